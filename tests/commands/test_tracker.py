"""Unit tests: the pending-command tracker (timeouts, redelivery, replies, rebuild)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from commands.actions import (
    Action,
    DeadLetterAction,
    PublishAction,
    ReleaseAction,
    ReplyAction,
    StatusAction,
)
from commands.mapping import Reply, parse_reply
from commands.model import (
    Command,
    Rejection,
    Source,
    State,
    Target,
    check_transition,
)
from commands.status import StatusRecord
from commands.tracker import Tracker

SRC = Source(3, 42)


def cmd(
    cid: str = "c1",
    *,
    device: str | None = "d1",
    group: str | None = None,
    timeout_ms: int = 1_000,
    max_attempts: int = 3,
    reply_expected: bool = True,
    created_at: int = 0,
    ttl_ms: int | None = None,
) -> Command:
    target = Target(group=group) if group else Target(device_id=device)
    return Command(
        command_id=cid,
        target=target,
        name="n",
        args={"a": 1},
        timeout_ms=timeout_ms,
        max_attempts=max_attempts,
        reply_expected=reply_expected,
        created_at=created_at,
        ttl_ms=ttl_ms if ttl_ms is not None else timeout_ms * (1 if group else max_attempts),
    )


def statuses(actions: Sequence[Action]) -> list[tuple[State, int]]:
    return [(a.status.state, a.status.attempt) for a in actions if isinstance(a, StatusAction)]


def publishes(actions: Sequence[Action]) -> list[int]:
    return [a.attempt for a in actions if isinstance(a, PublishAction)]


def ok(device: str = "d1", cid: str = "c1", result: str = "42") -> Reply:
    return parse_reply(device, cid, b'{"status": "ok", "result": ' + result.encode() + b"}")


def test_success_path() -> None:
    t = Tracker()
    a = t.admit(cmd(), 0, SRC)
    assert statuses(a) == [(State.ACCEPTED, 0), (State.SENT, 1)]
    assert publishes(a) == [1]
    # The offset is released by the `sent` status, not by `accepted`.
    assert [s.release for s in a if isinstance(s, StatusAction)] == [None, SRC]
    assert statuses(t.on_puback("c1", 1, 0, 5)) == [(State.DELIVERED, 1)]
    reply = parse_reply("d1", "c1", b'{"status": "ok", "result": 42}')
    out = t.on_reply(reply, 10)
    assert statuses(out) == [(State.SUCCEEDED, 1)]
    rec = [x for x in out if isinstance(x, ReplyAction)]
    assert rec[0].key == "d1"
    assert (rec[0].record["result"], rec[0].record["match"]) == (42, "matched")
    assert len(t) == 0
    assert t.state_of("c1") is State.SUCCEEDED
    assert t.tick(10_000) == []


def test_error_reply_fails_the_command() -> None:
    t = Tracker()
    t.admit(cmd(), 0, SRC)
    out = t.on_reply(parse_reply("d1", "c1", b'{"status": "error", "error": "busy"}'), 3)
    assert [(a.status.state, a.status.detail) for a in out if isinstance(a, StatusAction)] == [
        (State.DELIVERED, "delivery shown by the reply"),
        (State.FAILED, "busy"),
    ]


def test_a_reply_before_the_puback_implies_delivered_and_the_late_puback_is_ignored() -> None:
    # PUBACKs arrive on a publishing connection, replies on another: either may come first
    t = Tracker()
    t.admit(cmd(), 0, SRC)
    out = t.on_reply(ok(), 4)
    assert statuses(out) == [(State.DELIVERED, 1), (State.SUCCEEDED, 1)]
    assert t.on_puback("c1", 1, 0, 5) == []


def test_no_reply_means_max_attempts_then_expired_and_dead_letter() -> None:
    t = Tracker()
    sent = publishes(t.admit(cmd(), 0, SRC))
    assert t.tick(999) == []
    for now in (1_000, 2_000):
        sent += publishes(t.tick(now))
    assert sent == [1, 2, 3]
    out = t.tick(3_000)
    assert publishes(out) == []
    assert statuses(out) == [(State.EXPIRED, 3)]
    dlq = [a for a in out if isinstance(a, DeadLetterAction)]
    assert len(dlq) == 1
    assert (dlq[0].key, dlq[0].record["reason"], dlq[0].record["attempts"]) == (
        "d1",
        "max_attempts",
        3,
    )
    late = t.on_reply(parse_reply("d1", "c1", b'{"status": "ok"}'), 3_500)
    assert [a.record["match"] for a in late if isinstance(a, ReplyAction)] == ["late"]
    assert statuses(late) == []


def test_ttl_shorter_than_attempts_expires_early() -> None:
    t = Tracker()
    t.admit(cmd(ttl_ms=1_500), 0, SRC)
    assert publishes(t.tick(1_000)) == [2]
    out = t.tick(1_500)
    assert statuses(out) == [(State.EXPIRED, 2)]
    assert [a.record["reason"] for a in out if isinstance(a, DeadLetterAction)] == ["ttl"]


def test_command_already_past_ttl_is_expired_without_sending() -> None:
    t = Tracker()
    out = t.admit(cmd(created_at=0, ttl_ms=100), 100, SRC)
    assert publishes(out) == []
    assert statuses(out) == [(State.EXPIRED, 0)]
    assert [a.release for a in out if isinstance(a, StatusAction)] == [SRC]
    assert any(isinstance(a, DeadLetterAction) for a in out)


def test_default_ttl_counts_from_acceptance_explicit_ttl_from_creation() -> None:
    t = Tracker()
    waited = replace(cmd("w", created_at=0), ttl_from_accept=True)
    out = t.admit(waited, 50_000, SRC)  # read 50 s after it was written
    assert publishes(out) == [1]
    sent = next(
        a.status for a in out if isinstance(a, StatusAction) and a.status.state is State.SENT
    )
    assert sent.command is not None
    assert (sent.command["created_at"], sent.command["ttl_ms"]) == (50_000, 3_000)
    assert publishes(t.tick(51_000)) == [2]
    assert publishes(t.tick(52_000)) == [3]
    explicit = cmd("e", created_at=0, ttl_ms=3_000)
    out = t.admit(explicit, 50_000, SRC)
    assert publishes(out) == []
    assert statuses(out) == [(State.EXPIRED, 0)]


def test_duplicate_admission_only_releases_the_offset() -> None:
    t = Tracker()
    t.admit(cmd(), 0, SRC)
    assert t.admit(cmd(), 1, Source(3, 99)) == [ReleaseAction(Source(3, 99))]


def test_puback_no_subscribers_is_recorded_and_redelivery_goes_on() -> None:
    t = Tracker()
    t.admit(cmd(), 0, SRC)
    out = t.on_puback("c1", 1, 0x10, 1)
    [status] = [a.status for a in out if isinstance(a, StatusAction)]
    assert status.state is State.SENT
    assert status.detail is not None
    assert status.detail.startswith("no_matching_subscribers")
    assert publishes(t.tick(1_000)) == [2]
    # a stale PUBACK of attempt 1 changes nothing
    assert t.on_puback("c1", 1, 0, 1_001) == []


def test_no_reply_expected_succeeds_on_puback() -> None:
    t = Tracker()
    t.admit(cmd(reply_expected=False), 0, SRC)
    assert statuses(t.on_puback("c1", 1, 0, 2)) == [(State.SUCCEEDED, 1)]


def test_unknown_mismatched_duplicate_and_invalid_replies_are_recorded() -> None:
    t = Tracker()
    unknown = t.on_reply(parse_reply("d9", "nope", b'{"status": "ok"}'), 0)
    assert [a.record["match"] for a in unknown if isinstance(a, ReplyAction)] == ["unknown"]
    t.admit(cmd(), 0, SRC)
    wrong = t.on_reply(parse_reply("d2", "c1", b'{"status": "ok"}'), 1)
    assert [a.record["match"] for a in wrong if isinstance(a, ReplyAction)] == ["device_mismatch"]
    assert t.state_of("c1") is State.SENT
    t.on_reply(parse_reply("d1", "c1", b'{"status": "ok"}'), 2)
    dup = t.on_reply(parse_reply("d1", "c1", b'{"status": "ok"}'), 3)
    assert [a.record["match"] for a in dup if isinstance(a, ReplyAction)] == ["duplicate"]
    t.admit(cmd("c2"), 0, SRC)
    bad = t.on_reply(parse_reply("d1", "c2", b"garbage"), 4)
    assert [a.record["match"] for a in bad if isinstance(a, ReplyAction)] == ["invalid"]
    # unreadable, but an answer all the same: delivered, then failed
    assert statuses(bad) == [(State.DELIVERED, 1), (State.FAILED, 1)]


def test_a_same_named_device_of_another_tenant_cannot_answer() -> None:
    t = Tracker()
    t.admit(replace(cmd(), tenant="acme"), 0, SRC)
    foreign = parse_reply("d1", "c1", b'{"status": "ok"}', "beta")
    out = t.on_reply(foreign, 1)
    assert [a.record["match"] for a in out if isinstance(a, ReplyAction)] == ["device_mismatch"]
    assert t.state_of("c1") is State.SENT
    own = t.on_reply(parse_reply("d1", "c1", b'{"status": "ok"}', "acme"), 2)
    assert [(a.record["match"], a.record["tenant"]) for a in own if isinstance(a, ReplyAction)] == [
        ("matched", "acme")
    ]
    assert t.state_of("c1") is State.SUCCEEDED


def test_rejection_writes_rejected_status() -> None:
    t = Tracker()
    out = t.reject(Rejection("x-1", "dev/1", "bad_device_id", "no"), 7, SRC)
    assert [
        (a.status.state, a.status.detail, a.release) for a in out if isinstance(a, StatusAction)
    ] == [(State.REJECTED, "bad_device_id: no", SRC)]


def test_group_collects_replies_once_per_device_then_closes() -> None:
    t = Tracker()
    out = t.admit(cmd("g1", group="fleet", timeout_ms=500, max_attempts=3), 0, SRC)
    assert publishes(out) == [1]
    t.on_puback("g1", 1, 0, 1)
    for i in range(20):
        t.on_reply(parse_reply(f"d{i}", "g1", b'{"status": "ok"}'), 10 + i)
    dup = t.on_reply(parse_reply("d3", "g1", b'{"status": "ok"}'), 40)
    assert [a.record["match"] for a in dup if isinstance(a, ReplyAction)] == ["duplicate"]
    assert t.tick(499) == []
    closed = t.tick(500)
    assert publishes(closed) == []  # a broadcast is sent once
    [status] = [a.status for a in closed if isinstance(a, StatusAction)]
    assert (status.state, status.replies) == (State.SUCCEEDED, {"ok": 20, "error": 0})
    assert status.detail == "replies=20 ok=20 error=0"


def test_group_without_replies_expires() -> None:
    t = Tracker()
    t.admit(cmd("g1", group="fleet", timeout_ms=500), 0, SRC)
    out = t.tick(500)
    assert statuses(out) == [(State.EXPIRED, 1)]
    assert [a.record["reason"] for a in out if isinstance(a, DeadLetterAction)] == ["no_replies"]


def snapshot_of(actions: Sequence[Action]) -> StatusRecord:
    return [a.status for a in actions if isinstance(a, StatusAction)][-1]


def test_rebuild_resumes_timeouts_and_matches_replies() -> None:
    old = Tracker()
    last = snapshot_of(old.admit(cmd(), 0, SRC))
    last = snapshot_of(old.on_puback("c1", 1, 0, 5))
    assert last.state is State.DELIVERED
    new = Tracker()
    assert new.adopt(last, 300) == []
    assert new.state_of("c1") is State.DELIVERED
    assert publishes(new.tick(1_000)) == [2]  # timeout counted from the original send
    out = new.on_reply(parse_reply("d1", "c1", b'{"status": "ok"}'), 1_100)
    # attempt 2 was not PUBACKed yet: the reply shows it was delivered
    assert statuses(out) == [(State.DELIVERED, 2), (State.SUCCEEDED, 2)]


def test_rebuild_of_accepted_sends_and_of_final_remembers() -> None:
    old = Tracker()
    accepted = next(a.status for a in old.admit(cmd(), 0, SRC) if isinstance(a, StatusAction))
    new = Tracker()
    assert publishes(new.adopt(accepted, 10)) == [1]
    done = StatusRecord("c9", State.SUCCEEDED, 1, "d1", 5)
    assert new.adopt(done, 10) == []
    assert new.admit(cmd("c9"), 11, SRC) == [ReleaseAction(SRC)]


def test_drop_forgets_commands_of_revoked_partitions() -> None:
    t = Tracker()
    t.admit(cmd("a"), 0, Source(1, 0))
    t.admit(cmd("b"), 0, Source(2, 0))
    assert t.drop([1]) == 1
    assert "a" not in t
    assert "b" in t


events = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.integers(0, 1_500)),
        st.tuples(st.just("puback"), st.integers(1, 4), st.sampled_from([0, 0x10, 0x87])),
        st.tuples(st.just("reply"), st.sampled_from(["ok", "error", "junk", "other"])),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    evs=events,
    max_attempts=st.integers(1, 4),
    reply_expected=st.booleans(),
    ttl_extra=st.integers(-900, 2_000),
)
def test_any_event_sequence_keeps_the_contract(
    evs: list[tuple[object, ...]], max_attempts: int, reply_expected: bool, ttl_extra: int
) -> None:
    c = cmd(
        timeout_ms=1_000,
        max_attempts=max_attempts,
        reply_expected=reply_expected,
        ttl_ms=max(1, 1_000 * max_attempts + ttl_extra),
    )
    t = Tracker()
    now = 0
    actions = t.admit(c, now, SRC)
    for ev in evs:
        if ev[0] == "tick":
            now += int(str(ev[1]))
            actions += t.tick(now)
        elif ev[0] == "puback":
            actions += t.on_puback("c1", int(str(ev[1])), int(str(ev[2])), now)
        else:
            body = {"ok": b'{"status":"ok"}', "error": b'{"status":"error"}', "junk": b"?"}
            dev = "d2" if ev[1] == "other" else "d1"
            actions += t.on_reply(parse_reply(dev, "c1", body.get(str(ev[1]), b"{}")), now)
    now += 10_000_000
    actions += t.tick(now)  # long after everything: the command must have ended

    # every status change is a legal transition, and exactly one is final
    current: State | None = None
    finals = 0
    for a in actions:
        if isinstance(a, StatusAction):
            if a.status.state is not current or a.status.state is State.SENT:
                check_transition(current, a.status.state)
            current = a.status.state
            finals += a.status.final
    assert finals == 1
    assert current in {State.SUCCEEDED, State.FAILED, State.EXPIRED}
    sent = publishes(actions)
    assert sent == list(range(1, len(sent) + 1))
    assert 1 <= len(sent) <= max_attempts
    dlq = [a for a in actions if isinstance(a, DeadLetterAction)]
    assert len(dlq) == (1 if current is State.EXPIRED else 0)
    assert len(t) == 0
    # the offset is released exactly once, by the first `sent`
    assert [a.release for a in actions if isinstance(a, StatusAction) and a.release] == [SRC]
