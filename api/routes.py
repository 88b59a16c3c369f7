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
    where: str  # "path" or "query"
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
    ok: str = "json"  # "json", "text" or "prometheus"
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
    Route("GET", "/readyz", "readyz", "Readiness: Kafka answers a metadata request.", "service",
          ok_schema="Status", errors=(503,)),
    Route("GET", "/metrics", "metrics",
          "Prometheus metrics; MR's JSON ({name: {summary, raw}}) to Accept: application/json.",
          "service", ok="prometheus"),
    Route("GET", "/openapi.json", "openapi", "This document.", "service"),
    # --- access: api keys, topic ACLs, MR's metrics JSON (api.apikeys, api.topic_access) ---
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
    Route("GET", "/topics/{topic}/producers", "producers", "The topic's writer ACL.", "topics",
          params=(TOPIC,), ok_schema="Acl", errors=(403, 404)),
    Route("PUT", "/topics/{topic}/producers/{apiKey}", "permit_producer",
          "Let a key publish (a non-empty list admits only its keys and the owner).", "topics",
          params=(TOPIC, ACL_KEY), ok="text", errors=(403, 404)),
    Route("DELETE", "/topics/{topic}/producers/{apiKey}", "revoke_producer",
          "Take a key off the writer ACL.", "topics", params=(TOPIC, ACL_KEY), ok="text",
          errors=(403, 404)),
    Route("GET", "/topics/{topic}/consumers", "consumers", "The topic's reader ACL.", "topics",
          params=(TOPIC,), ok_schema="Acl", errors=(403, 404)),
    Route("PUT", "/topics/{topic}/consumers/{apiKey}", "permit_consumer",
          "Let a key consume (a non-empty list admits only its keys and the owner).", "topics",
          params=(TOPIC, ACL_KEY), ok="text", errors=(403, 404)),
    Route("DELETE", "/topics/{topic}/consumers/{apiKey}", "revoke_consumer",
          "Take a key off the reader ACL.", "topics", params=(TOPIC, ACL_KEY), ok="text",
          errors=(403, 404)),
)  # fmt: skip
