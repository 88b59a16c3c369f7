"""Applications on iot-amqp's northbound links (Hono's AMQP APIs over Kafka), with
python-qpid-proton's client against the session's Kafka and Mosquitto: telemetry in order,
receivers sharing a link name, credit, redelivery after a receiver went away, tenant
isolation, and a command sent northbound answered by an AMQP device."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from proton import Delivery, Message, Timeout
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, BlockingReceiver, LinkDetached

from amqp.service import AmqpService
from api.http_devices.model import DeviceRef
from commands.config import CommandConfig
from commands.service import CommandService
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from stack.topics import TopicSpec, ensure_topics
from tests.amqp.harness import rhea, running_amqp
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.commands.harness import forget_session, unique, wait_for
from tests.conftest import Endpoints
from tests.plugins.mqtt_logins import bridge_login_settings
from tests.registry.conftest import fresh_store

pytestmark = pytest.mark.integration


def reading(seq: int) -> bytes:
    return orjson.dumps({"ts": 1_700_000_000_000 + seq, "seq": seq, "metrics": {"t": 20.0}})


def body(msg: Message) -> Any:
    """The JSON in a message's Data section."""
    data = msg.body
    assert isinstance(data, bytes | memoryview)
    return orjson.loads(bytes(data))


def seq(msg: Message) -> int:
    found = body(msg)["seq"]
    assert isinstance(found, int)
    return found


def props(msg: Message) -> dict[str, Any]:
    assert msg.properties is not None
    return dict(msg.properties)


@dataclass
class North:
    service: AmqpService
    bootstrap: str
    base: str  # iot.{x}: topics {base}.telemetry, tenant acme's iot.acme.{x}.telemetry
    secrets: dict[str, str]

    def connect(self, user: str) -> BlockingConnection:
        return BlockingConnection(
            f"amqp://127.0.0.1:{self.service.port}", timeout=20, user=user,
            password=self.secrets[user], allowed_mechs="PLAIN",
        )  # fmt: skip

    def produce(self, items: list[tuple[bytes, bytes]]) -> None:
        """Records straight into tenant acme's telemetry topic (as the bridge writes them)."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        topic = "iot.acme." + self.base.removeprefix("iot.") + ".telemetry"
        for key, value in items:
            producer.produce(topic, value, key)
        assert producer.flush(20) == 0


@pytest.fixture(scope="module")
def north(stack: Endpoints, transactions_ready: None) -> Iterator[North]:  # noqa: F811
    suffix = uuid.uuid4().hex[:10]
    store = fresh_store(stack.kafka_bootstrap)
    reg = Registry.open(store, local_admin("test"), None, write=True)
    for tenant in ("default", "acme", "beta"):
        reg.create_tenant(tenant)
    secrets: dict[str, str] = {}
    for name, tenant in (("app", "acme"), ("beta-app", "beta")):
        secret = reg.create_account(name, [Role.API], tenant).secret
        assert secret is not None
        secrets[f"svc/{name}"] = secret
    device = reg.add_device("acme", "pump-1").secret
    assert device is not None
    secrets["acme/pump-1"] = device
    base = f"iot.n{suffix}"
    names = {kind: f"{base}.{kind}" for kind in ("telemetry", "events", "dlq")}
    own = {kind: f"iot.acme.n{suffix}.{kind}" for kind in names}
    cmd = {kind: f"iot.n{suffix}.{kind}" for kind in ("cmd", "status", "replies", "cmddlq")}
    ensure_topics(
        stack.kafka_bootstrap,
        [TopicSpec(n, compacted=n == cmd["status"])
         for n in (*names.values(), *own.values(), *cmd.values())],
        3,
    )  # fmt: skip
    login = bridge_login_settings(stack.mqtt_port)
    cfg = CommandConfig(
        mqtt_host=stack.mqtt_host, mqtt_port=stack.mqtt_port, **login,
        kafka_bootstrap=stack.kafka_bootstrap, topic_commands=cmd["cmd"],
        topic_command_status=cmd["status"], topic_command_replies=cmd["replies"],
        topic_commands_dlq=cmd["cmddlq"], command_group_id=unique("north-cmd"),
        command_mqtt_client_id=unique("north-path"), command_timeout_ms=30000, http_port=0,
    )  # fmt: skip
    command_path = CommandService(cfg)
    command_path.start()
    try:
        with running_amqp(
            kafka_bootstrap=stack.kafka_bootstrap, registry_auth=True, registry_topic=store.topic,
            topic_telemetry=names["telemetry"], topic_events=names["events"],
            topic_dlq=names["dlq"], topic_commands=cmd["cmd"],
            topic_command_replies=cmd["replies"], topic_command_status=cmd["status"],
            mqtt_host=stack.mqtt_host,
            mqtt_port=stack.mqtt_port, **login,
        ) as service:  # fmt: skip
            yield North(service, stack.kafka_bootstrap, base, secrets)
    finally:
        command_path.stop(10.0)
        store.close()
        assert command_path.failure is None, repr(command_path.failure)
        forget_session(stack.mqtt_host, stack.mqtt_port, cfg.command_mqtt_client_id)
        forget_session(stack.mqtt_host, stack.mqtt_port, "iot-amqp/acme/pump-1")


def take(receivers: list[BlockingReceiver], count: int) -> list[tuple[int, Message]]:
    """``count`` messages from any of ``receivers`` (index, message), each accepted."""
    got: list[tuple[int, Message]] = []
    for _ in range(200):
        for i, receiver in enumerate(receivers):
            try:
                got.append((i, receiver.receive(timeout=0.2)))
            except Timeout:
                continue
            receiver.accept()
        if len(got) >= count:
            return got
    raise AssertionError(f"{len(got)} of {count} messages received")


def test_a_devices_uploads_reach_the_application_in_order(north: North) -> None:
    app, dev = north.connect("svc/app"), north.connect("acme/pump-1")
    try:
        receiver = app.create_receiver("telemetry/acme", name=unique("order"), credit=5)
        sender = dev.create_sender(None)
        for n in range(12):
            sent = sender.send(Message(address="telemetry", body=reading(n), inferred=True))
            assert sent.remote_state == Delivery.ACCEPTED
        seqs = []
        for _ in range(12):
            msg = receiver.receive(timeout=20)
            receiver.accept()
            assert msg.content_type == "application/json"
            assert msg.creation_time > 1_600_000_000
            found = props(msg)
            assert (found["device_id"], found["tenant_id"]) == ("pump-1", "acme")
            assert found["orig_adapter"] == "amqp"
            seqs.append(seq(msg))
        assert seqs == list(range(12))
    finally:
        dev.close()
        app.close()


def test_two_receivers_with_one_link_name_share_the_stream(north: North) -> None:
    name = unique("shared")
    one, two = north.connect("svc/app"), north.connect("svc/app")
    try:
        first = one.create_receiver("telemetry/acme", name=name, credit=10)
        second = two.create_receiver("telemetry/acme", name=name, credit=10)
        items = [(f"dev-{i % 12}".encode(), reading(i)) for i in range(36)]
        north.produce(items)
        got = take([first, second], 36)
        seqs = sorted(seq(m) for _, m in got)
        assert seqs == list(range(36))  # each once
        assert {i for i, _ in got} == {0, 1}  # both had a share
        by_device: dict[str, list[int]] = {}
        for i, msg in got:
            by_device.setdefault(props(msg)["device_id"], []).append(i)
        assert all(len(set(owners)) == 1 for owners in by_device.values())  # a device: one
        with pytest.raises(Timeout):  # nothing more (no duplicates)
            first.receive(timeout=1)
    finally:
        two.close()
        one.close()


def test_no_credit_no_message_and_a_receiver_gone_unsettled_leaves_it_to_the_next(
    north: North,
) -> None:
    name = unique("credit")
    app = north.connect("svc/app")
    receiver = app.create_receiver("telemetry/acme", name=name, credit=0)
    north.produce([(b"dev-c", reading(1))])
    # no credit: nothing may arrive (a wait on nothing happening, so it is a fixed 2 s)
    fetcher = receiver.fetcher
    assert fetcher is not None
    with pytest.raises(Timeout):
        app.wait(lambda: bool(fetcher.incoming), timeout=2)
    msg = receiver.receive(timeout=20)  # one credit now
    assert seq(msg) == 1
    app.close()  # before accepting it: it is not committed
    again = north.connect("svc/app")
    try:
        receiver = again.create_receiver("telemetry/acme", name=name, credit=5)
        msg = receiver.receive(timeout=20)
        assert (props(msg)["device_id"], seq(msg)) == ("dev-c", 1)
        receiver.release()  # released: sent again on this link
        assert seq(receiver.receive(timeout=20)) == 1
        receiver.accept()
    finally:
        again.close()
    last = north.connect("svc/app")
    try:  # accepted: committed, not sent to the next receiver
        receiver = last.create_receiver("telemetry/acme", name=name, credit=5)
        north.produce([(b"dev-c", reading(2))])
        assert seq(receiver.receive(timeout=20)) == 2
    finally:
        last.close()


def test_applications_reach_only_their_tenant_and_devices_no_northbound_address(
    north: North,
) -> None:
    app = north.connect("svc/app")
    try:
        for source in ("telemetry/beta", "event/beta", "command_response/beta/r1"):
            with pytest.raises(LinkDetached) as caught:
                app.create_receiver(source)
            assert caught.value.condition == "amqp:unauthorized-access", source
        with pytest.raises(LinkDetached) as caught:
            app.create_sender("command/beta")
        assert caught.value.condition == "amqp:unauthorized-access"
        with pytest.raises(LinkDetached) as caught:
            app.create_receiver("event/acme", options=AtMostOnce())
        assert caught.value.condition == "amqp:precondition-failed"
    finally:
        app.close()
    dev = north.connect("acme/pump-1")
    try:
        for source in ("telemetry/acme", "event/acme", "command_response/acme/r1"):
            with pytest.raises(LinkDetached) as caught:
                dev.create_receiver(source)
            assert caught.value.condition == "amqp:unauthorized-access", source
        with pytest.raises(LinkDetached) as caught:
            dev.create_sender("command/acme")
        assert caught.value.condition == "amqp:unauthorized-access"
    finally:
        dev.close()


def test_a_command_sent_northbound_reaches_the_device_and_its_reply_comes_back(
    north: North,
) -> None:
    app, dev = north.connect("svc/app"), north.connect("acme/pump-1")
    try:
        commands = dev.create_receiver("command", credit=5)
        ready = north.service.door.commands
        wait_for(lambda: ready.ready(DeviceRef("acme", "pump-1")), 20, "the device's session")
        reply_id = unique("r")
        replies = app.create_receiver(f"command_response/acme/{reply_id}", credit=5)
        sender = app.create_sender("command/acme")
        cid = unique("c")
        sent = sender.send(Message(
            address="command/acme/pump-1", subject="reboot", correlation_id=cid,
            reply_to=f"command_response/acme/{reply_id}", body=b'{"delay": 2}', inferred=True,
        ))  # fmt: skip
        assert sent.remote_state == Delivery.ACCEPTED
        cmd = commands.receive(timeout=30)
        assert (cmd.subject, cmd.correlation_id) == ("reboot", cid)
        assert body(cmd)["delay"] == 2
        commands.accept()
        answer = Message(address=cmd.reply_to, correlation_id=cid,
                         body=b'{"status": "ok", "result": "done"}', inferred=True)  # fmt: skip
        assert dev.create_sender(None).send(answer).remote_state == Delivery.ACCEPTED
        reply = replies.receive(timeout=30)
        replies.accept()
        assert reply.correlation_id == cid
        assert props(reply) == {"device_id": "pump-1", "tenant_id": "acme", "status": 200}
        assert body(reply) == "done"
        bad = sender.send(Message(address="command/beta/pump-1", subject="x", correlation_id="c2",
                                  inferred=True, body=b"{}"), error_states=[])  # fmt: skip
        assert bad.remote_state == Delivery.REJECTED
        cond = bad.remote.condition
        assert cond is not None
        assert cond.name == "amqp:unauthorized-access"
    finally:
        dev.close()
        app.close()


def test_a_command_the_command_path_rejects_later_gets_a_400_on_the_reply_link(
    north: North,
) -> None:
    """Args with the command path's reserved key pass iot-amqp's checks, so the command is
    accepted once in Kafka; the command path then rejects it (`bad_args`), and the application
    hears of it on its command_response link: status 400 with the reason."""
    app = north.connect("svc/app")
    try:
        reply_id = unique("r")
        replies = app.create_receiver(f"command_response/acme/{reply_id}", credit=5)
        cid = unique("c")
        sent = app.create_sender("command/acme").send(Message(
            address="command/acme/pump-1", subject="reboot", correlation_id=cid,
            reply_to=f"command_response/acme/{reply_id}", body=b'{"command_id": "x"}',
            inferred=True,
        ))  # fmt: skip
        assert sent.remote_state == Delivery.ACCEPTED
        reply = replies.receive(timeout=30)
        replies.accept()
        assert reply.correlation_id == cid
        assert props(reply) == {"device_id": "pump-1", "tenant_id": "acme", "status": 400}
        assert isinstance(reply.body, bytes | memoryview)
        assert bytes(reply.body).decode().startswith("bad_args:")
    finally:
        app.close()


@pytest.mark.parametrize(
    ("to", "subject", "payload", "condition", "code"),
    [
        ("command/acme/ghost", "reboot", b"{}", "amqp:not-found", "unknown_device"),
        ("command/acme/pump-1", None, b"{}", "hono:bad-request", "bad_name"),
        ("command/acme/pump-1", "reboot", b"[1]", "hono:bad-request", "not_object"),
    ],
)
def test_a_refused_command_gets_a_rejected_outcome_with_the_reason(
    north: North, to: str, subject: str | None, payload: bytes, condition: str, code: str
) -> None:
    """The command path's refusals reach the application on the command's own delivery
    (Hono's way: the disposition of the command message), before anything is written."""
    app = north.connect("svc/app")
    try:
        sender = app.create_sender("command/acme")
        msg = Message(address=to, subject=subject, correlation_id=unique("c"), body=payload,
                      reply_to="command_response/acme/r1", inferred=True)  # fmt: skip
        dlv = sender.send(msg, error_states=[])
        assert dlv.remote_state == Delivery.REJECTED
        cond = dlv.remote.condition
        assert cond is not None
        info = cond.info if isinstance(cond.info, dict) else {}
        assert (cond.name, {str(k): v for k, v in info.items()}.get("code")) == (condition, code)
        assert cond.description
        # the link goes on: a good command after the refused one is accepted
        ok = Message(address="command/acme/pump-1", subject="x", correlation_id=unique("c"),
                     body=b"{}", inferred=True)  # fmt: skip
        assert sender.send(ok).remote_state == Delivery.ACCEPTED
    finally:
        app.close()


def test_rhea_as_a_device_and_as_an_application(north: North) -> None:
    """An independent client (rhea, npm) on both sides: its device uploads, its application
    receives them on telemetry/acme, in order."""
    port = str(north.service.port)
    app = rhea("app", port, "svc/app", north.secrets["svc/app"], "telemetry/acme",
               unique("rhea"), "3")  # fmt: skip
    try:
        assert app.stdout is not None
        assert app.stdout.readline().strip() == "attached"
        device = rhea("device", port, "acme/pump-1", north.secrets["acme/pump-1"], "3")
        out, err = device.communicate(timeout=60)
        assert device.returncode == 0, err
        assert out.split("\n")[:3] == ["accepted 0", "accepted 1", "accepted 2"]
        lines, err = app.communicate(timeout=60)
        assert app.returncode == 0, err
        got = [orjson.loads(line) for line in lines.splitlines()]
        assert [(g["device_id"], g["tenant_id"]) for g in got] == [("pump-1", "acme")] * 3
        assert [orjson.loads(g["body"])["seq"] for g in got] == [0, 1, 2]
    finally:
        app.kill()
        app.wait()
