"""Unit tests: command record parsing and the state machine."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.model import (
    FINAL_STATES,
    Command,
    CommandDefaults,
    InvalidTransitionError,
    Rejection,
    Source,
    State,
    Target,
    check_transition,
    parse_command,
    parse_target,
)

DEFAULTS = CommandDefaults(timeout_ms=5000, max_attempts=3, max_payload_bytes=1024)
SRC = Source(partition=4, offset=17)


def parse(key: bytes | None, doc: object, ts: int = 1_000) -> Command | Rejection:
    value = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return parse_command(key, value, timestamp_ms=ts, defaults=DEFAULTS, source=SRC)


def test_full_record_parses() -> None:
    cmd = parse(
        b"dev-1",
        {
            "command_id": "c1",
            "name": "reboot",
            "args": {"delay": 2},
            "timeout_ms": 700,
            "max_attempts": 2,
            "reply_expected": False,
        },
    )
    assert isinstance(cmd, Command)
    assert cmd.target == Target(device_id="dev-1")
    assert (cmd.name, dict(cmd.args), cmd.timeout_ms, cmd.max_attempts) == (
        "reboot",
        {"delay": 2},
        700,
        2,
    )
    assert cmd.reply_expected is False
    # TTL defaults to timeout x attempts (counted from acceptance: see the tracker tests)
    assert (cmd.created_at, cmd.ttl_ms, cmd.deadline) == (1_000, 1_400, 2_400)
    assert cmd.ttl_from_accept


def test_defaults_fill_missing_fields() -> None:
    cmd = parse(b"dev-1", {"command_id": "c1", "name": "ping"})
    assert isinstance(cmd, Command)
    assert (dict(cmd.args), cmd.timeout_ms, cmd.max_attempts, cmd.reply_expected) == (
        {},
        5000,
        3,
        True,
    )
    assert cmd.ttl_ms == 15_000


def test_group_key_and_group_ttl_is_one_window() -> None:
    cmd = parse(b"group:floor-2", {"command_id": "c1", "name": "ping", "timeout_ms": 900})
    assert isinstance(cmd, Command)
    assert cmd.target == Target(group="floor-2")
    assert cmd.target.key == "group:floor-2"
    assert cmd.ttl_ms == 900


def test_explicit_ttl_and_created_at() -> None:
    cmd = parse(b"d", {"command_id": "c", "name": "n", "ttl_ms": 50, "created_at": 7})
    assert isinstance(cmd, Command)
    assert cmd.deadline == 57
    assert not cmd.ttl_from_accept


@pytest.mark.parametrize(
    ("key", "doc", "code"),
    [
        (b"d", b"{not json", "bad_json"),
        (b"d", [1, 2], "bad_json"),
        (b"d", {"name": "n"}, "bad_command_id"),
        (b"d", {"command_id": "a/b", "name": "n"}, "bad_command_id"),
        (None, {"command_id": "c", "name": "n"}, "bad_key"),
        (b"dev/1", {"command_id": "c", "name": "n"}, "bad_device_id"),
        (b"dev+", {"command_id": "c", "name": "n"}, "bad_device_id"),
        (b"group:", {"command_id": "c", "name": "n"}, "bad_device_id"),
        (b"x" * 129, {"command_id": "c", "name": "n"}, "bad_device_id"),
        (b"d", {"command_id": "c", "name": "#"}, "bad_name"),
        (b"d", {"command_id": "c"}, "bad_name"),
        (b"d", {"command_id": "c", "name": "n", "args": [1]}, "bad_args"),
        (b"d", {"command_id": "c", "name": "n", "args": {"command_id": "x"}}, "bad_args"),
        (b"d", {"command_id": "c", "name": "n", "timeout_ms": 0}, "bad_timeout"),
        (b"d", {"command_id": "c", "name": "n", "timeout_ms": "5"}, "bad_timeout"),
        (b"d", {"command_id": "c", "name": "n", "timeout_ms": True}, "bad_timeout"),
        (b"d", {"command_id": "c", "name": "n", "max_attempts": 0}, "bad_max_attempts"),
        (b"d", {"command_id": "c", "name": "n", "reply_expected": "yes"}, "bad_reply_expected"),
        (b"d", {"command_id": "c", "name": "n", "ttl_ms": -1}, "bad_ttl"),
        (b"d", {"command_id": "c", "name": "n", "args": {"blob": "x" * 2000}}, "oversized"),
    ],
)
def test_bad_records_are_rejected_with_a_code(key: bytes | None, doc: object, code: str) -> None:
    out = parse(key, doc)
    assert isinstance(out, Rejection)
    assert out.code == code


def test_rejection_without_command_id_gets_a_source_based_id() -> None:
    out = parse(b"d", {"name": "n"})
    assert isinstance(out, Rejection)
    assert out.command_id == "iot.commands-4-17"


def test_none_value_is_rejected() -> None:
    out = parse_command(b"d", None, timestamp_ms=0, defaults=DEFAULTS)
    assert isinstance(out, Rejection)
    assert out.code == "empty_value"


@given(key=st.one_of(st.none(), st.binary(max_size=40)), value=st.binary(max_size=300))
def test_parse_never_raises_on_garbage(key: bytes | None, value: bytes) -> None:
    out = parse_command(key, value, timestamp_ms=0, defaults=DEFAULTS, source=SRC)
    assert isinstance(out, Command | Rejection)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    doc=st.fixed_dictionaries(
        {},
        optional={
            "command_id": st.one_of(_json, st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True)),
            "name": st.one_of(_json, st.sampled_from(["reboot", "set"])),
            "args": _json,
            "timeout_ms": _json,
            "max_attempts": _json,
            "reply_expected": _json,
            "ttl_ms": _json,
        },
    )
)
def test_parse_of_any_json_object_is_command_or_rejection(doc: dict[str, object]) -> None:
    out = parse(b"dev-1", doc)
    if isinstance(out, Command):
        assert out.command_id == doc["command_id"]
        assert out.timeout_ms >= 1
        assert out.max_attempts >= 1
        assert out.deadline > out.created_at
    else:
        assert isinstance(out, Rejection)
        assert out.code


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("dev.1:a_b-c", Target(device_id="dev.1:a_b-c")),
        ("group:g1", Target(group="g1")),
        ("group:a/b", None),
        ("", None),
        ("a b", None),
    ],
)
def test_parse_target(key: str, expected: Target | None) -> None:
    assert parse_target(key) == expected


def test_state_machine_happy_paths_and_forbidden_moves() -> None:
    for path in (
        [None, State.ACCEPTED, State.SENT, State.DELIVERED, State.SUCCEEDED],
        [None, State.ACCEPTED, State.SENT, State.DELIVERED, State.SENT, State.FAILED],
        [None, State.ACCEPTED, State.SENT, State.SENT, State.EXPIRED],
        [None, State.REJECTED],
        [None, State.ACCEPTED, State.EXPIRED],
    ):
        for current, new in itertools.pairwise(path):
            assert new is not None
            check_transition(current, new)
    for current, new in (
        (None, State.SENT),
        (State.ACCEPTED, State.DELIVERED),
        (State.SUCCEEDED, State.SENT),
        (State.EXPIRED, State.SUCCEEDED),
        (State.DELIVERED, State.DELIVERED),
        (State.SENT, State.REJECTED),
    ):
        with pytest.raises(InvalidTransitionError):
            check_transition(current, new)
    for final in FINAL_STATES:
        for new in State:
            with pytest.raises(InvalidTransitionError):
                check_transition(final, new)


def test_the_sender_tenant_comes_from_the_header_and_the_value_may_not_name_another() -> None:
    doc = {"command_id": "c-1", "name": "reboot"}

    def with_tenant(value: Mapping[str, object], tenant: str | None) -> Command | Rejection:
        return parse_command(
            b"pump-1", json.dumps(value).encode(), timestamp_ms=1, defaults=DEFAULTS, tenant=tenant
        )

    default = with_tenant(doc, None)
    assert isinstance(default, Command)
    assert default.tenant == "default"
    assert "tenant" not in default.to_record()  # default-tenant records are as before
    acme = with_tenant(doc, "acme")
    assert isinstance(acme, Command)
    assert (acme.tenant, acme.to_record()["tenant"]) == ("acme", "acme")
    assert isinstance(with_tenant({**doc, "tenant": "acme"}, "acme"), Command)
    for value, tenant, code in (
        ({**doc, "tenant": "beta"}, "acme", "tenant_mismatch"),
        ({**doc, "tenant": "beta"}, None, "tenant_mismatch"),  # no header: the default's
        ({**doc, "tenant": "default"}, "acme", "tenant_mismatch"),
        (doc, "Not/A/Tenant", "bad_tenant"),
        (doc, "", "bad_tenant"),
    ):
        refused = with_tenant(value, tenant)
        assert isinstance(refused, Rejection)
        assert (refused.command_id, refused.code) == ("c-1", code)
