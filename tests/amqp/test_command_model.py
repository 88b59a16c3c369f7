"""amqp.command_model: which device a `command` source names, settle modes, the command
message and a device's reply (pure)."""

from __future__ import annotations

import orjson

from amqp.command_model import (
    Reply,
    check_command_settle_modes,
    command_device,
    command_message,
    is_reply_address,
    parse_reply,
)
from amqp.model import Account, Cond, Refusal
from api.http_devices.model import DeviceRef, HttpCommand

PUMP = DeviceRef("default", "pump-1")
ACME = DeviceRef("acme", "pump-1")


def _cond(found: object) -> Cond | None:
    return found.condition if isinstance(found, Refusal) else None


def test_a_command_source_names_only_the_logged_in_device() -> None:
    assert command_device(PUMP, "command") == PUMP
    assert command_device(ACME, "command//pump-1") == ACME
    assert command_device(ACME, "command/acme/pump-1") == ACME
    assert _cond(command_device(PUMP, "command/default/pump-2")) is Cond.UNAUTHORIZED
    assert _cond(command_device(PUMP, "command/acme/pump-1")) is Cond.UNAUTHORIZED
    assert _cond(command_device(Account("app"), "command")) is Cond.UNAUTHORIZED
    assert _cond(command_device(None, "command")) is Cond.NOT_FOUND  # anonymous: name it
    assert command_device(None, "command/acme/pump-1") == ACME
    assert _cond(command_device(PUMP, "command/a/b/c")) is Cond.NOT_FOUND
    assert command_device(PUMP, "telemetry") is None  # not a command source
    assert command_device(PUMP, None) is None


def test_commands_go_unsettled_and_the_device_settles_first() -> None:
    assert check_command_settle_modes(0, 0) is None  # unsettled, first
    assert check_command_settle_modes(2, 0) is None  # mixed, first
    assert _cond(check_command_settle_modes(1, 0)) is Cond.PRECONDITION  # pre-settled
    assert _cond(check_command_settle_modes(0, 1)) is Cond.PRECONDITION  # second


def test_the_command_message_carries_hono_fields_and_the_mqtt_payload() -> None:
    payload = orjson.dumps({"delay": 3, "command_id": "c-1"})
    cmd = HttpCommand("reboot", "c-1", "2", "tenants/acme/devices/pump-1/commands/reboot", payload)
    msg = command_message(ACME, cmd)
    assert (msg.subject, msg.correlation_id) == ("reboot", "c-1")
    assert msg.reply_to == "command_response/acme/pump-1/c-1"
    assert msg.properties == {"command_id": "c-1", "attempt": 2}
    assert (msg.body, msg.content_type) == (payload, "application/json")


def test_a_reply_is_the_devices_own_mqtt_reply() -> None:
    address = "command_response/acme/pump-1/c-1"
    assert is_reply_address(address)
    assert not is_reply_address("telemetry")
    ok = parse_reply(ACME, address, b'{"status": "ok"}', None, 4096)
    assert ok == Reply(ACME, "c-1", b'{"status": "ok"}')
    hono = parse_reply(ACME, address, b'"no sensor"', 500, 4096)
    assert isinstance(hono, Reply)
    assert orjson.loads(hono.payload) == {"status": "error", "error": "no sensor"}
    assert _cond(parse_reply(PUMP, address, b"{}", None, 4096)) is Cond.UNAUTHORIZED
    assert _cond(parse_reply(Account("x"), address, b"{}", None, 4096)) is Cond.UNAUTHORIZED
    assert _cond(parse_reply(ACME, address, b"x" * 10, None, 4)) is Cond.BAD_REQUEST
    assert _cond(parse_reply(ACME, address, b"{}", "abc", 4096)) is Cond.BAD_REQUEST
    assert _cond(parse_reply(ACME, "command_response/acme/pump-1", b"{}", None, 9)) is (
        Cond.NOT_FOUND
    )
