"""The first dynamic-security file: the registry's admin client and nothing else (pure).

Written before Mosquitto first starts (``iot-devices mosquitto-init``), like
``mosquitto_ctrl dynsec init`` but without a shell-out and with a narrower admin role: the
registry's client may only use the ``$CONTROL/dynamic-security`` API, it cannot read devices'
traffic. The hash format is Mosquitto's (PBKDF2-HMAC-SHA512, 64-byte key, base64, raw salt
bytes base64), checked against ``mosquitto_ctrl``'s own output in the tests. Mosquitto 2.0.11
uses 101 iterations for clients it creates; for this file we choose more, since the admin
password is the key to everything and is checked only when the registry connects.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any, Final

from registry.topics import ADMIN_USERNAME

ADMIN_ROLE: Final = "registry-admin"
ADMIN_ITERATIONS: Final = 210_000  # OWASP's figure for PBKDF2-HMAC-SHA512


def pbkdf2_entry(password: str, iterations: int = ADMIN_ITERATIONS) -> dict[str, Any]:
    """The ``password``/``salt``/``iterations`` fields of a dynsec client."""
    salt = secrets.token_bytes(12)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, 64)
    return {
        "password": base64.b64encode(key).decode(),
        "salt": base64.b64encode(salt).decode(),
        "iterations": iterations,
    }


def check_pbkdf2(password: str, entry: dict[str, Any]) -> bool:
    key = hashlib.pbkdf2_hmac(
        "sha512",
        password.encode(),
        base64.b64decode(entry["salt"]),
        int(entry["iterations"]),
        64,
    )
    return secrets.compare_digest(key, base64.b64decode(entry["password"]))


def initial_config(admin_password: str, iterations: int = ADMIN_ITERATIONS) -> dict[str, Any]:
    control = "$CONTROL/dynamic-security/#"
    acls = [
        {"acltype": t, "topic": control, "allow": True}
        for t in ("publishClientSend", "publishClientReceive", "subscribePattern")
    ]
    return {
        "clients": [
            {
                "username": ADMIN_USERNAME,
                "textName": "iot-devices registry admin",
                **pbkdf2_entry(admin_password, iterations),
                "roles": [{"rolename": ADMIN_ROLE}],
            }
        ],
        "roles": [{"rolename": ADMIN_ROLE, "acls": acls}],
        "groups": [],
        "defaultACLAccess": {
            "publishClientSend": False,
            "publishClientReceive": False,
            "subscribe": False,
            "unsubscribe": True,
        },
    }


def render(admin_password: str, iterations: int = ADMIN_ITERATIONS) -> str:
    return json.dumps(initial_config(admin_password, iterations), indent=2) + "\n"
