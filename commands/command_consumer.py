"""`CommandConsumer`: the ``iot.commands`` consumer of one bridge instance.

It reads and validates command records, keeps the offsets of the partitions it owns
(:class:`~commands.offsets.CommandOffsets`) and stores one only once its command is
done, pauses while too many commands are pending, and tells the service when partitions come
and go (rebalance callbacks run inside ``consume()``, on the worker thread).

A consumer that librdkafka wedges raises nothing: it fetches nothing while commands wait in its
partitions. Every ``every_s`` (a third of ``command_consumer_stall_s``, at most 10 s) it is
shown to its :class:`~kafka_watch.stall.StallJudge` (issue 32); one whose partitions have
records past a position that has not moved for ``command_consumer_stall_s`` while it was not
paused by flow control is logged, counted (``iot_commands_consumer_renewals_total``) and
replaced: its partitions are revoked here as in a rebalance (their pending commands dropped,
offsets stored so far kept), the old member handed to
:func:`kafka_watch.retired.retire_member` (closed off this thread: it leaves the group and
commits what was stored), and a new member of the same group subscribes. It gets the
partitions from the group's committed offsets, so the commands read but not yet done are
read again and handled as after any rebalance (at-least-once; an id already known is not
resent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, MutableMapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from commands.config import CommandConfig
from commands.kafka_settings import commands_consumer_settings
from commands.model import Command, CommandDefaults, Rejection, Source, parse_command
from commands.offsets import CommandOffsets
from kafka_watch import retired
from kafka_watch.consumer import consumer_stalled
from kafka_watch.stall import StallJudge

__all__ = ["CommandConsumer"]

log = logging.getLogger(__name__)

# Commands taken from Kafka per worker step. Small on purpose: the worker services the MQTT
# socket (PUBACKs, replies) only between steps, so a step that publishes 500 commands makes
# every PUBACK and reply behind it wait for the whole batch (measured: sent -> delivered grew
# with the batch, to ~170 ms at p50 under load). Messages wait for free in librdkafka's queue.
_CONSUME_BATCH = 64
# How long the stall check waits for Kafka's answers: it runs on the worker thread, which
# services the MQTT connections between steps.
_STALL_QUERY_S = 2.0


class CommandConsumer:
    """Reads ``iot.commands`` for the worker thread (not thread-safe)."""

    def __init__(
        self,
        config: CommandConfig,
        defaults: CommandDefaults,
        *,
        on_assign: Callable[[set[int]], None],
        on_revoke: Callable[[set[int]], None],
        stats: MutableMapping[str, int] | None = None,
    ) -> None:
        self.config = config
        self.offsets = CommandOffsets()
        self._defaults = defaults
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._consumer: Consumer | None = None
        self._paused = False
        self._stats = stats if stats is not None else {}
        self.stall = StallJudge("commands", config.command_consumer_stall_s)

    def subscribe(self) -> None:
        self._consumer = Consumer(commands_consumer_settings(self.config))
        self._consumer.subscribe(
            [self.config.topic_commands], on_assign=self._assigned, on_revoke=self._revoked
        )
        self.stall.assigned(time.monotonic())  # nothing held against a new member

    def poll(self, now: int) -> list[tuple[Source, Command | Rejection]]:
        """The command records waiting (at most a step's batch), validated."""
        assert self._consumer is not None
        records: list[tuple[Source, Command | Rejection]] = []
        for msg in self._consumer.consume(_CONSUME_BATCH, 0):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("iot.commands consumer: %s", err)
                continue
            partition = msg.partition()
            offset = msg.offset()
            assert partition is not None
            assert offset is not None
            source = Source(partition, offset)
            self.offsets.read(partition, offset)
            _, ts = msg.timestamp()
            parsed = parse_command(
                msg.key(),
                msg.value(),
                timestamp_ms=ts if ts > 0 else now,
                defaults=self._defaults,
                source=source,
                topic=msg.topic() or self.config.topic_commands,
                tenant=_tenant_header(msg.headers()),
            )
            records.append((source, parsed))
        self._watch()
        return records

    def _watch(self) -> None:
        """Now and then, whether the consumer stalled; if so, replace it."""
        consumer = self._consumer
        if consumer is None or not self.stall.due(time.monotonic()):
            return
        if self._paused:  # flow control: not moving is what it was told to do
            self.stall.reset()
            return
        try:
            stalled = consumer_stalled(
                consumer, self.stall, {}, "command path: its iot.commands",
                group_start="earliest", timeout_s=_STALL_QUERY_S,
            )  # fmt: skip
        except KafkaException as exc:  # Kafka not answering: the consumer reports it too
            log.debug("iot.commands stall check failed: %s", exc)
            return
        if stalled:
            self._renew(consumer)

    def _renew(self, old: Consumer) -> None:
        """Replace a stalled member by a new one of the same group (see the module's doc)."""
        self._stats["consumer_renewals"] = self._stats.get("consumer_renewals", 0) + 1
        self._revoked(old, [TopicPartition(self.config.topic_commands, p)
                            for p in sorted(self.offsets.assigned)])  # fmt: skip
        self._consumer = None
        self._paused = False
        retired.retire_member(old)  # its callbacks no longer act: not the current consumer
        del old
        self.subscribe()

    def flow_control(self, pending: int) -> None:
        """Pause reading at ``pending_max_messages`` pending commands, resume below 80 %."""
        assert self._consumer is not None
        limit = self.config.pending_max_messages
        if not self._paused and pending >= limit:
            self._consumer.pause(self._consumer.assignment())
            self._paused = True
            log.warning("command path paused: %d commands pending", pending)
        elif self._paused and pending < limit * 0.8:
            self._consumer.resume(self._consumer.assignment())
            self._paused = False
            log.info("command path resumed")

    def release(self, source: Source) -> None:
        """The command read at ``source`` is done: store the offset its partition reached."""
        if self._consumer is None:
            return
        offset = self.offsets.done(source)
        if offset is not None:
            tp = TopicPartition(self.config.topic_commands, source.partition, offset)
            try:
                self._consumer.store_offsets(offsets=[tp])
            except Exception as exc:  # noqa: BLE001 - a revoked partition is no failure
                log.debug("store_offsets(%s) failed: %s", tp, exc)

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the cause
                log.warning("closing the commands consumer failed: %s", exc)
            self._consumer = None
        retired.drain(10.0)  # a replaced member too is gone when the service stops

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced member's (see _renew)
        assigned = {tp.partition for tp in partitions}
        log.info("command partitions assigned: %s", sorted(assigned))
        self.offsets.assign(assigned)
        topic = self.config.topic_commands
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            self.offsets.partition_count = len(meta.partitions)
        except Exception as exc:  # noqa: BLE001 - then every reply counts as ours
            log.warning("partition count of %s unknown: %s", topic, exc)
            self.offsets.partition_count = 0
        self._on_assign(assigned)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a replaced member's: its partitions were revoked when it was replaced
        revoked = {tp.partition for tp in partitions}
        log.info("command partitions revoked: %s", sorted(revoked))
        self.offsets.revoke(revoked)
        self._on_revoke(revoked)


def _tenant_header(
    headers: dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None,
) -> str | None:
    """The sender's tenant stamped by the writer (iot-api, ``iot-cmd send --tenant``); the last
    ``tenant`` header wins, an unreadable one is no tenant id (refused as ``bad_tenant``)."""
    items = headers.items() if isinstance(headers, dict) else headers or ()
    tenant = None
    for name, value in items:
        if name == "tenant":
            raw = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            tenant = raw or ""
    return tenant
