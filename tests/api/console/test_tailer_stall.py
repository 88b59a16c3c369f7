"""Issue 32: the console's tailer notices a consumer whose fetch has wedged (records wait on
Kafka, none arrive) and replaces it at its positions: nothing skipped, nothing repeated, and
the replacement counted on /metrics. The wedge is the consumer's own partitions paused behind
the tailer's back (a real Kafka, a real consumer that fetches nothing while metadata and
watermarks answer, as after a Kafka kill -9 and restart), which needs no private Kafka."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from prometheus_client import CollectorRegistry

from api.console.fleet import FleetState
from api.console.tailer import Tailer
from api.plumbing.kafka_renew import RenewalCollector
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def _wait(what: str, done: Callable[[], bool], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {deadline_s} s"
        time.sleep(0.05)


def test_a_wedged_fetch_is_replaced_and_the_records_sent_meanwhile_arrive(
    stack: Endpoints, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=2)
    # transactional, as the registry writes the audit topic: its commit markers raise the
    # high watermark past the last record, which must not pass for records waiting
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap,
                         "transactional.id": f"stall-{uuid.uuid4().hex}"})  # fmt: skip
    producer.init_transactions(30)
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        producer.begin_transaction()
        for i in range(sent, sent + n):
            value = json.dumps({"metrics": {"n": i}}).encode()
            producer.produce(topic, key=f"dev-{i % 4}".encode(), value=value)
        producer.commit_transaction(30)
        sent += n

    state = FleetState()
    tailer = Tailer(stack.kafka_bootstrap, {"telemetry": topic}, state, stall_s=2, check_s=0.5)

    def received() -> int:
        with tailer.lock:
            return sum(seen.count for seen in state.devices.values())

    tailer.start()
    try:
        send(20)
        _wait("the first records", lambda: received() == 20, 60)
        checks = tailer.checks
        _wait("stall checks while caught up", lambda: tailer.checks >= checks + 8, 30)
        assert tailer.renewals == 0  # caught up (commit markers and all): nothing to renew

        wedged = tailer.consumer
        assert wedged is not None
        # its own assignment as the tailer made it: `assignment()` from another thread than the
        # one polling waited for minutes (seen once, load 60)
        wedged.pause(tailer.assigned)  # it fetches nothing from here on
        started = time.monotonic()
        send(20)
        _wait("the records sent while wedged", lambda: received() >= 40, 60)
        recovered_s = time.monotonic() - started
        assert tailer.renewals == 1
        assert tailer.consumer is not wedged
        checks = tailer.checks
        _wait("stall checks after", lambda: tailer.checks >= checks + 4, 30)
        assert received() == 40  # nothing repeated by the new consumer
        assert tailer.renewals == 1
        assert 2 <= recovered_s < 30, recovered_s  # noticed after stall_s, within issue 32's bound
        registry = CollectorRegistry()
        registry.register(RenewalCollector(lambda: [tailer]))
        assert (
            registry.get_sample_value(
                "iot_api_kafka_client_renewals_total", {"client": "console-tailer"}
            )
            == 1
        )
        print(f"recovered {recovered_s:.1f} s after the wedge")
    finally:
        tailer.stop()
