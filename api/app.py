"""The aiohttp application: MR's events and topics over Kafka (``api.mr.handlers``), health,
metrics, OpenAPI.

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

from aiohttp import web
from confluent_kafka import KafkaException
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import __version__
from api.config import ApiConfig
from api.errors import (
    ACCESS_NOT_PERMITTED,
    AUTH_FAILURE,
    GENERIC_INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    METHOD_NOT_ALLOWED_TEXT,
    NOT_FOUND,
    RESOURCE_NOT_FOUND,
    SERVER_UNAV,
    SERVER_UNAVAILABLE,
    ApiError,
    error_body,
)
from api.mr.consumers import ConsumerPool
from api.mr.handlers import NO_CACHE, MrRoutes, json_response
from api.mr.json_metrics import CacheCounts, render, wants_json
from api.mr.metrics import ApiMetrics
from api.openapi import document
from api.operator.model import OPERATOR_TAGS
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.kafka_admin import (
    KafkaUnavailableError,
    TopicAdmin,
)
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.limits import LONG_POLL_HANDLERS, SSE_HANDLERS, Gate
from api.plumbing.topic_access import PRINCIPAL, TopicGuard
from api.routes import ROUTES, Route

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROTECTED_TAGS = (
    frozenset({"events", "topics", "queues", "apiKeys"}) | OPERATOR_TAGS
)  # sawmill: `token`
KAFKA_TAGS = frozenset({"events", "topics", "queues"}) | OPERATOR_TAGS  # 503 at once: Kafka down


async def _always() -> bool:
    return True


def error_response(error: ApiError) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="iot-api"'} if error.status == 401 else None
    return json_response(error.body(), error.status, headers)


class Handlers(MrRoutes):
    """Every route of the core app: MR's (its base class's) and the service's own."""

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
        self.kafka_ready: Callable[[], Awaitable[bool]] = _always  # and this one

    # --- service ---------------------------------------------------------------------------

    async def healthz(self, _request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def readyz(self, _request: web.Request) -> web.Response:
        # the probe's verdict, not a request of its own: one of a cluster's nodes gone silent
        # must not make readiness wait on it (issue 33; api/plumbing/kafka_health.py)
        if await self.kafka_ready():
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
