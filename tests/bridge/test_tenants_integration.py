"""Tenants end to end through the bridge, authentication on: a real dynsec Mosquitto, the
registry on the test Kafka, ``iot-bridge`` as a process logged in as ``svc/bridge``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
import pytest

from bridge.topics import tenant_kafka_topic
from registry.dynsec import DynsecClient
from registry.kafka_store import KafkaStore
from registry.model import Quotas, Role
from registry.permissions import local_admin
from registry.service import Registry
from registry.topics import ADMIN_USERNAME
from tests.bridge.helpers import Record, consume
from tests.bridge.test_bridge_integration import bridge_topics
from tests.registry.conftest import (  # noqa: F401 - fixtures used by this module's tests
    DynsecBroker,
    dynsec_broker,
    store_factory,
)
from tests.registry.mqtt_probe import Probe, wait_for

pytestmark = pytest.mark.integration

NOT_AUTHORIZED = 0x87


@dataclass
class Fleet:
    registry: Registry
    store: KafkaStore
    bridge_secret: str
    secrets: dict[str, str]  # MQTT user name -> secret


@pytest.fixture
def fleet(
    dynsec_broker: DynsecBroker,  # noqa: F811
    store_factory: Callable[[], KafkaStore],  # noqa: F811
) -> Iterator[Fleet]:
    """Tenants default, acme (2 msgs/s) and beta (no quota), each with a device `pump-1`."""
    mosquitto = DynsecClient(
        "127.0.0.1", dynsec_broker.port, ADMIN_USERNAME, dynsec_broker.admin_password
    ).start()
    store = store_factory()
    reg = Registry.open(store, local_admin("test"), mosquitto, write=True)
    reg.create_tenant("default")
    reg.create_tenant("acme", Quotas(msgs_per_s=2))
    reg.create_tenant("beta")
    secrets = {}
    for tenant, user in (("default", "pump-1"), ("acme", "acme/pump-1"), ("beta", "beta/pump-1")):
        secret = reg.add_device(tenant, "pump-1").secret
        assert secret is not None
        secrets[user] = secret
    bridge_secret = reg.create_account("bridge", [Role.BRIDGE]).secret
    assert bridge_secret is not None
    try:
        yield Fleet(reg, store, bridge_secret, secrets)
    finally:
        mosquitto.close()


def _reading(seq: int) -> bytes:
    return orjson.dumps({"ts": 1_700_000_000_000 + seq, "seq": seq, "metrics": {"t": 1.0}})


def _send(probe: Probe, topic: str, count: int) -> float:
    """Publish ``count`` QoS 1 messages without waiting in between; seconds until all acked."""
    start = time.monotonic()
    infos = [probe.client.publish(topic, _reading(seq), qos=1) for seq in range(count)]
    assert wait_for(lambda: all(i.is_published() for i in infos), 30), "not all acknowledged"
    return time.monotonic() - start


def _only_from(records: list[Record], root: str, tenant: str | None) -> None:
    for r in records:
        assert r.headers["mqtt_topic"].decode().startswith(root), r.headers
        assert r.headers.get("tenant") == (None if tenant is None else tenant.encode())
        assert r.key == b"pump-1"


def test_same_named_devices_of_two_tenants_land_apart_and_quota_bites_only_its_tenant(
    fleet: Fleet,
    dynsec_broker: DynsecBroker,  # noqa: F811
    bridge_factory: Callable[..., object],
    topic_factory: Callable[..., str],
) -> None:
    topics = bridge_topics(topic_factory)
    bridge = bridge_factory(
        mqtt_port=dynsec_broker.port,
        mqtt_username="svc/bridge",
        mqtt_password=fleet.bridge_secret,
        registry_topic=fleet.store.topic,
        kafka_linger_ms=5,
        **topics,
    )
    probes = {
        user: Probe(dynsec_broker.port, user, secret) for user, secret in fleet.secrets.items()
    }
    try:
        # the tenant root is the login's: acme's device cannot write under beta's or default's
        acme = probes["acme/pump-1"]
        assert acme.publish("tenants/beta/devices/pump-1/telemetry", _reading(0)).value == (
            NOT_AUTHORIZED
        )
        assert acme.publish("devices/pump-1/telemetry", _reading(0)).value == NOT_AUTHORIZED
        sent = 30
        took = {
            "default": _send(probes["pump-1"], "devices/pump-1/telemetry", sent),
            "beta": _send(probes["beta/pump-1"], "tenants/beta/devices/pump-1/telemetry", sent),
            "acme": _send(acme, "tenants/acme/devices/pump-1/telemetry", sent),
        }
    finally:
        for p in probes.values():
            p.close()

    # a PUBACK means Kafka holds the record: every topic below is complete when read
    def records(base: str, tenant: str, count: int, timeout: float = 30) -> list[Record]:
        name = tenant_kafka_topic(base, tenant)
        return consume(
            fleet.store.bootstrap, [name], until=lambda rs: len(rs) >= count, timeout=timeout
        )

    tel, dlq = topics["topic_telemetry"], topics["topic_dlq"]
    default_tel = records(tel, "default", sent)
    beta_tel = records(tel, "beta", sent)
    _only_from(default_tel, "devices/pump-1/", None)
    _only_from(beta_tel, "tenants/beta/devices/pump-1/", "beta")
    assert sorted(orjson.loads(r.value)["seq"] for r in default_tel) == list(range(sent))
    assert sorted(orjson.loads(r.value)["seq"] for r in beta_tel) == list(range(sent))
    # acme: 2 msgs/s with one second of burst; the rest are coded dead letters in acme's DLQ
    acme_records = consume(
        fleet.store.bootstrap,
        [tenant_kafka_topic(tel, "acme"), tenant_kafka_topic(dlq, "acme")],
        until=lambda rs: len(rs) >= sent,
        timeout=30,
    )
    _only_from(acme_records, "tenants/acme/devices/pump-1/", "acme")
    acme_tel = [r for r in acme_records if r.topic == tenant_kafka_topic(tel, "acme")]
    acme_dlq = [r for r in acme_records if r.topic == tenant_kafka_topic(dlq, "acme")]
    assert len(acme_records) == sent
    assert 2 <= len(acme_tel) <= 2 + 2 * took["acme"] + 1, (len(acme_tel), took)
    assert {r.headers["error"] for r in acme_dlq} == {b"quota_exceeded"}
    # the other tenants' messages were never dead-lettered, nor anyone's in the default DLQ
    assert records(dlq, "beta", 1, timeout=3) == []
    assert records(dlq, "default", 1, timeout=3) == []
    metric = bridge.metric  # type: ignore[attr-defined]
    assert metric("iot_bridge_tenant_dlq_total", tenant="acme", code="quota_exceeded") == len(
        acme_dlq
    )
    for tenant in ("default", "acme", "beta"):
        assert metric("iot_bridge_tenant_received_total", tenant=tenant) == sent
