"""iot-api stays ready while one node of a 3-node Kafka cluster is silent (issue 33).

A node cut off without a word (a lost host, a hung process: no RST) keeps its connections "up"
in librdkafka until the socket timeout, and a long-lived client's metadata requests went on
landing on it: during such a cut of one of three nodes (the compose stack's host-loss test, and
SIGSTOP here) iot-api answered ``/readyz`` 503 or not at all, and every Kafka-bound request 503
("Kafka does not answer") for up to 30 s, while two nodes served. SIGSTOP is the silent cut
here: the kernel still completes TCP handshakes with the stopped JVM, but nothing answers.

Needs its own cluster: it stops one of its nodes."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.api.harness import Client, running_api
from tests.bridge.helpers import wait_for

pytestmark = pytest.mark.integration

SILENT_S = 25.0  # past the broker session timeout (9 s): the cluster moves its leaders away


def _leader(bootstrap: str, topic: str) -> int:
    """The node id leading partition 0 of ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader)


def test_ready_and_serving_while_one_of_three_nodes_is_silent(local_cluster_factory: Any) -> None:
    local = local_cluster_factory(nodes=3, partitions=3)
    with running_api(kafka_bootstrap=local.kafka_bootstrap, insecure_anonymous=True) as svc:
        client = Client(svc.port)
        wait_for(lambda: client.request("GET", "/readyz").status == 200, 60, "iot-api ready")
        assert client.publish("silent.t", "x", "text/plain").status == 200
        health = svc.health
        assert health is not None
        # the leader of a partition the publisher knows (its metadata from the publish above):
        # what it sends there after the stop goes to a node that never answers
        leader = _leader(local.kafka_bootstrap, "silent.t")
        node = local.kafka_nodes[leader - 1]
        pid = node.process.pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        slow: list[float] = []
        try:
            silent_at = time.monotonic()
            while time.monotonic() - silent_at < SILENT_S:
                assert health.up, (
                    f"iot-api took Kafka for down {time.monotonic() - silent_at:.1f} s in"
                )
                started = time.monotonic()
                assert client.request("GET", "/readyz", timeout=10).status == 200
                slow.append(time.monotonic() - started)
                time.sleep(0.25)
            # the cluster has moved the silent node's leaders: a publish goes through the two,
            # also to the partitions the silent node led (the producer's metadata still names
            # it: 24 records without a key land on every partition; before socket.timeout.ms
            # was a third of the message's time, they failed with "Message timed out")
            published = client.publish("silent.t", json.dumps([{"n": n} for n in range(24)]))
        finally:
            os.kill(pid, signal.SIGCONT)
            # a clean stop of this cluster takes a minute now (controlled shutdowns around a
            # node back from a long stop); its data is thrown away, so kill it
            for each in local.kafka_nodes:
                each.kill()
        # readiness is the probe's verdict: it never waits on the silent node
        assert max(slow) < 1.0, f"a /readyz took {max(slow):.1f} s"
        assert published.status == 200, published.body
