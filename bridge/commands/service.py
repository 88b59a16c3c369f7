"""`CommandService`: the I/O around the pure tracker.

One worker thread owns the tracker, the Kafka consumer (``iot.commands``), the Kafka producer
(status, replies, dead letters) and the MQTT connections (:class:`LinkPool`), whose sockets it
reads and writes itself: no second thread fights it for the GIL (a paho network thread turned
millisecond PUBACKs into seconds under load), and a step's publishes and PUBACKs leave in one
write per connection.

Delivery rules:

- ``iot.commands`` offsets are stored (``enable.auto.offset.store=False``) only once the
  command's ``sent`` status (or its ``rejected``/``expired`` status) has been acknowledged by
  Kafka, in offset order per partition: at-least-once.
- A reply is PUBACKed to Mosquitto only after its ``iot.command-replies`` record and the
  resulting status are acknowledged by Kafka, in arrival order; the bridge's MQTT session is
  persistent, so replies that arrive while it is down wait in Mosquitto.
- On start the service reads ``iot.command-status`` to its end and adopts what is still
  pending; a command read again from ``iot.commands`` whose id is known is not resent.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

import mqtt_codec as codec
from bridge.commands.client import topic_metadata, watermarks
from bridge.commands.mapping import (
    REPLY_SUBSCRIPTION,
    build_publish,
    parse_reply,
    parse_reply_topic,
)
from bridge.commands.model import (
    CommandDefaults,
    CommandPathError,
    Rejection,
    Source,
    StatusRecord,
    decode_status,
    encode_status,
    parse_command,
)
from bridge.commands.mqtt_link import (
    Connected,
    Incoming,
    LinkEvent,
    LinkLostError,
    LinkPool,
    Puback,
)
from bridge.commands.tracker import (
    Action,
    DeadLetterAction,
    OrderedCompletion,
    PublishAction,
    ReplyAction,
    StatusAction,
    Tracker,
)
from bridge.config import BridgeConfig, parse_kafka_extra
from bridge.partitioner import partition_for

__all__ = ["CommandService", "StatusSnapshot", "producer_settings", "read_status_snapshot"]

log = logging.getLogger(__name__)

# Commands taken from Kafka per worker step. Small on purpose: the worker services the MQTT
# socket (PUBACKs, replies) only between steps, so a step that publishes 500 commands makes
# every PUBACK and reply behind it wait for the whole batch (measured: sent -> delivered grew
# with the batch, to ~170 ms at p50 under load). Messages wait for free in librdkafka's queue.
_CONSUME_BATCH = 64
# MQTT events (PUBACKs, replies) handled per step, for the same reason the other way round.
_EVENT_BATCH = 1000
_IDLE_WAIT_S = 0.005


def producer_settings(config: BridgeConfig) -> dict[str, Any]:
    """librdkafka producer settings of the command path (the design's producer rules)."""
    settings: dict[str, Any] = {
        "bootstrap.servers": config.kafka_bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": config.command_linger_ms,
        "compression.type": config.kafka_compression,
        "message.timeout.ms": config.kafka_message_timeout_ms,
    }
    settings.update(parse_kafka_extra(config.kafka_extra))
    return settings


@dataclass(slots=True)
class StatusSnapshot:
    """The last status of every command id found in ``iot.command-status``."""

    statuses: dict[str, StatusRecord]
    records: int
    seconds: float

    def pending(self) -> list[StatusRecord]:
        return [s for s in self.statuses.values() if not s.final]


def read_status_snapshot(
    config: BridgeConfig, *, timeout_s: float = 60.0, topic: str | None = None
) -> StatusSnapshot:
    """Read the compacted status topic from its beginning to its current end."""
    topic = topic or config.topic_command_status
    started = time.monotonic()
    settings: dict[str, Any] = {
        "bootstrap.servers": config.kafka_bootstrap,
        "group.id": f"iot-cmd-snapshot-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }
    settings.update(
        {
            k: v
            for k, v in parse_kafka_extra(config.kafka_extra).items()
            if k.startswith(("security", "sasl", "ssl"))
        }
    )
    consumer = Consumer(settings)
    statuses: dict[str, StatusRecord] = {}
    count = 0
    try:
        tmeta = topic_metadata(consumer, topic, timeout_s)
        ends: dict[int, int] = {}
        for p in tmeta.partitions:
            low, high = watermarks(consumer, topic, p, timeout_s)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = started + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise CommandPathError(f"reading {topic!r} to its end took more than {timeout_s}s")
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("status snapshot: %s", err)
                    continue
                count += 1
                key = msg.key()
                status = decode_status(key, msg.value())
                if status is not None:
                    statuses[status.command_id] = status
                elif msg.value() is None and key is not None:
                    statuses.pop(key.decode(errors="replace"), None)
                p = msg.partition()
                off = msg.offset()
                if p is not None and off is not None and p in ends and off + 1 >= ends[p]:
                    del ends[p]
    finally:
        consumer.close()
    return StatusSnapshot(statuses, count, time.monotonic() - started)


class CommandService:
    """The command path of one bridge instance: ``start()``, then ``stop(timeout)``."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        clock: Callable[[], float] = time.time,
        snapshot_timeout_s: float = 60.0,
    ) -> None:
        self.config = config
        self._clock = clock
        self._snapshot_timeout_s = snapshot_timeout_s
        self._defaults = CommandDefaults(
            timeout_ms=config.command_timeout_ms,
            max_attempts=config.command_max_attempts,
            max_payload_bytes=config.max_payload_bytes,
        )
        self._tracker = Tracker()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._link: LinkPool | None = None
        self._early_events: list[LinkEvent] = []
        self._backlog: list[Action] = []
        self._mids: dict[int, tuple[str, int]] = {}
        self._offsets: dict[int, OrderedCompletion[int]] = {}
        # replies of the current MQTT connection waiting for their Kafka writes before PUBACK
        self._acks: OrderedCompletion[int] = OrderedCompletion()
        self._ack_waits: dict[int, int] = {}
        self._ack_generation = 0
        self._first_assignment = True
        # iot.commands partitions this instance owns, and how many the topic has: a reply
        # from a device of another instance's partition is that instance's business
        self._assigned: set[int] = set()
        self._command_partitions = 0
        self._paused = False
        self._wait_s = 0.0
        self._inflight_limit = config.command_max_inflight
        self._held: deque[PublishAction] = deque()
        self._failure: BaseException | None = None
        self.stats: dict[str, int] = {
            "commands": 0,
            "rejected": 0,
            "published": 0,
            "replies": 0,
            "unknown_replies": 0,
            "foreign_replies": 0,
            "expired": 0,
            "adopted": 0,
        }

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Rebuild the pending set, connect MQTT and Kafka, start the worker thread."""
        if self._thread is not None:
            raise CommandPathError("CommandService already started")
        cfg = self.config
        snapshot = read_status_snapshot(cfg, timeout_s=self._snapshot_timeout_s)
        now = self._now()
        for status in snapshot.statuses.values():
            actions = self._tracker.adopt(status, now)
            self._backlog.extend(actions)
        self.stats["adopted"] = len(self._tracker)
        log.info(
            "command status snapshot: %d records, %d commands, %d pending, %.2fs",
            snapshot.records,
            len(snapshot.statuses),
            len(self._tracker),
            snapshot.seconds,
        )
        self._producer = Producer(producer_settings(cfg))
        self._link = self._connect_mqtt()
        consumer_settings: dict[str, Any] = {
            "bootstrap.servers": cfg.kafka_bootstrap,
            "group.id": cfg.command_group_id,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            # A fetch returns after command_fetch_wait_ms unless 1 MB is waiting: with the
            # default fetch.min.bytes=1 every fetch returned the moment one command arrived,
            # a fetch per command, and the broker spent ~0.4 of a core per 1,000 commands/s.
            "fetch.wait.max.ms": cfg.command_fetch_wait_ms,
            "fetch.min.bytes": 1 << 20,
        }
        consumer_settings.update(
            {
                k: v
                for k, v in parse_kafka_extra(cfg.kafka_extra).items()
                if k.startswith(("security", "sasl", "ssl"))
            }
        )
        self._consumer = Consumer(consumer_settings)
        self._consumer.subscribe(
            [cfg.topic_commands], on_assign=self._on_assign, on_revoke=self._on_revoke
        )
        self._thread = threading.Thread(target=self._run, name="iot-commands", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop consuming, flush Kafka, ack what was written, disconnect. Idempotent."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("command service did not stop within %.1fs", timeout)
        elif self._link is not None:
            self._close_mqtt()

    @property
    def pending(self) -> int:
        """Commands in flight (read from any thread; approximate)."""
        return len(self._tracker)

    @property
    def assigned_partitions(self) -> frozenset[int]:
        """The ``iot.commands`` partitions this instance owns (read from any thread)."""
        return frozenset(self._assigned)

    @property
    def failure(self) -> BaseException | None:
        """The exception that ended the worker thread, if any."""
        return self._failure

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- MQTT ---------------------------------------------------------------------------

    def _connect_mqtt(self) -> LinkPool:
        cfg = self.config
        link = LinkPool(
            host=cfg.mqtt_host,
            port=cfg.mqtt_port,
            client_id=cfg.command_mqtt_client_id,
            subscription=REPLY_SUBSCRIPTION,
            keepalive=cfg.mqtt_keepalive_s,
            session_expiry=cfg.mqtt_session_expiry_s,
            receive_maximum=cfg.mqtt_receive_maximum,
            publishers=cfg.command_mqtt_publishers,
            username=cfg.mqtt_username,
            password=cfg.mqtt_password,
            reconnect_min_s=cfg.mqtt_reconnect_min_s,
            reconnect_max_s=cfg.mqtt_reconnect_max_s,
        )
        try:
            self._early_events = link.connect()
        except (OSError, LinkLostError) as exc:
            link.close()
            raise CommandPathError(
                f"MQTT connection to {cfg.mqtt_host}:{cfg.mqtt_port} failed: {exc}"
            ) from exc
        return link

    # -- Kafka rebalance (called inside consume(), on the worker thread) --------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assigned = {tp.partition for tp in partitions}
        log.info("command partitions assigned: %s", sorted(assigned))
        self._assigned |= assigned
        topic = self.config.topic_commands
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            self._command_partitions = len(meta.partitions)
        except Exception as exc:  # noqa: BLE001 - then every reply counts as ours
            log.warning("partition count of %s unknown: %s", topic, exc)
            self._command_partitions = 0
        for p in assigned:
            self._offsets.setdefault(p, OrderedCompletion())
        if self._first_assignment:
            # At start every pending command was adopted; keep those of our partitions.
            self._first_assignment = False
            foreign = self._tracker.partitions() - assigned
            dropped = self._tracker.drop(foreign)
            if dropped:
                log.info("left %d pending commands to other instances", dropped)
            return
        snapshot = read_status_snapshot(self.config, timeout_s=self._snapshot_timeout_s)
        now = self._now()
        for status in snapshot.statuses.values():
            if status.final or (status.source is not None and status.source.partition in assigned):
                self._backlog.extend(self._tracker.adopt(status, now))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {tp.partition for tp in partitions}
        log.info("command partitions revoked: %s", sorted(revoked))
        self._assigned -= revoked
        self._tracker.drop(revoked)
        for p in revoked:
            self._offsets.pop(p, None)

    # -- worker thread --------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _run(self) -> None:
        try:
            self._execute(self._backlog)
            self._backlog = []
            for event in self._early_events:
                self._handle_event(event)
            self._early_events = []
            while not self._stopping.is_set():
                self._step()
        except BaseException as exc:
            self._failure = exc
            log.exception("command service failed")
        finally:
            self._shutdown()

    def _step(self) -> None:
        assert self._consumer is not None
        assert self._producer is not None
        busy = self._mqtt_io(self._wait_s)
        actions = self._tracker.tick(self._now())
        if self._backlog:
            actions = self._backlog + actions
            self._backlog = []
        if actions:
            busy = True
            self._execute(actions)
        self._flow_control()
        msgs = self._consumer.consume(_CONSUME_BATCH, 0)
        if msgs:
            busy = True
            self._handle_commands(msgs)
        self._producer.poll(0)
        assert self._link is not None
        self._link.flush()
        wait = 0.0 if busy else _IDLE_WAIT_S
        due = self._tracker.next_due()
        if due is not None:
            wait = max(0.0, min(wait, (due - self._now()) / 1000))
        self._wait_s = wait

    def _mqtt_io(self, timeout: float) -> bool:
        """Write what is queued, wait up to ``timeout`` for MQTT traffic (the pool reconnects
        lost connections meanwhile) and handle what arrived; True if anything did."""
        link = self._link
        assert link is not None
        events = link.poll(timeout)
        for event in events:
            self._handle_event(event)
        return bool(events)

    def _flow_control(self) -> None:
        assert self._consumer is not None
        limit = self.config.pending_max_messages
        pending = len(self._tracker)
        if not self._paused and pending >= limit:
            self._consumer.pause(self._consumer.assignment())
            self._paused = True
            log.warning("command path paused: %d commands pending", pending)
        elif self._paused and pending < limit * 0.8:
            self._consumer.resume(self._consumer.assignment())
            self._paused = False
            log.info("command path resumed")

    def _handle_event(self, event: LinkEvent) -> None:
        now = self._now()
        if isinstance(event, Puback):
            sent = self._mids.pop(event.mid, None)
            if sent is not None:
                self._execute(self._tracker.on_puback(sent[0], sent[1], event.reason, now))
                if self._held:
                    self._release_held()
        elif isinstance(event, Incoming):
            self._handle_reply(event, now)
        else:
            self._on_connected(event)

    def _on_connected(self, event: Connected) -> None:
        if event.link == 0:
            # PUBACKs owed on the previous reply connection are never sent on this one
            self._acks = OrderedCompletion()
            self._ack_waits = {}
            self._ack_generation = event.generation
        self._inflight_limit = min(self.config.command_max_inflight, event.receive_maximum)
        log.info(
            "command path MQTT connection %d up (session present: %s, %d unacknowledged "
            "commands sent again, Mosquitto takes %d in flight)",
            event.link,
            event.session_present,
            event.resent,
            event.receive_maximum,
        )
        if self._held:
            self._release_held()

    def _handle_reply(self, event: Incoming, now: int) -> None:
        ids = parse_reply_topic(event.topic)
        if ids is None:
            log.warning("ignoring a reply on an unexpected topic %r", event.topic)
            self._ack_now(event)
            return
        if self._tracker.state_of(ids[1]) is None and not self._owns_device(ids[0]):
            # every instance receives every reply; the owner of the device's partition
            # records it (a command of ours would be known here)
            self.stats["foreign_replies"] += 1
            self._ack_now(event)
            return
        reply = parse_reply(ids[0], ids[1], event.payload)
        actions = self._tracker.on_reply(reply, now)
        self.stats["replies"] += 1
        if any(isinstance(a, ReplyAction) and a.record["match"] == "unknown" for a in actions):
            self.stats["unknown_replies"] += 1
            log.info("reply for an unknown command %s from %s", ids[1], ids[0])
        writes = sum(isinstance(a, StatusAction | ReplyAction | DeadLetterAction) for a in actions)
        if event.qos == 0 or writes == 0:
            self._execute(actions)
            self._ack_now(event)
            return
        if event.generation != self._ack_generation:
            self._execute(actions)  # its connection is gone: Mosquitto sends it again
            return
        self._add_ack(event.mid)
        self._ack_waits[event.mid] = writes
        self._execute(actions, ack=(event.generation, event.mid))

    def _add_ack(self, mid: int) -> None:
        try:
            self._acks.add(mid)
        except ValueError:
            # the packet id is still waiting from before a wrap-around: start afresh
            log.warning("reply packet id %d reused while pending; acknowledging in new order", mid)
            self._acks = OrderedCompletion()
            self._ack_waits = {}
            self._acks.add(mid)

    def _owns_device(self, device_id: str) -> bool:
        """Whether this instance owns the commands partition of ``device_id`` (True while the
        partitioning is unknown, so that nothing goes unrecorded)."""
        if self._first_assignment or not self._command_partitions:
            return True
        return partition_for(device_id.encode(), self._command_partitions) in self._assigned

    def _ack_now(self, event: Incoming) -> None:
        if event.qos == 0 or event.generation != self._ack_generation:
            return
        self._add_ack(event.mid)
        self._ack_done((event.generation, event.mid))

    def _ack_done(self, ack: tuple[int, int]) -> None:
        generation, mid = ack
        if generation != self._ack_generation:
            return  # acknowledged by nobody: Mosquitto redelivers it on the new connection
        left = self._ack_waits.get(mid, 1) - 1
        if left > 0:
            self._ack_waits[mid] = left
            return
        self._ack_waits.pop(mid, None)
        ready = self._acks.complete(mid)
        if ready and self._link is not None:
            self._link.ack(ready, generation)

    def _handle_commands(self, msgs: list[Message]) -> None:
        now = self._now()
        for msg in msgs:
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
            try:
                self._offsets.setdefault(partition, OrderedCompletion()).add(offset)
            except ValueError:
                log.debug("offset %d of partition %d read twice", offset, partition)
            _, ts = msg.timestamp()
            parsed = parse_command(
                msg.key(),
                msg.value(),
                timestamp_ms=ts if ts > 0 else now,
                defaults=self._defaults,
                source=source,
                topic=msg.topic() or self.config.topic_commands,
            )
            if isinstance(parsed, Rejection):
                self.stats["rejected"] += 1
                log.warning(
                    "rejected command %s (partition %d offset %d): %s %s",
                    parsed.command_id,
                    partition,
                    offset,
                    parsed.code,
                    parsed.detail,
                )
                self._execute(self._tracker.reject(parsed, now, source))
            else:
                self.stats["commands"] += 1
                self._execute(self._tracker.admit(parsed, now, source))

    # -- executing tracker actions ---------------------------------------------------------

    def _execute(self, actions: list[Action], *, ack: tuple[int, int] | None = None) -> None:
        cfg = self.config
        for action in actions:
            if isinstance(action, PublishAction):
                self._publish(action)
            elif isinstance(action, StatusAction):
                status = action.status
                if status.final and status.state.value == "expired":
                    self.stats["expired"] += 1
                self._produce(
                    cfg.topic_command_status,
                    status.command_id.encode(),
                    encode_status(status),
                    action.release,
                    ack,
                )
            elif isinstance(action, ReplyAction):
                self._produce(
                    cfg.topic_command_replies,
                    action.key.encode(),
                    orjson.dumps(action.record),
                    None,
                    ack,
                )
            elif isinstance(action, DeadLetterAction):
                self._produce(
                    cfg.topic_commands_dlq,
                    action.key.encode(),
                    orjson.dumps(action.record),
                    None,
                    ack,
                )
            else:
                self._release(action.source)

    def _publish(self, action: PublishAction) -> None:
        if len(self._mids) >= self._inflight_limit or self._held:
            self._held.append(action)
            return
        self._publish_now(action)

    def _release_held(self) -> None:
        while self._held and len(self._mids) < self._inflight_limit:
            action = self._held.popleft()
            if self._tracker.attempt_of(action.command.command_id) == action.attempt:
                self._publish_now(action)

    def _publish_now(self, action: PublishAction) -> None:
        assert self._link is not None
        pub = build_publish(action.command, action.attempt, self._now())
        if pub is None:
            return  # TTL ran out this very moment: the tracker's next tick expires it
        props = codec.publish_properties(
            correlation_data=pub.correlation_data,
            response_topic=pub.response_topic,
            message_expiry=pub.message_expiry_s,
            user_properties=pub.user_properties,
        )
        mid = self._link.publish(action.command.target.key, pub.topic, pub.payload, props)
        self._mids[mid] = (action.command.command_id, action.attempt)
        self.stats["published"] += 1

    def _produce(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        release: Source | None,
        ack: tuple[int, int] | None,
    ) -> None:
        assert self._producer is not None

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                log.error("write to %s failed: %s", topic, err)
                return
            if release is not None:
                self._release(release)
            if ack is not None:
                self._ack_done(ack)

        while True:
            try:
                self._producer.produce(topic, value=value, key=key, on_delivery=delivered)
                return
            except BufferError:
                self._producer.poll(0.05)

    def _release(self, source: Source) -> None:
        tracker = self._offsets.get(source.partition)
        if tracker is None or self._consumer is None:
            return  # revoked meanwhile: the new owner reads it again
        done = tracker.complete(source.offset)
        if done:
            tp = TopicPartition(self.config.topic_commands, source.partition, done[-1] + 1)
            try:
                self._consumer.store_offsets(offsets=[tp])
            except Exception as exc:  # noqa: BLE001 - a revoked partition is no failure
                log.debug("store_offsets(%s) failed: %s", tp, exc)

    def _shutdown(self) -> None:
        deadline = time.monotonic() + max(1.0, self.config.shutdown_timeout_s)
        if self._producer is not None:
            # Serve delivery callbacks: they store offsets and ack replies.
            while len(self._producer) > 0 and time.monotonic() < deadline:
                self._producer.poll(0.1)
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception as exc:  # noqa: BLE001 - closing must not mask the cause
                log.warning("closing the commands consumer failed: %s", exc)
            self._consumer = None
        self._close_mqtt()

    def _close_mqtt(self) -> None:
        link = self._link
        if link is None:
            return
        try:
            link.flush()  # the PUBACKs the last delivery reports released
            link.close()
        finally:
            self._link = None
