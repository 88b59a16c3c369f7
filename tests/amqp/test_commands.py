"""Commands to AMQP devices end to end: the command path (`CommandService`) on the session's
Mosquitto and Kafka, iot-amqp (registry auth, its devices' MQTT sessions as the test account
`svc/tests`, role `api`), devices with python-qpid-proton's client; what the device receives,
and the statuses and replies the command path records."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pytest
from proton import Delivery, Message, Timeout
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, LinkDetached

from amqp.service import AmqpService
from api.http_devices.model import DeviceRef
from commands.client import CommandClient
from commands.config import CommandConfig
from commands.model import State
from commands.service import CommandService
from registry.permissions import local_admin
from registry.service import Registry
from stack.topics import TopicSpec, ensure_topics
from tests.amqp.harness import running_amqp
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.commands.harness import Records, forget_session, unique, wait_for
from tests.conftest import Endpoints
from tests.plugins.mqtt_logins import bridge_login_settings
from tests.registry.conftest import fresh_store

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    service: AmqpService
    secrets: dict[str, str]
    dev: str  # a device of tenant default, unique to this module (the Mosquitto is shared)
    other: str  # another device of tenant default
    cfg: CommandConfig
    client: CommandClient
    records: Records

    def connect(self, user: str) -> BlockingConnection:
        return BlockingConnection(
            f"amqp://127.0.0.1:{self.service.port}", timeout=20, user=user,
            password=self.secrets[user], allowed_mechs="PLAIN",
        )  # fmt: skip

    def wait_ready(self, device: str) -> None:
        """The device's MQTT session is subscribed: a command sent now reaches its link."""
        ref = DeviceRef("default", device)
        commands = self.service.door.commands
        wait_for(lambda: commands.ready(ref), 20, f"{device}'s command session subscribed")

    def final(self, command_id: str) -> State | None:
        found = [s for s in self.records.statuses(self.cfg.topic_command_status, command_id)
                 if s.final]  # fmt: skip
        return found[-1].state if found else None

    def replies(self, command_id: str) -> list[dict[str, object]]:
        return [r for r in self.records.values(self.cfg.topic_command_replies)
                if r["command_id"] == command_id]  # fmt: skip


@pytest.fixture(scope="module")
def setup(stack: Endpoints, transactions_ready: None) -> Iterator[Setup]:  # noqa: F811
    suffix = uuid.uuid4().hex[:10]
    store = fresh_store(stack.kafka_bootstrap)
    reg = Registry.open(store, local_admin("test"), None, write=True)
    reg.create_tenant("default")
    reg.create_tenant("acme")
    dev, other = f"pump-{suffix}", f"other-{suffix}"
    secrets: dict[str, str] = {}
    for tenant, user in (("default", dev), ("default", other), ("acme", f"acme/{dev}")):
        secret = reg.add_device(tenant, user.rpartition("/")[2]).secret
        assert secret is not None
        secrets[user] = secret
    base = f"amqpcmd{suffix}"
    names = {kind: f"{base}.{kind}" for kind in ("cmd", "status", "replies", "dlq", "tel")}
    ensure_topics(
        stack.kafka_bootstrap,
        [TopicSpec(n, compacted=kind == "status") for kind, n in names.items()],
        2,
    )
    login = bridge_login_settings(stack.mqtt_port)
    cfg = CommandConfig(
        mqtt_host=stack.mqtt_host,
        mqtt_port=stack.mqtt_port,
        **login,
        kafka_bootstrap=stack.kafka_bootstrap,
        topic_commands=names["cmd"],
        topic_command_status=names["status"],
        topic_command_replies=names["replies"],
        topic_commands_dlq=names["dlq"],
        command_group_id=unique("amqp-cmd"),
        command_mqtt_client_id=unique("cmd-path"),
        command_timeout_ms=30000,
        command_max_attempts=2,
        http_port=0,
    )
    command_path = CommandService(cfg)
    command_path.start()
    client = CommandClient(
        stack.kafka_bootstrap,
        topic_commands=cfg.topic_commands,
        topic_status=cfg.topic_command_status,
        topic_replies=cfg.topic_command_replies,
    )
    records = Records(stack.kafka_bootstrap, [cfg.topic_command_status, cfg.topic_command_replies])
    try:
        with running_amqp(
            kafka_bootstrap=stack.kafka_bootstrap,
            registry_auth=True,
            registry_topic=store.topic,
            topic_telemetry=names["tel"],
            topic_events=names["tel"],
            topic_dlq=names["dlq"],
            mqtt_host=stack.mqtt_host,
            mqtt_port=stack.mqtt_port,
            **login,
        ) as service:
            yield Setup(service, secrets, dev, other, cfg, client, records)
    finally:
        records.close()
        client.close()
        command_path.stop(10.0)
        store.close()
        assert command_path.failure is None, repr(command_path.failure)
        forget_session(stack.mqtt_host, stack.mqtt_port, cfg.command_mqtt_client_id)
        for user in secrets:
            forget_session(stack.mqtt_host, stack.mqtt_port, f"iot-amqp/{user}")


def test_a_command_reaches_the_command_link_and_the_devices_replies_end_it(setup: Setup) -> None:
    conn = setup.connect(setup.dev)
    try:
        receiver = conn.create_receiver("command", credit=10)
        setup.wait_ready(setup.dev)
        cid = setup.client.send(setup.dev, "reboot", {"delay": 3})
        msg = receiver.receive(timeout=30)
        assert (msg.subject, msg.correlation_id) == ("reboot", cid)
        assert msg.reply_to == f"command_response/default/{setup.dev}/{cid}"
        assert msg.content_type == "application/json"
        assert msg.properties == {"command_id": cid, "attempt": 1}
        body = msg.body  # one Data section (proton hands it over as a memoryview)
        assert isinstance(body, memoryview | bytes)
        assert orjson.loads(bytes(body)) == {"delay": 3, "command_id": cid}
        receiver.accept()
        sender = conn.create_sender(None)
        done = Message(address=msg.reply_to, correlation_id=cid,
                       body=b'{"status": "ok", "result": "done"}', inferred=True)  # fmt: skip
        assert sender.send(done).remote_state == Delivery.ACCEPTED
        setup.records.wait(lambda: setup.final(cid) is State.SUCCEEDED, 30, "succeeded")
        setup.records.wait(lambda: len(setup.replies(cid)) == 1, 30, "the reply recorded")
        assert [(r["match"], r["result"]) for r in setup.replies(cid)] == [("matched", "done")]

        # released: the same command comes again; Hono's reply (a status property, any body)
        later = setup.client.send(setup.dev, "calibrate")
        first = receiver.receive(timeout=30)
        assert first.correlation_id == later
        receiver.release()
        again = receiver.receive(timeout=30)
        assert (again.subject, again.correlation_id) == ("calibrate", later)
        receiver.accept()
        failed = Message(address=again.reply_to, correlation_id=later, body=b'"no sensor"',
                         properties={"status": 500}, inferred=True)  # fmt: skip
        assert sender.send(failed).remote_state == Delivery.ACCEPTED
        setup.records.wait(lambda: setup.final(later) is State.FAILED, 30, "failed")
        assert [r["error"] for r in setup.replies(later)] == ["no sensor"]

        # rejected by the device: taken out of its session (delivered), never sent again
        refused = setup.client.send(setup.dev, "explode")
        assert receiver.receive(timeout=30).correlation_id == refused
        receiver.reject()
        setup.records.wait(
            lambda: any(s.state is State.DELIVERED
                        for s in setup.records.statuses(setup.cfg.topic_command_status, refused)),
            30, "the rejected command delivered",
        )  # fmt: skip
        after = setup.client.send(setup.dev, "status")
        assert receiver.receive(timeout=30).correlation_id == after
        receiver.accept()
        with pytest.raises(Timeout):  # nothing more comes: a released one would within 1 s
            receiver.receive(timeout=3)
    finally:
        conn.close()


def test_a_device_cannot_take_another_devices_commands_nor_reply_for_it(setup: Setup) -> None:
    conn = setup.connect(setup.dev)
    try:
        for source in (f"command/default/{setup.other}", f"command//{setup.other}",
                       f"command/acme/{setup.dev}"):  # fmt: skip
            with pytest.raises(LinkDetached) as caught:
                conn.create_receiver(source)
            assert caught.value.condition == "amqp:unauthorized-access", source
        with pytest.raises(LinkDetached) as presettled:
            conn.create_receiver("command", options=AtMostOnce())
        assert presettled.value.condition == "amqp:precondition-failed"
        sender = conn.create_sender(None)
        forged = Message(address=f"command_response/default/{setup.other}/cmd-1",
                         body=b'{"status": "ok"}', inferred=True)  # fmt: skip
        dlv = sender.send(forged, error_states=[])
        cond = dlv.remote.condition
        assert dlv.remote_state == Delivery.REJECTED
        assert cond is not None
        assert cond.name == "amqp:unauthorized-access"
        own = conn.create_receiver(f"command/default/{setup.dev}")  # naming itself is fine
        own.close()
    finally:
        conn.close()


def test_a_newer_command_link_takes_over_the_older_one(setup: Setup) -> None:
    old, new = setup.connect(setup.other), setup.connect(setup.other)
    try:
        stale = old.create_receiver("command", credit=10)
        setup.wait_ready(setup.other)
        fresh = new.create_receiver("command", credit=10)
        with pytest.raises(LinkDetached) as caught:
            stale.receive(timeout=20)
        assert caught.value.condition == "amqp:link:stolen"
        setup.wait_ready(setup.other)
        cid = setup.client.send(setup.other, "ping")
        assert fresh.receive(timeout=30).correlation_id == cid
        fresh.accept()
        setup.records.wait(
            lambda: any(s.state is State.DELIVERED
                        for s in setup.records.statuses(setup.cfg.topic_command_status, cid)),
            30, "delivered",
        )  # fmt: skip
    finally:
        new.close()
        old.close()
