"""DMaaP Message Router's events and topics over Kafka (contract §§2-4): publish in MR's
framings, long-poll consumer groups, topics listed, described, created and deleted.

The methods of :class:`MrRoutes` serve the route table's ``events`` and ``topics`` routes; the
service's handler object (:class:`api.app.Handlers`) is one, and holds what they use.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from api.config import ApiConfig
from api.errors import (
    CONSUME_MSG_ERROR,
    CREATE_TOPIC_FAIL,
    DELETE_TOPIC_FAIL,
    GET_TOPICS_DETAILS_FAIL,
    TOO_MANY_REQUESTS,
    ApiError,
    no_such_topic,
    partial_publish,
)
from api.mr.consumers import ConsumerPool, PoolFullError
from api.mr.metrics import ApiMetrics
from api.plumbing.access import Access
from api.plumbing.framing import parse_body, request_too_large
from api.plumbing.kafka_admin import NoSuchTopicError, TopicAdmin, TopicExistsError
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.params import check_topic_name, parse_create_topic, poll_params
from api.plumbing.topic_access import TopicGuard

NO_CACHE = {"Cache-Control": "no-store, no-cache, must-revalidate", "Pragma": "no-cache",
            "Expires": "0"}  # fmt: skip


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


class MrRoutes:
    """MR's events and topics (the base of :class:`api.app.Handlers`)."""

    cfg: ApiConfig
    admin: TopicAdmin
    publisher: KafkaPublisher
    pool: ConsumerPool
    stats: ApiMetrics
    guard: TopicGuard

    async def _body(self, request: web.Request) -> bytes:
        limit = self.cfg.max_request_bytes
        if request.content_length is not None and request.content_length > limit:
            raise request_too_large(request.content_length, limit)
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(65536):
            size += len(chunk)
            if size > limit:
                raise request_too_large(size, limit)
            chunks.append(chunk)
        return b"".join(chunks)

    # --- events ----------------------------------------------------------------------------

    async def publish(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        topic = check_topic_name(request.match_info["topic"])
        body = await self._body(request)
        records = parse_body(
            request.headers.get("Content-Type"),
            body,
            request.query.get("partitionKey"),
            max_message_bytes=self.cfg.max_message_bytes,
            max_request_bytes=self.cfg.max_request_bytes,
        )
        if self.cfg.auto_create_topics:
            await self.admin.ensure(topic, self.cfg.default_partitions)
        elif not await self.admin.exists(topic):
            raise no_such_topic(topic)
        outcome = await self.publisher.publish(topic, records)
        self.stats.published.inc(outcome.acked)
        if outcome.error is not None:
            raise partial_publish(topic, outcome.acked, outcome.error)
        elapsed_ms = int((time.monotonic() - started) * 1000)
        return json_response({"serverTimeMs": elapsed_ms, "count": len(records)})

    async def consume(self, request: web.Request) -> web.StreamResponse:
        topic = check_topic_name(request.match_info["topic"])
        params = poll_params(
            request.query.get("timeout"),
            request.query.get("limit"),
            default_timeout_ms=self.cfg.poll_timeout_ms,
            max_timeout_ms=self.cfg.poll_timeout_max_ms,
            default_limit=self.cfg.poll_limit,
        )
        if not await self.admin.exists(topic):
            raise no_such_topic(topic)
        try:
            consumer = await self.pool.get(
                topic, request.match_info["group"], request.match_info["id"]
            )
        except PoolFullError as exc:
            raise ApiError(
                429,
                TOO_MANY_REQUESTS,
                f"Too many consumers in use ({exc}). Please retry later, or reuse consumer ids.",
            ) from exc
        async with consumer.lock:
            records = await consumer.fetch(params.limit, params.timeout_ms / 1000)
            if request.transport is None or request.transport.is_closing():
                # the client left during the long poll: keep the records for the next request
                raise ConnectionResetError("client disconnected before the answer")
            body = orjson.dumps([r.value.decode("utf-8", "replace") for r in records])
            response = web.StreamResponse(headers=NO_CACHE)
            response.content_type = "application/json"
            response.content_length = len(body)
            await response.prepare(request)
            await response.write(body)
            await response.write_eof()
            # written: only now are they delivered (a disconnect above commits nothing); counted
            # before the commit, which a client closing at once may interrupt (cancel) here
            self.stats.delivered.inc(len(records))
            await consumer.ack(records)
        return response

    async def consume_incomplete(self, request: web.Request) -> web.Response:
        missing = "consumer ID" if "group" in request.match_info else "consumer Group and ID"
        raise ApiError(
            404,
            CONSUME_MSG_ERROR,
            f"Incorrect url - Expects {missing} in {request.path} from {request.remote}",
        )

    # --- topics ----------------------------------------------------------------------------

    async def list_topics(self, request: web.Request) -> web.Response:
        names = self.guard.visible(request, list(await self.admin.topics()))
        return json_response({"topics": names})

    async def list_all_topics(self, request: web.Request) -> web.Response:
        names = self.guard.visible(request, list(await self.admin.topics()))
        return json_response(
            {
                "topics": [
                    {"topicName": n, "owner": self.guard.owner(n), "txenabled": False}
                    for n in names
                ]
            }
        )

    async def topic_details(self, request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        if topic not in await self.admin.topics():
            raise ApiError(
                404,
                GET_TOPICS_DETAILS_FAIL,
                f"Failed to retrieve details of topic:{topic}Topic [{topic}] does not exist.",
            )
        return json_response(self.guard.details(topic))

    async def create_topic(self, request: web.Request) -> web.Response:
        wanted = parse_create_topic(await self._body(request))
        self.guard.check(request, wanted.name, Access.WRITE)
        try:
            await self.admin.create(
                wanted.name, wanted.partitions or self.cfg.default_partitions, wanted.replicas
            )
        except TopicExistsError:
            raise ApiError(
                409,
                CREATE_TOPIC_FAIL,
                f"Failed to create topic:Could not create topic [{wanted.name}]. "
                "Topic Alreay exists.",
            ) from None
        return json_response(await self.guard.created(request, wanted.name, wanted.description))

    async def delete_topic(self, request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        try:
            await self.admin.delete(topic)
        except NoSuchTopicError:
            raise ApiError(
                404,
                DELETE_TOPIC_FAIL,
                f"Failed to delete topic:{topic}Failed to delete topic. "
                f"Topic [{topic}] does not exist.",
            ) from None
        await self.guard.deleted(request, topic)
        return web.Response(text=f"Topic [{topic}] deleted successfully", content_type="text/html")
