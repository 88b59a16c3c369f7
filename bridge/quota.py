"""Per-tenant message-rate quotas: one token bucket per tenant (pure, no clients, no clock).

A tenant with a quota of ``r`` messages/s gets a bucket of ``max(1, r)`` tokens (one second of
burst) refilled at ``r`` tokens/s; every message it sends takes one token, and a message that
finds the bucket empty is over quota. Buckets are independent: a tenant draining its own never
touches another's, so a flooding tenant cannot slow or starve the others at this step. The
caller passes the clock (``time.monotonic()``), which keeps this testable to the token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_ONE = 1.0 - 1e-9  # refills add up float steps (0.05 s * 10/s twice is 0.999...)


class TokenBucket:
    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, now: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = now

    def take(self, now: float) -> bool:
        """Take one token if there is one (True), else False (over quota)."""
        tokens = self.tokens + (now - self.stamp) * self.rate
        self.stamp = now
        if tokens > self.capacity:  # noqa: PLR1730 - hot path, min() is slower
            tokens = self.capacity
        if tokens >= _ONE:
            self.tokens = tokens - 1.0
            return True
        self.tokens = tokens
        return False


class TenantQuotas:
    """The buckets of every tenant that has a quota; tenants without one are never limited."""

    def __init__(self) -> None:
        self.buckets: dict[str, TokenBucket] = {}
        self._followed: object = None

    def follow(
        self, static: Mapping[str, float], tenants: Mapping[str, Any], version: object, now: float
    ) -> None:
        """:meth:`set_rates` from the registry's tenants (a tenant's ``quotas.msgs_per_s`` wins
        over ``static``), only when ``version`` changed since the last call: a door calls it per
        message, and a loop over every tenant per message was O(tenants) each."""
        if version == self._followed:
            return
        self._followed = version
        rates: dict[str, float | None] = dict(static)
        for tenant in tenants.values():
            if tenant.quotas.msgs_per_s is not None:
                rates[tenant.id] = tenant.quotas.msgs_per_s
        self.set_rates(rates, now)

    def set_rates(self, rates: Mapping[str, float | None], now: float) -> None:
        """Apply the current quotas (tenant -> msgs/s, None = unlimited). A tenant whose rate
        is unchanged keeps its bucket (and its tokens); a changed rate starts a full one."""
        buckets: dict[str, TokenBucket] = {}
        for tenant, rate in rates.items():
            if rate is None:
                continue
            old = self.buckets.get(tenant)
            keep = old is not None and old.rate == rate
            buckets[tenant] = old if keep and old is not None else TokenBucket(rate, now)
        self.buckets = buckets

    def allow(self, tenant: str, now: float) -> bool:
        bucket = self.buckets.get(tenant)
        return bucket is None or bucket.take(now)


def parse_rates(text: str) -> dict[str, float]:
    """``acme=500,beta=2.5`` -> ``{"acme": 500.0, "beta": 2.5}`` (ValueError if malformed)."""
    out: dict[str, float] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        tenant, sep, rate = item.partition("=")
        if not sep or not tenant.strip():
            raise ValueError(f"expected tenant=msgs_per_s, got {item!r}")
        value = float(rate)
        if not value > 0:
            raise ValueError(f"quota of {tenant.strip()!r} must be > 0, got {rate!r}")
        out[tenant.strip()] = value
    return out
