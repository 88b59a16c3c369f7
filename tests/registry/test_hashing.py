from __future__ import annotations

import time

import pytest

from registry import hashing
from registry.hashing import ScryptParams

FAST = ScryptParams(log2_n=10, r=8, p=1)


def test_generated_secrets_are_long_random_and_url_safe() -> None:
    secrets = {hashing.generate_secret() for _ in range(50)}
    assert len(secrets) == 50
    for s in secrets:
        assert len(s) == 43
        assert set(s) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_hash_verifies_only_its_secret_and_is_salted() -> None:
    h1 = hashing.hash_secret("s3cret", FAST)
    h2 = hashing.hash_secret("s3cret", FAST)
    assert h1 != h2  # salted
    assert "s3cret" not in h1
    assert hashing.verify_secret("s3cret", h1)
    assert hashing.verify_secret("s3cret", h2)
    assert not hashing.verify_secret("s3cret!", h1)
    assert not hashing.verify_secret("", h1)


def test_default_parameters_are_recorded_in_the_hash() -> None:
    encoded = hashing.hash_secret("x")
    assert encoded.startswith("scrypt$ln=14,r=8,p=1$")
    assert hashing.verify_secret("x", encoded)
    assert not hashing.needs_rehash(encoded)
    assert hashing.needs_rehash(hashing.hash_secret("x", FAST))


@pytest.mark.parametrize(
    "bad",
    ["", "plain", "scrypt$ln=14,r=8,p=1$abc", "scrypt$ln=40,r=8,p=1$YWJj$YWJj", "md5$x$y"],
)
def test_malformed_hash_never_verifies(bad: str) -> None:
    assert not hashing.verify_secret("x", bad)
    assert hashing.needs_rehash(bad)


def test_unknown_principals_cost_a_verify_too() -> None:
    encoded = hashing.hash_secret("s", FAST)
    assert hashing.verify_in_constant_time("s", encoded)
    assert not hashing.verify_in_constant_time("t", encoded)
    hashing.verify_in_constant_time("s", None)  # warms the decoy
    started = time.perf_counter()
    assert not hashing.verify_in_constant_time("s", None)
    assert time.perf_counter() - started > 0.005  # a real scrypt ran (34 ms measured)


def test_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        hashing.hash_secret("")


def test_fingerprints_normalise() -> None:
    hexa = "ab" * 32
    colons = ":".join(["AB"] * 32)
    assert hashing.normalise_fingerprint(hexa) == f"sha256:{hexa}"
    assert hashing.normalise_fingerprint(colons) == f"sha256:{hexa}"
    assert hashing.normalise_fingerprint(f"SHA256:{colons}") == f"sha256:{hexa}"
    assert hashing.fingerprint_of_der(b"x").startswith("sha256:")
    with pytest.raises(ValueError, match="SHA-256"):
        hashing.normalise_fingerprint("ab" * 31)
