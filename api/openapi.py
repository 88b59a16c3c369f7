"""The OpenAPI 3 document, rendered from the route table (``api.routes``) and the schemas here."""

from __future__ import annotations

import re
from typing import Any

from api.http_devices import model as http_devices_model
from api.operator import schemas as operator_schemas
from api.operator.model import OPERATOR_TAGS
from api.queues import model as queue_model
from api.routes import DEVICE_TAG, ROUTES, Route
from api.sawmill import model as sawmill

_STRING = {"type": "string"}
_BOOL_OR_STRING = {"oneOf": [{"type": "boolean"}, _STRING]}
_INT_OR_STRING = {"oneOf": [{"type": "integer"}, _STRING]}
_ACL = {
    "type": "object",
    "properties": {"enabled": {"type": "boolean"}, "users": {"type": "array", "items": _STRING}},
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "description": "MR's error body (mrstatus codes as the reference server sends them).",
        "required": ["mrstatus", "helpURL", "message", "status"],
        "properties": {
            "mrstatus": {"type": "integer"},
            "helpURL": _STRING,
            "message": _STRING,
            "status": {"type": "integer"},
        },
    },
    "PublishResult": {
        "type": "object",
        "required": ["serverTimeMs", "count"],
        "properties": {"serverTimeMs": {"type": "integer"}, "count": {"type": "integer"}},
    },
    "Messages": {
        "type": "array",
        "description": "Each Kafka record value as a JSON string (JSON messages stringified).",
        "items": _STRING,
    },
    "TopicNames": {
        "type": "object",
        "properties": {"topics": {"type": "array", "items": _STRING}},
    },
    "TopicList": {
        "type": "object",
        "properties": {
            "topics": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "topicName": _STRING,
                        "owner": _STRING,
                        "txenabled": {"type": "boolean"},
                    },
                },
            }
        },
    },
    "Topic": {
        "type": "object",
        "properties": {
            "name": _STRING,
            "description": _STRING,
            "owner": _STRING,
            "readerAcl": _ACL,
            "writerAcl": _ACL,
        },
    },
    "CreateTopic": {
        "type": "object",
        "required": ["topicName"],
        "properties": {
            "topicName": _STRING,
            "topicDescription": _STRING,
            "partitionCount": _INT_OR_STRING,
            "replicationCount": _INT_OR_STRING,
            "transactionEnabled": _BOOL_OR_STRING,
        },
    },
    "Status": {"type": "object", "properties": {"status": _STRING}},
    **sawmill.SCHEMAS,
    **queue_model.SCHEMAS,
    **operator_schemas.SCHEMAS,
    **http_devices_model.SCHEMAS,
    "Acl": _ACL,
    "MrMetrics": {
        "type": "object",
        "description": "MR's metrics: name -> {summary, raw}.",
        "additionalProperties": {
            "type": "object",
            "properties": {"summary": _STRING, "raw": {"oneOf": [{"type": "number"}, _STRING]}},
        },
    },
    "ApiKeyList": {
        "type": "object",
        "properties": {"apiKeys": {"type": "array", "items": _STRING}},
    },
    "ApiKeyCreate": {
        "type": "object",
        "properties": {
            "email": _STRING,
            "description": _STRING,
            "tenant": {**_STRING, "description": "Default: the caller's tenant, else default."},
            "role": {**_STRING, "enum": ["api", "viewer", "operator", "tenant-admin"]},
        },
    },
    "ApiKey": {
        "type": "object",
        "properties": {
            "key": _STRING,
            "aux": {"type": "object", "properties": {"email": _STRING, "description": _STRING}},
            "tenant": _STRING,
            "role": _STRING,
            "disabled": {"type": "boolean"},
        },
    },
    "ApiKeyIssued": {
        "allOf": [
            {"$ref": "#/components/schemas/ApiKey"},
            {"type": "object", "properties": {"secret": _STRING}},
        ]
    },
}
PROTECTED_TAGS = (
    "events",
    "topics",
    "queues",
    "apiKeys",
    *sorted(OPERATOR_TAGS),
)  # the rest of sawmill's tag: its `token` header
SECURITY: list[dict[str, list[str]]] = [
    {"basic": []},
    {"bearer": []},
    {"cambria": [], "cambriaDate": []},
]

_ERROR_TEXT = {
    400: "Malformed request or body.",
    401: "Missing or invalid credentials.",
    403: "Not permitted: another tenant's topic, not on the topic's ACL, not the key's owner "
    "(or, on topic listing, credentials given that fail, as MR).",
    404: "No such topic or resource.",
    409: "Already exists.",
    413: "Message or request too large.",
    429: "Too many long polls or event streams in progress (mrstatus 5012).",
    503: "Kafka unavailable or did not acknowledge in time.",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(route: Route, secured: bool) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": route.method.lower() + re.sub(r"[^A-Za-z0-9]+", "_", route.path),
        "summary": route.summary,
        "tags": [route.tag],
        "parameters": [
            {
                "name": p.name,
                "in": p.where,
                "required": p.where == "path",
                "description": p.description,
                "schema": p.schema,
            }
            for p in route.params
        ],
    }
    if route.body:
        schema = _ref(route.body_schema) if route.body_schema else {"type": "string"}
        op["requestBody"] = {
            "required": True,
            "content": {media: {"schema": schema} for media in route.body},
        }
    if route.ok == "text":
        ok_content = {"text/html": {"schema": _STRING}}
    elif route.ok == "prometheus":
        ok_content = {
            "text/plain": {"schema": _STRING},
            "application/json": {"schema": _ref("MrMetrics")},
        }
    elif route.ok == "asset":  # the docs page's script or style sheet
        ok_content = {media: {"schema": _STRING} for media in ("text/javascript", "text/css")}
    elif route.ok == "event-stream":
        ok_content = {"text/event-stream": {"schema": _STRING}}
    else:
        ok_schema = _ref(route.ok_schema) if route.ok_schema else {"type": "object"}
        ok_content = {"application/json": {"schema": ok_schema}}
    responses: dict[str, Any] = {"200": {"description": "OK", "content": ok_content}}
    device = route.tag == DEVICE_TAG  # HTTP devices: their own error body, Basic (a device)
    codes = set(route.errors) | ({401} if secured and (device or route.tag in PROTECTED_TAGS)
                                 else set())  # fmt: skip
    if device:
        responses["202"] = {"description": "Accepted (Kafka or Mosquitto holds it); no command."}
    for code in sorted(codes):
        responses[str(code)] = {
            "description": _ERROR_TEXT.get(code, "Error."),
            "content": {"application/json": {"schema": _ref("DeviceError" if device else "Error")}},
        }
    op["responses"] = responses
    if secured and route.tag in PROTECTED_TAGS:
        op["security"] = SECURITY
    elif secured and device:
        op["security"] = [{"basic": []}]  # the device's MQTT user name (or id@tenant) and secret
    elif secured and route.tag == "sawmill":
        op["security"] = [{"token": []}]
    return op


def document(version: str, *, secured: bool) -> dict[str, Any]:
    """OpenAPI 3.0 for every route of :data:`api.routes.ROUTES`."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, secured)
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": "iot-api: DMaaP Message Router compatible pub/sub over Kafka",
            "version": version,
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
    if secured:
        doc["components"]["securitySchemes"] = {
            "basic": {
                "type": "http",
                "scheme": "basic",
                "description": "A registry account, or an api key and its secret.",
            },
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "`Authorization: Bearer <key>:<secret>`.",
            },
            "cambria": {
                "type": "apiKey",
                "in": "header",
                "name": "X-CambriaAuth",
                "description": "`<key>:<Base64(HMAC-SHA1(secret, X-CambriaDate[:X-Nonce]))>`; "
                "the date within the clock window (default 10 min).",
            },
            "cambriaDate": {"type": "apiKey", "in": "header", "name": "X-CambriaDate"},
            "token": {"type": "apiKey", "in": "header", "name": "token"},  # account:secret
        }
    return doc
