"""Topics through Kafka's AdminClient: list, describe, create, delete, and Kafka readiness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from api.plumbing.kafka_renew import Renewing
from appconfig.kafka_security import client_base

log = logging.getLogger(__name__)


class TopicExistsError(Exception):
    pass


class NoSuchTopicError(Exception):
    pass


class KafkaUnavailableError(Exception):
    pass


class TopicAdmin:
    """Blocking AdminClient calls run in threads; a short cache of names for publish checks."""

    def __init__(self, bootstrap: str, *, timeout_s: float = 10.0) -> None:
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self.renewing: Renewing[AdminClient] = Renewing(
            "api-admin",
            lambda: AdminClient({**client_base(bootstrap), "client.id": "iot-api"}),
        )  # replaced when its calls keep timing out (issue 32)
        self._known: set[str] = set()
        self._known_at = 0.0

    def start(self) -> None:
        self.renewing.start()

    def close(self) -> None:
        self.renewing.close()  # AdminClient has no close(): dropped, librdkafka frees it

    def _names_blocking(self, timeout_s: float) -> dict[str, int]:
        try:
            meta = self.renewing.call(lambda a: a.list_topics(timeout=timeout_s), fresh_retry=True)
        except KafkaException as exc:
            raise KafkaUnavailableError(str(exc)) from exc
        return {name: len(t.partitions) for name, t in meta.topics.items() if t.error is None}

    async def topics(self) -> dict[str, int]:
        """Topic name -> partition count (internal topics included, as MR's list)."""
        names = await asyncio.to_thread(self._names_blocking, self._timeout_s)
        self._known = set(names)
        self._known_at = time.monotonic()
        return names

    async def exists(self, topic: str, settle_s: float = 3.0) -> bool:
        """Cached for a second; a miss asks Kafka again for up to ``settle_s`` (a topic just
        created elsewhere takes a moment to reach every broker's metadata)."""
        if topic in self._known and time.monotonic() - self._known_at < 1.0:
            return True
        deadline = time.monotonic() + settle_s
        while topic not in await self.topics():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def ready(self) -> bool:
        try:
            await asyncio.to_thread(self._names_blocking, 3.0)
        except KafkaUnavailableError:
            return False
        return True

    async def create(self, topic: str, partitions: int, replicas: int) -> None:
        """``partitions``/``replicas`` 0 = the broker's defaults; replicas clamped to brokers."""

        def run(admin: AdminClient) -> None:
            brokers = len(admin.list_topics(timeout=self._timeout_s).brokers) or 1
            new = NewTopic(
                topic,
                num_partitions=partitions or -1,
                replication_factor=min(replicas, brokers) if replicas else -1,
            )
            future = admin.create_topics([new], operation_timeout=self._timeout_s)[topic]
            _settle(
                future, self._timeout_s, KafkaError.TOPIC_ALREADY_EXISTS, TopicExistsError(topic)
            )

        await self._call(run)
        await self._wait_visible(topic)  # listed and publishable when the answer leaves

    async def ensure(self, topic: str, partitions: int) -> None:
        """Create ``topic`` unless it exists (publish's auto-create; one that exists but is not
        listed yet answers TOPIC_ALREADY_EXISTS, which is fine)."""
        if await self.exists(topic, settle_s=0):
            return
        with contextlib.suppress(TopicExistsError):  # created by another request meanwhile
            await self.create(topic, partitions, 0)

    async def _wait_visible(self, topic: str) -> None:
        for _ in range(50):
            names = await asyncio.to_thread(self._names_blocking, self._timeout_s)
            if topic in names:
                self._known.add(topic)
                return
            await asyncio.sleep(0.1)

    async def delete(self, topic: str) -> None:
        def run(admin: AdminClient) -> None:
            future = admin.delete_topics([topic], operation_timeout=self._timeout_s)[topic]
            _settle(
                future, self._timeout_s, KafkaError.UNKNOWN_TOPIC_OR_PART, NoSuchTopicError(topic)
            )

        await self._call(run)
        self._known.discard(topic)

    async def _call(self, run: Callable[[AdminClient], None]) -> None:
        """``run`` on the admin client in a thread; its bounded wait running out is Kafka
        being unavailable (503), after counting against the client."""
        try:
            await asyncio.to_thread(self.renewing.call, run)
        except TimeoutError as exc:
            raise KafkaUnavailableError(f"Kafka did not answer in {self._timeout_s} s") from exc


def _settle(future: Future[None], timeout_s: float, code: int, refusal: Exception) -> None:
    """Wait for an admin operation: ``refusal`` when Kafka answers ``code`` (the topic exists,
    or does not), any other failure as Kafka being unavailable. The future's own TimeoutError
    is left to the caller's :class:`Renewing` (it counts it) and maps to 503 like the rest."""
    try:
        future.result(timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() == code:
            raise refusal from exc
        raise KafkaUnavailableError(str(exc)) from exc
