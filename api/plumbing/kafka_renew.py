"""A long-lived Kafka client that is replaced when it stops answering (issue 32).

librdkafka's admin client can wedge for good when Kafka restarts under it: after a kill -9 and
restart, a long-lived AdminClient answers metadata and ListGroups again but never completes a
ListConsumerGroupOffsets (the group-coordinator request) any more, while a fresh client in the
same process answers it in milliseconds. So every call through :class:`Renewing` waits a
bounded time, and a client whose calls time out ``failures`` times in a row is dropped and made
anew (at most once per ``min_gap_s``, so that a Kafka that is really down costs one new client
per gap, not one per call). What happened is counted per client (``renewals``, ``failures``),
for ``/metrics`` (:class:`RenewalCollector`).

A long-lived consumer raises nothing when it wedges: it fetches nothing while its partitions'
high watermarks move on. Its :class:`~kafka_watch.stall.StallJudge` (``kafka_watch``, shared by
every service) finds it; its owner (the console's tailer, the operator feed, MR's and the
queues' group members) replaces it, and the judge counts it on the same ``/metrics`` family."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, wait
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from kafka_watch.retired import retire

log = logging.getLogger(__name__)
C = TypeVar("C")
R = TypeVar("R")
K = TypeVar("K")


def timed_out(exc: BaseException) -> bool:
    """A bounded wait ran out: a future's TimeoutError or librdkafka's own timeout."""
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)
    return False


def wait_all(futures: Mapping[K, Future[Any]], timeout_s: float) -> dict[K, Any]:
    """Each future's result or its exception, all awaited together within one bounded wait
    (requests sent at once, not one after the other). One left unanswered raises TimeoutError,
    one that timed out in librdkafka raises its error: :meth:`Renewing.call` counts either
    against its client (a wedged admin client answers every request with _TIMED_OUT)."""
    _, pending = wait(list(futures.values()), timeout_s)
    if pending:
        raise TimeoutError(f"{len(pending)} of {len(futures)} Kafka requests unanswered")
    found = {k: f.exception() or f.result() for k, f in futures.items()}
    if late := [r for r in found.values() if isinstance(r, BaseException) and timed_out(r)]:
        raise late[0]
    return found


class Renewing(Generic[C]):
    """One long-lived Kafka client (made by ``make``), replaced when its calls keep timing out.

    Use :meth:`call` for every request (a bounded wait inside ``fn``): it returns ``fn``'s
    answer or raises its error, after counting a timeout against the client."""

    def __init__(
        self,
        name: str,
        make: Callable[[], C],
        *,
        failures: int = 2,
        window_s: float = 60.0,
        min_gap_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._make = make
        self._threshold = failures
        self._window_s = window_s
        self._min_gap_s = min_gap_s
        self._clock = clock
        self._lock = threading.Lock()
        self._client: C | None = None
        self._made_at = 0.0
        self._timeouts: deque[float] = deque()  # when the current client's calls timed out
        self.renewals = 0  # clients replaced since start

    def start(self) -> None:
        with self._lock:
            self._client = self._make()
            self._made_at = self._clock()

    def close(self) -> None:
        with self._lock:
            old, self._client = self._client, None
        retire(old)

    @property
    def client(self) -> C:
        found = self._client
        assert found is not None, f"{self.name}: start() first"
        return found

    @property
    def failures(self) -> int:
        """The current client's calls that timed out within the last ``window_s``."""
        with self._lock:
            self._forget()
            return len(self._timeouts)

    @property
    def healthy(self) -> bool:
        return self.failures == 0

    def _forget(self) -> None:
        while self._timeouts and self._clock() - self._timeouts[0] > self._window_s:
            self._timeouts.popleft()

    def call(self, fn: Callable[[C], R], *, fresh_retry: bool = False) -> R:
        """``fn(client)``. With ``fresh_retry``, a call that times out is tried once more on a
        new client at once (unless one was made less than ``min_gap_s`` ago), for requests
        any broker can answer (metadata): librdkafka sends them to a broker whose connection
        is up, and a node cut off without a word keeps its connection "up" until the socket
        timeout, while a new client asks the first node that completes its handshake, which a
        silent one never does (issue 33)."""
        client = self.client
        try:
            return fn(client)
        except Exception as exc:  # noqa: BLE001 (raised again below)
            # without its frames: they hold the client, which must not be freed wherever the
            # error ends up (an event loop), see retire()
            error = exc.with_traceback(None)
        renewed = timed_out(error) and self._timed_out(client, error, fresh_retry)
        del client
        if not (fresh_retry and renewed):
            raise error
        return self.call(fn)  # on the new client, its own timeout counted against it

    def _timed_out(self, client: C, exc: BaseException, now: bool = False) -> bool:
        """Count a timeout against ``client``; True if it was replaced (``now``: whatever the
        count, gap allowing)."""
        old: C | None = None
        with self._lock:
            if client is not self._client:
                return now  # an older client, already replaced: a retry takes the new one
            self._timeouts.append(self._clock())
            self._forget()
            if (
                len(self._timeouts) < self._threshold and not now
            ) or self._clock() - self._made_at < self._min_gap_s:
                return False
            old, self._client = self._client, self._make()
            self._made_at = self._clock()
            self._timeouts.clear()
            self.renewals += 1
        log.warning(
            "Kafka client %s stopped answering (%s); replaced it by a new one (%d so far)",
            self.name, exc or type(exc).__name__, self.renewals,
        )  # fmt: skip
        retire(old)
        return True


class Renewed(Protocol):
    """What :class:`RenewalCollector` reads of a renewed client (:class:`Renewing`, or the
    :class:`StallJudge` of a long-lived consumer)."""

    @property
    def name(self) -> str: ...

    @property
    def renewals(self) -> int: ...

    @property
    def failures(self) -> int: ...


class RenewalCollector(Collector):
    """``iot_api_kafka_client_renewals_total{client}`` and ``iot_api_kafka_client_failing``
    (timeouts in a row now, or a consumer's partitions behind without progress) for the
    clients ``clients()`` names."""

    def __init__(self, clients: Callable[[], Iterable[Renewed]]) -> None:
        self._clients = clients

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        renewals = CounterMetricFamily(
            "iot_api_kafka_client_renewals",
            "Long-lived Kafka clients replaced because their calls kept timing out, or a "
            "consumer stalled (behind its partitions' high watermarks without progress)",
            labels=["client"],
        )
        failing = GaugeMetricFamily(
            "iot_api_kafka_client_failing",
            "Calls of a long-lived Kafka client that timed out in the last minute, or a "
            "consumer's partitions behind without progress at its last check (0: it answers)",
            labels=["client"],
        )
        for found in self._clients():
            renewals.add_metric([found.name], found.renewals)
            failing.add_metric([found.name], found.failures)
        yield renewals
        yield failing
