"""Integration tests of the command path: real Mosquitto and Kafka, paho devices."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from commands.client import CommandClient
from commands.config import CommandConfig
from commands.model import FINAL_STATES, State
from commands.service import CommandService
from tests.commands.conftest import CommandEnv
from tests.commands.harness import Device, Received, Records, unique, wait_for
from tests.plugins.mqtt_logins import bridge_login_settings

pytestmark = pytest.mark.integration

ServiceFactory = Callable[..., CommandService]


def test_online_device_succeeds_and_reply_carries_the_result(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    env = command_env
    device = env.device().connect()
    service_factory()
    cid = env.client.send(device.device_id, "add", {"a": 19, "b": 23}, timeout_ms=5000)
    final = env.wait_final(cid, 30)
    assert final.state is State.SUCCEEDED
    assert final.attempt == 1
    assert [s.state for s in env.statuses(cid)] == [
        State.ACCEPTED,
        State.SENT,
        State.DELIVERED,
        State.SUCCEEDED,
    ]
    env.records.wait(lambda: len(env.replies(cid)) == 1, 10, "the reply record")
    [reply] = env.replies(cid)
    assert reply["device_id"] == device.device_id
    assert reply["match"] == "matched"
    assert reply["result"] == {"sum": 42, "by": device.device_id}
    # what the device saw: MQTT 5 properties and the id inside the JSON for 3.1.1 devices
    [got] = device.commands()
    assert got.topic == f"devices/{device.device_id}/commands/add"
    assert got.command_id == cid
    assert got.args == {"a": 19, "b": 23, "command_id": cid}
    assert got.response_topic == f"devices/{device.device_id}/replies/{cid}"
    assert got.attempt == 1
    assert got.expiry_s is not None
    assert 14 <= got.expiry_s <= 15  # the TTL: 3 attempts x 5 s, counted from the send


def test_silent_device_gets_max_attempts_then_expired_and_dead_letter(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    env = command_env
    device = env.device(mode="silent").connect()
    service_factory()
    cid = env.client.send(device.device_id, "ping", {}, timeout_ms=500, max_attempts=3)
    final = env.wait_final(cid, 30)
    assert final.state is State.EXPIRED
    assert final.attempt == 3
    assert final.detail.startswith("max_attempts")
    wait_for(lambda: len(device.commands()) >= 3, 10, "three deliveries")
    assert [r.attempt for r in device.commands()] == [1, 2, 3]
    sent = [s.attempt for s in env.statuses(cid) if s.state is State.SENT]
    assert sorted(set(sent)) == [1, 2, 3]
    env.records.wait(lambda: len(env.dead_letters()) == 1, 10, "the DLQ record")
    [dead] = env.dead_letters()
    assert (dead["command_id"], dead["device_id"], dead["reason"], dead["attempts"]) == (
        cid,
        device.device_id,
        "max_attempts",
        3,
    )
    assert dead["command"]["name"] == "ping"
    # a late reply and a reply to an unknown command are recorded, nothing breaks
    device.reply(device.commands()[0], {"status": "ok", "result": "late"})
    device.reply(
        Received("x", "no-such-command", None, {}, None, None),
        {"status": "ok"},
    )
    env.records.wait(
        lambda: len(env.replies(cid)) == 1 and len(env.replies("no-such-command")) == 1,
        10,
        "late and unknown reply records",
    )
    assert env.replies(cid)[0]["match"] == "late"
    assert env.replies("no-such-command")[0]["match"] == "unknown"
    assert env.final(cid).state is State.EXPIRED
    # still alive: a new command to an answering device succeeds
    ok = env.device().connect()
    cid2 = env.client.send(ok.device_id, "add", {"a": 1, "b": 2})
    assert env.wait_final(cid2, 20).state is State.SUCCEEDED


def test_offline_device_gets_command_within_ttl_but_not_after(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    env = command_env
    early = env.device("early", persistent=True).connect()
    late = env.device("late", persistent=True).connect()
    early.disconnect()
    late.disconnect()
    service_factory()

    # back before the TTL: the persistent session hands the command over, the reply succeeds
    cid = env.client.send(
        early.device_id, "add", {"a": 2, "b": 3}, timeout_ms=20_000, max_attempts=1
    )
    env.records.wait(
        lambda: State.DELIVERED in [s.state for s in env.statuses(cid)],
        20,
        "PUBACK for the offline device's persistent session",
    )
    early.connect()
    final = env.wait_final(cid, 20)
    assert final.state is State.SUCCEEDED
    assert [r.command_id for r in early.commands()] == [cid]

    # back after the TTL: the command expired in the bridge and in Mosquitto
    gone = env.client.send(late.device_id, "add", {"a": 1, "b": 1}, timeout_ms=1000, max_attempts=1)
    final = env.wait_final(gone, 20)
    assert final.state is State.EXPIRED
    assert final.detail.startswith("max_attempts")
    # Mosquitto's copy expires at publish time + ceil(remaining TTL) = 1 s, on Mosquitto's
    # whole-second clock: wait until that has surely passed
    sent_at = next(s.sent_at for s in env.statuses(gone) if s.state is State.SENT)
    wait_for(lambda: time.time() * 1000 > sent_at + 2100, 5, "the MQTT expiry")
    late.connect()
    marker = env.client.send(late.device_id, "add", {"a": 5, "b": 5}, timeout_ms=10_000)
    assert env.wait_final(marker, 20).state is State.SUCCEEDED
    # the queued (expired) command would have come first: only the marker arrived
    assert [r.command_id for r in late.commands()] == [marker]
    assert [d["command_id"] for d in env.dead_letters()] == [gone]


def test_broadcast_to_a_group_of_20_collects_20_replies(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    env = command_env
    group = unique("floor")
    devices = [env.device("g", groups=(group,)).connect() for _ in range(20)]
    outsider = env.device("outsider").connect()
    service_factory()
    cid = env.client.send(f"group:{group}", "add", {"a": 40, "b": 2}, timeout_ms=3000)
    final = env.wait_final(cid, 30)
    assert final.state is State.SUCCEEDED
    assert final.device_id == f"group:{group}"
    assert final.replies == {"ok": 20, "error": 0}
    # the status and the reply records are on different topics: the final status can be read
    # before the last reply record
    env.records.wait(lambda: len(env.replies(cid)) >= 20, 10, "20 reply records")
    replies = env.replies(cid)
    assert sorted(r["device_id"] for r in replies) == sorted(d.device_id for d in devices)
    assert all(r["match"] == "matched" and r["result"]["sum"] == 42 for r in replies)
    for d in devices:
        [got] = d.commands()
        assert got.topic == f"groups/{group}/commands/add"
        assert got.command_id == cid
    assert outsider.commands() == []
    # sent once: one publish for the whole group
    assert [s.attempt for s in env.statuses(cid) if s.state is State.SENT] == [1]


def test_bad_input_is_rejected_and_nothing_stops(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    env = command_env
    device = env.device().connect()
    service_factory()
    big = orjson.dumps({"command_id": "big-1", "name": "x", "args": {"blob": "x" * 70_000}})
    cases: list[tuple[bytes | None, bytes | None, str, str]] = [
        (b"dev-1", b"{nope", f"{env.config.topic_commands}-", "bad_json"),
        (
            b"bad/device",
            orjson.dumps({"command_id": "bad-key-1", "name": "x"}),
            "bad-key-1",
            "bad_device_id",
        ),
        (b"dev-1", big, f"{env.config.topic_commands}-", "oversized"),
        (b"dev-1", orjson.dumps({"command_id": "no-name-1"}), "no-name-1", "bad_name"),
    ]
    for key, value, _, _ in cases:
        env.client.send_raw(key, value)
    cid = env.client.send(device.device_id, "add", {"a": 1, "b": 1})
    assert env.wait_final(cid, 30).state is State.SUCCEEDED
    env.records.wait(
        lambda: (
            len(
                [
                    s
                    for s in env.records.statuses(env.config.topic_command_status)
                    if s.state is State.REJECTED
                ]
            )
            == 4
        ),
        10,
        "four rejections",
    )
    rejected = [
        s
        for s in env.records.statuses(env.config.topic_command_status)
        if s.state is State.REJECTED
    ]
    got = sorted(((s.detail or "").split(":")[0], s.command_id) for s in rejected)
    expected = sorted((code, id_prefix) for _, _, id_prefix, code in cases)
    assert [code for code, _ in got] == [code for code, _ in expected]
    for (code, command_id), (_, id_prefix) in zip(got, expected, strict=True):
        assert command_id.startswith(id_prefix), code


def test_bridge_killed_with_100_pending_restarts_and_finishes_every_command(
    command_env: CommandEnv, bridge_factory: Callable[..., Any]
) -> None:
    env = command_env
    cfg = env.config
    devices = [env.device("k", mode="hold", persistent=True).connect() for _ in range(10)]
    bridge = bridge_factory(
        cfg.mqtt_host, cfg.mqtt_port, cfg.kafka_bootstrap, **env.bridge_settings()
    )
    expected: dict[str, tuple[str, int]] = {}
    for i in range(100):
        device = devices[i % 10]
        cid = env.client.send(
            device.device_id, "add", {"a": i, "b": 1}, timeout_ms=60_000, flush=False
        )
        expected[cid] = (device.device_id, i + 1)
    env.client.flush()

    def all_delivered() -> bool:
        delivered = {
            s.command_id
            for s in env.records.statuses(cfg.topic_command_status)
            if s.state is State.DELIVERED
        }
        return delivered >= set(expected)

    env.records.wait(all_delivered, 60, "100 commands delivered to the devices")
    # `delivered` is Mosquitto's PUBACK: the device's copy follows it on another connection
    wait_for(lambda: sum(len(d.commands()) for d in devices) >= 100, 30, "100 at the devices")
    assert bridge.kill() == -9
    # the devices answer while the bridge is dead: Mosquitto queues the replies in the
    # bridge's persistent session
    for device in devices:
        device.release()
    bridge.start()

    def all_final() -> bool:
        return all(env.final(cid) is not None for cid in expected)

    try:
        env.records.wait(all_final, 90, "a final state for all 100 commands")
    except AssertionError as exc:
        last = {cid: env.statuses(cid)[-1].state.value for cid in expected if env.statuses(cid)}
        counts = {v: list(last.values()).count(v) for v in set(last.values())}
        raise AssertionError(f"{exc}: last states {counts}\n{bridge.log_text()}") from exc
    states = {cid: env.final(cid).state for cid in expected}
    assert set(states.values()) == {State.SUCCEEDED}, states

    def matched(cid: str) -> list[dict[str, Any]]:
        return [r for r in env.replies(cid) if r["match"] == "matched"]

    # a final status can be read before its reply record (another topic)
    env.records.wait(lambda: all(matched(cid) for cid in expected), 30, "100 matched replies")
    for cid, (device_id, total) in expected.items():
        [reply] = matched(cid)
        assert reply["device_id"] == device_id
        assert reply["result"]["sum"] == total


@pytest.mark.slow
def test_mosquitto_restart_the_service_reconnects_and_carries_on(
    local_stack_factory: Callable[..., Any],
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
) -> None:
    local = local_stack_factory(partitions=2)
    bootstrap = local.kafka_bootstrap

    def topic(prefix: str, compacted: bool = False) -> str:
        return topic_factory(prefix, partitions=2, compacted=compacted, bootstrap=bootstrap)

    config = CommandConfig(
        mqtt_host=local.mqtt_host,
        mqtt_port=local.mqtt_port,
        kafka_bootstrap=bootstrap,
        topic_commands=topic("cmd"),
        topic_command_status=topic("cmdstatus", compacted=True),
        topic_command_replies=topic("cmdreplies"),
        topic_commands_dlq=topic("cmddlq"),
        command_group_id=group_factory(),
        command_mqtt_client_id=unique("cmd-bridge"),
        mqtt_reconnect_min_s=0.2,
        mqtt_reconnect_max_s=1.0,
        **bridge_login_settings(local.mqtt_port),
    )
    client = CommandClient(
        bootstrap,
        topic_commands=config.topic_commands,
        topic_status=config.topic_command_status,
        topic_replies=config.topic_command_replies,
    )
    records = Records(bootstrap, [config.topic_command_status])
    device = Device(unique("dev"), local.mqtt_host, local.mqtt_port, persistent=True).connect()
    service = CommandService(config)
    service.start()

    def final(cid: str) -> State | None:
        states = [s.state for s in records.statuses(config.topic_command_status, cid)]
        return next((s for s in reversed(states) if s in FINAL_STATES), None)

    try:
        first = client.send(device.device_id, "add", {"a": 1, "b": 1}, timeout_ms=3000)
        records.wait(lambda: final(first) is not None, 30, "the first command")
        assert final(first) is State.SUCCEEDED
        local.mosquitto.stop()
        second = client.send(device.device_id, "add", {"a": 2, "b": 2}, timeout_ms=3000)
        records.wait(
            lambda: bool(records.statuses(config.topic_command_status, second)),
            30,
            "the second command accepted while Mosquitto is down",
        )
        local.mosquitto.start()
        records.wait(lambda: final(second) is not None, 60, "the second command")
        assert final(second) is State.SUCCEEDED
        assert service.is_alive()
    finally:
        service.stop(10)
        device.disconnect()
        records.close()
        client.close()
    assert service.failure is None


def test_two_instances_split_the_devices_and_record_only_their_own_replies(
    command_env: CommandEnv, service_factory: ServiceFactory
) -> None:
    """Both instances receive every reply; each records only those of its partitions."""
    env = command_env
    devices = [env.device(f"split{i}").connect() for i in range(12)]
    first = service_factory(command_mqtt_client_id=unique("cmd-a"))
    second = service_factory(command_mqtt_client_id=unique("cmd-b"))
    # both in the group before sending: each owns some of the 4 partitions
    wait_for(
        lambda: bool(first.assigned_partitions) and bool(second.assigned_partitions),
        30,
        "both instances assigned",
    )
    assert not first.assigned_partitions & second.assigned_partitions
    ids = [env.client.send(d.device_id, "add", {"a": 1, "b": i}) for i, d in enumerate(devices)]
    for cid in ids:
        assert env.wait_final(cid, 30).state is State.SUCCEEDED
    env.records.wait(
        lambda: sum(len(env.replies(cid)) for cid in ids) >= len(ids), 10, "reply records"
    )
    records = [r for cid in ids for r in env.replies(cid)]
    # a rebalance while commands are in flight may deliver one twice (at-least-once), so
    # "duplicate" may appear; "unknown" would mean a non-owner recorded another's reply
    assert "unknown" not in [r["match"] for r in records]
    assert {r["command_id"] for r in records if r["match"] == "matched"} == set(ids)
    # each reply reached both instances: the owner recorded it, the other let it go
    assert first.stats["replies"] + second.stats["replies"] == len(records)
    assert first.stats["foreign_replies"] + second.stats["foreign_replies"] == len(records)
