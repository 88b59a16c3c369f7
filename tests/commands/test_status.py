"""Unit tests: status records, their encoding, and the command they carry."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from commands.model import Command, CommandDefaults, Source, State, parse_command
from commands.status import (
    StatusRecord,
    command_from_status,
    decode_status,
    encode_status,
    status_fields,
)

DEFAULTS = CommandDefaults(timeout_ms=5000, max_attempts=3, max_payload_bytes=1024)
SRC = Source(partition=4, offset=17)


def test_status_round_trip_and_command_rebuild() -> None:
    value = orjson.dumps({"command_id": "c9", "name": "set", "args": {"v": 1}})
    cmd = parse_command(b"group:g", value, timestamp_ms=1_000, defaults=DEFAULTS, source=SRC)
    assert isinstance(cmd, Command)
    status = StatusRecord(
        command_id="c9",
        state=State.DELIVERED,
        attempt=2,
        device_id="group:g",
        at=5,
        detail=None,
        command=cmd.to_record(),
        sent_at=4,
        source=SRC,
        replies={"ok": 3, "error": 1},
    )
    raw = encode_status(status)
    doc = orjson.loads(raw)
    assert {"state", "attempt", "device_id", "at", "detail"} <= set(doc)
    back = decode_status(b"c9", raw)
    assert back == status
    # a rebuilt command has its TTL fixed (the tracker rebased it when it accepted it)
    assert command_from_status(status) == replace(cmd, ttl_from_accept=False)


def test_a_tenants_command_survives_the_status_round_trip() -> None:
    value = orjson.dumps({"command_id": "c8", "name": "reboot"})
    cmd = parse_command(b"pump-1", value, timestamp_ms=1_000, defaults=DEFAULTS, tenant="acme")
    assert isinstance(cmd, Command)
    status = StatusRecord("c8", State.SENT, 1, "pump-1", 5, command=cmd.to_record())
    back = decode_status(b"c8", encode_status(status))
    assert back is not None
    rebuilt = command_from_status(back)
    assert rebuilt is not None
    assert rebuilt.tenant == "acme"


@pytest.mark.parametrize("value", [None, b"", b"[]", b'{"state": "nope"}', b'{"x": 1}'])
def test_decode_status_returns_none_for_unreadable(value: bytes | None) -> None:
    assert decode_status(b"k", value) is None


def test_status_fields_are_the_design_fields() -> None:
    status = StatusRecord("c1", State.SENT, 1, "dev-1", 7, "why", replies={"ok": 1})
    assert status_fields(status) == {
        "command_id": "c1",
        "state": "sent",
        "attempt": 1,
        "device_id": "dev-1",
        "at": 7,
        "detail": "why",
    }
