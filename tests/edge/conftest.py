"""Edge-site integration fixtures: a NAT'd site namespace, a central dynsec Mosquitto on the
host side of the router, the registry on the test Kafka, sites made with the real `iot-edge`."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from bench.chaos import netns
from registry.cli import main as registry_cli
from registry.dynsec import DynsecClient
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from registry.topics import ADMIN_USERNAME
from tests.conftest import Endpoints
from tests.registry.conftest import free_port, fresh_store, mosquitto_process

ROOT = Path(__file__).resolve().parents[2]
DEVICE_HELPER = ROOT / "bench" / "chaos" / "edge_device.py"  # run as a script in the site
_site_ports = itertools.count(18830)


@pytest.fixture(scope="module")
def nat_site() -> Iterator[netns.NatSite]:
    if os.geteuid() != 0:
        pytest.skip("edge tests need root to create network namespaces")
    why = netns.unavailable()
    if why is not None:
        pytest.skip(f"edge tests need network namespaces: {why}")
    site = netns.NatSite().create()
    try:
        yield site
    finally:
        site.destroy()


@dataclass
class Central:
    """The central Mosquitto (dynsec) and the registry that drives it."""

    port: int  # on 127.0.0.1 (the central bridge, the test)
    site_port: int  # on the centre's side of the router (sites dial this)
    log: Path
    registry: Registry
    service_user: str
    service_secret: str
    workdir: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def central(
    nat_site: netns.NatSite, stack: Endpoints, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Central]:
    workdir = tmp_path_factory.mktemp("edge-central")
    dynsec, secret = workdir / "dynsec.json", workdir / "admin.secret"
    assert registry_cli(["mosquitto-init", str(dynsec), "--password-file", str(secret)]) == 0
    site_port = free_port()
    extra = (
        f"listener {site_port} {nat_site.centre_ip}\n"
        # the central bridge drains in bursts after a heal: never drop what a site forwards
        "max_queued_messages 1000000\n"
    )
    store = fresh_store(stack.kafka_bootstrap)
    with ExitStack() as stack_:
        port, log, _proc = stack_.enter_context(mosquitto_process(dynsec, workdir, extra))
        mosquitto = DynsecClient(
            "127.0.0.1", port, ADMIN_USERNAME, secret.read_text().strip()
        ).start()
        stack_.callback(mosquitto.close)
        stack_.callback(store.close)
        registry = Registry.open(store, local_admin("edge-test"), mosquitto, write=True)
        registry.create_tenant("default")
        registry.create_tenant("t2")
        issued = registry.create_account("central", [Role.BRIDGE, Role.COMMANDS])
        assert issued.secret is not None
        yield Central(port, site_port, log, registry, "svc/central", issued.secret, workdir)


def run_edge(*args: str, ns: netns.NatSite | None = None, timeout: float = 60) -> str:
    cmd = [sys.executable, "-m", "edge", *args]
    if ns is not None:
        cmd = ns.in_site(*cmd)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} -> {done.returncode}: {done.stderr}{done.stdout}")
    return done.stdout


@dataclass
class Site:
    name: str
    dir: Path
    port: int
    devices: dict[str, str]
    ns: netns.NatSite
    listeners: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        path = self.dir / "status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def wait_status(
        self, check: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status and check(status):
                return status
            time.sleep(0.2)
        raise AssertionError(f"site {self.name}: {what} not within {timeout} s: {self.status()}")

    def device_cmd(self, mode: str, device: str, topic: str, **opts: Any) -> list[str]:
        # --secret=: a secret may begin with "-" (base64url), which argparse would take for
        # an option if it came as a word of its own
        secret = self.devices[device]
        cmd = [sys.executable, str(DEVICE_HELPER), mode, "--port", str(self.port),
               f"--user={device}", f"--secret={secret}", "--topic", topic]  # fmt: skip
        for key, value in opts.items():
            cmd += [f"--{key}", str(value)]
        return self.ns.in_site(*cmd)

    def publish(self, device: str, count: int, start: int = 0) -> subprocess.Popen[str]:
        """Starts a device publishing ``count`` QoS 1 messages; its stdout is the result."""
        cmd = self.device_cmd(
            "publish", device, f"devices/{device}/telemetry", count=count, start=start
        )
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def listen(self, device: str, out: Path) -> None:
        cmd = self.device_cmd("listen", device, f"devices/{device}/commands/#", out=out)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT)
        self.listeners.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"connected"


@pytest.fixture
def site_factory(
    central: Central, nat_site: netns.NatSite, tmp_path: Path
) -> Iterator[Callable[..., Site]]:
    made: list[Site] = []

    def make(
        name: str, device_ids: list[str], *extra: str, local: dict[str, str] | None = None
    ) -> Site:
        """A site account, ``device_ids`` registered to it, the site installed and up;
        ``local`` adds devices the site serves without the registry knowing them there."""
        account = central.registry.create_account(name, [Role.EDGE], tenant="default")
        assert account.secret is not None
        devices = dict(local or {})
        for device in device_ids:
            secret = central.registry.add_device("default", device, site=name).secret
            assert secret is not None
            devices[device] = secret
        secret_file = tmp_path / f"{name}.secret"
        secret_file.write_text(account.secret)
        devices_file = tmp_path / f"{name}-devices.json"
        devices_file.write_text(json.dumps(devices))
        site_dir, port = tmp_path / name, next(_site_ports)
        site = Site(name, site_dir, port, devices, nat_site)
        made.append(site)  # stopped at teardown even if `up` fails half-way
        # the one-command install, run on the site
        run_edge(
            "init", "--site", name, "--central", f"{nat_site.centre_ip}:{central.site_port}",
            "--account-secret-file", str(secret_file), "--devices-file", str(devices_file),
            "--site-dir", str(site_dir), "--listen-host", "127.0.0.1",
            "--listen-port", str(port), "--insecure-plain-link", "--keepalive-s", "5",
            "--restart-min-s", "1", "--restart-max-s", "2", "--status-interval-s", "1",
            *extra, "--up", ns=nat_site,
        )  # fmt: skip
        return site

    yield make
    # a test that failed during a cut must not leave the module's NAT router cut for the next
    nat_site.heal()
    for site in made:
        for proc in site.listeners:
            proc.kill()
            proc.wait()
        run_edge("down", "--dir", str(site.dir), ns=nat_site)


def kafka_records(bootstrap: str, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """Every record of ``topic`` as (key, JSON value), partition by partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"edge-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        out: list[tuple[str, dict[str, Any]]] = []
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            got = 0
            while got < high - low:
                msg = consumer.poll(5)
                if msg is None:
                    break
                if msg.error() is None:
                    got += 1
                    out.append(((msg.key() or b"").decode(), json.loads(msg.value() or b"null")))
        return out
    finally:
        consumer.close()
