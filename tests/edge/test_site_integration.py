"""Issue 16 end to end: real Mosquitto processes, a site behind a NAT router in network
namespaces, the central dynsec Mosquitto, the registry, `iot-bridge` into Kafka.

The default run uses shorter figures than the issue (2,000 messages, 10 s cut) to keep the
suite quick; IOT_EDGE_FULL=1 runs the issue's own figures (10,000 messages, 30 s cut).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from commands.client import CommandClient
from edge import central as edge_central
from registry.model import Role
from tests.conftest import Endpoints
from tests.edge.conftest import Central, Site, kafka_records

pytestmark = pytest.mark.integration

FULL = os.environ.get("IOT_EDGE_FULL") == "1"
HELD_OFFSET = 8
SHORT = pytest.param(2000, 10.0, id="2k-msgs-10s-cut")
ISSUE = pytest.param(
    10000,
    30.0,
    id="10k-msgs-30s-cut",
    marks=pytest.mark.skipif(not FULL, reason="the issue's full figures: IOT_EDGE_FULL=1"),
)


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def _stable(read: Callable[[], list[int]], quiet_s: float, timeout: float) -> list[int]:
    """``read()`` once it has not changed for ``quiet_s`` (the flow after a heal stopped)."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = read()
        if len(now) != len(last):
            last, since = now, time.monotonic()
        elif last and time.monotonic() - since >= quiet_s:
            return last
    raise AssertionError(f"records still changing after {timeout} s")


def _publish_all(site: Site, counts: dict[str, int]) -> dict[str, int]:
    """Every device publishes at once; returns what the site acknowledged per device."""
    procs = {d: site.publish(d, n) for d, n in counts.items()}
    acked = {}
    for device, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        acked[device] = json.loads(out)["acked"]
        print(f"MEASURED {device}: {json.loads(out)}")
    return acked


def _seqs(stack: Endpoints, topic: str) -> dict[str, list[int]]:
    by_device: dict[str, list[int]] = defaultdict(list)
    for key, value in kafka_records(stack.kafka_bootstrap, topic):
        by_device[key].append(int(value["seq"]))
    return by_device


def _central_view(central: Central, site: str) -> dict[str, Any]:
    views = edge_central.snapshot(
        "127.0.0.1", central.port, central.service_user, central.service_secret, settle_s=0.5
    )
    return next((v.as_dict() for v in views if v.site == site), {})


@pytest.fixture
def bridge(
    central: Central,
    stack: Endpoints,
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    bridge_factory: Any,
) -> Any:
    """iot-bridge at the centre: telemetry into a topic of its own, commands out of one."""
    topics = {
        "topic_telemetry": topic_factory("edge-tel"),
        "topic_commands": topic_factory("edge-cmd", partitions=4),
        "topic_command_status": topic_factory("edge-cmdst", partitions=4, compacted=True),
        "topic_command_replies": topic_factory("edge-cmdrep", partitions=4),
        "topic_commands_dlq": topic_factory("edge-cmddlq", partitions=2),
    }
    return bridge_factory(
        "127.0.0.1",
        central.port,
        stack.kafka_bootstrap,
        mqtt_username=central.service_user,
        mqtt_password=central.service_secret,
        commands_enabled=True,
        command_group_id=group_factory(),
        command_mqtt_client_id=f"edge-cmd-{os.getpid()}-{time.monotonic_ns()}",
        **topics,
    )


def test_centre_cannot_connect_in_the_site_dials_out_through_nat(
    central: Central, site_factory: Callable[..., Site]
) -> None:
    site = site_factory("site-nat", [])
    site.wait_status(lambda s: s.get("link") == "up", 30, "link up")
    # the centre saw the router's address, not the site's: masqueraded
    assert f"from {site.ns.router_wan_ip}" in central.log_text()
    assert f"from {site.ns.site_ip}" not in central.log_text()
    # the host has a route to the site; the router forwards nothing new inbound
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # dropped by the router: no answer, not a refusal
        socket.create_connection((site.ns.site_ip, site.port), timeout=3).close()
    print(f"MEASURED connect into the site failed after {time.monotonic() - started:.2f} s")
    assert _central_view(central, "site-nat")["link"] == "up"


@pytest.mark.parametrize(("messages", "cut_s"), [SHORT, ISSUE])
@pytest.mark.parametrize("event", ["none", "sigterm"])
def test_cut_keeps_everything_in_order_and_commands_arrive_after_heal(
    messages: int,
    cut_s: float,
    event: str,
    central: Central,
    stack: Endpoints,
    site_factory: Callable[..., Site],
    bridge: Any,
    tmp_path: Path,
) -> None:
    tag = f"{event}-{messages}"
    names = [f"a-{tag}-1", f"a-{tag}-2"]
    # one connection per device (its client id is pinned): commands go to a third device
    target = f"a-{tag}-c"
    site = site_factory(f"site-{tag}", [*names, target])
    site.wait_status(lambda s: s.get("link") == "up", 30, "link up")
    commands_out = tmp_path / "commands.txt"
    site.listen(target, commands_out)
    client = CommandClient(stack.kafka_bootstrap, topic_commands=bridge.settings["topic_commands"])

    site.ns.cut()
    cut_at = time.monotonic()
    acked = _publish_all(site, dict.fromkeys(names, messages // 2))
    assert acked == dict.fromkeys(names, messages // 2), "the site acknowledged every message"
    # one attempt each: with the command path's default (3 attempts, 30 s reply timeout) a
    # device away longer than the timeout gets each command once per attempt (measured: 200
    # for 100 over a 30 s cut); that redelivery is the command path's, not the site's
    sent = [
        client.send(target, f"set-{i}", {"i": i}, max_attempts=1, timeout_ms=600_000)
        for i in range(100)
    ]
    held = site.wait_status(
        lambda s: (s.get("held_messages") or 0) >= messages, 15, "queue depth reported"
    )
    print(f"MEASURED held at the site during the cut: {held['held_messages']}")
    if event == "sigterm":  # the supervisor restarts it; the store is saved on SIGTERM
        os.kill(held["broker_pid"], signal.SIGTERM)
        site.wait_status(lambda s: s.get("broker_restarts") == 1 and s["broker_running"], 30,
                         "broker restarted")  # fmt: skip
    _wait(lambda: _central_view(central, site.name).get("link") == "down", cut_s + 15,
          "the centre sees the link down")  # fmt: skip
    time.sleep(max(0.0, cut_s - (time.monotonic() - cut_at)))
    site.ns.heal()
    healed = time.monotonic()

    topic = bridge.settings["topic_telemetry"]
    _wait(lambda: sum(len(v) for v in _seqs(stack, topic).values()) >= messages, 90,
          "every message in Kafka")  # fmt: skip
    print(f"MEASURED all {messages} in Kafka {time.monotonic() - healed:.2f} s after heal")
    seqs = _seqs(stack, topic)
    for name in names:  # in order per device, none lost, none twice
        assert seqs[name] == list(range(messages // 2)), name
    _wait(lambda: commands_out.exists() and len(commands_out.read_text().split()) >= 100, 60,
          "commands at the device")  # fmt: skip
    got = commands_out.read_text().split()
    print(f"MEASURED 100 commands at the device {time.monotonic() - healed:.2f} s after heal")
    assert sorted(got) == sorted(f"devices/{target}/commands/set-{i}" for i in range(100))
    assert len(sent) == 100
    _wait(lambda: _central_view(central, site.name).get("link") == "up", 30, "link up again")
    # held = stored - retained; after a restart with a queue a few entries stay counted
    # (4 measured, docs/edge.md), hence "drained" = at most HELD_OFFSET
    _wait(lambda: (_central_view(central, site.name).get("held_messages") or 0) <= HELD_OFFSET,
          30, "the centre sees the site's queue drained")  # fmt: skip
    print(f"MEASURED held after drain: {_central_view(central, site.name)['held_messages']}")
    client.close()


def test_kill_9_loses_less_than_the_autosave_bound(
    central: Central, stack: Endpoints, site_factory: Callable[..., Site], bridge: Any
) -> None:
    bound, messages = 200, 2000
    name = "k9-1"
    site = site_factory("site-k9", [name], "--autosave-changes", str(bound))
    site.wait_status(lambda s: s.get("link") == "up", 30, "link up")
    site.ns.cut()
    acked = _publish_all(site, {name: messages})[name]
    assert acked == messages
    time.sleep(0.3)  # as field notes run o6/o8: killed 0.3 s after the last acknowledgement
    pid = site.status()["broker_pid"]
    os.kill(pid, signal.SIGKILL)
    site.wait_status(lambda s: s.get("broker_restarts") == 1 and s["broker_running"], 30,
                     "broker restarted")  # fmt: skip
    site.ns.heal()
    topic = bridge.settings["topic_telemetry"]
    site.wait_status(lambda s: s.get("link") == "up", 60, "link up after heal")
    seqs = _stable(lambda: _seqs(stack, topic).get(name, []), 4.0, 90)
    lost = messages - len(set(seqs))
    print(f"MEASURED kill -9 with autosave every {bound} changes: {len(set(seqs))}/{messages} "
          f"arrived, lost {lost}, duplicates {len(seqs) - len(set(seqs))}")  # fmt: skip
    assert lost < bound
    # at-least-once: a kill -9 may redeliver what was in flight before it (seen once in CI: 0, 1
    # twice); the first arrival of each seq keeps the order, and the loss is the newest messages
    first_seen = list(dict.fromkeys(seqs))
    assert first_seen == sorted(first_seen), "what survived keeps its order"
    assert first_seen == list(range(len(first_seen))), "the loss is the newest messages, not a hole"


def test_a_site_cannot_publish_for_another_site_or_tenant(
    central: Central, stack: Endpoints, site_factory: Callable[..., Site], bridge: Any
) -> None:
    assert central.registry.create_account("site-other", [Role.EDGE], tenant="default").secret
    central.registry.add_device("default", "other-1", site="site-other")
    central.registry.add_device("t2", "own-1")  # same id, another tenant
    # the site's operator lists the other site's device as its own: the site broker takes it,
    # the bridge forwards it, the centre refuses it
    site = site_factory("site-own", ["own-1"], local={"other-1": "other-secret"})
    site.wait_status(lambda s: s.get("link") == "up", 30, "link up")
    assert _publish_all(site, {"other-1": 50}) == {"other-1": 50}
    assert _publish_all(site, {"own-1": 50}) == {"own-1": 50}
    topic = bridge.settings["topic_telemetry"]
    _wait(lambda: len(_seqs(stack, topic).get("own-1", [])) == 50, 30, "own device in Kafka")
    time.sleep(2)
    seqs = _seqs(stack, topic)
    assert set(seqs) == {"own-1"}, "nothing of the other site's device reached Kafka"
    assert "Denied PUBLISH from edge-site-own" in central.log_text()
    # with the site's own credentials, straight at the centre (MQTT 5 shows the refusal)
    secret = (site.dir.parent / "site-own.secret").read_text()
    for target in ("devices/other-1/telemetry", "tenants/t2/devices/own-1/telemetry"):
        cmd = site.ns.in_site(
            "mosquitto_pub", "-h", site.ns.centre_ip, "-p", str(central.site_port), "-V", "5",
            "-q", "1", "-u", "svc/site-own", "-P", secret, "-i", "rogue-site-own", "-t", target,
            "-m", '{"ts": 1, "seq": 0, "metrics": {}}',
        )  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
        assert "Not authorized" in done.stderr + done.stdout, (target, done)
