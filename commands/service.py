"""`CommandService`: the I/O around the pure tracker.

One worker thread owns the tracker, the Kafka consumer (``iot.commands``), the Kafka producer
(status, replies, dead letters) and the MQTT connections (:class:`LinkPool`), whose sockets it
reads and writes itself: no second thread fights it for the GIL (a paho network thread turned
millisecond PUBACKs into seconds under load), and a step's publishes and PUBACKs leave in one
write per connection.

Delivery rules (at-least-once both ways): a command's ``iot.commands`` offset is stored only
once its status is acknowledged by Kafka (:mod:`commands.offsets`); a reply is PUBACKed
only once its records are (:mod:`commands.reply_acks`), and the MQTT session is
persistent, so replies that arrive while the bridge is down wait in Mosquitto. On start the
service reads ``iot.command-status`` to its end and adopts what is still pending; a command
read again from ``iot.commands`` whose id is known is not resent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Producer

from bridge.shards import shard_of
from commands.actions import (
    Action,
    DeadLetterAction,
    PublishAction,
    ReleaseAction,
    ReplyAction,
    StatusAction,
)
from commands.command_consumer import CommandConsumer
from commands.config import CommandConfig
from commands.kafka_settings import producer_settings
from commands.link_pool import LinkPool, connect_pool
from commands.mapping import parse_reply, parse_tenant_reply_topic
from commands.model import (
    Command,
    CommandDefaults,
    CommandPathError,
    Rejection,
    Source,
)
from commands.mqtt_link import Connected, Incoming, LinkEvent, Puback
from commands.publisher import CommandPublisher
from commands.record_writer import RecordWriter
from commands.reply_acks import ReplyAcks
from commands.status_snapshot import read_status_snapshot
from commands.tracker import Tracker

__all__ = ["CommandService"]

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.005


class CommandService:
    """The command path of one bridge instance: ``start()``, then ``stop(timeout)``."""

    def __init__(
        self,
        config: CommandConfig,
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
        self._writer: RecordWriter | None = None
        self._link: LinkPool | None = None
        self._early_events: list[LinkEvent] = []
        self._backlog: list[Action] = []
        # replies of the current MQTT connection waiting for their Kafka writes before PUBACK
        self._acks = ReplyAcks()
        self._first_assignment = True
        self._wait_s = 0.0
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
            "consumer_renewals": 0,
        }
        self._commands = CommandConsumer(
            config, self._defaults, on_assign=self._on_assign, on_revoke=self._on_revoke,
            stats=self.stats,
        )  # fmt: skip
        self._publisher = CommandPublisher(
            self._tracker, self._now, self.stats, config.command_max_inflight
        )

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
        self._writer = RecordWriter(
            self._producer, cfg, self.stats, release=self._commands.release, ack_done=self._ack_done
        )
        self._link, self._early_events = connect_pool(cfg)
        self._publisher.link = self._link
        self._commands.subscribe()
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
        return frozenset(self._commands.offsets.assigned)

    @property
    def failure(self) -> BaseException | None:
        """The exception that ended the worker thread, if any."""
        return self._failure

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- Kafka rebalance (called inside consume(), on the worker thread) --------------------

    def _on_assign(self, assigned: set[int]) -> None:
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

    def _on_revoke(self, revoked: set[int]) -> None:
        self._tracker.drop(revoked)

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
        assert self._producer is not None
        busy = self._mqtt_io(self._wait_s)
        actions = self._tracker.tick(self._now())
        if self._backlog:
            actions = self._backlog + actions
            self._backlog = []
        if actions:
            busy = True
            self._execute(actions)
        self._commands.flow_control(len(self._tracker))
        now = self._now()
        records = self._commands.poll(now)
        if records:
            busy = True
            self._handle_commands(records, now)
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

    def _handle_event(self, event: LinkEvent) -> None:
        now = self._now()
        if isinstance(event, Puback):
            sent = self._publisher.acked(event.mid)
            if sent is not None:
                self._execute(self._tracker.on_puback(sent[0], sent[1], event.reason, now))
                if self._publisher.held:
                    self._publisher.release_held()
        elif isinstance(event, Incoming):
            self._handle_reply(event, now)
        else:
            self._on_connected(event)

    def _on_connected(self, event: Connected) -> None:
        if event.link == 0:
            # PUBACKs owed on the previous reply connection are never sent on this one
            self._acks.new_connection(event.generation)
        self._publisher.limit = min(self.config.command_max_inflight, event.receive_maximum)
        log.info(
            "command path MQTT connection %d up (session present: %s, %d unacknowledged "
            "commands sent again, Mosquitto takes %d in flight)",
            event.link,
            event.session_present,
            event.resent,
            event.receive_maximum,
        )
        if self._publisher.held:
            self._publisher.release_held()

    def _handle_reply(self, event: Incoming, now: int) -> None:
        parsed = parse_tenant_reply_topic(event.topic)
        if parsed is None:
            log.warning("ignoring a reply on an unexpected topic %r", event.topic)
            self._ack_now(event)
            return
        tenant, device_id, command_id = parsed
        if self._tracker.state_of(command_id) is None and not self._owns_device(device_id):
            # every instance receives every reply; the owner of the device's partition
            # records it (a command of ours would be known here)
            self.stats["foreign_replies"] += 1
            self._ack_now(event)
            return
        reply = parse_reply(device_id, command_id, event.payload, tenant)
        actions = self._tracker.on_reply(reply, now)
        self.stats["replies"] += 1
        if any(isinstance(a, ReplyAction) and a.record["match"] == "unknown" for a in actions):
            self.stats["unknown_replies"] += 1
            log.info("reply for an unknown command %s from %s", command_id, device_id)
        writes = sum(isinstance(a, StatusAction | ReplyAction | DeadLetterAction) for a in actions)
        if event.qos == 0 or writes == 0:
            self._execute(actions)
            self._ack_now(event)
            return
        if event.generation != self._acks.generation:
            self._execute(actions)  # its connection is gone: Mosquitto sends it again
            return
        self._acks.add(event.mid, writes)
        self._execute(actions, ack=(event.generation, event.mid))

    def _owns_device(self, device_id: str) -> bool:
        """Whether this instance owns the commands partition of ``device_id`` (True while the
        partitioning is unknown, so that nothing goes unrecorded)."""
        return self._first_assignment or self._commands.offsets.owns_device(device_id)

    def _ack_now(self, event: Incoming) -> None:
        if event.qos == 0 or event.generation != self._acks.generation:
            return
        self._acks.add(event.mid)
        self._ack_done((event.generation, event.mid))

    def _ack_done(self, ack: tuple[int, int]) -> None:
        generation, mid = ack
        ready = self._acks.done(generation, mid)
        if ready and self._link is not None:
            self._link.ack(ready, generation)

    def _other_shard(self, parsed: Command | Rejection) -> bool:
        """Whether another shard's command path handles this record (`command_shards` > 1):
        a device's command goes out on the shard that holds the device, a group's on every
        shard, and shard 0 alone rejects what cannot be parsed (one dead letter, not N)."""
        cfg = self.config
        if cfg.command_shards == 1:
            return False
        if isinstance(parsed, Rejection):
            return cfg.command_shard != 0
        device = parsed.target.device_id
        return device is not None and shard_of(device, cfg.command_shards) != cfg.command_shard

    def _handle_commands(self, records: list[tuple[Source, Command | Rejection]], now: int) -> None:
        for source, parsed in records:
            if self._other_shard(parsed):
                self._commands.release(source)  # done here: its offset may be committed
                continue
            if isinstance(parsed, Rejection):
                self.stats["rejected"] += 1
                log.warning(
                    "rejected command %s (partition %d offset %d): %s %s",
                    parsed.command_id,
                    source.partition,
                    source.offset,
                    parsed.code,
                    parsed.detail,
                )
                self._execute(self._tracker.reject(parsed, now, source))
            else:
                self.stats["commands"] += 1
                self._execute(self._tracker.admit(parsed, now, source))

    # -- executing tracker actions ---------------------------------------------------------

    def _execute(self, actions: list[Action], *, ack: tuple[int, int] | None = None) -> None:
        writer = self._writer
        assert writer is not None
        for action in actions:
            if isinstance(action, PublishAction):
                self._publisher.publish(action)
            elif isinstance(action, ReleaseAction):
                self._commands.release(action.source)
            else:
                writer.write(action, ack)

    def _shutdown(self) -> None:
        deadline = time.monotonic() + max(1.0, self.config.shutdown_timeout_s)
        if self._producer is not None:
            # Serve delivery callbacks: they store offsets and ack replies.
            while len(self._producer) > 0 and time.monotonic() < deadline:
                self._producer.poll(0.1)
        self._commands.close()
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
