"""MR's Cambria HMAC scheme and the credential headers (contract §8.2), pure."""

from __future__ import annotations

import base64
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from api.plumbing import cambria
from api.plumbing.cambria import Basic, Bearer, Signed

NOW = datetime(2016, 10, 18, 14, 56, 4, tzinfo=UTC)


def test_golden_vector_of_the_contract() -> None:
    assert cambria.sign("kkk", "test") == "T0NMPpkfG2fY2hW2jmaR31OIsuE="


def test_the_shell_recipe_of_mr_scripts_agrees() -> None:
    date = "2016-10-18T09:56:04-05:00"
    shell = subprocess.run(
        ["sh", "-c", f'echo -n "{date}" | openssl sha1 -hmac s3cret -binary | openssl base64'],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert cambria.sign("s3cret", date) == shell


def test_signed_headers_with_aliases_and_nonce() -> None:
    got = cambria.presented({"X-CambriaAuth": "KEY:sig=", "X-CambriaDate": "d1"})
    assert got == Signed("KEY", "sig=", "d1", "d1")
    got = cambria.presented({"X-Auth": "KEY:sig=", "X-Date": "d2", "X-Nonce": "n"})
    assert got == Signed("KEY", "sig=", "d2:n", "d2")
    got = cambria.presented({"X-CambriaAuth": "KEY:sig=", "Date": "d3"})
    assert got == Signed("KEY", "sig=", "d3", "d3")
    for broken in ("KEY", "KEY:", ":sig", "a:b:c"):
        assert cambria.presented({"X-CambriaAuth": broken, "X-CambriaDate": "d"}) is None
    assert cambria.presented({"X-CambriaAuth": "KEY:sig"}) is None  # no date at all


def test_signature_check() -> None:
    secret = "abc"
    good = Signed("K", cambria.sign(secret, "d:n"), "d:n", "d")
    assert cambria.signature_matches(secret, good)
    assert not cambria.signature_matches("abd", good)
    assert not cambria.signature_matches(secret, Signed("K", good.signature, "d", "d"))


def test_bearer_and_basic() -> None:
    assert cambria.presented({"Authorization": "Bearer K:S"}) == Bearer("K", "S")
    assert cambria.presented({"Authorization": "Bearer K"}) is None
    basic = "Basic " + base64.b64encode(b"user:p:w").decode()
    assert cambria.presented({"Authorization": basic}) == Basic("user", "p:w")
    assert cambria.presented({"Authorization": "Digest x"}) is None
    assert cambria.presented({}) is None


@pytest.mark.parametrize(
    "text",
    [
        "2016-10-18T09:56:04-05:00",  # date --iso-8601=seconds
        "2016-10-18T14:56:04Z",
        "2016-10-18T14:56:04GMT",  # yyyy-MM-dd'T'HH:mm:ssz
        "2016-10-18T07:56:04PDT",
        "Tue, 18 Oct 2016 14:56:04 GMT",  # RFC 1123, the Java client's
        "Tue, 18 Oct 16 14:56:04 GMT",
        "18 Oct 16 14:56:04 GMT",
        "Tue Oct 18 14:56:04 UTC 2016",  # Unix date
        "Tue Oct 18 14:56:04 2016",  # asctime, zone-less = GMT
        "2016-10-18T14:56:04",  # zone-less = GMT
    ],
)
def test_mr_date_formats(text: str) -> None:
    assert cambria.parse_date(text) == NOW


def test_unparsable_dates_fail() -> None:
    for text in ("", "yesterday", "2016-13-45T99:00:00Z", "Tue Oct 18 14:56:04 XYZ 2016"):
        assert cambria.parse_date(text) is None
        assert not cambria.within_window(text, NOW, 1e9)


def test_clock_window() -> None:
    date = "Tue, 18 Oct 2016 14:56:04 GMT"
    assert cambria.within_window(date, NOW + timedelta(seconds=600), 600)
    assert cambria.within_window(date, NOW - timedelta(seconds=600), 600)
    assert not cambria.within_window(date, NOW + timedelta(seconds=601), 600)
    assert not cambria.within_window(date, NOW - timedelta(seconds=601), 600)


def test_key_ids_and_derived_secrets() -> None:
    key = cambria.new_key_id()
    assert len(key) == 16
    assert set(key) <= set(cambria.KEY_ALPHABET)
    salt = cambria.new_salt()
    secret = cambria.derive_secret(b"m" * 32, key, salt)
    assert len(secret) == 24
    assert secret == cambria.derive_secret(b"m" * 32, key, salt)
    assert secret != cambria.derive_secret(b"n" * 32, key, salt)
    assert secret != cambria.derive_secret(b"m" * 32, key, cambria.new_salt())
