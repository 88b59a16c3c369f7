"""A fake Kafka producer and MQTT subscriber for a `TelemetryBridge` under unit test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from bridge.service import TelemetryBridge

GOOD = b'{"ts": 1, "seq": 0, "metrics": {"t": 1}}'


class FakeProducer:
    def __init__(self) -> None:
        self.queue: list[tuple[str, bytes, Callable[..., None]]] = []
        self.full = False
        self.flushes: list[float] = []  # timeouts of flush() calls

        self.partitions: list[int] = []  # each record's partition (-1: the partitioner's)

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        partition: int = -1,
        on_delivery: Any = None,
        callback: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        if self.full:
            raise BufferError("queue full")
        self.queue.append((topic, key, on_delivery))
        self.partitions.append(partition)

    def deliver(self, index: int, error: Any = None) -> None:
        self.queue[index][2](error, None)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes.append(timeout)
        return len(self.queue)


class FakeSubscriber:
    def __init__(self) -> None:
        self.generation = 1
        self.connected = True
        self.acks: list[int] = []
        self.paused = False
        self.dropped = 0
        self.errors: dict[str, int] = {}

    def send_acks(self, generation: int, packet_ids: list[int]) -> bool:
        if generation != self.generation:
            return False
        self.acks.extend(packet_ids)
        return True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def drop_connection(self, why: str) -> None:
        self.dropped += 1


Rig = tuple[TelemetryBridge, FakeProducer, FakeSubscriber]


def make_rig(bridge: TelemetryBridge) -> Iterator[Rig]:
    """``bridge`` wired to a fake producer and subscriber on a fresh loop (a fixture's body)."""
    loop = asyncio.new_event_loop()
    producer, sub = FakeProducer(), FakeSubscriber()
    bridge._producer = producer
    bridge.subscriber = sub  # type: ignore[assignment]
    bridge._loop = loop
    yield bridge, producer, sub
    loop.close()
