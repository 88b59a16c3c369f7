"""iot-amqp end to end with python-qpid-proton's client: SASL PLAIN against a registry on the
session's Kafka (tenants default and acme, devices `pump-1`, `acme/pump-1`, `acme/pump-2`, an
account `svc/app`), uploads into fresh topics, what lands in Kafka and what the client sees."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
import pytest
from proton import (
    ConnectionException,
    Data,
    Described,
    Link,
    Message,
    symbol,
    ulong,
)
from proton._data import PythonAMQPData
from proton._delivery import DispositionType
from proton.reactor import AtMostOnce, LinkOption
from proton.utils import BlockingConnection, BlockingSender, ConnectionClosed, LinkDetached

from amqp import sasl
from amqp.service import AmqpService
from registry.model import Quotas, Role
from registry.permissions import local_admin
from registry.service import Registry
from stack.topics import TopicSpec, ensure_topics
from tests.amqp.harness import running_amqp
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.bridge.helpers import Record, consume
from tests.conftest import Endpoints
from tests.registry.conftest import fresh_store

pytestmark = pytest.mark.integration


def reading(seq: int) -> bytes:
    return orjson.dumps({"ts": 1_700_000_000_000 + seq, "seq": seq, "metrics": {"t": 20.0}})


def seq_of(record: Record) -> int:
    seq = record.json()["seq"]
    assert isinstance(seq, int)
    return seq


@dataclass
class Door:
    service: AmqpService
    bootstrap: str
    base: str  # topic prefix: {base}.telemetry, {base}.events, {base}.dlq
    secrets: dict[str, str]
    registry_topic: str
    registry: Registry

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.service.port}"

    def connect(self, user: str, secret: str | None = None) -> BlockingConnection:
        return BlockingConnection(
            self.url, timeout=20, user=user, password=secret or self.secrets[user],
            allowed_mechs="PLAIN",
        )  # fmt: skip

    def topic(self, kind: str, tenant: str = "default") -> str:
        return f"{self.base}.{kind}" if tenant == "default" else f"{self.base}.{tenant}.{kind}"

    def read(
        self, topic: str, count: int, where: Callable[[Record], bool] = lambda _: True
    ) -> list[Record]:
        """``count`` records of ``topic`` that ``where`` picks (other tests share the topics)."""
        found = consume(
            self.bootstrap, [topic], until=lambda rs: sum(map(where, rs)) >= count, timeout=30
        )
        return sorted(filter(where, found), key=lambda r: (r.partition, r.offset))


@pytest.fixture(scope="module")
def door(stack: Endpoints, transactions_ready: None) -> Iterator[Door]:  # noqa: F811
    suffix = uuid.uuid4().hex[:10]
    store = fresh_store(stack.kafka_bootstrap)
    reg = Registry.open(store, local_admin("test"), None, write=True)
    secrets: dict[str, str] = {}
    reg.create_tenant("default")
    reg.create_tenant("acme")
    reg.create_tenant("slow", Quotas(msgs_per_s=0.5))
    devices = (("default", "pump-1"), ("acme", "acme/pump-1"), ("acme", "acme/pump-2"),
               ("acme", "acme/pump-3"), ("slow", "slow/pump-1"))  # fmt: skip
    for tenant, user in devices:
        secret = reg.add_device(tenant, user.rpartition("/")[2]).secret
        assert secret is not None
        secrets[user] = secret
    app = reg.create_account("app", [Role.API]).secret
    assert app is not None
    secrets["svc/app"] = app
    base = f"amqp{suffix}"
    ensure_topics(
        stack.kafka_bootstrap,
        [TopicSpec(f"{base}.{kind}") for kind in ("telemetry", "events", "dlq")],
        3,
    )
    try:
        with running_amqp(
            kafka_bootstrap=stack.kafka_bootstrap,
            registry_auth=True,
            registry_topic=store.topic,
            topic_telemetry=f"{base}.telemetry",
            topic_events=f"{base}.events",
            topic_dlq=f"{base}.dlq",
            max_payload_bytes=4096,
            max_message_bytes=16384,
            login_check_s=0.2,
        ) as service:
            yield Door(service, stack.kafka_bootstrap, base, secrets, store.topic, reg)
    finally:
        store.close()


def test_unsettled_telemetry_lands_keyed_with_the_bridges_headers(door: Door) -> None:
    conn = door.connect("pump-1")
    try:
        sender = conn.create_sender(None)  # anonymous terminus, `to` per message (Hono)
        for seq in range(5):
            sender.send(Message(address="telemetry", body=reading(seq), inferred=True))
        sender.send(Message(address="t", body=reading(5).decode()))  # AmqpValue string
    finally:
        conn.close()
    records = door.read(door.topic("telemetry"), 6)
    assert [seq_of(r) for r in records] == list(range(6))
    for r in records:
        assert r.key == b"pump-1"
        assert r.headers["mqtt_topic"] == b"devices/pump-1/telemetry"
        assert r.headers["qos"] == b"1"
        assert r.headers["orig_adapter"] == b"amqp"
        assert "received_at" in r.headers


def test_a_tenant_device_with_hono_login_and_a_fixed_link_target(door: Door) -> None:
    conn = door.connect("pump-2@acme", door.secrets["acme/pump-2"])
    try:
        sender = conn.create_sender("event")  # JMS-style: the link's target is the address
        event = orjson.dumps({"ts": 1, "seq": 7, "type": "door_open"})
        assert outcome(sender, Message(body=event, inferred=True)) == ("accepted", None, {})
    finally:
        conn.close()
    (record,) = door.read(door.topic("events", "acme"), 1, lambda r: seq_of(r) == 7)
    assert record.key == b"pump-2"
    assert record.headers["mqtt_topic"] == b"tenants/acme/devices/pump-2/events"
    assert record.headers["tenant"] == b"acme"
    assert record.headers["orig_adapter"] == b"amqp"


def test_presettled_is_at_most_once(door: Door) -> None:
    conn = door.connect("acme/pump-1")
    try:
        sender = conn.create_sender(None, options=AtMostOnce())
        for seq in (100, 101):
            sender.send(Message(address="t", body=reading(seq), inferred=True))
        boot = orjson.dumps({"ts": 1, "seq": 102, "type": "boot"})
        sender.send(Message(address="e", body=boot, inferred=True))
    finally:
        conn.close()
    records = door.read(door.topic("telemetry", "acme"), 2, lambda r: seq_of(r) >= 100)
    assert sorted(seq_of(r) for r in records) == [100, 101]
    assert all(r.headers["qos"] == b"0" for r in records)
    (event,) = door.read(door.topic("events", "acme"), 1, lambda r: seq_of(r) == 102)
    assert event.headers["qos"] == b"0"


def outcome(sender: BlockingSender, msg: Message) -> tuple[str, str | None, dict[str, str]]:
    """Send ``msg`` unsettled; the outcome the server settled it with, its condition, info."""
    dlv = sender.send(msg, error_states=[])
    cond = dlv.remote.condition
    state = DispositionType(dlv.remote_state).name.lower()
    if cond is None:
        return state, None, {}
    info = {str(k): str(v) for k, v in cond.info.items()} if isinstance(cond.info, dict) else {}
    return state, cond.name, info


def test_impersonation_and_unknown_addresses_are_refused(door: Door) -> None:
    conn = door.connect("acme/pump-1")
    sender = conn.create_sender(None)
    try:
        for to, condition in (
            ("telemetry/acme/pump-2", "amqp:unauthorized-access"),
            ("telemetry/default/pump-1", "amqp:unauthorized-access"),
            ("event//pump-2", "amqp:unauthorized-access"),
            ("queue/jobs", "amqp:not-found"),
            (None, "amqp:not-found"),
        ):
            msg = Message(address=to, body=reading(1), inferred=True)
            assert outcome(sender, msg)[:2] == ("rejected", condition), to
        msg = Message(address="telemetry/acme/pump-1", body=reading(9), inferred=True)
        assert outcome(sender, msg) == ("accepted", None, {})
    finally:
        conn.close()
    # the one accepted message is the only record: nothing was written for the refused ones
    (record,) = door.read(door.topic("telemetry", "acme"), 1, lambda r: seq_of(r) < 100)
    assert seq_of(record) == 9


def test_bad_payloads_are_dead_lettered_then_rejected_with_the_bridges_code(door: Door) -> None:
    conn = door.connect("pump-1")
    try:
        sender = conn.create_sender(None)
        bad = Message(address="telemetry", body=b"{not json", inferred=True)
        assert outcome(sender, bad) == ("rejected", "hono:bad-request", {"code": "not_json"})
        big = orjson.dumps({"ts": 1, "seq": 1, "metrics": {"t": 1}, "pad": "x" * 5000})
        assert outcome(sender, Message(address="telemetry", body=big, inferred=True)) == (
            "rejected", "hono:bad-request", {"code": "oversized"},
        )  # fmt: skip
        as_map = Message(address="telemetry", body={"ts": 1, "seq": 1, "metrics": {}})
        assert outcome(sender, as_map) == ("rejected", "hono:bad-request", {"code": "bad_body"})
        # the link and the connection are still usable after client errors
        good = Message(address="telemetry", body=reading(50), inferred=True)
        assert outcome(sender, good) == ("accepted", None, {})
    finally:
        conn.close()
    letters = door.read(door.topic("dlq"), 2)
    assert sorted(r.headers["error"] for r in letters) == [b"not_json", b"oversized"]
    assert all(r.headers["orig_adapter"] == b"amqp" for r in letters)
    assert all(r.key == b"pump-1" for r in letters)


def test_over_the_tenants_quota_is_dead_lettered_then_rejected(door: Door) -> None:
    conn = door.connect("slow/pump-1")
    try:
        sender = conn.create_sender(None)
        seen = [
            outcome(sender, Message(address="t", body=reading(s), inferred=True)) for s in (1, 2)
        ]
    finally:
        conn.close()
    # 0.5 msgs/s, a burst of 1: the first goes through, the second (a moment later) does not
    assert seen[0] == ("accepted", None, {})
    assert seen[1] == ("rejected", "amqp:resource-limit-exceeded", {"code": "quota_exceeded"})
    (letter,) = door.read(door.topic("dlq", "slow"), 1)
    assert (letter.key, letter.headers["error"]) == (b"pump-1", b"quota_exceeded")
    assert letter.headers["orig_adapter"] == b"amqp"


def test_a_message_over_max_message_size_detaches_the_link(door: Door) -> None:
    conn = door.connect("pump-1")
    try:
        sender = conn.create_sender(None)
        huge = Message(address="telemetry", body=b"x" * 40000, inferred=True)
        with pytest.raises(LinkDetached) as caught:
            sender.send(huge)
        assert caught.value.condition == "amqp:link:message-size-exceeded"
        again = conn.create_sender(None)  # the connection stays up
        good = Message(address="telemetry", body=reading(60), inferred=True)
        assert outcome(again, good) == ("accepted", None, {})
    finally:
        conn.close()


class _RcvSecond(LinkOption):
    def apply(self, link: Link) -> None:
        link.rcv_settle_mode = Link.RCV_SECOND


def test_wrong_settle_mode_and_receiving_are_refused_at_attach(door: Door) -> None:
    conn = door.connect("pump-1")
    try:
        with pytest.raises(LinkDetached) as second:
            conn.create_sender(None, options=_RcvSecond())
        assert second.value.condition == "amqp:not-implemented"
        with pytest.raises(LinkDetached) as receiver:  # `command` is a device's: test_commands
            conn.create_receiver("nothing/here")
        assert receiver.value.condition == "amqp:not-found"
        with pytest.raises(LinkDetached) as northbound:  # applications': test_northbound
            conn.create_receiver("telemetry/default")
        assert northbound.value.condition == "amqp:unauthorized-access"
        with pytest.raises(LinkDetached) as queue:  # queues are applications': test_queue_links
            conn.create_sender("queue/jobs")
        assert queue.value.condition == "amqp:unauthorized-access"
        with pytest.raises(LinkDetached) as unknown:
            conn.create_sender("jobs/default")
        assert unknown.value.condition == "amqp:not-found"
    finally:
        conn.close()


def test_wrong_secret_anonymous_and_accounts(door: Door) -> None:
    with pytest.raises(ConnectionException, match="Authentication failed"):
        door.connect("pump-1", "not-the-secret")
    with pytest.raises(ConnectionException, match="Authentication failed"):
        door.connect("acme/pump-9", "whatever")
    with pytest.raises(ConnectionException, match="Authentication failed"):
        BlockingConnection(door.url, timeout=20, allowed_mechs="ANONYMOUS")
    conn = door.connect("svc/app")  # an account logs in, but is no device
    try:
        msg = Message(address="telemetry/default/pump-1", body=reading(1), inferred=True)
        assert outcome(conn.create_sender(None), msg)[:2] == (
            "rejected", "amqp:unauthorized-access",
        )  # fmt: skip
    finally:
        conn.close()


def test_a_device_disabled_while_connected_is_closed(door: Door) -> None:
    conn = door.connect("acme/pump-3")
    try:
        msg = Message(address="telemetry", body=reading(1), inferred=True)
        assert outcome(conn.create_sender(None), msg)[0] == "accepted"
        door.registry.set_device_disabled("acme", "pump-3", True)
        with pytest.raises(ConnectionClosed) as caught:
            conn.wait(lambda: False, timeout=20, msg="still open")
        assert "amqp:unauthorized-access" in str(caught.value)
    finally:
        conn.close()
    with pytest.raises(ConnectionException, match="Authentication failed"):
        door.connect("acme/pump-3")


def _raw(door: Door, data: bytes) -> bytes:
    """Write ``data`` on a fresh socket; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", door.service.port), timeout=20) as sock:
        sock.sendall(data)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


def _frame(descriptor: int, fields: list[PythonAMQPData], kind: int = 0) -> bytes:
    """A frame (AMQP ``kind`` 0, SASL 1) whose body is a described list."""
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = data.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, kind, 0) + body


def _plain_init(user: str, secret: str) -> bytes:
    return _frame(0x41, [symbol("PLAIN"), f"\0{user}\0{secret}".encode()], kind=1)


def test_malformed_bytes_end_only_that_connection(door: Door) -> None:
    # no SASL at all: told what the server speaks, then closed
    assert _raw(door, b"AMQP\x00\x01\x00\x00") == sasl.SASL_HEADER
    # garbage where a SASL frame belongs
    assert _raw(door, sasl.SASL_HEADER + b"\xff" * 64).startswith(sasl.SASL_HEADER)
    # logged in, a valid open, then a frame that is no AMQP: closed with framing-error
    login = sasl.SASL_HEADER + _plain_init("pump-1", door.secrets["pump-1"])
    garbage = struct.pack(">IBBH", 16, 2, 0, 0) + b"\xde\xad\xbe\xef" * 2
    answer = _raw(door, login + sasl.AMQP_HEADER + _frame(0x10, ["raw-client"]) + garbage)
    assert b"amqp:connection:framing-error" in answer
    # the door still serves
    conn = door.connect("pump-1")
    try:
        good = Message(address="telemetry", body=reading(70), inferred=True)
        assert outcome(conn.create_sender(None), good) == ("accepted", None, {})
    finally:
        conn.close()
