"""The simulator and verifier against real Mosquitto + Kafka (+ the real bridge).

Each test uses its own Kafka topics, a unique device-id prefix and a private runs dir.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Producer
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from device_sim import manifest as manifest_io
from device_sim.cli import main
from device_sim.kafka_io import read_records
from device_sim.spec import FleetSpec
from device_sim.verifier import parse_telemetry
from tests.plugins.mqtt_logins import bridge_login_settings, set_login, sim_login_args

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _prefix() -> str:
    return f"sim{uuid.uuid4().hex[:8]}"


def _endpoint_args(
    stack: Any, telemetry: str, dlq: str, runs: Path, *, login: bool = True
) -> list[str]:
    """The fixture's servers and topics; every device logs in as the test account unless
    ``login`` is False (then give the devices their own: ``--credentials``)."""
    return [
        *(sim_login_args(stack.mqtt_port) if login else []),
        "--mqtt-host",
        stack.mqtt_host,
        "--mqtt-port",
        str(stack.mqtt_port),
        "--kafka-bootstrap",
        stack.kafka_bootstrap,
        "--topic-telemetry",
        telemetry,
        "--topic-dlq",
        dlq,
        "--runs-dir",
        str(runs),
    ]


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_fifty_devices_through_the_bridge_verify_clean(
    stack: Any, bridge_factory: Any, topic_factory: Any, tmp_path: Path
) -> None:
    telemetry, dlq = topic_factory("sim.tel"), topic_factory("sim.dlq")
    bridge_factory(topic_telemetry=telemetry, topic_dlq=dlq)
    runs = tmp_path / "runs"
    common = _endpoint_args(stack, telemetry, dlq, runs)
    rc = main(
        [
            "run",
            "--devices",
            "50",
            "--rate",
            "5",
            "--count",
            "20",
            "--processes",
            "2",
            "--seed",
            "7",
            "--device-prefix",
            _prefix(),
            "--session-expiry-s",
            "5",
            "--malformed-rate",
            "0.05",
            "--anomaly-rate",
            "0.02",
            "--late-rate",
            "0.03",
            "--out-of-order-rate",
            "0.03",
            "--skew-fraction",
            "0.2",
            "--churn-rate",
            "0.01",
            "--churn-down-max-s",
            "1",
            "--offline-fraction",
            "0.1",
            "--no-progress",
            *common,
        ]
    )
    assert rc == 0
    doc = manifest_io.read(manifest_io.latest(runs))
    totals = doc["totals"]
    assert doc["status"] == "complete"
    assert len(doc["devices"]) == 50
    assert totals["devices_failed"] == 0
    offline = {i["device"] for i in doc["injections"]["offline"]}
    # every device sent its 20 messages, except those that went offline (and said when)
    for device, info in doc["devices"].items():
        if device in offline:
            after = next(
                i["after_seq"] for i in doc["injections"]["offline"] if i["device"] == device
            )
            assert info["sent"] == after
        else:
            assert info["sent"] == 20
    assert totals["malformed_sent"] > 0
    assert sum(doc["expected_dlq"].values()) == totals["malformed_sent"] - sum(
        1 for m in doc["injections"]["malformed"] if not m["acked"]
    )

    report_path = tmp_path / "report.json"
    rc = main(["verify", "--wait-s", "20", "--json", str(report_path), *common])
    report = orjson.loads(report_path.read_bytes())
    assert rc == 0, report
    assert report["run_id"] == doc["run_id"]
    assert report["ok"] is True
    assert report["missing"] == 0
    assert report["unique"] == totals["telemetry_sent"]
    assert report["devices_seen"] == 50
    assert report["devices_spanning_partitions"] == []
    assert report["dlq_received"] == doc["expected_dlq"]
    assert report["latency"]["count"] > 0


def test_same_seed_same_payloads_through_kafka(
    stack: Any, bridge_factory: Any, topic_factory: Any, tmp_path: Path
) -> None:
    telemetry, dlq = topic_factory("sim.tel"), topic_factory("sim.dlq")
    bridge_factory(topic_telemetry=telemetry, topic_dlq=dlq)
    # each device logs in with its own secret, issued through the registry
    common = _endpoint_args(stack, telemetry, dlq, tmp_path / "runs", login=False)
    prefix = _prefix()
    secrets = stack.device_logins([FleetSpec(devices=4, device_prefix=prefix).device_id(i)
                                   for i in range(4)])  # fmt: skip
    credentials = tmp_path / "devices.json"
    credentials.write_text(orjson.dumps(secrets).decode())
    common += ["--credentials", str(credentials)]

    def run(seed: int, run_id: str) -> dict[tuple[str, int], dict[str, Any]]:
        argv = ["run", "--devices", "4", "--rate", "10", "--count", "10", "--seed", str(seed)]
        argv += ["--device-prefix", prefix, "--session-expiry-s", "5", "--anomaly-rate", "0.1"]
        argv += ["--run-id", run_id, "--no-progress", *common]
        assert main(argv) == 0
        doc = manifest_io.read(manifest_io.resolve(tmp_path / "runs", run_id))
        records = read_records(
            stack.kafka_bootstrap,
            telemetry,
            manifest_io.start_offsets(doc, "telemetry"),
            want=lambda r: run_id.encode() in r.value,
            keep_going=lambda kept: len(kept) < 40,
            wait_s=20,
        )
        out = {}
        for raw in records:
            rec = parse_telemetry(raw, run_id)
            assert rec is not None
            payload = orjson.loads(raw.value)
            del payload["ts"], payload["tags"]["run"]
            out[(rec.device, rec.seq)] = payload
        assert len(out) == 40
        return out

    first = run(11, f"same-a-{uuid.uuid4().hex[:8]}")
    second = run(11, f"same-b-{uuid.uuid4().hex[:8]}")
    other = run(12, f"other-{uuid.uuid4().hex[:8]}")
    assert first == second
    assert set(other) == set(first)
    assert all(other[k]["metrics"] != first[k]["metrics"] for k in first)


def test_verifier_catches_planted_gap_duplicate_and_partition_split(
    stack: Any, topic_factory: Any, tmp_path: Path
) -> None:
    telemetry, dlq = topic_factory("sim.tel", partitions=4), topic_factory("sim.dlq")
    run_id = f"planted-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})

    def put(device: str, seq: int, partition: int) -> None:
        value = orjson.dumps(
            {
                "ts": int(time.time() * 1000),
                "seq": seq,
                "metrics": {"t": 1.0},
                "tags": {"run": run_id},
            }
        )
        producer.produce(telemetry, value, key=device.encode(), partition=partition)

    # device a: seq 5 missing (a gap); device b: seq 3 twice (a duplicate);
    # device c: seqs 1-5 on partition 1, 6-10 on partition 2 (a device spanning partitions)
    for seq in range(1, 11):
        if seq != 5:
            put("a", seq, 0)
        put("b", seq, 3)
        put("c", seq, 1 if seq <= 5 else 2)
    put("b", 3, 3)
    for error in ("not_json", "oversized"):
        producer.produce(dlq, b"junk " + run_id.encode(), key=b"a", headers={"error": error})
    assert producer.flush(10) == 0

    devices = {d: {"sent": 10, "qos": 1, "unacked": [], "skew_ms": 0} for d in "abc"}
    doc = {
        "format": manifest_io.FORMAT,
        "run_id": run_id,
        "status": "complete",
        "started_at_ms": int(time.time() * 1000) - 1000,
        "ended_at_ms": int(time.time() * 1000),
        "start_offsets": None,
        "devices": devices,
        "injections": manifest_io.empty_injections(),
        "expected_dlq": {"not_json": 2, "oversized": 1},
    }
    runs = tmp_path / "runs"
    manifest_io.write(runs / run_id / manifest_io.MANIFEST_NAME, doc)
    out = tmp_path / "report.json"
    argv = ["verify", run_id, "--wait-s", "1", "--json", str(out)]
    rc = main([*argv, *_endpoint_args(stack, telemetry, dlq, runs)])
    report = orjson.loads(out.read_bytes())
    assert rc == 1
    assert report["ok"] is False
    assert report["missing"] == 1
    assert report["missing_acked"] == 1
    assert report["duplicates"] == 1
    assert report["received"] == 30
    assert report["devices_spanning_partitions"] == ["c"]
    assert report["dlq_missing"] == {"not_json": 1}
    problems = {p["device"]: p for p in report["problems"]}
    assert problems["a"]["missing"] == ["5"]
    assert problems["b"]["duplicates"] == 1
    assert problems["c"]["partitions"] == [1, 2]


def test_devices_answer_direct_and_group_commands(stack: Any, tmp_path: Path) -> None:
    prefix = _prefix()
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_sim.cli", "run", "--devices", "6", "--rate", "2",
         "--duration", "120", "--groups", "2", "--device-prefix", prefix, "--seed", "3",
         "--session-expiry-s", "5", "--reply-latency-ms", "20", "--no-offsets", "--no-progress",
         "--mqtt-host", stack.mqtt_host, "--mqtt-port", str(stack.mqtt_port),
         *sim_login_args(stack.mqtt_port),
         "--runs-dir", str(runs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    lock = threading.Lock()
    online: set[str] = set()
    replies: list[tuple[str, dict[str, Any], bytes | None]] = []

    def on_message(client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with lock:
            if msg.topic.endswith("/status"):
                device = msg.topic.split("/")[1]
                if device.startswith(prefix) and msg.payload == b"online":
                    online.add(device)
            else:
                corr = getattr(msg.properties, "CorrelationData", None)
                replies.append((msg.topic, orjson.loads(msg.payload), corr))

    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.on_message = on_message
    set_login(client, stack.mqtt_port)
    client.connect(stack.mqtt_host, stack.mqtt_port)
    client.loop_start()
    try:
        # what the test login (the command path's role) may read: replies are one level deep
        client.subscribe([("devices/+/status", 1), ("devices/+/replies/+", 1)])
        _wait_for(lambda: len(online) == 6, 20, "6 devices online")
        d0, d1 = f"{prefix}-00000", f"{prefix}-00001"
        props = Properties(PacketTypes.PUBLISH)
        props.CorrelationData = b"corr-1"
        # another topic than the default reply topic (.../replies/corr-1), and one a device may
        # publish to (its own replies: the appliance's ACL)
        answer_topic = f"devices/{d0}/replies/answer-{prefix}"
        props.ResponseTopic = answer_topic
        client.publish(f"devices/{d0}/commands/reboot", b'{"delay": 1}', qos=1, properties=props)
        client.publish(f"devices/{d1}/commands/ping", b'{"command_id": "json-1"}', qos=1)
        client.publish("groups/group-0/commands/blink", b'{"command_id": "grp-1"}', qos=1)
        spec = FleetSpec(devices=6, seed=3, groups=2, device_prefix=prefix)
        n_group0 = sum(1 for i in range(6) if "group-0" in spec.device_groups(i))
        _wait_for(lambda: len(replies) >= 2 + n_group0, 10, "all replies")
    finally:
        proc.send_signal(signal.SIGINT)  # stop early: the run ends "interrupted", cleanly
        out, _ = proc.communicate(timeout=60)
        client.loop_stop()
        client.disconnect()
    assert proc.returncode == 0, out.decode()
    doc = manifest_io.read(manifest_io.latest(runs))
    assert doc["status"] == "interrupted"
    group0 = {d for d, info in doc["devices"].items() if "group-0" in info["groups"]}
    assert 0 < len(group0) < 6  # 2 groups over 6 devices, drawn from the seed
    with lock:
        by_topic = {t: (body, corr) for t, body, corr in replies}
        grp_repliers = {
            body["result"]["device_id"]
            for _, body, _ in replies
            if body["command_id"] == "grp-1" and body["result"]["device_id"].startswith(prefix)
        }
    body, corr = by_topic[answer_topic]
    assert (body["status"], body["command_id"], corr) == ("ok", "corr-1", b"corr-1")
    assert body["result"]["command"] == "reboot"
    assert body["result"]["device_id"] == d0
    body, _ = by_topic[f"devices/{d1}/replies/json-1"]
    assert (body["status"], body["result"]["command"]) == ("ok", "ping")
    assert grp_repliers == group0
    assert doc["commands"]["received"] == 2 + len(group0)
    assert doc["commands"]["replied_ok"] == 2 + len(group0)


def test_command_path_round_trip_with_simulated_devices(
    stack: Any, topic_factory: Any, group_factory: Any, tmp_path: Path
) -> None:
    """iot.commands -> command service -> simulated devices -> replies -> iot.command-status."""
    from commands.client import CommandClient
    from commands.config import CommandConfig
    from commands.service import CommandService
    from device_sim.device import DeviceScript

    prefix = _prefix()
    spec = FleetSpec(devices=4, seed=2, device_prefix=prefix, silent_fraction=0.5, duration_s=120)
    silent = {
        DeviceScript(spec, i, "x").device_id for i in range(4) if DeviceScript(spec, i, "x").silent
    }
    assert 0 < len(silent) < 4  # the seed gives both kinds
    config = CommandConfig(
        mqtt_host=stack.mqtt_host,
        mqtt_port=stack.mqtt_port,
        kafka_bootstrap=stack.kafka_bootstrap,
        topic_commands=topic_factory("cmd", partitions=2),
        topic_command_status=topic_factory("cmdstatus", partitions=2, compacted=True),
        topic_command_replies=topic_factory("cmdreplies", partitions=2),
        topic_commands_dlq=topic_factory("cmddlq", partitions=1),
        command_group_id=group_factory(),
        command_mqtt_client_id=f"cmd-{prefix}",
        commands_enabled=True,
        **bridge_login_settings(stack.mqtt_port),
        http_port=0,
        shutdown_timeout_s=5.0,
    )
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_sim.cli", "run", "--devices", "4", "--rate", "1",
         "--duration", "120", "--device-prefix", prefix, "--seed", "2", "--silent-fraction", "0.5",
         "--session-expiry-s", "5", "--reply-latency-ms", "10", "--no-offsets", "--no-progress",
         "--mqtt-host", stack.mqtt_host, "--mqtt-port", str(stack.mqtt_port),
         *sim_login_args(stack.mqtt_port),
         "--runs-dir", str(runs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    service = CommandService(config)
    client = CommandClient(
        config.kafka_bootstrap,
        topic_commands=config.topic_commands,
        topic_status=config.topic_command_status,
        topic_replies=config.topic_command_replies,
    )
    online: set[str] = set()
    watcher = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)

    def on_status(client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        if msg.topic.split("/")[1].startswith(prefix) and msg.payload == b"online":
            online.add(msg.topic.split("/")[1])

    watcher.on_message = on_status
    set_login(watcher, stack.mqtt_port)
    watcher.connect(stack.mqtt_host, stack.mqtt_port)
    watcher.loop_start()
    try:
        watcher.subscribe("devices/+/status", 1)
        service.start()
        _wait_for(lambda: len(online) == 4, 20, "4 devices online")
        ids = {
            spec.device_id(i): client.send(
                spec.device_id(i), "ping", {"n": i}, timeout_ms=1500, max_attempts=1
            )
            for i in range(4)
        }
        finals: dict[str, str] = {}

        def all_final() -> bool:
            for device, cid in ids.items():
                if device not in finals:
                    status = client.status(cid, timeout_s=5)
                    if status is not None and status.final:
                        finals[device] = str(status.state)
            return len(finals) == 4

        _wait_for(all_final, 30, "every command final")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        watcher.loop_stop()
        watcher.disconnect()
        service.stop(10.0)
        client.close()
    assert proc.returncode == 0, out.decode()
    for device, state in finals.items():
        assert state == ("expired" if device in silent else "succeeded"), (device, state)
    doc = manifest_io.read(manifest_io.latest(runs))
    assert {d for d, info in doc["devices"].items() if info["silent"]} == silent
    assert doc["commands"]["replied_ok"] == 4 - len(silent)
    assert doc["commands"]["ignored"] == len(silent)


def test_realistic_traffic_events_bursts_churn_and_commands_verify_clean(
    stack: Any, bridge_factory: Any, topic_factory: Any, tmp_path: Path
) -> None:
    """Events, a diurnal curve, bursts and churn through the bridge, commands answered under
    that load (also those sent while a device was away: its persistent session keeps them);
    verified with nothing lost, telemetry and events alike."""
    telemetry, dlq = topic_factory("sim.tel"), topic_factory("sim.dlq")
    events = topic_factory("sim.ev")
    bridge_factory(topic_telemetry=telemetry, topic_dlq=dlq, topic_events=events)
    runs = tmp_path / "runs"
    common = [*_endpoint_args(stack, telemetry, dlq, runs), "--topic-events", events]
    prefix = _prefix()
    devices = 8
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_sim.cli", "run", "--devices", str(devices),
         "--rate", "5", "--duration", "14", "--seed", "11", "--device-prefix", prefix,
         "--event-rate", "0.1", "--anomaly-rate", "0.03",
         "--churn-rate", "0.03", "--churn-down-min-s", "1", "--churn-down-max-s", "2",
         "--diurnal-period", "14", "--diurnal-min", "0.5", "--diurnal-max", "1.5",
         "--burst-every", "7", "--burst-factor", "4", "--burst-duration", "2",
         "--reply-latency-ms", "10", "--session-expiry-s", "60", "--no-progress", *common],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    lock = threading.Lock()
    online: set[str] = set()
    sent_while_away = 0
    replies: set[str] = set()

    def on_message(client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with lock:
            device = msg.topic.split("/")[1]
            if msg.topic.endswith("/status") and device.startswith(prefix):
                if msg.payload == b"online":
                    online.add(device)
                else:
                    online.discard(device)
            elif "/replies/" in msg.topic and device.startswith(prefix):
                replies.add(orjson.loads(msg.payload)["command_id"])

    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.on_message = on_message
    set_login(client, stack.mqtt_port)
    client.connect(stack.mqtt_host, stack.mqtt_port)
    client.loop_start()
    commands: list[str] = []
    try:
        client.subscribe([("devices/+/status", 1), ("devices/+/replies/+", 1)])
        _wait_for(lambda: len(online) == devices, 30, "the fleet online")
        started = time.monotonic()
        while time.monotonic() - started < 8:  # commands while the fleet sends, then a margin
            for i in range(devices):
                device = f"{prefix}-{i:05d}"
                command_id = f"c{len(commands)}"
                with lock:
                    sent_while_away += device not in online
                commands.append(command_id)
                body = orjson.dumps({"command_id": command_id})
                client.publish(f"devices/{device}/commands/ping", body, qos=1)
            time.sleep(0.25)
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out.decode()
        _wait_for(lambda: len(replies) >= len(commands), 10, "a reply to every command")
    finally:
        if proc.poll() is None:
            proc.kill()
        client.loop_stop()
        client.disconnect()
    assert replies == set(commands)  # every command answered, under load and across churn
    assert sent_while_away > 0  # some waited in a device's persistent session

    doc = manifest_io.read(manifest_io.latest(runs))
    totals = doc["totals"]
    assert doc["status"] == "complete"
    assert totals["devices_failed"] == 0
    assert doc["commands"]["replied_ok"] == len(commands)
    assert doc["injections"]["churn"]
    assert totals["events_sent"] > 0
    assert totals["events_by_type"]["restart"] == len(doc["injections"]["churn"])
    assert totals["events_by_type"]["alarm"] == len(doc["injections"]["anomalies"])
    # the shape: 14 s at 5 msg/s x the day curve (mean 1) plus 2 bursts of 2 s at x4
    per_device = totals["telemetry_sent"] / devices
    assert 70 < per_device < 170, per_device
    assert "events" in doc["start_offsets"]

    report_path = tmp_path / "report.json"
    rc = main(["verify", "--wait-s", "20", "--json", str(report_path), *common])
    report = orjson.loads(report_path.read_bytes())
    assert rc == 0, report
    assert report["ok"] is True
    assert report["missing"] == 0
    assert report["unique"] == totals["telemetry_sent"]
    ev = report["events"]
    assert ev["missing"] == 0
    assert ev["unique"] == ev["sent"] == totals["events_sent"]
    assert ev["devices_spanning_partitions"] == []
