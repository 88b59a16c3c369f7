"""Queues with per-message acknowledgement over HTTP (kmq's model; docs/api.md "Queues").

``PUT /queues/{q}`` creates the queue's topic and its dead-letter topic; ``POST .../messages``
sends (MR's framings); ``POST .../receive`` hands out up to ``max`` messages, each with a
receipt handle, invisible for ``visibility`` seconds; ``POST .../ack`` and ``.../nack`` answer
for each handle. Everything that decides a message's fate is a marker in Kafka, so any instance
takes any request and a restarted one carries on.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import orjson
from aiohttp import web

from api.config import ApiConfig
from api.errors import (
    CONSUME_MSG_ERROR,
    INCORRECT_JSON,
    ApiError,
    no_such_topic,
    partial_publish,
)
from api.mr.consumers import close_all
from api.plumbing.framing import Record, parse_body
from api.plumbing.kafka_admin import TopicAdmin
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.params import check_topic_name
from api.queues import model as qm
from api.queues.kafka import MarkerTracker, QueueConsumer, Received
from api.queues.settings import QueueSettingsStore
from kafka_watch.stall import StallJudge, StallTally

log = logging.getLogger(__name__)


def _json(data: object) -> web.Response:
    return web.Response(body=orjson.dumps(data), content_type="application/json")


def _bad(message: str) -> ApiError:
    return ApiError(400, INCORRECT_JSON, message)


class QueueHandlers:
    def __init__(
        self,
        cfg: ApiConfig,
        admin: TopicAdmin,
        publisher: KafkaPublisher,
        draining: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.draining = draining if draining is not None else threading.Event()
        self.admin = admin
        self.publisher = publisher
        self.tracker = MarkerTracker(
            cfg.kafka_bootstrap,
            cfg.queue_markers_topic,
            partitions=cfg.queue_markers_partitions,
            grace_ms=cfg.queue_clock_grace_ms,
            max_bytes=cfg.max_message_bytes,
            stall_s=cfg.kafka_consumer_stall_s,
        )
        self.settings = QueueSettingsStore(
            cfg.kafka_bootstrap, cfg.queue_settings_topic, cfg.kafka_consumer_stall_s
        )
        self._defaults = qm.QueueSettings(cfg.queue_visibility_s, cfg.queue_max_deliveries)
        self._consumers: dict[str, QueueConsumer] = {}
        # the queue members replaced when they stall, on /metrics (one name for all queues)
        self.stall = StallTally("queue-consumers", self._judges)
        self._creating: dict[str, asyncio.Lock] = {}
        self._dead_letter_ready: set[str] = set()
        self._keeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.tracker.start()
        self.settings.start()
        self._keeper = asyncio.get_running_loop().create_task(self._keep())

    async def close(self) -> None:
        await close_all(self._consumers, self._keeper)
        await asyncio.to_thread(self.tracker.stop)
        await asyncio.to_thread(self.settings.stop)

    async def _keep(self) -> None:
        """Idle queue consumers take part in rebalances; long unused ones are closed (what
        they read ahead is uncommitted: read again by the next)."""
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            for name, consumer in list(self._consumers.items()):
                try:
                    if now - consumer.last_used > self.cfg.consumer_idle_s:
                        if not consumer.lock.locked():
                            del self._consumers[name]
                            await asyncio.to_thread(consumer.close_blocking)
                    else:
                        await consumer.keep_alive()
                except Exception:
                    log.exception("queue keeper: %s", name)

    async def _consumer(self, queue: str) -> QueueConsumer:
        found = self._consumers.get(queue)
        if found is not None:
            return found
        async with self._creating.setdefault(queue, asyncio.Lock()):
            found = self._consumers.get(queue)
            if found is None:
                judge = StallJudge(f"queue {queue}", self.cfg.kafka_consumer_stall_s)
                found = await asyncio.to_thread(
                    QueueConsumer, self.cfg.kafka_bootstrap, queue, draining=self.draining,
                    stall=judge, tally=self.stall,
                )  # fmt: skip
                self._consumers[queue] = found
        return found

    def _judges(self) -> list[StallJudge]:
        return [c.stall for c in list(self._consumers.values()) if c.stall is not None]

    async def _existing(self, request: web.Request) -> str:
        queue = check_topic_name(request.match_info["queue"])
        check_topic_name(qm.dead_letter_topic(queue))
        if not await self.admin.exists(queue):
            raise no_such_topic(queue)
        return queue

    async def _settings_of(self, queue: str) -> qm.QueueSettings:
        """The queue's own settings, else the service's defaults; 503 until the settings
        topic was read to its end (a restarted instance must not apply the defaults)."""
        if not self.settings.ready.is_set():
            await asyncio.to_thread(self.settings.ready.wait, 30.0)
            if not self.settings.ready.is_set():
                raise ApiError(503, CONSUME_MSG_ERROR, "Queue settings not read yet.")
        return self.settings.get(queue) or self._defaults

    async def _change_settings(
        self, queue: str, visibility: object, max_deliveries: object
    ) -> qm.QueueSettings:
        current = await self._settings_of(queue)
        if visibility is None and max_deliveries is None:
            return current
        wanted = qm.settings_change(
            current, visibility, max_deliveries, self.cfg.queue_visibility_max_s
        )
        if isinstance(wanted, str):
            raise _bad(wanted)
        if wanted != current:
            outcome = await self.publisher.publish(
                self.cfg.queue_settings_topic, [Record(queue.encode(), wanted.encode())]
            )
            if outcome.error is not None:
                raise ApiError(503, CONSUME_MSG_ERROR, f"Not recorded: {outcome.error}")
            self.settings.applied(queue, wanted)
        return wanted

    async def _describe(self, queue: str, partitions: int) -> dict[str, object]:
        own = await self._settings_of(queue)
        return {
            "queue": queue,
            "deadLetterTopic": qm.dead_letter_topic(queue),
            "partitions": partitions,
            "maxDeliveries": own.max_deliveries,
            "visibilityTimeoutS": own.visibility_s,
        }

    # --- endpoints -------------------------------------------------------------------------

    async def queue_create(self, request: web.Request) -> web.Response:
        queue = check_topic_name(request.match_info["queue"])
        dead = check_topic_name(qm.dead_letter_topic(queue))
        partitions = request.query.get("partitions", "0")
        if not partitions.isdigit():
            raise _bad("partitions must be a whole number")
        for topic in (queue, dead):
            await self.admin.ensure(topic, int(partitions) or self.cfg.default_partitions)
        self._dead_letter_ready.add(queue)
        query = request.query
        await self._change_settings(queue, query.get("visibility"), query.get("maxDeliveries"))
        return _json(await self._describe(queue, (await self.admin.topics()).get(queue, 0)))

    async def queue_info(self, request: web.Request) -> web.Response:
        queue = await self._existing(request)
        return _json(await self._describe(queue, (await self.admin.topics()).get(queue, 0)))

    async def queue_settings(self, request: web.Request) -> web.Response:
        """Change a queue's visibility timeout and maximum deliveries (kept in Kafka): later
        receives use them; messages in flight keep the maximum they were handed out with."""
        queue = await self._existing(request)
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            raise _bad('the body must be {"visibilityTimeoutS": s, "maxDeliveries": n}')
        await self._change_settings(
            queue, body.get("visibilityTimeoutS"), body.get("maxDeliveries")
        )
        return _json(await self._describe(queue, (await self.admin.topics()).get(queue, 0)))

    async def queue_send(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        queue = await self._existing(request)
        records = parse_body(
            request.headers.get("Content-Type"),
            await request.read(),
            request.query.get("partitionKey"),
            max_message_bytes=self.cfg.max_message_bytes,
            max_request_bytes=self.cfg.max_request_bytes,
        )
        outcome = await self.publisher.publish(queue, records)
        if outcome.error is not None:
            raise partial_publish(queue, outcome.acked, outcome.error)
        elapsed_ms = int((time.monotonic() - started) * 1000)
        return _json({"serverTimeMs": elapsed_ms, "count": len(records)})

    async def queue_receive(self, request: web.Request) -> web.Response:
        queue = await self._existing(request)
        count = request.query.get("max", "1")
        if not count.isdigit() or not 1 <= int(count) <= self.cfg.poll_limit:
            raise ApiError(400, CONSUME_MSG_ERROR, f"max must be 1-{self.cfg.poll_limit}")
        own = await self._settings_of(queue)
        visibility = qm.visibility_ms(
            request.query.get("visibility"), own.visibility_s, self.cfg.queue_visibility_max_s
        )
        if visibility is None:
            raise ApiError(
                400,
                CONSUME_MSG_ERROR,
                f"visibility must be seconds in (0, {self.cfg.queue_visibility_max_s}]",
            )
        wait = request.query.get("timeout", str(self.cfg.poll_timeout_ms))
        if not wait.isdigit():
            raise ApiError(400, CONSUME_MSG_ERROR, "timeout must be milliseconds")
        wait_s = min(int(wait), self.cfg.poll_timeout_max_ms) / 1000
        if queue not in self._dead_letter_ready:  # a queue made as a plain topic
            await self.admin.ensure(qm.dead_letter_topic(queue), self.cfg.default_partitions)
            self._dead_letter_ready.add(queue)
        consumer = await self._consumer(queue)
        async with consumer.lock:
            fetched = await consumer.fetch(int(count), wait_s)
            if not fetched:
                return _json({"messages": []})
            handles = await self._start(queue, fetched, visibility, own.max_deliveries)
            await consumer.commit(fetched)  # the markers own them now
        return _json(
            {
                "messages": [
                    {
                        "receiptHandle": h.encode(),
                        "message": r.value.decode("utf-8", "replace"),
                        "deliveryCount": h.count,
                        "partition": r.partition,
                        "offset": r.offset,
                        "visibleAgainMs": h.deadline_ms,
                    }
                    for h, r in zip(handles, fetched, strict=True)
                ]
            }
        )

    async def _start(
        self, queue: str, fetched: list[Received], visibility: int, max_deliveries: int
    ) -> list[qm.Handle]:
        deadline = int(time.time() * 1000) + visibility
        handles = [
            qm.Handle(queue, r.partition, r.offset, r.token, deadline, r.count + 1) for r in fetched
        ]
        markers = [
            Record(
                qm.marker_key(queue, r.partition),
                qm.start_marker(h, max_deliveries, r.key, r.value),
            )
            for h, r in zip(handles, fetched, strict=True)
        ]
        outcome = await self.publisher.publish(self.cfg.queue_markers_topic, markers)
        if outcome.error is not None:  # not handed out; the next try writes the same tokens
            raise ApiError(503, CONSUME_MSG_ERROR, f"Queue markers not written: {outcome.error}")
        return handles

    async def queue_ack(self, request: web.Request) -> web.Response:
        return await self._answer(request, qm.ACK, "acked")

    async def queue_nack(self, request: web.Request) -> web.Response:
        return await self._answer(request, qm.NACK, "nacked")

    async def _answer(self, request: web.Request, kind: str, done: str) -> web.Response:
        """Each handle's answer counts only if Kafka holds it by the handle's deadline: then
        the owner reads it before it acts on that deadline (its tick comes later)."""
        queue = check_topic_name(request.match_info["queue"])
        texts = qm.handles_of(await request.read())
        if texts is None:
            raise _bad('the body must be {"receiptHandles": ["...", ...]}')
        now = int(time.time() * 1000)
        status: dict[int, str] = {}
        writes: list[tuple[int, qm.Handle]] = []
        for i, text in enumerate(texts):
            handle = qm.decode_handle(text)
            if handle is None or handle.queue != queue:
                status[i] = "invalid"
            elif now > handle.deadline_ms:
                status[i] = "expired"
            else:
                writes.append((i, handle))
        if writes:
            outcome = await self.publisher.publish(
                self.cfg.queue_markers_topic,
                [
                    Record(qm.marker_key(h.queue, h.partition), qm.answer_marker(kind, h))
                    for _i, h in writes
                ],
            )
            if outcome.error is not None:
                raise ApiError(503, CONSUME_MSG_ERROR, f"Not recorded: {outcome.error}")
            recorded = int(time.time() * 1000)
            for i, h in writes:
                status[i] = done if recorded <= h.deadline_ms else "expired"
        return _json(
            {
                "results": [
                    {"receiptHandle": text, "status": status[i]} for i, text in enumerate(texts)
                ]
            }
        )
