"""The long-lived Kafka client that is replaced when its calls keep timing out (issue 32)."""

from __future__ import annotations

import threading
import time
import traceback
from concurrent.futures import Future
from typing import ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import CollectorRegistry

from api.plumbing.kafka_renew import RenewalCollector, Renewing, timed_out, wait_all
from kafka_watch.stall import StallJudge


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _made() -> tuple[Renewing[int], Clock]:
    clock = Clock()
    made = iter(range(1, 100))
    client = Renewing("t", lambda: next(made), failures=2, min_gap_s=10.0, clock=clock)
    client.start()
    return client, clock


def _stuck(_client: int) -> None:
    raise TimeoutError


def test_a_client_timing_out_twice_is_replaced_and_counted() -> None:
    client, clock = _made()
    clock.now += 30
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert (client.client, client.failures, client.renewals) == (1, 1, 0)
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert (client.client, client.failures, client.renewals) == (2, 0, 1)
    assert client.call(lambda c: c * 10) == 20  # the new client answers
    assert client.healthy


def test_answers_between_timeouts_do_not_save_a_wedged_client() -> None:
    """Issue 32's wedge: metadata answers, the coordinator requests time out; the timeouts
    count within the window whatever answers in between, other errors do not count."""
    client, clock = _made()
    clock.now += 30
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert client.call(lambda c: c) == 1
    refused = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
    for _ in range(3):
        with pytest.raises(KafkaException):
            client.call(lambda c: (_ for _ in ()).throw(refused))
    assert (client.client, client.failures, client.renewals) == (1, 1, 0)
    clock.now += 5
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert (client.client, client.failures, client.renewals) == (2, 0, 1)


def test_timeouts_older_than_the_window_are_forgotten() -> None:
    client, clock = _made()
    clock.now += 30
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    clock.now += 61
    assert client.healthy
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert (client.client, client.failures, client.renewals) == (1, 1, 0)


def _silent_on_client_1(c: int) -> int:
    if c == 1:  # the first client keeps asking a silent node
        raise TimeoutError
    return c * 10


def test_a_fresh_retry_answers_from_a_new_client_at_the_first_timeout() -> None:
    client, clock = _made()
    clock.now += 30
    with pytest.raises(TimeoutError):  # without it: the timeout is the caller's
        client.call(_silent_on_client_1)
    assert client.call(_silent_on_client_1, fresh_retry=True) == 20
    assert (client.client, client.renewals, client.failures) == (2, 1, 0)


def test_a_fresh_retry_waits_out_the_gap_while_kafka_is_down() -> None:
    client, clock = _made()
    clock.now += 30
    with pytest.raises(TimeoutError):
        client.call(_stuck, fresh_retry=True)  # renewed, and the new client timed out too
    assert (client.client, client.renewals, client.failures) == (2, 1, 1)
    clock.now += 1.0
    with pytest.raises(TimeoutError):  # within the gap: no new client, no retry
        client.call(_stuck, fresh_retry=True)
    assert (client.client, client.renewals) == (2, 1)


def test_no_more_than_one_new_client_per_gap_while_kafka_is_down() -> None:
    client, clock = _made()
    for _ in range(10):  # 10 timeouts within 5 s of the client's making: kept
        clock.now += 0.5
        with pytest.raises(TimeoutError):
            client.call(_stuck)
    assert client.renewals == 0
    clock.now += 5.0
    with pytest.raises(TimeoutError):
        client.call(_stuck)
    assert (client.client, client.renewals) == (2, 1)


def test_a_late_timeout_of_a_replaced_client_does_not_count_against_the_new_one() -> None:
    client, clock = _made()
    clock.now += 30
    old = client.client

    def stuck_after_renewal(c: int) -> None:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                client.call(_stuck)
        raise TimeoutError  # the call that had taken `old` ends only now

    with pytest.raises(TimeoutError):
        client.call(stuck_after_renewal)
    assert client.client != old
    assert (client.failures, client.renewals) == (0, 1)


def test_librdkafkas_own_timeouts_count() -> None:
    assert timed_out(TimeoutError())
    assert timed_out(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    assert timed_out(KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)))
    assert not timed_out(KafkaException(KafkaError(KafkaError._TRANSPORT)))
    assert not timed_out(ValueError())


def test_the_collector_shows_every_client() -> None:
    client, clock = _made()
    clock.now += 30
    for _ in range(3):
        with pytest.raises(TimeoutError):
            client.call(_stuck)
    registry = CollectorRegistry()
    registry.register(RenewalCollector(lambda: [client]))
    assert registry.get_sample_value("iot_api_kafka_client_renewals_total", {"client": "t"}) == 1
    assert registry.get_sample_value("iot_api_kafka_client_failing", {"client": "t"}) == 1


def test_wait_all_gives_each_result_or_exception_and_times_out_on_an_unanswered_one() -> None:
    answered, failed, unanswered = Future[int](), Future[int](), Future[int]()
    answered.set_result(7)
    error = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    failed.set_exception(error)
    assert wait_all({"a": answered, "b": failed}, 1.0) == {"a": 7, "b": error}
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="1 of 2"):
        wait_all({"a": answered, "c": unanswered}, 0.2)
    assert time.monotonic() - started < 1.0  # one bounded wait for them all
    assert timed_out(TimeoutError())  # so Renewing.call counts it against its client
    late = Future[int]()  # librdkafka's own timeout, as a wedged admin client answers
    late.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
    with pytest.raises(KafkaException):
        wait_all({"a": answered, "b": late}, 1.0)


class _Client:
    """A stand-in client that records the thread that frees it."""

    freed_in: ClassVar[list[str]] = []

    def __del__(self) -> None:
        _Client.freed_in.append(threading.current_thread().name)


def test_a_replaced_client_is_freed_in_the_reaper_thread_not_where_its_error_lands() -> None:
    """Freeing a librdkafka client waits for its broker threads (7 s behind a DNS lookup of a
    cut-off host): the error a timed-out call raises must not hold the old client, which the
    reaper thread frees instead, wherever the error is handled."""
    _Client.freed_in = []
    clock = Clock()
    client: Renewing[_Client] = Renewing("t", _Client, failures=1, min_gap_s=0, clock=clock)
    client.start()

    def stuck(_c: _Client) -> None:
        raise TimeoutError("unanswered")

    with pytest.raises(TimeoutError) as raised:
        client.call(stuck)
    assert client.renewals == 1
    frames = traceback.walk_tb(raised.value.__traceback__)
    assert not [f for f, _ in frames if any(isinstance(v, _Client) for v in f.f_locals.values())]
    deadline = time.monotonic() + 10
    while not _Client.freed_in and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _Client.freed_in == ["kafka-client-reaper"]
    client.close()


def test_a_stall_judge_is_counted_as_a_renewed_client() -> None:
    judge = StallJudge("console-tailer", 10.0)
    assert judge.check(0.0, {("t", 0): 1}, {("t", 0): 9}) == []
    assert judge.check(10.0, {("t", 0): 1}, {("t", 0): 9}) == [("t", 0)]
    registry = CollectorRegistry()
    registry.register(RenewalCollector(lambda: [judge]))
    labels = {"client": "console-tailer"}
    assert registry.get_sample_value("iot_api_kafka_client_failing", labels) == 1
    judge.renewed()
    assert registry.get_sample_value("iot_api_kafka_client_renewals_total", labels) == 1
    assert registry.get_sample_value("iot_api_kafka_client_failing", labels) == 0
