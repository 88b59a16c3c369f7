"""The SASL frames iot-amqp writes and reads, checked against proton's own SASL client: a
client transport is fed our frames and answers with its sasl-init."""

from __future__ import annotations

import struct

import pytest
from proton import SASL, Connection, Transport

from amqp import sasl
from amqp.errors import SaslError


def _client(user: str, password: str, mechs: str) -> Transport:
    transport = Transport()
    connection = Connection()
    connection.user = user
    connection.password = password
    transport.bind(connection)
    client_sasl = transport.sasl()
    client_sasl.allowed_mechs(mechs)
    client_sasl.allow_insecure_mechs = True
    connection.open()
    return transport


def _drain(transport: Transport) -> bytes:
    out = b""
    while transport.pending() > 0:
        chunk = transport.peek(transport.pending()) or b""
        transport.pop(len(chunk))
        out += bytes(chunk)
    return out


def test_a_proton_client_logs_in_with_plain_through_our_frames() -> None:
    client = _client("pump-1@acme", "s3cret", "PLAIN")
    assert _drain(client).startswith(sasl.SASL_HEADER)
    client.push(sasl.SASL_HEADER + sasl.mechanisms_frame(("PLAIN",)))
    sent = _drain(client)
    body, used = sasl.take_frame(sent)
    assert body is not None
    assert used == len(sent)
    init = sasl.parse_init(body)
    assert init.mechanism == "PLAIN"
    assert init.response == b"\0pump-1@acme\0s3cret"
    client.push(sasl.outcome_frame(sasl.OK))
    assert client.sasl().outcome == SASL.OK
    assert _drain(client).startswith(sasl.AMQP_HEADER)  # on to AMQP


def test_a_refusal_is_an_auth_outcome() -> None:
    client = _client("pump-1", "wrong", "PLAIN")
    _drain(client)
    client.push(sasl.SASL_HEADER + sasl.mechanisms_frame(("PLAIN",)))
    _drain(client)
    client.push(sasl.outcome_frame(sasl.AUTH))
    assert client.sasl().outcome == SASL.AUTH


def test_frames_split_and_garbage() -> None:
    frame = sasl.mechanisms_frame(("PLAIN",))
    assert sasl.take_frame(frame[:5]) == (None, 0)
    assert sasl.take_frame(frame[:-1]) == (None, 0)
    with pytest.raises(SaslError):
        sasl.take_frame(struct.pack(">IBBH", 16, 2, 0, 0) + bytes(8))  # an AMQP frame
    with pytest.raises(SaslError):
        sasl.take_frame(struct.pack(">IBBH", 1 << 20, 2, 1, 0))  # far too large
    with pytest.raises(SaslError):
        sasl.parse_init(b"\x00\x53\x44\xc0\x03\x01\x50\x00")  # an outcome, not an init
    with pytest.raises(SaslError):
        sasl.parse_init(b"\xff\xfe")
