"""The subscriber's connection decoding and ack/pause behaviour, over a fake transport."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import mqtt_codec as codec
from bridge.mqtt_client import Subscriber, _Connection


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[str, bytes, int, int, bool]] = []
        self.pause_after: int | None = None
        self.sub: Subscriber | None = None
        self.reads: list[int] = []  # len(got) at each on_read_done

    def on_publish(self, topic: str, payload: bytes, qos: int, packet_id: int, dup: bool) -> None:
        self.got.append((topic, payload, qos, packet_id, dup))
        if self.pause_after is not None and len(self.got) >= self.pause_after:
            assert self.sub is not None
            self.sub.pause_reading()

    def on_read_done(self) -> None:
        self.reads.append(len(self.got))

    def on_connection_change(self, generation: int, connected: bool) -> None:
        return


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.reading = True
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def make() -> tuple[Sink, Subscriber, _Connection, Transport]:
    sink = Sink()
    sub = Subscriber(
        sink,
        host="h",
        port=1,
        client_id="c",
        filters=("devices/+/telemetry",),
        keepalive=0,
        session_expiry=1,
        receive_maximum=10,
    )
    sink.sub = sub
    sub._loop = asyncio.new_event_loop()
    conn = _Connection(sub)
    transport = Transport()
    conn.connection_made(transport)
    sub._conn = conn
    sub.connected = True
    sub.generation = 3
    return sink, sub, conn, transport


def test_decodes_packets_split_across_reads() -> None:
    sink, _, conn, _ = make()
    stream = b"".join(
        codec.encode_publish(f"devices/d{i}/telemetry", b"x" * (i * 50), i % 2, i + 1)
        for i in range(10)
    )
    for i in range(0, len(stream), 7):
        conn.data_received(stream[i : i + 7])
    assert [(t, len(p), q, m) for t, p, q, m, _ in sink.got] == [
        (f"devices/d{i}/telemetry", i * 50, i % 2, (i + 1) if i % 2 else 0) for i in range(10)
    ]
    assert not conn.buf


def test_pause_stops_decoding_mid_read_and_resume_continues_in_order() -> None:
    sink, sub, conn, transport = make()
    sink.pause_after = 3
    conn.data_received(
        b"".join(codec.encode_publish("devices/d/telemetry", b"%d" % i, 1, i + 1) for i in range(8))
    )
    assert len(sink.got) == 3
    assert not transport.reading
    sink.pause_after = None
    sub.resume_reading()
    assert [p for _, p, _, _, _ in sink.got] == [b"%d" % i for i in range(8)]
    assert transport.reading
    assert sink.reads == [3, 8]  # the end of the read, then of what the resume decoded


def test_the_sink_hears_the_end_of_every_read_after_its_publishes() -> None:
    sink, _, conn, _ = make()
    packets = [codec.encode_publish("devices/d/telemetry", b"%d" % i, 1, i + 1) for i in range(5)]
    conn.data_received(b"".join(packets[:2]))
    conn.data_received(packets[2][:4])  # a partial packet: nothing handed, the read still ends
    conn.data_received(packets[2][4:] + b"".join(packets[3:]))
    assert sink.reads == [2, 2, 5]


def test_acks_only_for_the_current_connection() -> None:
    _, sub, _, transport = make()
    assert sub.send_acks(3, [1, 2])
    assert bytes(transport.written) == b"\x40\x02\x00\x01\x40\x02\x00\x02"
    assert not sub.send_acks(2, [9])  # an older connection's packet ids are never acked here
    assert len(transport.written) == 8


def test_qos2_publish_is_a_protocol_error() -> None:
    _, sub, conn, transport = make()
    raw = bytearray(codec.encode_publish("devices/d/telemetry", b"x", 1, 1))
    raw[0] |= 0x04  # QoS 2 (we subscribe with maximum QoS 1)
    conn.data_received(bytes(raw))
    assert transport.closed
    assert sub.errors["protocol"] == 1


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=300), max_size=8))
def test_garbage_from_the_server_never_raises(chunks: list[bytes]) -> None:
    # fuzz the inbound decoder: anything malformed closes the connection, nothing escapes
    _, _, conn, transport = make()
    for chunk in chunks:
        if transport.closed:
            break
        conn.data_received(chunk)  # must not raise
    if not transport.closed:  # whatever is left is an incomplete packet, nothing decodable
        try:
            left = codec.split_packets(conn.buf)[1]
        except codec.MqttProtocolError:
            left = -1
        assert left in (0, -1)
