"""The console's Kafka view against a fake admin client (no Kafka): every group's offsets and
every partition's offsets are asked at once, within one bounded wait (issue 32: asked one
after the other, the Topics page took 80-120 s to answer after a Kafka restart under load)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from api.console.group_offsets import GroupOffsetsError, Offsets, ask, timed_out
from api.console.kafka_view import KafkaDownError, KafkaView

ANSWER_S = 0.3  # each fake request answers this long after it was sent


class FakeAdmin:
    """Answers every request ANSWER_S after it was made (on a timer thread), or never."""

    def __init__(self, groups: int, *, answer: bool = True) -> None:
        self.groups = [f"g{i:02d}" for i in range(groups)]
        self.answer = answer
        self.requests = 0
        self.listing_errors: list[KafkaError] = []  # a node's error beside the groups listed

    def _later(self, value: Any) -> Future[Any]:
        self.requests += 1
        future: Future[Any] = Future()
        if self.answer:
            timer = threading.Timer(ANSWER_S, lambda: future.set_result(value))
            timer.daemon = True
            timer.start()
        return future

    def list_topics(self, timeout: float) -> Any:
        parts = dict.fromkeys(range(3))
        return SimpleNamespace(topics={
            "t1": SimpleNamespace(error=None, partitions=parts),
            "__consumer_offsets": SimpleNamespace(error=None, partitions=parts),
        })  # fmt: skip

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        valid = [SimpleNamespace(group_id=g, state=SimpleNamespace(name="STABLE"))
                 for g in self.groups]  # fmt: skip
        return self._later(SimpleNamespace(valid=valid, errors=self.listing_errors))

    def list_consumer_group_offsets(self, request: list[Any], request_timeout: float) -> Any:
        gid = request[0].group_id
        committed = [TopicPartition("t1", 0, 40)]
        if gid == "g00":  # a group on a topic deleted since: its lag is left out
            committed.append(TopicPartition("gone", 0, 1))
        return {gid: self._later(SimpleNamespace(topic_partitions=committed))}

    def list_offsets(self, wanted: dict[TopicPartition, Any], request_timeout: float) -> Any:
        out = {}
        for tp in wanted:
            if tp.topic == "gone":
                failed: Future[Any] = Future()
                failed.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
                out[tp] = failed
            else:
                out[tp] = self._later(SimpleNamespace(offset=100 + tp.partition))
        return out


class InProcess:
    """The group offsets' child, in this process and on the fake admin client (the child's
    own behaviour, crashes and all, is tested on a real Kafka: test_group_offsets.py)."""

    def __init__(self, admin: FakeAdmin) -> None:
        self.admin = admin

    def committed(self, groups: list[str]) -> dict[str, Offsets | tuple[int, str]]:
        found = ask([self.admin], groups, 1.0)
        if timed_out(found):
            raise GroupOffsetsError("timed out asking Kafka")
        return found


def _view(admin: FakeAdmin) -> KafkaView:
    view = KafkaView("127.0.0.1:1", timeout_s=1.0)
    view.admin._make = lambda: admin  # type: ignore[assignment,return-value]
    view.admin.start()
    view.group_offsets = InProcess(admin)  # type: ignore[assignment]
    return view


def test_groups_are_asked_at_once_with_their_lag() -> None:
    admin = FakeAdmin(groups=30)
    view = _view(admin)
    started = time.monotonic()
    found = view.groups()
    took = time.monotonic() - started
    # list groups, then 30 groups' offsets together, then the high marks together: 3 rounds,
    # not 30 (one after the other that would be 30 x ANSWER_S = 9 s)
    assert took < 6 * ANSWER_S, took
    assert [g["group"] for g in found] == admin.groups
    assert found[0]["lag"] == {"t1": 60}
    assert found[0]["total_lag"] == 60
    assert all(g["state"] == "STABLE" for g in found)
    assert not view.groups_partial


def test_a_listing_with_a_nodes_error_is_partial_until_one_without() -> None:
    """A restarted Kafka lists groups before its coordinator has loaded them: the node's error
    says the listing is short (the sampler reads it again at its next sample)."""
    admin = FakeAdmin(groups=2)
    admin.listing_errors = [KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)]
    view = _view(admin)
    assert len(view.groups()) == 2
    assert view.groups_partial
    admin.listing_errors = []
    view.groups()
    assert not view.groups_partial


def test_topics_offsets_are_asked_at_once() -> None:
    view = _view(FakeAdmin(groups=0))
    started = time.monotonic()
    [topic] = view.topics()  # __consumer_offsets is not shown
    assert time.monotonic() - started < 4 * ANSWER_S
    assert topic["name"] == "t1"
    assert topic["records"] == 0
    assert [p["high"] for p in topic["partitions"]] == [100, 101, 102]


def test_unanswered_requests_are_kafka_down_and_the_admin_client_is_replaced() -> None:
    admin = FakeAdmin(groups=5, answer=False)
    view = _view(admin)
    view.admin._made_at -= 60  # made long ago: a timeout replaces it at once
    started = time.monotonic()
    with pytest.raises(KafkaDownError):
        view.groups()
    assert time.monotonic() - started < 3.0  # one bounded wait (timeout_s + 1), not 5
    assert view.admin.renewals == 1


def test_group_offsets_answered_with_librdkafkas_timeout_are_kafka_down() -> None:
    """A wedged admin client (librdkafka#5511) answers each group's offsets with _TIMED_OUT:
    the group offsets' child says so (and is replaced, test_group_offsets.py); the page says
    Kafka does not answer."""
    admin = FakeAdmin(groups=3)
    view = _view(admin)

    def stuck(request: list[Any], request_timeout: float) -> Any:
        failed: Future[Any] = Future()
        failed.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
        return {request[0].group_id: failed}

    admin.list_consumer_group_offsets = stuck  # type: ignore[method-assign]
    with pytest.raises(KafkaDownError):
        view.groups()


def test_a_group_whose_offsets_kafka_refused_is_listed_with_its_error_and_a_gone_one_not() -> None:
    admin = FakeAdmin(groups=3)
    view = _view(admin)
    answers = {"g01": KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "g02": KafkaError.GROUP_ID_NOT_FOUND}
    answer = admin.list_consumer_group_offsets

    def refused(request: list[Any], request_timeout: float) -> Any:
        gid = request[0].group_id
        if gid not in answers:
            return answer(request, request_timeout)
        failed: Future[Any] = Future()
        failed.set_exception(KafkaException(KafkaError(answers[gid])))
        return {gid: failed}

    admin.list_consumer_group_offsets = refused  # type: ignore[method-assign]
    found = {g["group"]: g for g in view.groups()}
    assert sorted(found) == ["g00", "g01"]  # g02 is gone
    assert "error" not in found["g00"]
    assert found["g01"]["error"]
    assert found["g01"]["lag"] == {}
