"""sawmill's endpoints (contract §10) on our Kafka, with its bugs fixed.

Names and shapes as sawmill's: ``/push``, ``/consume``, ``/latest``, ``/latest_time``,
``/realtime``, ``/delete``, ``/topics/``, ``/connection/``, ``/spec``; its ``token`` header
carries our credentials. ``/realtime`` is a real stream (Server-Sent Events) that resumes from
``Last-Event-ID``; ``/spec`` is the OpenAPI document, served by ``api.app``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from api.config import ApiConfig
from api.errors import ApiError
from api.plumbing.access import Access
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.framing import Record
from api.plumbing.kafka_admin import KafkaUnavailableError, NoSuchTopicError, TopicAdmin
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.params import check_topic_name
from api.plumbing.topic_access import PRINCIPAL, TopicGuard
from api.sawmill import kafka as sawmill_kafka
from api.sawmill import model as sawmill
from api.sawmill.events import stream_events
from api.sawmill.model import SawmillError

log = logging.getLogger(__name__)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


class SawmillHandlers:
    def __init__(
        self,
        cfg: ApiConfig,
        admin: TopicAdmin,
        publisher: KafkaPublisher,
        auth: RegistryAuthenticator | None,
    ) -> None:
        self.cfg = cfg
        self.admin = admin
        self.publisher = publisher
        self.auth = auth
        self.guard = TopicGuard(auth)  # the same tenant and ACL rules as MR's /events
        self.closing = asyncio.Event()
        self.stream_watch: sawmill_kafka.StreamWatch | None = None  # streams' stall check

    def close(self) -> None:
        """The service stops: open streams end (clients resume elsewhere from their id)."""
        self.closing.set()

    async def _guarded(
        self,
        request: web.Request,
        run: Callable[[], Awaitable[web.StreamResponse]],
        *,
        token: bool = True,
        access: Access = Access.READ,
    ) -> web.StreamResponse:
        """sawmill's token check, the caller's right to the path's topic (``access``: a tenant's
        key reaches only its tenant's topics, as on ``/events``) and sawmill's error shapes."""
        try:
            if token and self.auth is not None:
                header = sawmill.authorization_from(
                    request.headers.get("token"), request.headers.get("Authorization")
                )
                if header is None:
                    return _json(sawmill.MISSING_TOKEN, 400)
                principal = await self.auth.principal({"Authorization": header})
                if principal is None:
                    return _json(sawmill.INVALID_TOKEN, 401)
                request[PRINCIPAL] = principal
                if "topic" in request.match_info:
                    self.guard.check(request, self._topic(request), access)
            return await run()
        except SawmillError as exc:
            return _json(exc.body, exc.status)
        except ApiError as exc:  # a bad topic name
            return _json({"status": "error", "message": exc.message}, exc.status)
        except NoSuchTopicError as exc:
            return _json(sawmill.topic_not_found(str(exc)).body, 404)
        except KafkaUnavailableError:
            return _json(sawmill.KAFKA_DOWN, 503)

    def _topic(self, request: web.Request) -> str:
        return check_topic_name(request.match_info["topic"])

    # --- endpoints -------------------------------------------------------------------------

    async def sawmill_push(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            topic = self._topic(request)
            body = await request.read()
            value = sawmill.push_value(body)
            if len(value) > self.cfg.max_message_bytes:
                raise sawmill.error(413, "Message size exceeds the default size.")
            if self.cfg.auto_create_topics:
                await self.admin.ensure(topic, self.cfg.default_partitions)
            elif not await self.admin.exists(topic):
                raise sawmill.topic_not_found(topic)
            outcome = await self.publisher.publish(topic, [Record(None, value)])
            if outcome.error is not None:
                return _json(sawmill.KAFKA_DOWN, 503)
            return _json(sawmill.PUSHED)

        return await self._guarded(request, run, access=Access.WRITE)

    async def sawmill_consume(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            topic = self._topic(request)
            start = sawmill.parse_start(request.query.get("offset"))
            limit = self._limit(request)
            found, starts = await asyncio.to_thread(
                sawmill_kafka.read_from, self.cfg.kafka_bootstrap, topic, start, limit
            )
            return self._messages(found, starts, limit)

        return await self._guarded(request, run)

    async def sawmill_latest(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            topic = self._topic(request)
            count = sawmill.parse_count(
                request.query.get("offset"), sawmill.DEFAULT_LATEST, "offset"
            )
            count = min(count, self.cfg.poll_limit)
            found = await asyncio.to_thread(
                sawmill_kafka.read_latest, self.cfg.kafka_bootstrap, topic, count
            )
            newest = sawmill.in_time_order(found)[-count:] if count else []
            return _json([sawmill.decoded(m.value) for m in newest])

        return await self._guarded(request, run)

    async def sawmill_latest_time(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            topic = self._topic(request)
            back_s = sawmill.parse_count(
                request.query.get("offset"), sawmill.DEFAULT_SINCE_S, "offset"
            )
            limit = self._limit(request)
            since_ms = int(time.time() * 1000) - back_s * 1000
            found, starts = await asyncio.to_thread(
                sawmill_kafka.read_since, self.cfg.kafka_bootstrap, topic, since_ms, limit
            )
            return self._messages(found, starts, limit)

        return await self._guarded(request, run)

    def _limit(self, request: web.Request) -> int:
        """Ours (sawmill reads to the end): at most ``poll_limit`` a request; 0 = that."""
        asked = sawmill.parse_count(request.query.get("limit"), 0, "limit")
        return min(asked, self.cfg.poll_limit) or self.cfg.poll_limit

    def _messages(
        self, found: list[sawmill.Message], starts: dict[int, int], limit: int
    ) -> web.Response:
        """The first ``limit`` in time order; where to go on is in ``X-Next-Offset``."""
        kept = sawmill.in_time_order(found)[:limit]
        positions = sawmill.next_positions(starts, kept)
        return _json(
            [sawmill.decoded(m.value) for m in kept],
            headers={"X-Next-Offset": sawmill.format_vector(positions)},
        )

    async def sawmill_realtime(self, request: web.Request) -> web.StreamResponse:
        follower: sawmill_kafka.Follower | None = None

        async def run() -> web.StreamResponse:
            nonlocal follower
            topic = self._topic(request)
            start = sawmill.resume_start(
                request.headers.get("Last-Event-ID"), request.query.get("offset")
            )
            follower = await asyncio.to_thread(
                sawmill_kafka.Follower, self.cfg.kafka_bootstrap, topic, start, self.stream_watch
            )
            return await self._stream(request, follower)

        try:
            return await self._guarded(request, run)
        finally:
            if follower is not None:
                await asyncio.to_thread(follower.close)

    async def _stream(
        self, request: web.Request, follower: sawmill_kafka.Follower
    ) -> web.StreamResponse:
        positions = dict(follower.positions)

        def render(batch: list[sawmill.Message]) -> list[bytes]:
            chunks = []
            for m in batch:  # each event's id: the position right after it
                positions[m.partition] = m.offset + 1
                chunks.append(sawmill.sse_event(sawmill.format_vector(positions), m.value))
            return chunks

        return await stream_events(
            request, follower, render, self.closing, self.cfg.sse_heartbeat_s
        )

    async def sawmill_delete(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            topic = self._topic(request)
            try:
                await self.admin.delete(topic)
            except NoSuchTopicError:
                raise sawmill.error(400, f"topic {topic} not found") from None
            return _json({"status": "pass", "message": f"topic {topic} deleted"})

        return await self._guarded(request, run, access=Access.MANAGE)

    async def sawmill_topics(self, request: web.Request) -> web.StreamResponse:
        async def run() -> web.StreamResponse:
            names = await self.admin.topics()
            mine = self.guard.visible(request, [n for n in names if not n.startswith("__")])
            return _json(sorted(mine))

        return await self._guarded(request, run)

    async def sawmill_connection(self, request: web.Request) -> web.StreamResponse:
        where = self.cfg.kafka_bootstrap
        if await self.admin.ready():
            return _json({"status": "success", "message": f"listening on {where}"})
        return _json({"status": "error", "message": f"no brokers available on {where}"}, 503)
