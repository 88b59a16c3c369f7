import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import mqtt_codec as codec


@pytest.mark.parametrize(
    ("n", "raw"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (268435455, b"\xff\xff\xff\x7f"),
    ],
)
def test_varint_spec_examples(n: int, raw: bytes) -> None:
    # MQTT 5.0 section 1.5.5 table
    assert codec.encode_varint(n) == raw
    assert codec.decode_varint(raw, 0) == (n, len(raw))


def test_varint_incomplete_and_malformed() -> None:
    assert codec.decode_varint(b"\x80", 0) is None
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_varint(b"\xff\xff\xff\xff\x01", 0)


def test_connect_bytes() -> None:
    raw = codec.encode_connect(
        "br",
        keepalive=30,
        clean_start=False,
        session_expiry=86400,
        receive_maximum=1000,
        username="u",
        password="p",
    )
    # fixed header, protocol name, level 5, flags user+password (no clean start), keepalive 30
    assert raw[0] == 0x10
    body = raw[2:]
    assert body[:7] == b"\x00\x04MQTT\x05"
    assert body[7] == 0xC0
    assert body[8:10] == b"\x00\x1e"
    # properties: length 8, session expiry 86400, receive maximum 1000
    assert body[10:19] == b"\x08\x11\x00\x01\x51\x80\x21\x03\xe8"
    assert body[19:] == b"\x00\x02br\x00\x01u\x00\x01p"
    assert raw[1] == len(body)


def test_subscribe_retain_handling_option() -> None:
    raw = codec.encode_subscribe(1, ("a",), qos=1, retain_handling=1)
    assert raw[-1] == 0x11  # QoS 1 | retain handling 1 (bits 4-5)


def test_subscribe_bytes() -> None:
    raw = codec.encode_subscribe(7, ("a/+", "$share/g/b"), qos=1)
    # remaining length 22 = packet id 2 + properties 1 + (2+3+1) + (2+10+1)
    assert raw == b"\x82\x16\x00\x07\x00\x00\x03a/+\x01\x00\x0a$share/g/b\x01"


def test_pubacks_batch() -> None:
    assert codec.encode_puback(0x1234) == b"\x40\x02\x12\x34"
    assert codec.encode_pubacks([1, 65535]) == b"\x40\x02\x00\x01\x40\x02\xff\xff"


def test_connack_suback_decode() -> None:
    assert codec.decode_connack(b"\x01\x00\x00") == codec.Connack(True, 0)
    assert codec.decode_connack(b"\x00\x86\x00").reason_text == "bad user name or password"
    assert codec.decode_suback(b"\x00\x01\x00\x01\x80") == (1, [1, 0x80])


@given(
    topic=st.text(min_size=1, max_size=60),
    payload=st.binary(max_size=70000),
    qos=st.integers(0, 1),
    mid=st.integers(1, 65535),
    dup=st.booleans(),
)
def test_publish_roundtrip_and_split(
    topic: str, payload: bytes, qos: int, mid: int, dup: bool
) -> None:
    raw = codec.encode_publish(topic, payload, qos, mid, dup=dup)
    buf = bytearray(raw + raw[:3])  # one complete packet and the start of another
    packets, used = codec.split_packets(buf)
    assert used == len(raw)
    assert len(packets) == 1
    first, body = packets[0]
    p = codec.decode_publish(first, body)
    assert (p.topic, p.payload, p.qos, p.dup) == (topic, payload, qos, dup)
    assert p.packet_id == (mid if qos else 0)


def test_connack_receive_maximum() -> None:
    # session expiry (4 bytes), receive maximum 20, assigned client id (a string): all skipped
    # or read, whatever their order
    props = b"\x11\x00\x00\x00\x3c" + b"\x21\x00\x14" + b"\x12\x00\x02id"
    body = b"\x00\x00" + codec.encode_varint(len(props)) + props
    assert codec.decode_connack(body) == codec.Connack(False, 0, 20)
    assert codec.decode_connack(b"\x00\x00\x00").receive_maximum == 65535
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_connack(b"\x00\x00\x05\x21\x00")


def test_puback_reason() -> None:
    assert codec.decode_puback(b"\x00\x07") == (7, 0)
    assert codec.decode_puback(b"\x01\x00\x10\x00") == (256, 0x10)  # no matching subscribers
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_puback(b"\x01")


@given(
    correlation=st.binary(min_size=1, max_size=200),
    response=st.none() | st.text(max_size=80),
    expiry=st.none() | st.integers(0, 2**32 - 1),
    users=st.lists(st.tuples(st.text(max_size=20), st.text(max_size=20)), max_size=4),
    mid=st.integers(1, 65535),
)
def test_publish_properties_roundtrip(
    correlation: bytes,
    response: str | None,
    expiry: int | None,
    users: list[tuple[str, str]],
    mid: int,
) -> None:
    props = codec.publish_properties(
        correlation_data=correlation,
        response_topic=response,
        message_expiry=expiry,
        user_properties=tuple(users),
    )
    raw = codec.encode_publish("devices/d/commands/x", b"{}", 1, mid, properties=props)
    packets, used = codec.split_packets(bytearray(raw))
    assert used == len(raw)
    first, body = packets[0]
    pub = codec.decode_publish(first, body)
    assert (pub.payload, pub.packet_id) == (b"{}", mid)
    decoded, end = codec.decode_properties(body, 2 + len("devices/d/commands/x") + 2)
    assert body[end:] == b"{}"
    assert decoded.get(0x09) == correlation
    assert decoded.get(0x08) == response
    assert decoded.get(0x02) == expiry
    assert decoded.get(0x26, []) == users
    dup = codec.set_dup(raw)
    assert codec.decode_publish(dup[0], body).dup
    assert dup[1:] == raw[1:]


def test_connack_with_a_malformed_string_property_is_a_protocol_error() -> None:
    # reason string (0x1F) holding invalid UTF-8
    props = b"\x1f\x00\x01\x80"
    with pytest.raises(codec.MqttProtocolError):
        codec.decode_connack(b"\x00\x00" + codec.encode_varint(len(props)) + props)
