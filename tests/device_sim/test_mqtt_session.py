"""A device session's bookkeeping of what it published (no broker: a recording client)."""

from __future__ import annotations

import asyncio

from device_sim.counters import DeviceRecord, Stats
from device_sim.device import Outgoing
from device_sim.mqtt_session import EVENT_TAG_BASE, DeviceSession
from device_sim.pacing import ConnectLimiter
from device_sim.run_config import Endpoints, RunOptions


class RecordingClient:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes, int]] = []

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        self.published.append((topic, payload, qos))


def _session() -> tuple[DeviceSession, DeviceRecord, Stats, RecordingClient]:
    stats = Stats()
    record = DeviceRecord(device="d", groups=[], qos=1, skew_ms=0, silent=False)
    session = DeviceSession(
        "d",
        [],
        endpoints=Endpoints(),
        options=RunOptions(),
        stats=stats,
        record=record,
        limiter=ConnectLimiter(100.0),
        stop=asyncio.Event(),
        on_message=lambda *a: 0,
    )
    client = RecordingClient()
    session._client = client
    return session, record, stats, client


def _event(seq: int, kind: str = "alarm") -> Outgoing:
    return Outgoing("devices/d/events", b"{}", qos=1, event_seq=seq, event_type=kind)


def test_events_are_counted_apart_from_telemetry() -> None:
    session, record, stats, client = _session()
    session.publish(Outgoing("devices/d/telemetry", b"{}", qos=1, seq=1))
    session.publish(_event(1, "alarm"))
    session.publish(_event(2, "restart"))
    session.publish(Outgoing("devices/d/telemetry", b"{}", qos=1, seq=2))
    session.publish(Outgoing("devices/d/telemetry", b"x", qos=1, malformed_kind="not_utf8"))
    assert len(client.published) == 5
    assert (record.sent, record.events_sent) == (2, 2)
    assert record.event_types == {"alarm": 1, "restart": 1}
    assert (stats.telemetry, stats.events, stats.malformed, stats.published) == (2, 2, 1, 5)
    assert stats.awaiting_ack == 5
    # acks for telemetry seq 2 and event seq 1 (tags as the ack tracker hands them back)
    session._on_ack(2)
    session._on_ack(EVENT_TAG_BASE + 1)
    session.settle_acks()
    assert record.unacked == [1]
    assert record.events_unacked == [2]
    assert stats.acked == 2


def test_no_events_no_event_bookkeeping() -> None:
    session, record, _stats, _client = _session()
    for seq in (1, 2, 3):
        session.publish(Outgoing("devices/d/telemetry", b"{}", qos=1, seq=seq))
    session.settle_acks()
    assert (record.unacked, record.events_unacked, record.events_sent) == ([1, 2, 3], [], 0)


class SubscribingClient(RecordingClient):
    def subscribe(self, subscriptions: object) -> None:
        pass


def test_connected_counts_sessions_up_and_failed_attempts_do_not_count() -> None:
    session, record, stats, _client = _session()
    client = SubscribingClient()
    session._client = client
    session._on_disconnect(client, None)  # a failed attempt: gmqtt calls this without a connect
    assert stats.connected == 0
    session._on_connect(client, 0, 0, None)
    session._on_connect(client, 0, 0, None)  # a repeated callback is one connection
    assert (stats.connected, stats.connects, record.connects) == (1, 2, 2)
    session._on_disconnect(client, None)
    session._on_disconnect(client, None)
    assert stats.connected == 0
