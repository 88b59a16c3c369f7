import pytest

from bridge.quota import TenantQuotas, TokenBucket, parse_rates


def test_bucket_allows_one_second_of_burst_then_the_rate() -> None:
    bucket = TokenBucket(10.0, now=100.0)
    assert [bucket.take(100.0) for _ in range(11)] == [True] * 10 + [False]
    assert bucket.take(100.05) is False  # half a token
    assert bucket.take(100.1) is True  # one token after 0.1 s at 10/s
    assert bucket.take(100.1) is False
    # a long pause refills to the capacity (10), not beyond
    assert sum(bucket.take(1000.0) for _ in range(20)) == 10


def test_slow_rate_has_a_burst_of_one() -> None:
    bucket = TokenBucket(0.5, now=0.0)
    assert bucket.take(0.0) is True
    assert bucket.take(1.0) is False
    assert bucket.take(2.0) is True
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(0.0, now=0.0)


def test_tenants_are_independent_and_unlimited_without_quota() -> None:
    quotas = TenantQuotas()
    quotas.set_rates({"a": 2.0, "b": 5.0, "c": None}, now=0.0)
    assert [quotas.allow("a", 0.0) for _ in range(3)] == [True, True, False]
    assert all(quotas.allow("b", 0.0) for _ in range(5))
    assert all(quotas.allow("c", 0.0) for _ in range(1000))
    assert all(quotas.allow("default", 0.0) for _ in range(1000))
    # same rate again: the bucket (and its emptiness) is kept; a new rate starts full
    quotas.set_rates({"a": 2.0, "b": 50.0}, now=0.0)
    assert quotas.allow("a", 0.0) is False
    assert sum(quotas.allow("b", 0.0) for _ in range(60)) == 50
    quotas.set_rates({}, now=0.0)
    assert quotas.buckets == {}


def test_parse_rates() -> None:
    assert parse_rates("") == {}
    assert parse_rates(" acme=500, beta=2.5 ,") == {"acme": 500.0, "beta": 2.5}
    for bad in ("acme", "acme=0", "=1", "acme=nan", "acme=x"):
        with pytest.raises(ValueError):  # noqa: PT011 - any malformed entry
            parse_rates(bad)


def test_follow_applies_the_registry_tenants_only_when_their_version_changed() -> None:
    from registry.model import Quotas, Tenant

    quotas = TenantQuotas()
    tenants = {"acme": Tenant("acme", Quotas(msgs_per_s=2.0)), "beta": Tenant("beta")}
    quotas.follow({"beta": 5.0, "gamma": 1.0}, tenants, 1, now=0.0)
    assert {t: b.rate for t, b in quotas.buckets.items()} == {
        "acme": 2.0,
        "beta": 5.0,
        "gamma": 1.0,
    }
    assert quotas.allow("acme", 0.0)
    assert quotas.allow("acme", 0.0)
    assert not quotas.allow("acme", 0.0)
    # same version: nothing is read again, the drained bucket stays drained
    tenants["acme"] = Tenant("acme", Quotas(msgs_per_s=100.0))
    quotas.follow({}, tenants, 1, now=0.0)
    assert quotas.buckets["acme"].rate == 2.0
    # a new version: the registry's rate wins, static ones it no longer names are gone
    quotas.follow({}, tenants, 2, now=0.0)
    assert {t: b.rate for t, b in quotas.buckets.items()} == {"acme": 100.0}
    assert quotas.allow("acme", 0.0)
