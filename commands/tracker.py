"""The pending-command tracker: a pure state machine driven by events, returning actions.

Events (a command read, a PUBACK, a reply, the clock) go in; actions (write a status,
publish an attempt, write a reply record, write a dead letter, release a consumer offset)
come out. The service executes the actions; nothing here does I/O, so every rule of the
command path (timeouts, redelivery, expiry, reply matching, rebuild after a restart) is
tested without servers.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from commands.actions import (
    DUPLICATE,
    INVALID,
    LATE,
    MATCHED,
    MISMATCH,
    UNKNOWN,
    Action,
    PublishAction,
    ReleaseAction,
    StatusAction,
    dead_letter,
    reply_record,
)
from commands.mapping import Reply
from commands.model import (
    Command,
    Rejection,
    Source,
    State,
    check_transition,
)
from commands.status import StatusRecord, command_from_status

__all__ = ["Tracker"]


@dataclass(slots=True)
class _Pending:
    command: Command
    state: State
    attempt: int
    sent_at: int | None
    source: Source | None
    replied: set[str] = field(default_factory=set)
    ok: int = 0
    errors: int = 0
    detail: str | None = None


class Tracker:
    """Pending commands of one bridge instance. Not thread-safe: one thread drives it."""

    def __init__(self, *, recent_limit: int = 100_000) -> None:
        self._pending: dict[str, _Pending] = {}
        self._due: list[tuple[int, str, int]] = []  # (due ms, command id, attempt)
        self._recent: OrderedDict[str, State] = OrderedDict()
        self._recent_limit = recent_limit

    # -- queries ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, command_id: object) -> bool:
        return command_id in self._pending

    def state_of(self, command_id: str) -> State | None:
        entry = self._pending.get(command_id)
        if entry is not None:
            return entry.state
        return self._recent.get(command_id)

    def attempt_of(self, command_id: str) -> int | None:
        entry = self._pending.get(command_id)
        return None if entry is None else entry.attempt

    def partitions(self) -> set[int]:
        """The ``iot.commands`` partitions the pending commands were read from."""
        return {e.source.partition for e in self._pending.values() if e.source is not None}

    def next_due(self) -> int | None:
        """The earliest time (epoch ms) at which `tick` may have something to do."""
        return self._due[0][0] if self._due else None

    # -- events -------------------------------------------------------------------------

    def reject(self, rejection: Rejection, now: int, source: Source | None) -> list[Action]:
        """A record that cannot be executed: status ``rejected`` with the reason."""
        if rejection.command_id in self._pending or rejection.command_id in self._recent:
            # An id we know: do not overwrite its status with the rejection of a bad copy.
            return [ReleaseAction(source)] if source is not None else []
        self._remember(rejection.command_id, State.REJECTED)
        status = StatusRecord(
            command_id=rejection.command_id,
            state=State.REJECTED,
            attempt=0,
            device_id=rejection.key,
            at=now,
            detail=f"{rejection.code}: {rejection.detail}",
            source=source,
        )
        return [StatusAction(status, release=source)]

    def admit(self, command: Command, now: int, source: Source | None) -> list[Action]:
        """A command read from ``iot.commands``."""
        cid = command.command_id
        if command.ttl_from_accept:
            command = replace(command, created_at=now, ttl_from_accept=False)
        if cid in self._pending or cid in self._recent:
            # Read again after a restart (offsets are committed lazily): already handled.
            return [ReleaseAction(source)] if source is not None else []
        if now >= command.deadline:
            self._remember(cid, State.EXPIRED)
            status = self._status(
                command,
                State.EXPIRED,
                attempt=0,
                now=now,
                detail="ttl: expired before sending",
                source=source,
            )
            return [
                StatusAction(status, release=source),
                dead_letter(command, 0, now, "ttl", "the TTL ran out before it was sent"),
            ]
        entry = _Pending(command, State.ACCEPTED, 0, None, source)
        self._pending[cid] = entry
        accepted = self._status(
            command, State.ACCEPTED, attempt=0, now=now, detail=None, source=source
        )
        return [StatusAction(accepted), *self._send(entry, now, release=source)]

    def adopt(self, status: StatusRecord, now: int) -> list[Action]:
        """Resume a command from its last status (rebuild after a restart)."""
        cid = status.command_id
        if status.final:
            self._remember(cid, status.state)
            return []
        if cid in self._pending or cid in self._recent:
            return []
        command = command_from_status(status)
        if command is None:
            return []
        entry = _Pending(
            command,
            status.state,
            status.attempt,
            status.sent_at,
            status.source,
            ok=status.replies.get("ok", 0),
            errors=status.replies.get("error", 0),
        )
        self._pending[cid] = entry
        if status.state is State.ACCEPTED or status.sent_at is None:
            if now >= command.deadline:
                return self._expire(entry, now)
            entry.state = State.ACCEPTED
            entry.attempt = 0
            return self._send(entry, now, release=None)
        self._schedule(entry)
        return []

    def drop(self, partitions: Iterable[int]) -> int:
        """Forget pending commands read from ``partitions`` (revoked: another instance
        adopts them). Returns how many were dropped."""
        parts = set(partitions)
        gone = [
            cid
            for cid, e in self._pending.items()
            if e.source is not None and e.source.partition in parts
        ]
        for cid in gone:
            del self._pending[cid]
        return len(gone)

    def on_puback(self, command_id: str, attempt: int, reason: int, now: int) -> list[Action]:
        """The broker's PUBACK for ``attempt``. ``reason`` is the MQTT 5 reason code."""
        entry = self._pending.get(command_id)
        if entry is None or entry.attempt != attempt:
            return []
        command = entry.command
        if reason == 0:
            if entry.state is not State.SENT:
                return []
            entry.state = State.DELIVERED
            entry.detail = None
            if not command.reply_expected:
                return self._finish(entry, State.SUCCEEDED, now, "delivered; no reply expected")
            return [self._entry_status(entry, State.DELIVERED, now, None)]
        detail = (
            "no_matching_subscribers: the broker knows no subscriber for this topic"
            if reason == 0x10
            else f"puback_reason_{reason:#04x}"
        )
        entry.detail = detail
        if entry.state is not State.SENT:
            return []
        return [self._entry_status(entry, State.SENT, now, detail)]

    def on_reply(self, reply: Reply, now: int) -> list[Action]:
        """A reply on ``devices/{id}/replies/{command_id}``."""
        cid = reply.command_id
        entry = self._pending.get(cid)
        if entry is None:
            previous = self._recent.get(cid)
            if previous is None:
                match = UNKNOWN
            elif previous is State.EXPIRED:
                match = LATE
            else:
                match = DUPLICATE
            return [reply_record(reply, now, match, None)]
        command = entry.command
        if reply.tenant != command.tenant or (
            command.target.device_id is not None and reply.device_id != command.target.device_id
        ):  # another tenant's device of the same name guessing a command id is no answer
            return [reply_record(reply, now, MISMATCH, entry.attempt)]
        if command.target.is_group:
            if reply.device_id in entry.replied:
                return [reply_record(reply, now, DUPLICATE, entry.attempt)]
            entry.replied.add(reply.device_id)
            if reply.ok:
                entry.ok += 1
            else:
                entry.errors += 1
            match = MATCHED if reply.ok is not None else INVALID
            return [reply_record(reply, now, match, entry.attempt)]
        record = reply_record(
            reply, now, MATCHED if reply.ok is not None else INVALID, entry.attempt
        )
        actions: list[Action] = [record]
        if entry.state is State.SENT:
            # The PUBACK (read on a publishing connection) may come after the reply (read on
            # the reply connection); the reply proves delivery: keep the history complete.
            entry.state = State.DELIVERED
            actions.append(
                self._entry_status(entry, State.DELIVERED, now, "delivery shown by the reply")
            )
        if reply.ok:
            return [*actions, *self._finish(entry, State.SUCCEEDED, now, None)]
        return [*actions, *self._finish(entry, State.FAILED, now, reply.error)]

    def tick(self, now: int) -> list[Action]:
        """Timeouts due at ``now``: redeliver, expire, or close a broadcast's reply window."""
        actions: list[Action] = []
        while self._due and self._due[0][0] <= now:
            _, cid, attempt = heapq.heappop(self._due)
            entry = self._pending.get(cid)
            if entry is None or entry.attempt != attempt or entry.state in (State.ACCEPTED,):
                continue
            command = entry.command
            if command.target.is_group:
                actions.extend(self._close_group(entry, now))
            elif entry.attempt < command.max_attempts and now < command.deadline:
                actions.extend(self._send(entry, now, release=None))
            else:
                actions.extend(self._expire(entry, now))
        return actions

    # -- internals ----------------------------------------------------------------------

    def _send(self, entry: _Pending, now: int, release: Source | None) -> list[Action]:
        next_state = State.SENT
        check_transition(entry.state, next_state)
        entry.attempt += 1
        entry.state = next_state
        entry.sent_at = now
        entry.detail = None
        self._schedule(entry)
        status = self._entry_status(entry, State.SENT, now, None).status
        return [PublishAction(entry.command, entry.attempt), StatusAction(status, release=release)]

    def _schedule(self, entry: _Pending) -> None:
        assert entry.sent_at is not None
        due = min(entry.sent_at + entry.command.timeout_ms, entry.command.deadline)
        heapq.heappush(self._due, (due, entry.command.command_id, entry.attempt))

    def _expire(self, entry: _Pending, now: int) -> list[Action]:
        command = entry.command
        if entry.attempt >= command.max_attempts:
            reason = "max_attempts"
            detail = f"no reply after {entry.attempt} attempt(s)"
        elif entry.attempt == 0:
            reason = "ttl"
            detail = "the TTL ran out before it was sent"
        else:
            reason = "ttl"
            detail = f"the TTL ran out after {entry.attempt} attempt(s)"
        if entry.detail:
            detail = f"{detail}; last PUBACK: {entry.detail}"
        return [
            *self._finish(entry, State.EXPIRED, now, f"{reason}: {detail}"),
            dead_letter(command, entry.attempt, now, reason, detail),
        ]

    def _close_group(self, entry: _Pending, now: int) -> list[Action]:
        command = entry.command
        replies = entry.ok + entry.errors
        counts = f"replies={replies} ok={entry.ok} error={entry.errors}"
        if replies == 0 and command.reply_expected:
            detail = "no device replied"
            if entry.detail:
                detail = f"{detail}; last PUBACK: {entry.detail}"
            return [
                *self._finish(entry, State.EXPIRED, now, f"no_replies: {detail}"),
                dead_letter(command, entry.attempt, now, "no_replies", detail),
            ]
        if replies == 0 and entry.state is not State.DELIVERED:
            detail = entry.detail or "the broker never confirmed delivery"
            return [
                *self._finish(entry, State.EXPIRED, now, f"undelivered: {detail}"),
                dead_letter(command, entry.attempt, now, "undelivered", detail),
            ]
        final = State.FAILED if entry.errors else State.SUCCEEDED
        return self._finish(entry, final, now, counts)

    def _finish(self, entry: _Pending, state: State, now: int, detail: str | None) -> list[Action]:
        check_transition(entry.state, state)
        cid = entry.command.command_id
        del self._pending[cid]
        entry.state = state
        self._remember(cid, state)
        return [self._entry_status(entry, state, now, detail)]

    def _remember(self, command_id: str, state: State) -> None:
        self._recent[command_id] = state
        self._recent.move_to_end(command_id)
        while len(self._recent) > self._recent_limit:
            self._recent.popitem(last=False)

    def _entry_status(
        self, entry: _Pending, state: State, now: int, detail: str | None
    ) -> StatusAction:
        replies: dict[str, int] = {}
        if entry.command.target.is_group:
            replies = {"ok": entry.ok, "error": entry.errors}
        status = StatusRecord(
            command_id=entry.command.command_id,
            state=state,
            attempt=entry.attempt,
            device_id=entry.command.target.key,
            at=now,
            detail=detail,
            command=entry.command.to_record(),
            sent_at=entry.sent_at,
            source=entry.source,
            replies=replies,
        )
        return StatusAction(status)

    @staticmethod
    def _status(
        command: Command,
        state: State,
        *,
        attempt: int,
        now: int,
        detail: str | None,
        source: Source | None = None,
    ) -> StatusRecord:
        return StatusRecord(
            command_id=command.command_id,
            state=state,
            attempt=attempt,
            device_id=command.target.key,
            at=now,
            detail=detail,
            command=command.to_record(),
            source=source,
        )
