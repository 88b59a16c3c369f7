"""OpenAPI schemas of the ``/ops`` routes (commands and devices over HTTP, docs/api.md)."""

from __future__ import annotations

from typing import Any, Final

_S: Final = {"type": "string"}
_I: Final = {"type": "integer"}
_B: Final = {"type": "boolean"}
_OBJ: Final = {"type": "object"}
_LIST: Final = {"type": "array", "items": _S}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: Final[dict[str, Any]] = {
    "SendCommand": {
        "type": "object",
        "required": ["name"],
        "description": "Exactly one of `device` and `group`.",
        "properties": {
            "device": _S, "group": _S, "name": _S, "args": _OBJ,
            "tenant": {**_S, "description": "Default: the caller's tenant, else default."},
            "timeout_ms": _I, "max_attempts": _I, "ttl_ms": _I, "reply_expected": _B,
            "command_id": _S,
        },
    },
    "Command": {
        "type": "object",
        "properties": {
            "command_id": _S, "tenant": _S,
            "target": {**_S, "description": "Device id or `group:<name>`."},
            "name": _S, "args": _OBJ, "state": _S, "final": _B, "at": _I,
            "states": {"type": "array", "items": _OBJ},
            "replies": {"type": "array", "items": _OBJ},
        },
    },
    "CommandList": {
        "type": "object", "properties": {"commands": {"type": "array", "items": _ref("Command")}}
    },
    "Device": {
        "type": "object",
        "properties": {
            "tenant": _S, "id": _S, "groups": _LIST, "disabled": _B, "credentials": _LIST,
            "site": _S, "created_at": _I, "updated_at": _I,
            "online": {**_B, "nullable": True}, "last_seen": {**_I, "nullable": True},
            "presence_at": {**_I, "nullable": True},
        },
    },
    "DeviceList": {
        "type": "object",
        "properties": {"total": _I, "online": _I,
                       "devices": {"type": "array", "items": _ref("Device")}},
    },
    "DeviceIssued": {
        "type": "object",
        "properties": {"device": _ref("Device"), "username": _S,
                       "secret": {**_S, "description": "Shown this once; never stored."}},
    },
    "DeviceChanged": {"type": "object", "properties": {"device": _ref("Device")}},
    "AddDevice": {
        "type": "object",
        "required": ["id"],
        "properties": {"id": _S, "tenant": _S, "groups": _LIST, "certificate": _S,
                       "secret": {**_B, "description": "false: certificate only."}},
    },
    "GroupChange": {"type": "object", "properties": {"add": _LIST, "remove": _LIST}},
    "Certificate": {"type": "object", "required": ["fingerprint"],
                    "properties": {"fingerprint": _S}},
    "Groups": {"type": "object", "properties": {"groups": {"type": "array", "items": _OBJ}}},
    "Tenant": {
        "type": "object",
        "properties": {"id": _S, "disabled": _B, "quotas": _OBJ, "created_at": _I,
                       "updated_at": _I},
    },
    "TenantList": {
        "type": "object", "properties": {"tenants": {"type": "array", "items": _ref("Tenant")}}
    },
    "CreateTenant": {
        "type": "object", "required": ["id"],
        "properties": {"id": _S, "devices": _I, "msgs_per_s": {"type": "number"}},
    },
    "Deleted": {"type": "object", "properties": {"deleted": _S}},
}  # fmt: skip
