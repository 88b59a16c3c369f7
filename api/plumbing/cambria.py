"""Credentials a request presents, and MR's Cambria API key HMAC scheme (contract §8.2; pure).

- ``X-CambriaAuth: <key>:<signature>`` (alias ``X-Auth``) with ``X-CambriaDate`` (alias
  ``X-Date``, else ``Date``) and optional ``X-Nonce``: signature = Base64(HMAC-SHA1(secret,
  date or date:nonce)); the date must be within the clock window of now.
- ``Authorization: Bearer <key>:<secret>`` (ours) and ``Authorization: Basic`` (a registry
  account, or an api key as user name with its secret as password).
- A key's secret is derived from the service's master key and the key's salt (HMAC-SHA256), so
  the registry stores only a salt and a hash while iot-api can still check HMAC signatures.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

# MR's key alphabet (ApiKeysServiceImpl; its doubled "I" kept out)
KEY_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
KEY_LENGTH: Final = 16
SECRET_LENGTH: Final = 24


@dataclass(frozen=True, slots=True)
class Basic:
    user: str
    secret: str


@dataclass(frozen=True, slots=True)
class Bearer:
    key: str
    secret: str


@dataclass(frozen=True, slots=True)
class Signed:
    """A Cambria HMAC: ``signed`` is the exact text the client signed."""

    key: str
    signature: str
    signed: str
    date: str


Presented = Basic | Bearer | Signed


def new_key_id() -> str:
    return "".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_LENGTH))


def new_salt() -> str:
    return secrets.token_urlsafe(16)


def derive_secret(master: bytes, key: str, salt: str) -> str:
    """The 24-character secret of ``key``: nothing secret is stored, the master key re-makes it."""
    digest = hmac.new(master, f"iot-api-key\0{key}\0{salt}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:SECRET_LENGTH]


def sign(secret: str, message: str) -> str:
    """Base64(HMAC-SHA1(secret, message)), as MR's sha1HmacSigner (``test``/``kkk`` ->
    ``T0NMPpkfG2fY2hW2jmaR31OIsuE=``)."""
    digest = hmac.new(secret.encode(), message.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def signature_matches(secret: str, presented: Signed) -> bool:
    return hmac.compare_digest(sign(secret, presented.signed), presented.signature)


def _header(headers: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = headers.get(name)
        if value:
            return value.strip()
    return None


def presented(headers: Mapping[str, str]) -> Presented | None:
    """The credentials of a request (HMAC first, as MR's filter chain), or None."""
    auth = _header(headers, "X-CambriaAuth", "X-Auth")
    if auth is not None:
        parts = auth.split(":")
        date = _header(headers, "X-CambriaDate", "X-Date", "Date")
        if len(parts) != 2 or not all(parts) or date is None:
            return None
        nonce = _header(headers, "X-Nonce")
        signed = f"{date}:{nonce}" if nonce else date
        return Signed(parts[0], parts[1], signed, date)
    header = _header(headers, "Authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        key, sep, secret = value.strip().partition(":")
        return Bearer(key, secret) if sep and key and secret else None
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, secret = decoded.partition(":")
    return Basic(user, secret) if sep and user else None


# --- dates (MR's accepted formats; a zone-less date is GMT) ---------------------------------

_ZONES: Final = {"GMT": 0, "UTC": 0, "UT": 0, "Z": 0, "EST": -5, "EDT": -4, "CST": -6,
                 "CDT": -5, "MST": -7, "MDT": -6, "PST": -8, "PDT": -7}  # fmt: skip
_ISO_ZONE_NAME: Final = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\s*([A-Za-z]{1,4})")
_UNIX_DATE: Final = re.compile(
    r"[A-Za-z]{3} ([A-Za-z]{3}) +(\d{1,2}) (\d\d:\d\d:\d\d)(?: ([A-Za-z]{1,4}|[+-]\d{4}))? (\d{4})"
)


def _zone(name: str) -> timezone | None:
    if name.upper() in _ZONES:
        return timezone(timedelta(hours=_ZONES[name.upper()]))
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", name)
    if m is None:
        return None
    minutes = int(m[2]) * 60 + int(m[3])
    return timezone(timedelta(minutes=-minutes if m[1] == "-" else minutes))


def parse_date(text: str) -> datetime | None:
    """``X-CambriaDate`` in any of MR's formats (ISO 8601 with offset or zone name, RFC 1123
    and its two-digit-year forms, Unix ``date``, asctime), as an aware datetime; else None."""
    text = text.strip()
    with_name = _ISO_ZONE_NAME.fullmatch(text)
    if with_name is not None:
        zone = _zone(with_name[2])
        if zone is None:
            return None
        try:
            return datetime.fromisoformat(with_name[1]).replace(tzinfo=zone)
        except ValueError:
            return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is not None:
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    unix = _UNIX_DATE.fullmatch(text)
    if unix is not None:
        zone = _zone(unix[4]) if unix[4] else UTC
        if zone is None:
            return None
        try:
            plain = datetime.strptime(
                f"{unix[1]} {unix[2]} {unix[3]} {unix[5]}", "%b %d %H:%M:%S %Y"
            )
        except ValueError:
            return None
        return plain.replace(tzinfo=zone)
    try:
        rfc = email.utils.parsedate_to_datetime(text)  # RFC 1123/850 and two-digit years
    except (TypeError, ValueError, IndexError):
        return None
    return rfc if rfc.tzinfo else rfc.replace(tzinfo=UTC)


def within_window(date: str, now: datetime, window_s: float) -> bool:
    """MR's clock check: ``|now - date| <= window`` (an unparsable date fails)."""
    when = parse_date(date)
    return when is not None and abs((now - when).total_seconds()) <= window_s
