"""Consumer groups' committed offsets, asked in a child process of their own.

librdkafka's admin ListConsumerGroupOffsets crashes its whole process (SIGSEGV in
``rd_kafka_cgrp_op`` from ``rd_kafka_handle_OffsetFetch``: an admin client has no consumer
group, and the NOT_COORDINATOR answer asks it to look its coordinator up again) when a group's
coordinator moved, as when its Kafka node shuts down cleanly in a 3-node cluster
(confluentinc/librdkafka#5040, open; iot-api died so in 3 of 3 chaos runs of the active
controller's restart, bench/results/chaos.md). The console's group listing is the appliance's
only caller, so it asks in a child process (spawned, not forked: iot-api has threads): a crash
there costs a new child and one retry, never iot-api. A child that does not answer in time is
killed and replaced too, and so is one whose admin client's requests time out (a wedged
admin client, librdkafka#5511, as ``Renewing`` replaces one; one kept after its requests timed
out hung 9 s, then aborted: librdkafka#4605's assertion on late answers), and so is one that
lived while Kafka did not answer (:meth:`forget`). Counted for ``/metrics`` as a renewed client
(``name``, ``renewals``, ``failures``)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from concurrent.futures import wait
from multiprocessing.connection import Connection
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

Offsets = list[tuple[str, int, int]]  # (topic, partition, committed offset >= 0)
Failure = tuple[int, str]  # librdkafka's error code and text, for a group not read
_UNANSWERED = (KafkaError._TIMED_OUT, "Local: Timed out")
_TIMEOUTS = (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)
CONNECTIONS = 4  # the child's admin clients, each its own connection to Kafka (see ask)


class GroupOffsetsError(RuntimeError):
    """The child did not answer (it died, or was too slow and was killed)."""


def ask(admins: Sequence[Any], groups: list[str], timeout_s: float) -> dict[str, Offsets | Failure]:
    """Every group's committed offsets, asked at once within one bounded wait, the groups dealt
    over ``admins`` in turn: Kafka answers one request at a time per connection, and one
    OffsetFetch per group (librdkafka asks no more), so under load one connection's queue is
    what a read waits on."""
    futures = {
        g: admins[i % len(admins)].list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g)], request_timeout=timeout_s
        )[g]
        for i, g in enumerate(groups)
    }
    wait(list(futures.values()), timeout_s + 1.0)
    answer: dict[str, Offsets | Failure] = {}
    for group, future in futures.items():
        if not future.done():
            answer[group] = _UNANSWERED
        elif isinstance(exc := future.exception(), KafkaException):
            answer[group] = (exc.args[0].code(), exc.args[0].str())
        elif exc is not None:
            answer[group] = (-1, repr(exc))
        else:
            parts = future.result().topic_partitions or []
            answer[group] = [(p.topic, p.partition, p.offset) for p in parts if p.offset >= 0]
    return answer


def timed_out(answer: dict[str, Offsets | Failure]) -> bool:
    """Some group unanswered: the child's admin client may be wedged (librdkafka#5511)."""
    return any(isinstance(f, tuple) and f[0] in _TIMEOUTS for f in answer.values())


def _serve(conn: Connection, config: dict[str, Any], timeout_s: float) -> None:
    """The child: CONNECTIONS admin clients, one request (a list of group ids) at a time."""
    admins = [AdminClient(config) for _ in range(CONNECTIONS)]
    while (groups := conn.recv()) is not None:
        conn.send(ask(admins, groups, timeout_s))


class GroupOffsets:
    name = "console-group-offsets"

    def __init__(self, config: dict[str, Any], timeout_s: float) -> None:
        self._config = config
        self._timeout_s = timeout_s
        self._lock = threading.Lock()  # one request at a time (the page and the sampler)
        self._child: Any = None  # multiprocessing's Process (its type is context-bound)
        self._conn: Connection | None = None
        self.renewals = 0  # children replaced (died, too slow, or Kafka went away under it)
        self.failures = 0  # 1 while the last request failed

    def committed(self, groups: list[str]) -> dict[str, Offsets | Failure]:
        """Each group's committed offsets, or the error that kept it from being read. A child
        that dies or hangs is replaced and asked once more; GroupOffsetsError if that fails."""
        with self._lock:
            try:
                found = self._ask(groups)
            except GroupOffsetsError as exc:
                log.warning("console: the group offsets' child process %s; asking a new one", exc)
                try:
                    found = self._ask(groups)
                except GroupOffsetsError as again:
                    self.failures = 1
                    log.warning(
                        "console: the new group offsets' child process %s too; another one "
                        "answers the next call", again,
                    )  # fmt: skip
                    raise
            self.failures = 0
            return found

    def forget(self) -> None:
        """Kafka does not answer: drop the child, so that the first request once Kafka is back
        starts from a fresh one. An admin client alive across a Kafka restart may time out on
        every group-coordinator request after it (librdkafka#5511): in 2 of 2 kill -9 runs the
        old child's first request after the restart timed out (5 s lost before the new child)."""
        with self._lock:
            if self._child is not None:
                log.info("console: Kafka does not answer; the group offsets' child is replaced")
                self._drop(renewal=True)

    def _ask(self, groups: list[str]) -> dict[str, Offsets | Failure]:
        wait_s = self._timeout_s + 5.0
        if self._child is None or not self._child.is_alive():
            self._spawn()
            wait_s += 15.0  # a new child imports and connects first (slow on a loaded host)
        assert self._conn is not None
        try:
            self._conn.send(groups)
            if self._conn.poll(wait_s):
                answer: dict[str, Offsets | Failure] = self._conn.recv()
                if not timed_out(answer):
                    return answer
                why = "timed out asking Kafka"
            else:
                why = f"did not answer within {wait_s:.0f} s"
        except (EOFError, OSError):
            self._child.join(5)
            why = f"died (exit code {self._child.exitcode}: confluentinc/librdkafka#5040?)"
        self._drop(renewal=True)
        raise GroupOffsetsError(why)

    def _spawn(self) -> None:
        if self._child is not None:
            self._drop(renewal=True)
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._child = ctx.Process(
            target=_serve,
            args=(child, self._config, self._timeout_s),
            name="iot-api-group-offsets",
            daemon=True,
        )
        self._child.start()
        child.close()
        self._conn = parent

    def _drop(self, *, renewal: bool) -> None:
        """Kill the child (if still there) and forget it; the next call spawns a new one."""
        child, self._child = self._child, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if child is not None:
            if child.is_alive():
                child.kill()
            child.join(5)
            self.renewals += renewal

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.send(None)  # the child's loop ends, its admin client freed
            if self._child is not None:
                self._child.join(5)
            self._drop(renewal=False)
