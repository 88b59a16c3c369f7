"""The command path's MQTT connection against a real Mosquitto, with paho devices."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

import mqtt_codec as codec
from commands.link_pool import LinkPool
from commands.mapping import REPLY_SUBSCRIPTION
from commands.mqtt_link import (
    CommandLink,
    Connected,
    Incoming,
    LinkEvent,
    Puback,
)
from tests.commands.harness import Device, forget_session, unique, wait_for
from tests.plugins.mqtt_logins import credentials

pytestmark = pytest.mark.integration


@pytest.fixture
def link(stack: Any) -> Iterator[CommandLink]:
    client_id = unique("link")
    link = CommandLink(
        host=stack.mqtt_host,
        port=stack.mqtt_port,
        **credentials(stack.mqtt_port),
        client_id=client_id,
        subscription=REPLY_SUBSCRIPTION,
        keepalive=30,
        session_expiry=600,
        receive_maximum=100,
    )
    yield link
    link.close()
    forget_session(stack.mqtt_host, stack.mqtt_port, client_id)


@pytest.fixture
def device(stack: Any) -> Iterator[Device]:
    dev = Device(unique("linkdev"), stack.mqtt_host, stack.mqtt_port, mode="hold").connect()
    yield dev
    dev.disconnect()


def poll_until(
    link: CommandLink | LinkPool, want: int, kind: type, timeout: float = 10.0
) -> list[Any]:
    """Poll a link or a pool until ``want`` events of ``kind`` arrived; return those events."""
    got: list[LinkEvent] = []
    deadline = time.monotonic() + timeout
    while sum(isinstance(e, kind) for e in got) < want:
        assert time.monotonic() < deadline, f"timed out waiting for {want} {kind.__name__}"
        got += link.poll(0.05)
    return [e for e in got if isinstance(e, kind)]


def command_props(cid: str, response: str) -> bytes:
    return codec.publish_properties(
        correlation_data=cid.encode(),
        response_topic=response,
        message_expiry=90,
        user_properties=(("command_id", cid), ("attempt", "2")),
    )


def test_publish_carries_properties_and_pubacks_tell_the_reason(
    link: CommandLink, device: Device
) -> None:
    events = link.connect()
    assert isinstance(events[0], Connected)
    reply_to = f"devices/{device.device_id}/replies/c1"
    mid = link.publish(
        f"devices/{device.device_id}/commands/set", b'{"a":1}', command_props("c1", reply_to)
    )
    nobody = link.publish(
        f"devices/{unique('nobody')}/commands/set", b"{}", command_props("c2", "x")
    )
    acks = {e.mid: e.reason for e in poll_until(link, 2, Puback)}
    assert acks == {mid: 0, nobody: 0x10}  # 0x10: no matching subscribers
    assert link.inflight == 0
    wait_for(lambda: len(device.commands()) == 1, 10, "the command at the device")
    got = device.commands()[0]
    assert (got.command_id, got.attempt, got.response_topic, got.args) == (
        "c1",
        2,
        reply_to,
        {"a": 1},
    )
    assert got.expiry_s is not None
    assert 85 <= got.expiry_s <= 90


def test_reply_acked_is_not_redelivered_unacked_is(link: CommandLink, device: Device) -> None:
    link.connect()
    first = device.reply(_received(device, "r1"))
    second = device.reply(_received(device, "r2"))
    first.wait_for_publish(10)
    second.wait_for_publish(10)
    replies = poll_until(link, 2, Incoming)
    assert [r.topic.rsplit("/", 1)[1] for r in replies] == ["r1", "r2"]
    link.ack([replies[0].mid], replies[0].generation)  # r2 stays unacknowledged
    link.close()  # the PUBACK is written before the DISCONNECT, so Mosquitto has it
    events = link.connect()
    again = [e for e in events if isinstance(e, Incoming)]
    again += poll_until(link, 1 - len(again), Incoming) if not again else []
    assert [r.topic.rsplit("/", 1)[1] for r in again] == ["r2"]
    assert again[0].generation == link.generation != replies[0].generation
    # an ack owed on the old connection is never written on the new one
    link.ack([replies[1].mid], replies[1].generation)
    link.flush()
    link.ack([again[0].mid], again[0].generation)
    link.close()
    assert not [e for e in link.connect()[1:] if isinstance(e, Incoming)]
    assert not any(isinstance(e, Incoming) for e in link.poll(0.5))


def test_publish_while_disconnected_goes_out_after_connect(
    link: CommandLink, device: Device
) -> None:
    link.connect()
    link.close(disconnect=False)
    assert not link.connected
    mid = link.publish(
        f"devices/{device.device_id}/commands/later", b"{}", command_props("c3", "r")
    )
    connected = link.connect()[0]
    assert isinstance(connected, Connected)
    assert connected.resent == 1
    assert [e.mid for e in poll_until(link, 1, Puback)] == [mid]
    wait_for(lambda: len(device.commands()) == 1, 10, "the queued command")


def _received(device: Device, cid: str) -> Any:
    from tests.commands.harness import Received

    return Received(f"devices/{device.device_id}/commands/x", cid, 1, {}, None, None)


def test_pool_keeps_a_target_on_one_link_and_reconnects_a_lost_one(
    stack: Any, device: Device
) -> None:
    client_id = unique("pool")
    pool = LinkPool(
        host=stack.mqtt_host,
        port=stack.mqtt_port,
        **credentials(stack.mqtt_port),
        client_id=client_id,
        subscription=REPLY_SUBSCRIPTION,
        keepalive=30,
        session_expiry=600,
        receive_maximum=100,
        publishers=3,
        reconnect_min_s=0.05,
    )
    try:
        connected = [e for e in pool.connect() if isinstance(e, Connected)]
        assert [e.link for e in connected] == [0, 1, 2, 3]
        keys = [f"dev{i}" for i in range(30)] * 2
        mids = [pool.publish(k, f"devices/{k}/commands/x", b"{}", b"\x00") for k in keys]
        acked = {e.mid for e in poll_until(pool, len(mids), Puback)}
        assert acked == set(mids)
        link_of = {k: m // 65536 for k, m in zip(keys, mids, strict=True)}
        assert all(link_of[k] == m // 65536 for k, m in zip(keys, mids, strict=True))
        assert set(link_of.values()) == {1, 2, 3}  # spread, never on the reply link
        # the device's link goes away as in a crash; its command waits and goes out after
        target = device.device_id
        index = 1 + zlib.crc32(target.encode()) % 3
        pool.links[index].close(disconnect=False)
        mid = pool.publish(target, f"devices/{target}/commands/later", b"{}", b"\x00")
        assert mid // 65536 == index
        events = poll_until(pool, 1, Puback)
        assert [e.mid for e in events] == [mid]
        assert pool.links[index].connected
        wait_for(lambda: len(device.commands()) == 1, 10, "the command after the reconnect")
    finally:
        pool.close()
        forget_session(stack.mqtt_host, stack.mqtt_port, client_id)
