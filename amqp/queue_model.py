"""The HTTP door's queues over AMQP (pure): ``queue/{q}`` addresses, settle modes, and which
marker (api.queues.model, the one queue model iot-api uses) each AMQP outcome writes.

- A sender link with target ``queue/{q}``: each message is published to ``q``, ``accepted`` once
  Kafka acknowledged it.
- A receiver link with source ``queue/{q}``: each transfer is a ``start`` marker written before
  it is sent; the outcome is the receiver's answer: ``accepted`` = ``ack``, ``released`` =
  ``nack`` (again at once, counted), ``modified`` = ``nack`` due after the visibility timeout
  (counted), ``rejected`` = ``reject`` (straight to ``q.dlq``).
- Both directions are at least once: unsettled only (else ``amqp:precondition-failed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from amqp.model import RCV_SETTLE_FIRST, Cond, Refusal
from api.queues import model as qm
from appconfig.settings import KAFKA_TOPIC_RE

QUEUE_PREFIX: Final = "queue/"
SND_SETTLED: Final = 1  # sender-settle-mode settled (pre-settled: at most once)
PARTITION_KEY: Final = "partitionKey"  # application property: the record's Kafka key


@dataclass(frozen=True, slots=True)
class QueueAddress:
    queue: str


def parse_queue_address(address: str | None) -> QueueAddress | Refusal | None:
    """``queue/{q}``; a refusal for a malformed one; None if it is no queue address."""
    if not address or not address.startswith(QUEUE_PREFIX):
        return None
    queue = address[len(QUEUE_PREFIX) :]
    dead = qm.dead_letter_topic(queue)
    if queue in (".", "..") or not all(KAFKA_TOPIC_RE.fullmatch(t) for t in (queue, dead)):
        return Refusal(Cond.NOT_FOUND, f"no queue {queue[:100]!r} (1-245 of [a-zA-Z0-9._-])")
    return QueueAddress(queue)


def check_queue_settle_modes(snd_settle_mode: int, rcv_settle_mode: int) -> Refusal | None:
    """A queue's messages are acknowledged one by one: unsettled transfers, ``first``."""
    if snd_settle_mode == SND_SETTLED:
        return Refusal(Cond.PRECONDITION, "queues are at least once: attach unsettled")
    if rcv_settle_mode != RCV_SETTLE_FIRST:
        return Refusal(Cond.NOT_IMPLEMENTED, "rcv-settle-mode second is not supported: use first")
    return None


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    RELEASED = "released"
    MODIFIED = "modified"
    REJECTED = "rejected"


def answer_for(outcome: Outcome, handle: qm.Handle, now_ms: int, visibility_ms: int) -> bytes:
    """The marker a receiver's outcome writes for ``handle``."""
    if outcome is Outcome.ACCEPTED:
        return qm.answer_marker(qm.ACK, handle)
    if outcome is Outcome.REJECTED:
        return qm.answer_marker(qm.REJECT, handle)
    if outcome is Outcome.MODIFIED:  # failed here: again once the visibility timeout is over
        return qm.answer_marker(qm.NACK, handle, now_ms + visibility_ms)
    return qm.answer_marker(qm.NACK, handle)


def amqp_delivery_count(count: int) -> tuple[int, bool]:
    """The AMQP header's ``delivery-count`` (earlier failed attempts) and ``first-acquirer``
    for a queue delivery that is the ``count``-th."""
    return count - 1, count == 1
