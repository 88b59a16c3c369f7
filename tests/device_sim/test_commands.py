"""Command parsing and the device's seeded replies."""

from __future__ import annotations

import random

import orjson

from device_sim.commands import Responder, parse_command, subscriptions


def test_direct_command_with_mqtt5_properties() -> None:
    cmd = parse_command(
        "dev-1",
        "devices/dev-1/commands/reboot",
        b'{"delay": 5}',
        {"correlation_data": [b"cmd-42"], "response_topic": ["devices/dev-1/replies/cmd-42"]},
    )
    assert cmd is not None
    assert (cmd.name, cmd.command_id, cmd.group) == ("reboot", "cmd-42", None)
    assert cmd.args == {"delay": 5}
    assert cmd.response_topic == "devices/dev-1/replies/cmd-42"
    assert cmd.correlation_data == b"cmd-42"


def test_group_command_with_id_in_json() -> None:
    cmd = parse_command(
        "dev-1", "groups/group-3/commands/set", b'{"command_id": "c-7", "args": {"x": 1}}', {}
    )
    assert cmd is not None
    assert (cmd.name, cmd.command_id, cmd.group) == ("set", "c-7", "group-3")
    assert cmd.response_topic is None


def test_not_a_command_for_this_device() -> None:
    assert parse_command("dev-1", "devices/dev-2/commands/reboot", b"{}", {}) is None
    assert parse_command("dev-1", "devices/dev-1/telemetry", b"{}", {}) is None
    assert parse_command("dev-1", "devices/dev-1/commands", b"{}", {}) is None


def test_unparsable_args_still_a_command() -> None:
    cmd = parse_command("dev-1", "devices/dev-1/commands/x", b"{nope", {"correlation_data": [b"a"]})
    assert cmd is not None
    assert cmd.args is None
    assert cmd.command_id == "a"


def test_reply_goes_to_default_topic_with_status_and_result() -> None:
    responder = Responder("dev-1", random.Random(1), 100.0, 0.0, silent=False)
    cmd = parse_command("dev-1", "devices/dev-1/commands/ping", b'{"command_id": "c1"}', {})
    assert cmd is not None
    reply = responder.reply(cmd, {"battery": 80.0})
    assert reply is not None
    assert reply.topic == "devices/dev-1/replies/c1"
    doc = orjson.loads(reply.payload)
    assert doc["status"] == "ok"
    assert doc["command_id"] == "c1"
    assert doc["result"]["state"] == {"battery": 80.0}
    assert 0.05 <= reply.delay_s <= 0.15


def test_reply_uses_response_topic_and_correlation() -> None:
    responder = Responder("dev-1", random.Random(1), 0.0, 0.0, silent=False)
    cmd = parse_command(
        "dev-1",
        "devices/dev-1/commands/ping",
        b"{}",
        {"correlation_data": [b"abc"], "response_topic": ["custom/reply"]},
    )
    assert cmd is not None
    reply = responder.reply(cmd)
    assert reply is not None
    assert (reply.topic, reply.correlation_data, reply.delay_s) == ("custom/reply", b"abc", 0.0)


def test_failure_rate_and_silence() -> None:
    cmd = parse_command("dev-1", "devices/dev-1/commands/ping", b'{"command_id": "c1"}', {})
    assert cmd is not None
    failing = Responder("dev-1", random.Random(1), 0.0, 1.0, silent=False)
    reply = failing.reply(cmd)
    assert reply is not None
    assert not reply.ok
    doc = orjson.loads(reply.payload)
    assert (doc["status"], doc["error"]) == ("error", "simulated failure")
    assert Responder("dev-1", random.Random(1), 0.0, 0.0, silent=True).reply(cmd) is None
    half = Responder("dev-1", random.Random(3), 0.0, 0.5, silent=False)
    oks = sum(1 for _ in range(1000) if (r := half.reply(cmd)) is not None and r.ok)
    assert 400 < oks < 600


def test_no_id_no_reply() -> None:
    cmd = parse_command("dev-1", "devices/dev-1/commands/ping", b"{}", {})
    assert cmd is not None
    assert Responder("dev-1", random.Random(1), 0.0, 0.0, silent=False).reply(cmd) is None


def test_subscriptions() -> None:
    assert subscriptions("d", ["group-1", "group-2"]) == [
        "devices/d/commands/+",
        "groups/group-1/commands/+",
        "groups/group-2/commands/+",
    ]
