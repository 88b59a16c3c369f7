"""The aiohttp application: MR's events and topics over Kafka, health, metrics, OpenAPI.

Routes come from ``api.routes.ROUTES`` (each names a method of :class:`Handlers` or of one of
the extra handler objects); every ``events``/``topics``/``apiKeys`` route is authenticated
unless the service runs ``--insecure-anonymous``, and a route with a ``{topic}`` is checked
against the caller's tenant and the topic's ACLs (``api.plumbing.topic_access``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson
from aiohttp import web
from confluent_kafka import KafkaException
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import __version__
from api.config import ApiConfig
from api.errors import (
    ACCESS_NOT_PERMITTED,
    AUTH_FAILURE,
    CONSUME_MSG_ERROR,
    CREATE_TOPIC_FAIL,
    DELETE_TOPIC_FAIL,
    GENERIC_INTERNAL_ERROR,
    GET_TOPICS_DETAILS_FAIL,
    METHOD_NOT_ALLOWED,
    METHOD_NOT_ALLOWED_TEXT,
    NOT_FOUND,
    RESOURCE_NOT_FOUND,
    SERVER_UNAV,
    SERVER_UNAVAILABLE,
    TOO_MANY_REQUESTS,
    ApiError,
    error_body,
    no_such_topic,
    partial_publish,
)
from api.mr.consumers import ConsumerPool, PoolFullError
from api.mr.json_metrics import CacheCounts, render, wants_json
from api.mr.metrics import ApiMetrics
from api.openapi import document
from api.operator.model import OPERATOR_TAGS
from api.plumbing.access import Access
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.framing import parse_body, request_too_large
from api.plumbing.kafka_admin import (
    KafkaUnavailableError,
    NoSuchTopicError,
    TopicAdmin,
    TopicExistsError,
)
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.limits import LONG_POLL_HANDLERS, SSE_HANDLERS, Gate
from api.plumbing.params import check_topic_name, parse_create_topic, poll_params
from api.plumbing.topic_access import PRINCIPAL, TopicGuard
from api.routes import ROUTES, Route

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NO_CACHE = {"Cache-Control": "no-store, no-cache, must-revalidate", "Pragma": "no-cache",
            "Expires": "0"}  # fmt: skip
PROTECTED_TAGS = (
    frozenset({"events", "topics", "queues", "apiKeys"}) | OPERATOR_TAGS
)  # sawmill: `token`
KAFKA_TAGS = frozenset({"events", "topics", "queues"}) | OPERATOR_TAGS  # 503 at once: Kafka down


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


def error_response(error: ApiError) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="iot-api"'} if error.status == 401 else None
    return json_response(error.body(), error.status, headers)


class Handlers:
    def __init__(
        self,
        cfg: ApiConfig,
        admin: TopicAdmin,
        publisher: KafkaPublisher,
        pool: ConsumerPool,
        metrics: ApiMetrics,
    ) -> None:
        self.cfg = cfg
        self.admin = admin
        self.publisher = publisher
        self.pool = pool
        self.stats = metrics
        self.guard = TopicGuard(None)  # the service sets the authenticated one
        self.long_polls = Gate(cfg.max_long_polls)
        self.sse_streams = Gate(cfg.max_sse_streams, "event streams")
        self.kafka_up: Callable[[], bool] = lambda: True  # the service sets its probe

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

    # --- service ---------------------------------------------------------------------------

    async def healthz(self, _request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def readyz(self, _request: web.Request) -> web.Response:
        if await self.admin.ready():
            return json_response({"status": "ready"})
        raise ApiError(503, SERVER_UNAVAILABLE, f"{SERVER_UNAV} Kafka does not answer.")

    async def metrics(self, request: web.Request) -> web.Response:
        self.stats.consumers.set(len(self.pool))
        if wants_json(request.headers.get("Accept")):
            return json_response(self._mr_metrics(), headers=NO_CACHE)
        body = generate_latest(self.stats.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _mr_metrics(self) -> dict[str, Any]:
        pool = self.pool
        cache = CacheCounts(pool.hits, pool.misses, len(pool), pool.timeouts)
        started = self.stats.started_epoch_s
        return render(
            __version__,
            started_epoch_s=started,
            now_epoch_s=time.time(),
            recv=self.stats.recv,
            send=self.stats.send,
            cache=cache,
        )

    async def metric(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        found = self._mr_metrics().get(name)
        if found is None:
            raise ApiError(404, RESOURCE_NOT_FOUND, f"No metric named [{name}].")
        return json_response({name: found}, headers=NO_CACHE)

    async def openapi(self, _request: web.Request) -> web.Response:
        return json_response(document(__version__, secured=not self.cfg.insecure_anonymous))

    sawmill_spec = openapi  # sawmill's `/spec`: the same document


@web.middleware
async def mr_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as MR's JSON body, the framework's own 404/405/413 included."""
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc)
    except (KafkaUnavailableError, KafkaException) as exc:
        return error_response(ApiError(503, SERVER_UNAVAILABLE, f"{SERVER_UNAV} {exc}"))
    except web.HTTPException as exc:
        if exc.status == 404:
            return error_response(ApiError(404, RESOURCE_NOT_FOUND, NOT_FOUND))
        if exc.status == 405:
            return error_response(ApiError(405, METHOD_NOT_ALLOWED, METHOD_NOT_ALLOWED_TEXT))
        raise
    except ConnectionResetError:
        log.debug("%s %s: client gone", request.method, request.path)
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return json_response(error_body(500, GENERIC_INTERNAL_ERROR, "Internal error."), 500)


def _wrap(
    route: Route, handler: Handler, auth: RegistryAuthenticator | None, core: Handlers
) -> Handler:
    protected = auth is not None and route.tag in PROTECTED_TAGS
    metrics, guard = core.stats, core.guard
    long_poll = route.handler in LONG_POLL_HANDLERS
    gate = core.long_polls if long_poll else core.sse_streams
    capped = long_poll or route.handler in SSE_HANDLERS
    needs_kafka = route.tag in KAFKA_TAGS

    async def wrapped(request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        status = 500
        try:
            if protected and auth is not None:
                principal = await auth.principal(request.headers)
                if principal is None:
                    # MR: listing topics with credentials that fail is 403, otherwise 401
                    listing = route.handler in ("list_topics", "list_all_topics")
                    given = "Authorization" in request.headers or "X-CambriaAuth" in request.headers
                    status = 403 if listing and given else 401
                    raise ApiError(status, ACCESS_NOT_PERMITTED, AUTH_FAILURE)
                request[PRINCIPAL] = principal
                # a queue is a topic too (its dead letters `<queue>.dlq` share its tenant)
                topic = request.match_info.get("topic") or request.match_info.get("queue")
                if topic is not None:
                    guard.check(request, topic, guard.route_access(route.handler, route.method))
            if needs_kafka and not core.kafka_up():
                raise ApiError(503, SERVER_UNAVAILABLE, f"{SERVER_UNAV} Kafka does not answer.")
            if capped:
                gate.enter()
            try:
                response = await handler(request)
            finally:
                if capped:
                    gate.leave()
            status = response.status
            return response
        except ApiError as exc:
            status = exc.status
            raise
        finally:
            metrics.requests.labels(route.handler, str(status)).inc()
            metrics.latency.labels(route.handler).observe(time.monotonic() - started)

    return wrapped


def build_app(
    handlers: Handlers, auth: RegistryAuthenticator | None, extra: Sequence[object] = ()
) -> web.Application:
    """``extra``: further objects whose methods the route table names (the first that has the
    named method serves the route)."""
    # the body limit is ours (413 with MR's code); aiohttp's own is set past it
    app = web.Application(
        middlewares=[mr_errors], client_max_size=handlers.cfg.max_request_bytes + 1
    )
    for route in ROUTES:
        owner = next(o for o in (handlers, *extra) if hasattr(o, route.handler))
        handler = getattr(owner, route.handler)
        app.router.add_route(route.method, route.path, _wrap(route, handler, auth, handlers))
    return app
