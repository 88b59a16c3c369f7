"""The HTTP door's queues over AMQP (`queue/{q}`), with python-qpid-proton's client and rhea
against a real iot-amqp and a real iot-api (its markers' tracker redelivers) on the session's
Kafka: AMQP and HTTP on one queue both ways, each outcome's effect, a receiver killed with
messages unsettled, tenant isolation and the attach errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from proton import Delivery, Message, Timeout
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, BlockingReceiver, LinkDetached

from amqp.service import AmqpService
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from tests.amqp.harness import running_amqp
from tests.amqp.test_northbound import rhea
from tests.api.harness import Client, basic, running_api
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.api.queues.test_app import answer, collect, dead_letters
from tests.api.queues.test_app import receive as http_receive
from tests.conftest import Endpoints
from tests.registry.conftest import fresh_store

pytestmark = pytest.mark.integration
VISIBILITY_S = 3


@dataclass
class Queues:
    amqp: AmqpService
    http: Client  # tenant acme's application over HTTP
    bootstrap: str
    secrets: dict[str, str]

    def connect(self, user: str = "svc/app") -> BlockingConnection:
        return BlockingConnection(
            f"amqp://127.0.0.1:{self.amqp.port}", timeout=20, user=user,
            password=self.secrets[user], allowed_mechs="PLAIN",
        )  # fmt: skip

    def make(self, visibility_s: float = VISIBILITY_S) -> str:
        """A fresh queue of tenant acme (one partition: one consumer at a time owns it)."""
        queue = f"iot.acme.q{uuid.uuid4().hex[:10]}"
        query = f"?partitions=1&visibility={visibility_s}&maxDeliveries=3"
        made = self.http.request("PUT", f"/queues/{queue}{query}")
        assert made.status == 200, made.body
        return queue

    def send_http(self, queue: str, texts: list[str]) -> None:
        reply = self.http.request(
            "POST", f"/queues/{queue}/messages", "\n".join(texts), "text/plain"
        )
        assert reply.status == 200, reply.body


@pytest.fixture(scope="module")
def queues(stack: Endpoints, transactions_ready: None) -> Iterator[Queues]:  # noqa: F811
    store = fresh_store(stack.kafka_bootstrap)
    reg = Registry.open(store, local_admin("test"), None, write=True)
    for tenant in ("acme", "beta"):
        reg.create_tenant(tenant)
    secrets: dict[str, str] = {}
    for name, tenant in (("app", "acme"), ("beta-app", "beta")):
        secret = reg.create_account(name, [Role.API], tenant).secret
        assert secret is not None
        secrets[f"svc/{name}"] = secret
    suffix = uuid.uuid4().hex[:10]
    shared = {
        "kafka_bootstrap": stack.kafka_bootstrap, "registry_auth": True,
        "registry_topic": store.topic, "queue_markers_topic": f"markers.{suffix}",
        "queue_settings_topic": f"queue-settings.{suffix}",
    }  # fmt: skip
    try:
        with (
            running_api(**shared, queue_clock_grace_ms=200) as api,
            running_amqp(**shared) as amqp,
        ):
            http = Client(api.port, basic("app", secrets["svc/app"]))
            yield Queues(amqp, http, stack.kafka_bootstrap, secrets)
    finally:
        store.close()


def text(msg: Message) -> str:
    data = msg.body
    assert isinstance(data, bytes | memoryview), data
    return bytes(data).decode()


def receive(receiver: BlockingReceiver, count: int, within: float = 15) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + within
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count}"
        got.append(receiver.receive(timeout=max(0.1, deadline - time.monotonic())))
    return got


def test_sent_over_amqp_received_over_http_and_the_reverse(queues: Queues) -> None:
    one, two = queues.make(), queues.make()
    conn = queues.connect()
    try:
        sender = conn.create_sender(f"queue/{one}")
        for n in range(3):
            sent = sender.send(Message(body=f"a{n}".encode(), properties={"partitionKey": "k"}))
            assert sent.remote_state == Delivery.ACCEPTED  # once Kafka acknowledged it
        got = collect(queues.http, one, 3, "?max=10&timeout=3000", within=15)
        assert sorted(m["message"] for m in got) == ["a0", "a1", "a2"]
        assert answer(queues.http, one, "ack", [m["receiptHandle"] for m in got]) == ["acked"] * 3

        queues.send_http(two, ["h0", "h1", "h2"])
        receiver = conn.create_receiver(f"queue/{two}", credit=10)
        msgs = receive(receiver, 3)
        for _ in msgs:
            receiver.accept()
        assert sorted(text(m) for m in msgs) == ["h0", "h1", "h2"]
        assert {(m.delivery_count, m.first_acquirer) for m in msgs} == {(0, True)}
        with pytest.raises(Timeout):  # accepted: never again, not even after the visibility
            receiver.receive(timeout=VISIBILITY_S + 1.5)
    finally:
        conn.close()


def test_each_outcome_has_its_effect(queues: Queues) -> None:
    queue = queues.make()
    queues.send_http(queue, ["accept", "release", "modify", "reject"])
    conn = queues.connect()
    try:
        receiver = conn.create_receiver(f"queue/{queue}", credit=10)
        msgs = receive(receiver, 4)
        assert [text(m) for m in msgs] == ["accept", "release", "modify", "reject"]
        receiver.accept()
        receiver.release(delivered=False)  # released: again at once, counted
        modified_at = time.monotonic()
        receiver.release(delivered=True)  # modified: again after the visibility timeout
        receiver.reject()  # straight to the dead-letter topic

        again = receive(receiver, 1, within=VISIBILITY_S - 0.5)[0]  # well before the timeout
        assert (text(again), again.delivery_count, again.first_acquirer) == ("release", 1, False)
        receiver.accept()
        later = receive(receiver, 1, within=10)[0]
        assert text(later) == "modify"
        assert later.delivery_count == 1
        assert time.monotonic() - modified_at >= VISIBILITY_S - 0.5
        receiver.accept()
        dead = dead_letters(queues.bootstrap, f"{queue}.dlq", 1)
        assert [(v, h["iot-delivery-count"]) for v, h in dead] == [(b"reject", b"1")]
        with pytest.raises(Timeout):  # accept and reject: never again
            receiver.receive(timeout=1.5)
    finally:
        conn.close()


def test_a_message_held_unsettled_past_its_visibility_timeout_is_not_delivered_again(
    queues: Queues,
) -> None:
    """The link lives, the transfer is unsettled: its deadline is renewed (renew markers)."""
    queue = queues.make()
    queues.send_http(queue, ["held"])
    one, two = queues.connect(), queues.connect()
    try:
        holder = one.create_receiver(f"queue/{queue}", credit=1)
        assert text(receive(holder, 1)[0]) == "held"
        other = two.create_receiver(f"queue/{queue}", credit=10)
        with pytest.raises(Timeout):  # more than twice the visibility timeout
            other.receive(timeout=2 * VISIBILITY_S + 1)
        with pytest.raises(Timeout):
            holder.receive(timeout=0.2)
        holder.accept()
        with pytest.raises(Timeout):
            other.receive(timeout=1.5)
    finally:
        two.close()
        one.close()


def test_no_credit_nothing_handed_out(queues: Queues) -> None:
    queue = queues.make()
    queues.send_http(queue, ["c0"])
    conn = queues.connect()
    try:
        receiver = conn.create_receiver(f"queue/{queue}", credit=0)
        fetcher = receiver.fetcher
        assert fetcher is not None
        with pytest.raises(Timeout):  # no credit: nothing sent (a wait on nothing: fixed 2 s)
            conn.wait(lambda: bool(fetcher.incoming), timeout=2)
        msg = receiver.receive(timeout=15)  # one credit now
        assert (text(msg), msg.delivery_count, msg.first_acquirer) == ("c0", 0, True)
        receiver.accept()
    finally:
        conn.close()


KILLED = """
import sys
from proton.utils import BlockingConnection
port, secret, queue = sys.argv[1:]
conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=20, user="svc/app",
                          password=secret, allowed_mechs="PLAIN")
receiver = conn.create_receiver(f"queue/{queue}", credit=10)
for _ in range(2):
    msg = receiver.receive(timeout=15)
    print(bytes(msg.body).decode(), flush=True)
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_receiver_killed_with_messages_unsettled_leaves_them_to_the_next(
    queues: Queues,
) -> None:
    queue = queues.make(visibility_s=60)  # back at once: the nacks, not the timeout
    queues.send_http(queue, ["k0", "k1"])
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(queues.amqp.port), queues.secrets["svc/app"], queue],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    try:
        assert child.stdout is not None
        lines = [child.stdout.readline().strip() for _ in range(3)]
        assert sorted(lines[:2]) == ["k0", "k1"]
        assert lines[2] == "holding"
    finally:
        child.kill()  # SIGKILL: the connection drops, nothing settled
        child.wait()
    conn = queues.connect()
    try:
        receiver = conn.create_receiver(f"queue/{queue}", credit=10)
        msgs = receive(receiver, 2, within=15)
        receiver.accept()
        receiver.accept()
        assert sorted(text(m) for m in msgs) == ["k0", "k1"]
        assert {m.delivery_count for m in msgs} == {1}
    finally:
        conn.close()


def refused(conn: BlockingConnection, address: str, *, send: bool, **options: Any) -> str:
    attach = conn.create_sender if send else conn.create_receiver
    with pytest.raises(LinkDetached) as caught:
        attach(address, name=uuid.uuid4().hex, **options)  # each refused link's name its own
    condition = caught.value.link.remote_condition
    assert condition is not None
    return str(condition.name)


def test_other_tenants_unknown_queues_and_wrong_settle_modes_are_refused(
    queues: Queues,
) -> None:
    queue = queues.make()
    beta, conn = queues.connect("svc/beta-app"), queues.connect()
    try:
        assert refused(beta, f"queue/{queue}", send=False) == "amqp:unauthorized-access"
        assert refused(beta, f"queue/{queue}", send=True) == "amqp:unauthorized-access"
        missing = f"iot.acme.q{uuid.uuid4().hex[:10]}"
        assert refused(conn, f"queue/{missing}", send=False) == "amqp:not-found"
        assert refused(conn, "queue/bad name", send=True) == "amqp:not-found"
        assert (
            refused(conn, f"queue/{queue}", send=False, options=AtMostOnce())
            == "amqp:precondition-failed"
        )
        assert (
            refused(conn, f"queue/{queue}", send=True, options=AtMostOnce())
            == "amqp:precondition-failed"
        )
        sender = conn.create_sender(f"queue/{queue}")  # the service and connection go on
        assert sender.send(Message(body=b"after")).remote_state == Delivery.ACCEPTED
    finally:
        conn.close()
        beta.close()


def test_rhea_receives_from_a_queue(queues: Queues) -> None:
    """An independent client (rhea, npm): what HTTP sent, received and accepted over AMQP."""
    queue = queues.make()
    queues.send_http(queue, ["r0", "r1", "r2"])
    port, secret = str(queues.amqp.port), queues.secrets["svc/app"]
    client = rhea("queue", port, "svc/app", secret, queue, "3")
    try:
        out, err = client.communicate(timeout=30)
    finally:
        client.kill()
    assert client.returncode == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    assert sorted(g["body"] for g in got) == ["r0", "r1", "r2"]
    assert {g["delivery_count"] for g in got} == {0}
    # accepted: nothing comes back to HTTP, even past the visibility timeout
    assert http_receive(queues.http, queue, f"?max=10&timeout={(VISIBILITY_S + 2) * 1000}") == []
