"""`RecordWriter`: what the tracker decided, written to Kafka.

Statuses go to ``iot.command-status`` (key: the command id), reply records to
``iot.command-replies`` and dead letters to ``iot.commands.dlq``; once Kafka acknowledges a
write, the writer calls back: a status releases its command's consumer offset, and every write
a reply caused counts towards that reply's PUBACK.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
from confluent_kafka import KafkaError, Message, Producer

from commands.actions import DeadLetterAction, ReplyAction, StatusAction
from commands.config import CommandConfig
from commands.model import Source
from commands.status import encode_status

__all__ = ["RecordWriter"]

log = logging.getLogger(__name__)


class RecordWriter:
    """Produces the records of status, reply and dead-letter actions (worker thread only)."""

    def __init__(
        self,
        producer: Producer,
        config: CommandConfig,
        stats: dict[str, int],
        *,
        release: Callable[[Source], None],
        ack_done: Callable[[tuple[int, int]], None],
    ) -> None:
        self._producer = producer
        self._config = config
        self._stats = stats
        self._release = release
        self._ack_done = ack_done

    def write(
        self, action: StatusAction | ReplyAction | DeadLetterAction, ack: tuple[int, int] | None
    ) -> None:
        """Produce ``action``'s record; ``ack`` is the (connection, packet id) of the reply
        that caused it, if any."""
        cfg = self._config
        if isinstance(action, StatusAction):
            status = action.status
            if status.final and status.state.value == "expired":
                self._stats["expired"] += 1
            self._produce(
                cfg.topic_command_status,
                status.command_id.encode(),
                encode_status(status),
                action.release,
                ack,
            )
            return
        topic = (
            cfg.topic_command_replies if isinstance(action, ReplyAction) else cfg.topic_commands_dlq
        )
        self._produce(topic, action.key.encode(), orjson.dumps(action.record), None, ack)

    def _produce(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        release: Source | None,
        ack: tuple[int, int] | None,
    ) -> None:
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
