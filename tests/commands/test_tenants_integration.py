"""Commands stay inside the sender's tenant: the command path against a real dynsec Mosquitto
(authentication on, logged in as ``svc/commands``) and Kafka, with same-named devices in two
tenants and in the default tenant."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import orjson
import pytest

from commands.client import CommandClient
from commands.config import CommandConfig
from commands.model import State
from commands.service import CommandService
from registry.model import Role
from tests.bridge.test_tenants_integration import Fleet, fleet  # noqa: F401 - fixture
from tests.commands.harness import Records, forget_session, unique
from tests.registry.conftest import (  # noqa: F401 - fixtures used by `fleet`
    DynsecBroker,
    dynsec_broker,
    store_factory,
)
from tests.registry.mqtt_probe import Probe, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def command_path(
    fleet: Fleet,  # noqa: F811
    dynsec_broker: DynsecBroker,  # noqa: F811
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
) -> Iterator[tuple[CommandConfig, CommandClient, Records]]:
    secret = fleet.registry.create_account("commands", [Role.COMMANDS]).secret
    assert secret is not None
    cfg = CommandConfig(
        mqtt_port=dynsec_broker.port,
        mqtt_host="127.0.0.1",
        mqtt_username="svc/commands",
        mqtt_password=secret,
        kafka_bootstrap=fleet.store.bootstrap,
        topic_commands=topic_factory("cmd", partitions=2),
        topic_command_status=topic_factory("cmdstatus", partitions=2, compacted=True),
        topic_command_replies=topic_factory("cmdreplies", partitions=2),
        topic_commands_dlq=topic_factory("cmddlq", partitions=1),
        command_group_id=group_factory(),
        command_mqtt_client_id=unique("cmd-path"),
        command_timeout_ms=3000,
        command_max_attempts=1,
        http_port=0,
    )
    service = CommandService(cfg)
    service.start()
    client = CommandClient(
        cfg.kafka_bootstrap,
        topic_commands=cfg.topic_commands,
        topic_status=cfg.topic_command_status,
        topic_replies=cfg.topic_command_replies,
    )
    records = Records(cfg.kafka_bootstrap, [cfg.topic_command_status, cfg.topic_command_replies])
    try:
        yield cfg, client, records
    finally:
        records.close()
        client.close()
        service.stop(10.0)
        assert service.failure is None, repr(service.failure)
        forget_session("127.0.0.1", dynsec_broker.port, cfg.command_mqtt_client_id)


def test_a_command_reaches_only_the_senders_tenant_and_naming_another_is_refused(
    fleet: Fleet,  # noqa: F811
    dynsec_broker: DynsecBroker,  # noqa: F811
    command_path: tuple[CommandConfig, CommandClient, Records],
) -> None:
    cfg, client, records = command_path
    roots = {"pump-1": "", "acme/pump-1": "tenants/acme/", "beta/pump-1": "tenants/beta/"}
    devices = {
        user: Probe(dynsec_broker.port, user, secret) for user, secret in fleet.secrets.items()
    }
    try:
        for user, probe in devices.items():
            assert probe.subscribe(f"{roots[user]}devices/pump-1/commands/#").value == 1
        acme = devices["acme/pump-1"]

        def final(cid: str) -> State | None:
            finals = [s for s in records.statuses(cfg.topic_command_status, cid) if s.final]
            return finals[-1].state if finals else None

        # acme's command for "pump-1" goes to acme's pump-1 only; its reply closes it
        cid = client.send("pump-1", "reboot", {"now": True}, tenant="acme")
        assert wait_for(lambda: len(acme.messages) == 1, 15), "acme's device got nothing"
        topic, payload = acme.messages[0]
        assert topic == "tenants/acme/devices/pump-1/commands/reboot"
        assert orjson.loads(payload)["command_id"] == cid
        reply = orjson.dumps({"status": "ok", "result": "rebooting"})
        assert acme.publish(f"tenants/acme/devices/pump-1/replies/{cid}", reply).value == 0
        records.wait(lambda: final(cid) is State.SUCCEEDED, 20, "acme's command succeeded")

        def answers() -> list[dict[str, object]]:
            return [r for r in records.values(cfg.topic_command_replies) if r["command_id"] == cid]

        records.wait(lambda: len(answers()) == 1, 20, "acme's reply recorded")
        (answer,) = answers()
        assert (answer["tenant"], answer["match"]) == ("acme", "matched")

        # sent by acme (header) but naming beta in the value: refused, nothing published
        refused = "refused-1"
        client.send_raw(
            b"pump-1",
            orjson.dumps({"command_id": refused, "name": "reboot", "tenant": "beta"}),
            headers=[("tenant", b"acme")],
        )
        records.wait(lambda: final(refused) is State.REJECTED, 20, "the command refused")
        (status,) = [s for s in records.statuses(cfg.topic_command_status, refused) if s.final]
        assert status.detail is not None
        assert status.detail.startswith("tenant_mismatch")
        # a default-tenant command for pump-1 reaches the default tenant's pump-1 only
        plain = client.send("pump-1", "ping", reply_expected=False)
        assert wait_for(lambda: len(devices["pump-1"].messages) == 1, 15)
        assert devices["pump-1"].messages[0][0] == "devices/pump-1/commands/ping"
        records.wait(lambda: final(plain) is State.SUCCEEDED, 20, "the default command")
        assert devices["beta/pump-1"].messages == []  # beta's pump-1 never got anything
        assert len(acme.messages) == 1
    finally:
        for probe in devices.values():
            probe.close()
