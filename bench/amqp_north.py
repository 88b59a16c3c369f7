"""The northbound receive phase of `make bench-amqp` (issue 34, item 6): an application reading
a tenant's telemetry over AMQP 1.0 (``telemetry/{tenant}``, Hono's northbound API) from
`iot-amqp`, which reads it from Kafka.

python-qpid-proton's client attaches a receiver (credit ``--north-credit``, accepting each
message as it comes: unsettled, so iot-amqp commits past it only once accepted); once the link
is open (its consumer holds its partitions: the group starts at the topic's end), a producer
thread writes ``--north-messages`` 1 KiB readings into the tenant's telemetry topic as fast as
Kafka takes them. The figure is messages received per second from the first to the last, and
iot-amqp's CPU seconds per million messages over the same span.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from proton.handlers import MessagingHandler
from proton.reactor import Container


def _produce(bootstrap: str, topic: str, count: int, reading: Callable[[int], bytes]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    for seq in range(count):
        value = reading(seq)
        while True:
            try:
                producer.produce(topic, value, key=b"bench-%d" % (seq % 1000))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)


class _Reader(MessagingHandler):
    def __init__(
        self, url: str, source: str, *, count: int, credit: int, produce: Any, cpu: Any
    ) -> None:
        super().__init__(prefetch=credit, auto_accept=True)
        self.url, self.source, self.count = url, source, count
        self.produce, self.cpu = produce, cpu
        self.received = 0
        self.first = self.last = self.cpu_first = self.cpu_last = 0.0
        self.error = ""

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url)
        event.container.create_receiver(conn, self.source, name=f"bench-{uuid.uuid4().hex[:8]}")

    def on_link_opened(self, event: Any) -> None:
        if event.receiver is not None:
            threading.Thread(target=self.produce, daemon=True).start()

    def on_message(self, event: Any) -> None:
        now = time.monotonic()
        if self.received == 0:
            self.first, self.cpu_first = now, self.cpu()
        self.received += 1
        self.last = now
        if self.received >= self.count:
            self.cpu_last = self.cpu()
            event.connection.close()

    def on_link_error(self, event: Any) -> None:
        self.error = str(event.link.remote_condition)
        event.connection.close()


def receive_phase(
    url: str,
    bootstrap: str,
    *,
    topic: str,
    tenant: str,
    count: int,
    credit: int,
    cpu: Any,
    reading: Callable[[int], bytes],
) -> dict[str, Any]:
    """Read ``count`` records over ``telemetry/{tenant}`` while ``reading(seq)`` values are
    written to ``topic`` (the upload phases' readings); ``cpu()`` is iot-amqp's CPU seconds."""
    reader = _Reader(
        url, f"telemetry/{tenant}", count=count, credit=credit, cpu=cpu,
        produce=lambda: _produce(bootstrap, topic, count, reading),
    )  # fmt: skip
    Container(reader).run()
    span, used = reader.last - reader.first, reader.cpu_last - reader.cpu_first
    if reader.error or reader.received < count or span <= 0:
        raise RuntimeError(f"northbound read {reader.received} of {count}: {reader.error}")
    return {
        "north_msgs_per_s": count / span,
        "north_server_cpu_s_per_million": used / count * 1e6,
    }
