"""Limits and degraded modes of a real iot-api: the long-poll cap, MR's /metrics JSON, Kafka
down answered 503 quickly (no hang) and served again when it is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.api.harness import Client, Reply, running_api
from tests.api.mr.test_json_metrics import MR_NAMES as MR_METRIC_NAMES
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration


def test_long_polls_beyond_the_cap_are_429_at_once(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic = topic_factory("api", partitions=1)
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True, max_long_polls=2
    ) as svc:
        api = Client(svc.port)
        groups = [group_factory() for _ in range(3)]
        assert api.publish(topic, "old", "text/plain").status == 200  # known to this service
        for group in groups:
            assert api.consume(topic, group, "c", "?timeout=0").status == 200
        answers: list[Reply] = []
        pollers = [
            threading.Thread(
                target=lambda g=g: answers.append(api.consume(topic, g, "c", "?timeout=4000"))
            )
            for g in groups[:2]
        ]
        for poller in pollers:
            poller.start()
        time.sleep(1.0)  # both are waiting inside the service
        started = time.monotonic()
        refused = api.consume(topic, groups[2], "c", "?timeout=4000")
        took = time.monotonic() - started
        assert refused.status == 429
        assert refused.json()["mrstatus"] == 5012
        assert took < 1.0  # refused at once, not queued
        assert api.publish(topic, "x", "text/plain").status == 200  # publishes are not capped
        for poller in pollers:
            poller.join(30)
        assert [a.status for a in answers] == [200, 200]
        # a long poll counts until its commit is done, which may outlast its answer a little
        deadline = time.monotonic() + 15
        while api.consume(topic, groups[2], "c", "?timeout=2000").status == 429:
            assert time.monotonic() < deadline, "the cap never freed"
            time.sleep(0.2)


def test_a_new_consumer_id_beyond_the_bound_closes_an_idle_one_or_is_429(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    """librdkafka clients are bounded per process (glibc's pthread keys): the pool holds at most
    ``max_consumers``; a new id closes the least recently used idle one, and when every one is
    serving a long poll it is refused with MR's 429, never a 500."""
    topic = topic_factory("api", partitions=1)
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True, max_consumers=2
    ) as svc:
        api = Client(svc.port)
        group = group_factory()
        assert api.publish(topic, "old", "text/plain").status == 200
        for cid in ("a", "b", "c"):  # c closes a (idle, least recently used)
            assert api.consume(topic, group, cid, "?timeout=0").status == 200
        assert svc.pool.evictions == 1
        assert len(svc.pool) == 2
        answers: list[Reply] = []
        pollers = [
            threading.Thread(
                target=lambda c=c: answers.append(api.consume(topic, group, c, "?timeout=4000"))
            )
            for c in ("b", "c")
        ]
        for poller in pollers:
            poller.start()
        time.sleep(1.0)  # both are waiting inside the service: nothing idle to close
        refused = api.consume(topic, group, "d", "?timeout=4000")
        assert refused.status == 429
        assert refused.json()["mrstatus"] == 5012
        assert "Too many consumers in use" in refused.json()["message"]
        for poller in pollers:
            poller.join(30)
        assert [a.status for a in answers] == [200, 200]
        deadline = time.monotonic() + 15  # idle again (after their commits): d gets one
        while (reply := api.consume(topic, group, "d", "?timeout=0")).status == 429:
            assert time.monotonic() < deadline, "no consumer became idle"
            time.sleep(0.2)
        assert reply.status == 200
        assert svc.pool.evictions == 2


def test_metrics_in_mr_json_and_prometheus(
    stack: Endpoints, topic_factory: Callable[..., str], group_factory: Callable[[], str]
) -> None:
    topic, group = topic_factory("api", partitions=1), group_factory()
    with running_api(kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True) as svc:
        api = Client(svc.port)
        api.consume(topic, group, "c", "?timeout=0")
        assert api.publish(topic, "a\nb\nc", "text/plain").json()["count"] == 3
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += api.consume(topic, group, "c", "?timeout=2000").json()
        mr = api.request("GET", "/metrics", headers={"Accept": "application/json"})
        assert mr.status == 200
        assert mr.headers["Content-Type"].startswith("application/json")
        assert mr.headers["Cache-Control"] == "no-store, no-cache, must-revalidate"
        body = mr.json()
        assert set(body) == MR_METRIC_NAMES
        assert body["recvTotalEvents"]["raw"] == 3
        assert body["sendTotalEvents"]["raw"] == 3
        assert body["recvEpsLong"]["raw"] > 0
        assert body["kafkaConsumerCacheMiss"]["raw"] >= 1
        assert body["kafkaConsumerCacheHit"]["raw"] >= 1
        one = api.request("GET", "/metrics/recvTotalEvents").json()
        assert one == {"recvTotalEvents": body["recvTotalEvents"]}
        missing = api.request("GET", "/metrics/noSuchMetric")
        assert missing.status == 404
        assert missing.json()["message"] == "No metric named [noSuchMetric]."
        prometheus = api.request("GET", "/metrics")  # a scraper, or no Accept at all
        assert prometheus.headers["Content-Type"].startswith("text/plain")
        assert b"iot_api_published_messages_total 3.0" in prometheus.body


def test_kafka_down_is_503_quickly_and_served_again(
    local_stack_factory: Callable[..., Any], group_factory: Callable[[], str]
) -> None:
    local = local_stack_factory(partitions=1)
    group = group_factory()
    with running_api(kafka_bootstrap=local.kafka_bootstrap, insecure_anonymous=True) as svc:
        api = Client(svc.port)
        assert api.publish("api.down", "before", "text/plain").status == 200
        deadline = time.monotonic() + 120  # a fresh broker's group coordinator may load slowly
        while api.consume("api.down", group, "c", "?timeout=0").status != 200:
            assert time.monotonic() < deadline, "the group never started"
            time.sleep(1)
        local.kafka.stop()
        stopped = time.monotonic()
        timings: dict[str, float] = {}
        deadline = time.monotonic() + 30
        while True:  # the probe notices within a few seconds; meanwhile requests are bounded
            started = time.monotonic()
            reply = api.publish("api.down", "during", "text/plain")
            assert time.monotonic() - started < 35  # publish_timeout_ms (30 s) bounds it
            if reply.status == 503:
                break
            assert time.monotonic() < deadline, "never 503"
        timings["detected_after_s"] = time.monotonic() - stopped
        assert reply.json()["mrstatus"] in (3002, 5007)
        for method, path in (
            ("POST", "/events/api.down"),
            ("GET", f"/events/api.down/{group}/c?timeout=5000"),
            ("GET", "/topics"),
        ):
            started = time.monotonic()
            reply = api.request(method, path, "x" if method == "POST" else None, "text/plain")
            timings[path] = time.monotonic() - started
            assert reply.status == 503, (path, reply.body)
            assert reply.json()["mrstatus"] == 3002
            assert timings[path] < 1.0, timings  # at once, not after a timeout
        assert api.request("GET", "/readyz").status == 503
        assert api.request("GET", "/healthz").status == 200
        print("kafka down:", timings)
        local.kafka.start()
        deadline = time.monotonic() + 90
        while api.publish("api.down", "after", "text/plain").status != 200:
            assert time.monotonic() < deadline, "not served again"
            time.sleep(1)
