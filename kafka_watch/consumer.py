"""What the stall judge needs of a live consumer, asked of Kafka within a bounded wait (issue 32).

A long-lived consumer raises nothing when it wedges: it fetches nothing while its partitions'
high watermarks move on. :func:`consumer_stall` asks Kafka those high watermarks within a
bounded wait and has :class:`~kafka_watch.stall.StallJudge` (pure) say whether the consumer
stalled; :func:`consumer_stalled` also counts and logs it, and its owner then replaces the
consumer (a new one resuming where the old stood) and hands the old one to
:func:`kafka_watch.retired.retire`, which frees it off the owner's thread or event loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from kafka_watch.stall import Partition, StallJudge

log = logging.getLogger(__name__)


def consumer_stall(
    consumer: Consumer,
    judge: StallJudge,
    handed: Mapping[Partition, int],
    timeout_s: float,
    now: float,
    *,
    group_start: str = "",
) -> list[Partition]:
    """The partitions of ``consumer``'s assignment that ``judge`` finds stalled at ``now``.

    Each partition's high watermark is asked of Kafka (one ListOffsets per leader, within
    ``timeout_s``: a request left unanswered raises KafkaException, as any other failing call
    of the consumer); its position is the later of librdkafka's and ``handed``'s (the next
    offset the owner has yet to get, or where it was assigned). With ``group_start`` (a group
    member's ``auto.offset.reset``, "earliest" or "latest"), a partition whose position
    neither knows (it handed nothing yet) starts at the group's commit, or without one at the
    partition's low watermark ("earliest"; "latest": its end, nothing to judge): where the
    member was to begin, so one wedged from its assignment is judged too."""
    parts = consumer.assignment()
    if not parts:
        return []
    asked = [TopicPartition(p.topic, p.partition, OFFSET_END) for p in parts]  # latest
    highs = {
        (p.topic, p.partition): p.offset
        for p in consumer.offsets_for_times(asked, timeout=timeout_s)
        if p.error is None
    }  # fmt: skip
    positions = {
        (p.topic, p.partition): max(p.offset, handed.get((p.topic, p.partition), -1))
        for p in consumer.position(parts)
    }  # fmt: skip
    unknown = [p for p in parts if positions.get((p.topic, p.partition), -1) < 0]
    if group_start and unknown:
        for c in consumer.committed(unknown, timeout=timeout_s):
            key = (c.topic, c.partition)
            if c.error is None and c.offset >= 0:
                positions[key] = c.offset
            elif group_start == "earliest" and highs.get(key, -1) > 0:  # from the low end
                low, _ = consumer.get_watermark_offsets(c, timeout=timeout_s, cached=False)
                positions[key] = low
    return judge.check(now, positions, highs)


def consumer_stalled(
    consumer: Consumer,
    judge: StallJudge,
    handed: Mapping[Partition, int],
    who: str,
    *,
    group_start: str = "",
    timeout_s: float = 5.0,
) -> bool:
    """Whether ``consumer`` stalled now (:func:`consumer_stall`, within ``timeout_s``); if so,
    counted (``judge.renewed``) and logged as ``who``'s, and its owner replaces it."""
    stuck = consumer_stall(
        consumer, judge, handed, timeout_s, time.monotonic(), group_start=group_start
    )
    if not stuck:
        return False
    stalled_log(judge, stuck, who)
    return True


def stalled_log(judge: StallJudge, stuck: list[Partition], who: str) -> None:
    """Count (``judge.renewed``) and log a stall the judge found (``stuck``: its partitions)."""
    judge.renewed()
    log.warning(
        "%s Kafka consumer receives nothing while %d partitions (%s:%d%s) have records past "
        "its position for %.0f s; replacing it (%d so far)",
        who, len(stuck), *stuck[0], " ..." if len(stuck) > 1 else "", judge.stall_s,
        judge.renewals,
    )  # fmt: skip
