"""A real Mosquitto with the dynamic-security plugin, and registry stores on the test Kafka."""

from __future__ import annotations

import getpass
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from registry.cli import main as cli_main
from registry.kafka_store import KafkaStore
from stack.ports import free_port
from tests.conftest import Endpoints
from tests.plugins.mosquitto_process import running_mosquitto

PLUGIN = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"


@dataclass
class DynsecBroker:
    port: int
    password_file: Path
    log: Path
    config: Path  # the dynsec file Mosquitto rewrites on every change

    @property
    def admin_password(self) -> str:
        return self.password_file.read_text().strip()


def plugin_path() -> Path:
    plugin = Path(PLUGIN)
    if not plugin.exists():  # the package's own list says where it is
        listed = subprocess.run(
            ["dpkg", "-L", "mosquitto"], check=True, capture_output=True, text=True
        )
        plugin = Path(next(p for p in listed.stdout.split() if "dynamic_security" in p))
    return plugin


@contextmanager
def running_dynsec_mosquitto(dynsec: Path, workdir: Path) -> Iterator[tuple[int, Path]]:
    """Mosquitto with the dynamic-security plugin on `dynsec` (made by `iot-devices
    mosquitto-init`) and a free loopback port; yields (port, log)."""
    with mosquitto_process(dynsec, workdir) as (port, log, _proc):
        yield port, log


@contextmanager
def mosquitto_process(
    dynsec: Path, workdir: Path, extra_conf: str = ""
) -> Iterator[tuple[int, Path, subprocess.Popen[bytes]]]:
    """As running_dynsec_mosquitto, with more listeners in ``extra_conf`` (e.g. TLS) and the
    process (to send it SIGHUP); yields (port, log, process)."""
    port, log = free_port(), workdir / "mosquitto.log"
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        "per_listener_settings false\n"
        f"user {getpass.getuser()}\n"
        f"listener {port} 127.0.0.1\n"
        "allow_anonymous false\n"
        f"plugin {plugin_path()}\n"
        f"plugin_opt_config_file {dynsec}\n"
        f"log_dest file {log}\n"
        "log_type all\n" + extra_conf
    )
    with running_mosquitto(conf, port, log) as proc:
        yield port, log, proc


@pytest.fixture
def dynsec_broker(tmp_path: Path) -> Iterator[DynsecBroker]:
    dynsec, secret = tmp_path / "dynsec.json", tmp_path / "admin.secret"
    assert cli_main(["mosquitto-init", str(dynsec), "--password-file", str(secret)]) == 0
    with running_dynsec_mosquitto(dynsec, tmp_path) as (port, log):
        yield DynsecBroker(port, secret, log, dynsec)


def fresh_store(bootstrap: str) -> KafkaStore:
    """A registry store on fresh registry/audit topics of the test Kafka, with a transactional
    id of its own (so tests never fence each other); its topics made."""
    suffix = uuid.uuid4().hex[:10]
    store = KafkaStore(
        bootstrap,
        topic=f"iot.registry.{suffix}",
        audit_topic=f"iot.registry.audit.{suffix}",
        transactional_id=f"iot-registry-{suffix}",
    )
    store.ensure_topics()
    return store


@pytest.fixture
def store_factory(stack: Endpoints) -> Iterator[Callable[[], KafkaStore]]:
    """Stores on fresh registry/audit topics of the test Kafka, one transactional id per test
    (so tests never fence each other)."""
    suffix = uuid.uuid4().hex[:10]
    made: list[KafkaStore] = []

    def make() -> KafkaStore:
        store = KafkaStore(
            stack.kafka_bootstrap,
            topic=f"iot.registry.{suffix}",
            audit_topic=f"iot.registry.audit.{suffix}",
            transactional_id=f"iot-registry-{suffix}",
        )
        store.ensure_topics()
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
