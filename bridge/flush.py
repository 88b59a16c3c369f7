"""Adaptive linger: when to cut the producer's ``linger.ms`` short (pure; the caller passes
the clock).

librdkafka's linger is fixed when the producer is made, and the bridge's (50 ms) is chosen for
saturation, where big batches save Kafka's CPU. At a low rate that linger is pure waiting: a
device sending one message a second would wait 50 ms for a batch that never fills. This policy
gives the recent input rate an *effective* linger that grows with it: ``min_s`` at or below
``low_rate`` msgs/s, growing linearly to ``max_s`` at ``high_rate``, and above ``high_rate``
no early flush at all (the producer's own linger rules, as before). The pipeline asks
:meth:`AdaptiveLinger.due` on every tick and, when it says so, makes the producer send what it
holds now (``flush`` with a tiny timeout, which treats the linger as expired).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LingerPolicy:
    """The shape of the effective linger (seconds) against the input rate (msgs/s)."""

    min_s: float = 0.001
    max_s: float = 0.02
    low_rate: float = 2_000.0
    high_rate: float = 40_000.0
    rate_window_s: float = 0.1  # the rate is measured over windows this long

    def __post_init__(self) -> None:
        if not 0 <= self.min_s <= self.max_s:
            raise ValueError("need 0 <= min_s <= max_s")
        if not 0 <= self.low_rate < self.high_rate:
            raise ValueError("need 0 <= low_rate < high_rate")
        if self.rate_window_s <= 0:
            raise ValueError("rate_window_s must be > 0")

    def linger_for(self, rate: float) -> float | None:
        """The effective linger at ``rate`` msgs/s; None above ``high_rate`` (no early flush)."""
        if rate <= self.low_rate:
            return self.min_s
        if rate > self.high_rate:
            return None
        share = (rate - self.low_rate) / (self.high_rate - self.low_rate)
        return self.min_s + share * (self.max_s - self.min_s)


class AdaptiveLinger:
    """Tracks the input rate and the oldest message not yet pushed out; says when to flush.

    The caller keeps a running count of produced messages (an int it bumps per message, the
    cheapest thing on the hot path) and hands it in with the clock on every tick.
    """

    __slots__ = ("_first_unsent_at", "_rate_count", "_rate_stamp", "_sent_count", "policy", "rate")

    def __init__(self, policy: LingerPolicy, now: float) -> None:
        self.policy = policy
        self.rate = 0.0  # msgs/s over the last complete window
        self._rate_stamp = now
        self._rate_count = 0
        self._sent_count = 0  # produced count at the last flush
        self._first_unsent_at: float | None = None  # when a tick first saw unflushed messages

    def due(self, now: float, produced: int) -> bool:
        """True when the messages produced since the last flush should go out now."""
        span = now - self._rate_stamp
        if span >= self.policy.rate_window_s:
            self.rate = (produced - self._rate_count) / span
            self._rate_stamp = now
            self._rate_count = produced
        if produced == self._sent_count:
            self._first_unsent_at = None
            return False
        if self._first_unsent_at is None:
            self._first_unsent_at = now
        linger = self.policy.linger_for(self.rate)
        if linger is None:
            # the producer's own linger sends these; forget them so a later drop in the rate
            # does not flush on their account
            self._sent_count = produced
            self._first_unsent_at = None
            return False
        return now - self._first_unsent_at >= linger

    def flushed(self, produced: int) -> None:
        """The caller pushed out everything produced so far."""
        self._sent_count = produced
        self._first_unsent_at = None
