"""proton's engine as iot-amqp drives it, without sockets."""

from __future__ import annotations

import struct

from proton import SSL, Event

from amqp.engine import Engine, condition_of
from amqp.model import Cond, Refusal
from amqp.sasl import AMQP_HEADER


def test_proton_was_built_with_openssl() -> None:
    """The sdist links OpenSSL only if pkg-config found libssl-dev at build time, else it
    builds a stub silently (.ci/setup installs both): TLS on 5671 needs it."""
    assert SSL.present()


def test_a_client_header_and_open_are_read_and_answered() -> None:
    engine = Engine(max_frame_bytes=16384, idle_timeout_s=60)
    engine.push(AMQP_HEADER)
    assert [e.type for e in engine.events()][:2] == [
        Event.CONNECTION_INIT, Event.CONNECTION_BOUND,
    ]  # fmt: skip
    assert engine.output() == AMQP_HEADER
    assert not engine.input_closed


def test_unreadable_bytes_close_the_input() -> None:
    engine = Engine(max_frame_bytes=16384, idle_timeout_s=60)
    engine.push(AMQP_HEADER + struct.pack(">IBBH", 16, 2, 0, 0) + b"\xde\xad\xbe\xef" * 2)
    list(engine.events())
    assert engine.input_closed


def test_conditions_carry_the_code() -> None:
    cond = condition_of(Refusal(Cond.BAD_REQUEST, "not_json: x", {"code": "not_json"}))
    assert (cond.name, cond.description) == ("hono:bad-request", "not_json: x")
    assert cond.info == {"code": "not_json"}
    assert condition_of(Refusal(Cond.NOT_FOUND, "no")).info is None


def test_only_the_wanted_events_are_yielded_and_all_are_consumed() -> None:
    engine = Engine(max_frame_bytes=16384, idle_timeout_s=60)
    engine.push(AMQP_HEADER)
    wanted = frozenset({Event.CONNECTION_BOUND.number})
    assert [e.type for e in engine.events(wanted)] == [Event.CONNECTION_BOUND]
    assert list(engine.events()) == []
