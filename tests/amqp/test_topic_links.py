"""MR topics as AMQP addresses (`topic/{name}[::{group}]`) with python-qpid-proton's client
against a real iot-amqp and iot-api on the session's Kafka: consumer groups (members of one
share the topic, each group gets every record), HTTP publish received over AMQP, a released
record sent again, tenant isolation and unknown topics."""

from __future__ import annotations

import time
import uuid

import pytest
from proton import Delivery, Message, Timeout

from stack.topics import TopicSpec, ensure_topics
from tests.amqp.test_queue_links import Queues, queues, receive, refused, text  # noqa: F401
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


def acme_topic(q: Queues) -> str:
    name = f"iot.acme.t{uuid.uuid4().hex[:10]}"
    ensure_topics(q.bootstrap, [TopicSpec(name)], 3)
    return name


def test_groups_share_a_topic_and_each_group_gets_every_record(queues: Queues) -> None:  # noqa: F811
    topic = acme_topic(queues)
    one, two, other = queues.connect(), queues.connect(), queues.connect()
    try:
        first = one.create_receiver(f"topic/{topic}::g1", name="a", credit=20)
        second = two.create_receiver(f"topic/{topic}::g1", name="b", credit=20)
        third = other.create_receiver(f"topic/{topic}::g2", name="c", credit=20)
        sender = one.create_sender(f"topic/{topic}")
        sent = [f"r{i}" for i in range(12)]
        for i, body in enumerate(sent):
            props = {"partitionKey": f"dev-{i % 6}"}
            outcome = sender.send(Message(body=body.encode(), properties=props))
            assert outcome.remote_state == Delivery.ACCEPTED
        got: dict[str, list[str]] = {"a": [], "b": []}
        deadline = time.monotonic() + 15
        while len(got["a"]) + len(got["b"]) < 12:
            assert time.monotonic() < deadline, got
            for name, receiver in (("a", first), ("b", second)):
                try:
                    got[name].append(text(receiver.receive(timeout=0.2)))
                except Timeout:
                    continue
                receiver.accept()
        assert sorted(got["a"] + got["b"]) == sorted(sent)  # each once within the group
        assert got["a"]
        assert got["b"]  # both members had a share
        everything = receive(third, 12)
        third.settle(Delivery.ACCEPTED)
        assert sorted(text(m) for m in everything) == sorted(sent)  # the other group: all
    finally:
        other.close()
        two.close()
        one.close()


def test_http_publish_received_and_a_released_record_comes_again(queues: Queues) -> None:  # noqa: F811
    topic = acme_topic(queues)
    conn = queues.connect()
    try:
        receiver = conn.create_receiver(f"topic/{topic}", name=uuid.uuid4().hex, credit=10)
        reply = queues.http.request("POST", f"/events/{topic}", "h0\nh1", "text/plain")
        assert reply.status == 200, reply.body
        msgs = receive(receiver, 2)
        texts = [text(m) for m in msgs]
        assert sorted(texts) == ["h0", "h1"]
        receiver.accept()
        receiver.release(delivered=False)  # the second: sent again on this link
        again = receive(receiver, 1)[0]
        assert text(again) == texts[1]
        receiver.accept()
        with pytest.raises(Timeout):
            receiver.receive(timeout=1.0)
    finally:
        conn.close()


def test_no_credit_no_record_and_a_member_gone_unsettled_leaves_it_to_the_group(
    queues: Queues,  # noqa: F811
) -> None:
    topic = acme_topic(queues)
    first = queues.connect()
    receiver = first.create_receiver(f"topic/{topic}::paced", name="m1", credit=0)
    reply = queues.http.request("POST", f"/events/{topic}", "p0", "text/plain")
    assert reply.status == 200, reply.body
    fetcher = receiver.fetcher
    assert fetcher is not None
    with pytest.raises(Timeout):  # no credit: nothing may arrive (a wait on nothing: fixed 2 s)
        first.wait(lambda: bool(fetcher.incoming), timeout=2)
    assert text(receiver.receive(timeout=15)) == "p0"  # one credit now
    first.close()  # before accepting it: not committed
    second = queues.connect()
    try:
        receiver = second.create_receiver(f"topic/{topic}::paced", name="m2", credit=5)
        assert text(receive(receiver, 1)[0]) == "p0"
        receiver.accept()
    finally:
        second.close()


def test_other_tenants_and_unknown_topics_are_refused(queues: Queues) -> None:  # noqa: F811
    topic = acme_topic(queues)
    beta, conn = queues.connect("svc/beta-app"), queues.connect()
    try:
        assert refused(beta, f"topic/{topic}", send=False) == "amqp:unauthorized-access"
        assert refused(beta, f"topic/{topic}", send=True) == "amqp:unauthorized-access"
        missing = f"iot.acme.t{uuid.uuid4().hex[:10]}"
        assert refused(conn, f"topic/{missing}", send=False) == "amqp:not-found"
        assert refused(conn, f"topic/{topic}::bad group", send=False) == "amqp:not-found"
        sender = conn.create_sender(f"topic/{topic}")  # the connection goes on
        assert sender.send(Message(body=b"after")).remote_state == Delivery.ACCEPTED
    finally:
        conn.close()
        beta.close()
