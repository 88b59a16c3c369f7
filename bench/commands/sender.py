"""Commands from this process: the warm-up pings, then commands at a steady rate spread over
the devices, each timed from just before the producer takes it to its final status read back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from bench.commands.errors import BenchError
from bench.progress import say
from commands.client import CommandClient, Tail
from commands.model import State
from commands.status import decode_status

WARMUP_PING_MS = 5000
TICK_S = 0.01  # commands go out in a burst every tick, rate * TICK_S of them on average
CHECK_EVERY_S = 1.0  # how often the other processes are checked while sending


class CommandSender:
    """Sends commands through ``client`` and follows their statuses on ``tail``.

    ``sent_at``: wall-clock time each measured command was handed to the producer;
    ``finals``: its final state and when it was read; ``marks``: the first status ``at``
    (epoch ms, the command path's clock) of each state it went through. ``alive`` raises when
    a process of the benchmark has died.
    """

    def __init__(
        self,
        client: CommandClient,
        tail: Tail,
        devices: Sequence[str],
        alive: Callable[[], None],
    ) -> None:
        self.client = client
        self.tail = tail
        self.devices = list(devices)
        self.alive = alive
        self.sent_at: dict[str, float] = {}
        self.finals: dict[str, tuple[State, float]] = {}
        self.marks: dict[str, dict[str, int]] = {}
        self._counter = 0

    def warm_up(self, timeout_s: float) -> None:
        """Every device answers once (all connected, command path consuming).

        A ping lives one attempt of WARMUP_PING_MS: a device that was not subscribed yet gets a
        new ping in the next round, and no stale ping is redelivered into the measured window.
        """
        client, tail = self.client, self.tail
        unanswered = set(self.devices)
        last_status: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s
        while unanswered and time.monotonic() < deadline:
            round_ids = {
                client.send(
                    d, "ping", {}, timeout_ms=WARMUP_PING_MS, max_attempts=1, flush=False
                ): d
                for d in unanswered
            }
            client.flush()
            while round_ids and time.monotonic() < deadline:
                for msg in tail.poll(0.2):
                    status = decode_status(msg.key(), msg.value())
                    if status is None:
                        continue
                    if status.command_id in round_ids:
                        last_status[round_ids[status.command_id]] = (
                            f"{status.state.value} attempt {status.attempt} {status.detail or ''}"
                        ).strip()
                    if not status.final:
                        continue
                    device = round_ids.pop(status.command_id, None)
                    if device is not None and status.state is State.SUCCEEDED:
                        unanswered.discard(device)
                self.alive()
            if unanswered:
                say(f"warm-up: {len(unanswered):,} devices did not answer yet, pinging again")
        if unanswered:
            some = sorted(unanswered)[:5]
            raise BenchError(
                f"{len(unanswered)} devices did not answer the warm-up commands; e.g. "
                + ", ".join(f"{d}: {last_status.get(d, 'no status')}" for d in some)
            )

    def observe(self, msgs: list[Any]) -> None:
        """Note the statuses of measured commands among ``msgs`` (read just now)."""
        seen = time.time()
        for msg in msgs:
            status = decode_status(msg.key(), msg.value())
            if status is None or status.command_id not in self.sent_at:
                continue
            marks = self.marks.setdefault(status.command_id, {})
            marks.setdefault(status.state.value, status.at)
            if status.final:
                self.finals[status.command_id] = (status.state, seen)

    def drive(self, rate: float, seconds: float, record: bool) -> None:
        """Send at ``rate`` per second for ``seconds``; only recorded commands are measured."""
        per_tick = rate * TICK_S
        credit = 0.0
        next_tick = time.monotonic()
        end_send = next_tick + seconds
        next_check = next_tick + CHECK_EVERY_S
        while time.monotonic() < end_send:
            now = time.monotonic()
            if now >= next_tick:
                credit += per_tick
                while credit >= 1:
                    self._send_one(record)
                    credit -= 1
                next_tick += TICK_S
            if now >= next_check:
                self.alive()
                next_check = now + CHECK_EVERY_S
            self.observe(self.tail.poll(0))
            pause = next_tick - time.monotonic()
            if pause > 0:
                self.observe(self.tail.poll(min(pause, TICK_S)))

    def _send_one(self, record: bool) -> None:
        cid = uuid.uuid4().hex
        if record:
            self.sent_at[cid] = time.time()
        n = self._counter
        self.client.send(
            self.devices[n % len(self.devices)], "set", {"i": n}, command_id=cid, flush=False
        )
        self._counter = n + 1

    def drain(self, timeout_s: float) -> None:
        """Read statuses until every measured command has a final one, or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while len(self.finals) < len(self.sent_at) and time.monotonic() < deadline:
            self.observe(self.tail.poll(0.05))
