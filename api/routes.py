"""The route table: every endpoint once, with what the OpenAPI document says of it.

The HTTP adapter binds each row to the handler method it names and ``api.openapi`` renders the
same rows, so the document cannot miss an endpoint the server answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    where: str  # "path", "query" or "header"
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    handler: str
    summary: str
    tag: str
    params: tuple[Param, ...] = ()
    body: tuple[str, ...] = ()  # media types the request body may have
    body_schema: str | None = None  # a name in api.openapi.SCHEMAS
    ok: str = "json"  # "json", "text", "prometheus", "event-stream" or "asset" (js/css)
    ok_schema: str | None = None
    errors: tuple[int, ...] = ()


TOPIC = Param("topic", "path", "Kafka topic name ([a-zA-Z0-9._-], 1-249 characters).")
GROUP = Param("group", "path", "MR consumer group; one Kafka group per (group, topic).")
CONSUMER = Param("id", "path", "Consumer id: ids of one group share the partitions.")
PUBLISH_TYPES = (
    "application/json",
    "text/plain",
    "application/cambria",
    "application/cambria-zip",
    "application/octet-stream",
)
INT = {"type": "integer"}
API_KEY = Param("key", "path", "An api key (16 letters and digits).")
ACL_KEY = Param("apiKey", "path", "The api key to add to or take off the list.")

QUEUE = Param(
    "queue",
    "path",
    "Queue: its topic (1-245 of [a-zA-Z0-9._-]); `<queue>.dlq` is its dead-letter topic.",
)
OFFSET = Param(
    "offset",
    "query",
    "Start: an offset of every partition, `partition:offset,...` "
    "(as `X-Next-Offset` and the stream ids), or `end`; absent: the beginning.",
)
SAWMILL_LIMIT = Param("limit", "query", "Most messages (ours; absent or 0: the poll limit).", INT)

# sawmill's facade (contract §10): its names and shapes, its `token` header, bugs fixed
SAWMILL_ROUTES: tuple[Route, ...] = (
    Route("POST", "/push/{topic}", "sawmill_push",
          "sawmill: push the JSON body as one message (200 after Kafka acknowledged it).",
          "sawmill", params=(TOPIC,), body=("application/json",), ok_schema="SawmillStatus",
          errors=(400, 401, 404, 413, 503)),
    Route("GET", "/consume/{topic}", "sawmill_consume",
          "sawmill: every partition from `offset` to its end, in record-time order; "
          "`X-Next-Offset` says where to go on.", "sawmill",
          params=(TOPIC, OFFSET, SAWMILL_LIMIT), ok_schema="SawmillMessages",
          errors=(400, 401, 404, 503)),
    Route("GET", "/latest/{topic}", "sawmill_latest",
          "sawmill: the `offset` (default 10) newest messages of the topic.", "sawmill",
          params=(TOPIC, Param("offset", "query", "How many (default 10).", INT)),
          ok_schema="SawmillMessages", errors=(400, 401, 404, 503)),
    Route("GET", "/latest_time/{topic}", "sawmill_latest_time",
          "sawmill: the messages of the last `offset` seconds (default 3600).", "sawmill",
          params=(TOPIC, Param("offset", "query", "Seconds back (default 3600).", INT),
                  SAWMILL_LIMIT),
          ok_schema="SawmillMessages", errors=(400, 401, 404, 503)),
    Route("GET", "/realtime/{topic}", "sawmill_realtime",
          "sawmill: a Server-Sent Events stream from `offset`, resumed from `Last-Event-ID`.",
          "sawmill", params=(TOPIC, OFFSET, Param("Last-Event-ID", "header", "Resume after this "
                                                   "event (its id), whatever `offset` says.")),
          ok="event-stream", errors=(400, 401, 404, 503)),
    Route("GET", "/delete/{topic}", "sawmill_delete", "sawmill: delete the topic.", "sawmill",
          params=(TOPIC,), ok_schema="SawmillStatus", errors=(400, 401, 503)),
    Route("GET", "/topics/", "sawmill_topics", "sawmill: topic names (a JSON array).",
          "sawmill", ok_schema="SawmillTopics", errors=(400, 401, 503)),
    Route("GET", "/connection/", "sawmill_connection", "sawmill: does Kafka answer?",
          "service", ok_schema="SawmillStatus", errors=(503,)),
    Route("GET", "/spec", "sawmill_spec", "sawmill's spec: this document.", "service"),
)  # fmt: skip

QUEUE_ROUTES: tuple[Route, ...] = (
    Route("PUT", "/queues/{queue}", "queue_create",
          "Create a queue: its topic and its dead-letter topic (`?partitions=`), with its own "
          "visibility timeout and maximum deliveries if given (kept in Kafka).", "queues",
          params=(QUEUE, Param("partitions", "query", "Partitions (0: the default).", INT),
                  Param("visibility", "query", "The queue's visibility timeout in s.",
                        {"type": "number"}),
                  Param("maxDeliveries", "query",
                        "Deliveries before the dead-letter topic (1-1000).", INT)),
          ok_schema="Queue", errors=(400, 503)),
    Route("PUT", "/queues/{queue}/settings", "queue_settings",
          "Change a queue's visibility timeout and maximum deliveries (its administrators; "
          "kept in Kafka, every instance applies them).", "queues",
          params=(QUEUE,), body=("application/json",), body_schema="QueueSettings",
          ok_schema="Queue", errors=(400, 403, 404, 503)),
    Route("GET", "/queues/{queue}", "queue_info", "A queue's settings.", "queues",
          params=(QUEUE,), ok_schema="Queue", errors=(400, 404, 503)),
    Route("POST", "/queues/{queue}/messages", "queue_send",
          "Send: 200 after Kafka acknowledged every message (MR's framings).", "queues",
          params=(QUEUE, Param("partitionKey", "query", "Key of messages without one.")),
          body=PUBLISH_TYPES, ok_schema="PublishResult", errors=(400, 404, 413, 503)),
    Route("POST", "/queues/{queue}/receive", "queue_receive",
          "Receive up to `max` messages, each invisible for `visibility` s; redelivered "
          "after that unless acked.", "queues",
          params=(QUEUE, Param("max", "query", "Most messages (default 1).", INT),
                  Param("visibility", "query", "Visibility timeout in s.", {"type": "number"}),
                  Param("timeout", "query", "Long-poll wait in ms.", INT)),
          ok_schema="QueueMessages", errors=(400, 404, 503)),
    Route("POST", "/queues/{queue}/ack", "queue_ack",
          "Acknowledge: recorded by the deadline, never delivered again.", "queues",
          params=(QUEUE,), body=("application/json",), body_schema="ReceiptHandles",
          ok_schema="AckResults", errors=(400, 503)),
    Route("POST", "/queues/{queue}/nack", "queue_nack",
          "Give back: delivered again at once (the delivery counts).", "queues",
          params=(QUEUE,), body=("application/json",), body_schema="ReceiptHandles",
          ok_schema="AckResults", errors=(400, 503)),
)  # fmt: skip

# HTTP devices (Hono's HTTP adapter paths; api.http_devices.handlers, docs/api.md "HTTP devices")
DEVICE_TAG = "http-devices"  # not the operator routes' "devices": a device authenticates itself
DEVICE_TENANT = Param("tenant", "path", "Tenant id (`default` for the default tenant).")
DEVICE_ID = Param("device", "path", "Device id; must be the authenticated device (else 403).")
REQ_ID = Param("reqId", "path", "The command's `hono-cmd-req-id` (its command id).")
TTD = Param(
    "hono-ttd", "header",
    "Seconds to wait in this request for a command (capped by `--device-ttd-max-s`; -1: the "
    "cap). Also accepted as a query parameter.", {"type": "integer"},
)  # fmt: skip
CMD_STATUS = Param(
    "hono-cmd-status", "header",
    "Hono's result code of a reply (2xx ok, else error); absent: the body is the reply as an "
    "MQTT device sends it.", {"type": "integer"},
)  # fmt: skip
_UPLOAD_ERRORS = (400, 403, 413, 429, 503)
_TELEMETRY = ("Telemetry, the MQTT JSON contract: 202 once Kafka holds it (acks=all), 200 with "
              "a command (`hono-command`, `hono-cmd-req-id`) when one came within `hono-ttd`; "
              "bad payloads 400 with the bridge's error code, dead-lettered.")  # fmt: skip
_EVENT = "An event, as telemetry (the events topic)."
_REPLY = ("A command's reply: published as the device's MQTT reply (QoS 1); 202 once Mosquitto "
          "took it, the command path then records it.")  # fmt: skip

DEVICE_ROUTES: tuple[Route, ...] = (
    Route("POST", "/telemetry", "device_telemetry", _TELEMETRY, DEVICE_TAG, params=(TTD,),
          body=("application/json",), ok_schema="DeviceCommand", errors=_UPLOAD_ERRORS),
    Route("PUT", "/telemetry/{tenant}/{device}", "device_telemetry", _TELEMETRY, DEVICE_TAG,
          params=(DEVICE_TENANT, DEVICE_ID, TTD), body=("application/json",),
          ok_schema="DeviceCommand", errors=_UPLOAD_ERRORS),
    Route("POST", "/event", "device_event", _EVENT, DEVICE_TAG, params=(TTD,),
          body=("application/json",), ok_schema="DeviceCommand", errors=_UPLOAD_ERRORS),
    Route("PUT", "/event/{tenant}/{device}", "device_event", _EVENT, DEVICE_TAG,
          params=(DEVICE_TENANT, DEVICE_ID, TTD), body=("application/json",),
          ok_schema="DeviceCommand", errors=_UPLOAD_ERRORS),
    Route("POST", "/command/res/{reqId}", "device_command_reply", _REPLY, DEVICE_TAG,
          params=(REQ_ID, CMD_STATUS), body=("application/json",), body_schema="DeviceReply",
          errors=(400, 403, 503)),
    Route("PUT", "/command/res/{tenant}/{device}/{reqId}", "device_command_reply", _REPLY,
          DEVICE_TAG,
          params=(DEVICE_TENANT, DEVICE_ID, REQ_ID, CMD_STATUS), body=("application/json",),
          body_schema="DeviceReply", errors=(400, 403, 503)),
)  # fmt: skip


def _acl_routes(side: str, one: str, acl: str, verb: str) -> tuple[Route, ...]:
    """MR's two access lists of a topic (producers: writers, consumers: readers), alike."""
    path = f"/topics/{{topic}}/{side}"
    return (
        Route("GET", path, side, f"The topic's {acl} ACL.", "topics", params=(TOPIC,),
              ok_schema="Acl", errors=(403, 404)),
        Route("PUT", f"{path}/{{apiKey}}", f"permit_{one}",
              f"Let a key {verb} (a non-empty list admits only its keys and the owner).",
              "topics", params=(TOPIC, ACL_KEY), ok="text", errors=(403, 404)),
        Route("DELETE", f"{path}/{{apiKey}}", f"revoke_{one}", f"Take a key off the {acl} ACL.",
              "topics", params=(TOPIC, ACL_KEY), ok="text", errors=(403, 404)),
    )  # fmt: skip


ROUTES: tuple[Route, ...] = (
    Route(
        "POST", "/events/{topic}", "publish",
        "Publish: 200 only after Kafka acknowledged every record (acks=all).", "events",
        params=(
            TOPIC,
            Param("partitionKey", "query", "Kafka key of every record without its own key."),
        ),
        body=PUBLISH_TYPES, ok_schema="PublishResult", errors=(400, 404, 413, 503),
    ),
    Route(
        "GET", "/events/{topic}/{group}/{id}", "consume",
        "Long-poll consume: messages as JSON strings; offsets committed only for what is "
        "returned.", "events",
        params=(
            TOPIC, GROUP, CONSUMER,
            Param("timeout", "query", "Long-poll wait in ms (default 10000, capped).", INT),
            Param("limit", "query", "Most messages to return (absent or 0: 4096).", INT),
            Param("filter", "query", "Accepted and ignored, as in ONAP MR."),
        ),
        ok_schema="Messages", errors=(400, 404, 503),
    ),
    Route("GET", "/events/{topic}", "consume_incomplete",
          "Consume without group and id: 404 (mrstatus 5008), as MR.", "events",
          params=(TOPIC,), errors=(404,)),
    Route("GET", "/events/{topic}/{group}", "consume_incomplete",
          "Consume without an id: 404 (mrstatus 5008), as MR.", "events",
          params=(TOPIC, GROUP), errors=(404,)),
    Route("GET", "/topics", "list_topics", "Topic names.", "topics", ok_schema="TopicNames",
          errors=(403, 503)),
    Route("GET", "/topics/listAll", "list_all_topics", "Topics with owner and txenabled.",
          "topics", ok_schema="TopicList", errors=(403, 503)),
    Route("GET", "/topics/{topic}", "topic_details", "One topic's details.", "topics",
          params=(TOPIC,), ok_schema="Topic", errors=(404, 503)),
    Route("POST", "/topics/create", "create_topic",
          "Create a topic (numbers as integers or strings).", "topics",
          body=("application/json",), body_schema="CreateTopic", ok_schema="Topic",
          errors=(400, 409, 503)),
    Route("DELETE", "/topics/{topic}", "delete_topic", "Delete a topic (really).", "topics",
          params=(TOPIC,), ok="text", errors=(404, 503)),
    Route("GET", "/healthz", "healthz", "Liveness: the process serves.", "service",
          ok_schema="Status"),
    Route("GET", "/readyz", "readyz",
          "Readiness: Kafka answers the service's probe (a metadata request every second).",
          "service",
          ok_schema="Status", errors=(503,)),
    Route("GET", "/metrics", "metrics",
          "Prometheus metrics; MR's JSON ({name: {summary, raw}}) to Accept: application/json.",
          "service", ok="prometheus"),
    Route("GET", "/openapi.json", "openapi", "This document.", "service"),
    # --- access: api keys, topic ACLs, MR's metrics JSON (mr.apikeys, plumbing.topic_access) ---
    Route("GET", "/metrics/{name}", "metric", "One of MR's metrics as JSON.", "service",
          params=(Param("name", "path", "An MR metric name (recvTotalEvents, upTime, ...)."),),
          ok_schema="MrMetrics", errors=(404,)),
    Route("GET", "/apiKeys", "list_keys", "Api keys the caller may see.", "apiKeys",
          ok_schema="ApiKeyList", errors=(403,)),
    Route("POST", "/apiKeys/create", "create_key",
          "Issue a key scoped to a tenant and role; the secret is in this answer only.",
          "apiKeys", body=("application/json",), body_schema="ApiKeyCreate",
          ok_schema="ApiKeyIssued", errors=(400, 403, 503)),
    Route("GET", "/apiKeys/{key}", "show_key", "One key (never its secret).", "apiKeys",
          params=(API_KEY,), ok_schema="ApiKey", errors=(404,)),
    Route("PUT", "/apiKeys/{key}", "update_key", "Change a key's email or description.",
          "apiKeys", params=(API_KEY,), body=("application/json",), body_schema="ApiKeyCreate",
          ok_schema="ApiKey", errors=(400, 403, 404)),
    Route("PATCH", "/apiKeys/{key}", "update_key", "As PUT (MR's Java client uses PATCH).",
          "apiKeys", params=(API_KEY,), body=("application/json",), body_schema="ApiKeyCreate",
          ok_schema="ApiKey", errors=(400, 403, 404)),
    Route("DELETE", "/apiKeys/{key}", "delete_key", "Delete a key.", "apiKeys",
          params=(API_KEY,), ok="text", errors=(403, 404)),
    *_acl_routes("producers", "producer", "writer", "publish"),
    *_acl_routes("consumers", "consumer", "reader", "consume"),
)  # fmt: skip

OPS_TENANT = Param("tenant", "path", "Tenant id (`default` for the default tenant).")
OPS_DEVICE = Param("id", "path", "Device id.")
_DEV = "/ops/devices/{tenant}/{id}"
_DP = (OPS_TENANT, OPS_DEVICE)
# commands and devices over HTTP for operators and services (api.operator.app, docs/api.md)
OPERATOR_ROUTES: tuple[Route, ...] = (
    Route("POST", "/ops/commands", "send_command",
          "Send a command to a device or group; `?wait=S` waits (bounded) for a final state: "
          "200 final, 202 not (yet).", "commands",
          params=(Param("wait", "query", "Seconds to wait for a final state (0: none).",
                        {"type": "number"}),),
          body=("application/json",), body_schema="SendCommand", ok_schema="Command",
          errors=(400, 403, 404, 503)),
    Route("GET", "/ops/commands", "list_commands",
          "Command history (newest first) from the status topic and the live feed.", "commands",
          params=(Param("device", "query", "Device id or `group:<name>`."),
                  Param("status", "query", "State (accepted ... rejected)."),
                  Param("since", "query", "Epoch ms (default: the newest records).", INT),
                  Param("until", "query", "Epoch ms.", INT),
                  Param("tenant", "query", "Only this tenant's (system-wide callers)."),
                  Param("limit", "query", "Most rows (default 100, max 1000).", INT)),
          ok_schema="CommandList", errors=(400, 403, 404, 503)),
    Route("GET", "/ops/commands/{command_id}", "get_command",
          "A command's state, its states and replies.", "commands",
          params=(Param("command_id", "path", "Command id."),), ok_schema="Command",
          errors=(403, 404, 503)),
    Route("GET", "/ops/devices", "list_devices", "Devices with presence and last seen.",
          "devices",
          params=(Param("tenant", "query", "Tenant (default: the caller's, or all)."),
                  Param("q", "query", "Id contains."), Param("group", "query", "In group."),
                  Param("state", "query", "online or offline."),
                  Param("limit", "query", "Most rows.", INT),
                  Param("offset", "query", "Rows to skip.", INT)),
          ok_schema="DeviceList", errors=(400, 403, 404, 503)),
    Route("POST", "/ops/devices", "add_device",
          "Add a device (201); its secret is in this answer only.", "registry",
          body=("application/json",), body_schema="AddDevice", ok_schema="DeviceIssued",
          errors=(400, 403, 404, 409, 503)),
    Route("GET", _DEV, "get_device", "A device, its presence and recent commands.", "devices",
          params=_DP, ok_schema="Device", errors=(403, 404, 503)),
    Route("DELETE", _DEV, "delete_device", "Delete a device.", "registry", params=_DP,
          ok_schema="Deleted", errors=(403, 404, 503)),
    Route("GET", _DEV + "/telemetry", "device_telemetry_stream",
          "The device's telemetry as Server-Sent Events (new records; `event: telemetry`).",
          "devices", params=_DP, ok="event-stream", errors=(403, 404, 429, 503)),
    Route("POST", _DEV + "/disable", "disable_device", "Disable a device.", "registry",
          params=_DP, ok_schema="DeviceChanged", errors=(403, 404, 503)),
    Route("POST", _DEV + "/enable", "enable_device", "Enable a device.", "registry",
          params=_DP, ok_schema="DeviceChanged", errors=(403, 404, 503)),
    Route("POST", _DEV + "/rotate", "rotate_device",
          "A new secret (shown once); the old one stops working.", "registry", params=_DP,
          ok_schema="DeviceIssued", errors=(403, 404, 503)),
    Route("PUT", _DEV + "/groups", "set_device_groups", "Add the device to / take it off groups.",
          "registry", params=_DP, body=("application/json",), body_schema="GroupChange",
          ok_schema="DeviceChanged", errors=(400, 403, 404, 503)),
    Route("PUT", _DEV + "/certificate", "set_device_certificate",
          "Record the fingerprint of the device's client certificate.", "registry",
          params=_DP, body=("application/json",), body_schema="Certificate",
          ok_schema="DeviceChanged", errors=(400, 403, 404, 503)),
    Route("GET", "/ops/groups", "list_groups", "Groups and their devices.", "devices",
          params=(Param("tenant", "query", "Tenant (default: the caller's, or all)."),),
          ok_schema="Groups", errors=(403, 404, 503)),
    Route("GET", "/ops/tenants", "list_tenants", "Tenants the caller may see.", "registry",
          ok_schema="TenantList", errors=(403, 503)),
    Route("POST", "/ops/tenants", "create_tenant", "Create a tenant (system admin).",
          "registry", body=("application/json",), body_schema="CreateTenant",
          ok_schema="Tenant", errors=(400, 403, 409, 503)),
    Route("POST", "/ops/tenants/{tenant}/disable", "disable_tenant",
          "Disable a tenant: its devices and accounts are refused.", "registry",
          params=(OPS_TENANT,), ok_schema="Tenant", errors=(403, 404, 503)),
    Route("POST", "/ops/tenants/{tenant}/enable", "enable_tenant", "Enable a tenant.",
          "registry", params=(OPS_TENANT,), ok_schema="Tenant", errors=(403, 404, 503)),
    Route("DELETE", "/ops/tenants/{tenant}", "delete_tenant",
          "Delete a tenant (`?cascade=true`: with its devices, accounts, keys).", "registry",
          params=(OPS_TENANT, Param("cascade", "query", "true: delete what it holds too.")),
          ok_schema="Deleted", errors=(403, 404, 409, 503)),
)  # fmt: skip
# the interactive page over /openapi.json (api.docs_page): Swagger UI from its PyPI package
DOCS_ROUTES: tuple[Route, ...] = (
    Route("GET", "/docs", "docs_page",
          "Interactive API page: every endpoint of /openapi.json, readable and tried from the "
          "browser (Swagger UI, served from this service: no network needed).", "service",
          ok="text"),
    Route("GET", "/docs/swagger-ui.css", "docs_asset", "The page's style sheet.", "service",
          ok="asset", errors=(404,)),
    Route("GET", "/docs/swagger-ui-bundle.js", "docs_asset", "The page's Swagger UI.",
          "service", ok="asset", errors=(404,)),
    Route("GET", "/docs/init.js", "docs_asset", "The page's start: render /openapi.json.",
          "service", ok="asset", errors=(404,)),
)  # fmt: skip
# after MR's rows: sawmill's facade, the queues, the operator routes, HTTP devices, the page
ROUTES += SAWMILL_ROUTES + QUEUE_ROUTES + OPERATOR_ROUTES + DEVICE_ROUTES + DOCS_ROUTES
