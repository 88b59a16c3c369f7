"""Reason codes as text, for log lines and errors (MQTT 5.0 3.2.2.2, 3.14.2.1)."""

from __future__ import annotations

from typing import Final

CONNACK_REASONS: Final = {
    0x00: "success",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x83: "implementation specific error",
    0x84: "unsupported protocol version",
    0x85: "client identifier not valid",
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
    0x8C: "bad authentication method",
    0x90: "topic name invalid",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x99: "payload format invalid",
    0x9A: "retain not supported",
    0x9B: "QoS not supported",
    0x9C: "use another server",
    0x9D: "server moved",
    0x9F: "connection rate exceeded",
}

DISCONNECT_REASONS: Final = {
    0x00: "normal disconnection",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x87: "not authorized",
    0x89: "server busy",
    0x8B: "server shutting down",
    0x8D: "keep alive timeout",
    0x8E: "session taken over: another client connected with the same client id",
    0x93: "receive maximum exceeded",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x98: "administrative action",
}

# CONNACK reasons after which retrying cannot help (credentials, authorization, protocol)
PERMANENT_CONNACK_REASONS: Final = frozenset({0x84, 0x85, 0x86, 0x87, 0x8A, 0x8C})
