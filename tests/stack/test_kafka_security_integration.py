"""Kafka with `--kafka-security sasl_ssl` (issue 33): TLS from the appliance CA, SCRAM-SHA-512
per principal, ACLs. One private stack (Mosquitto, one Kafka node, the bridge, the command path,
one simulated device, iot-api and iot-amqp, each its own principal; `up` waits for their
/readyz) started by the launcher as `iot-stack up --kafka-security sasl_ssl --amqp --devices 1`
would. The services' least-privilege grants (stack.kafka_security.service_grants): each
principal is refused what its code never does and allowed what it does."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from commands.client import CommandClient
from stack import kafka_auth, mqtt_tls
from stack.config import StackConfig
from stack.kafka_health import health_lines
from stack.kafka_security import Grant, service_grants, tenant_prefix
from stack.kafka_server import KafkaServer
from stack.launcher import Stack
from stack.ports import free_ports
from stack.secret_files import admin_secret, read_secret
from stack.topics import TopicSpec, ensure_topics
from tests.plugins.jvm_options import kafka_jvm_options
from tests.plugins.server_reaper import reaper

pytestmark = pytest.mark.integration

TENANTS = ("acme", "globex")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    bridge_port, commands_port, api_port, amqp_port, amqp_http_port, amqps_port = free_ports(6)
    config = StackConfig.servers_on_free_ports(
        tmp_path_factory.mktemp("kafka-sasl"), 3, "512m", kafka_jvm_options=kafka_jvm_options()
    ).with_changes(
        kafka_security="sasl_ssl",
        with_bridge=True,
        commands_mode="separate",  # its own principal (inline is refused with sasl_ssl)
        bridge_http_port=bridge_port,
        commands_http_port=commands_port,
        with_api=True,
        api_port=api_port,
        with_amqp=True,
        amqp_port=amqp_port,
        amqp_http_port=amqp_http_port,
        amqp_tls_port=amqps_port,
        devices=1,
        device_rate=5.0,
        start_timeout=180.0,
    )
    stack = Stack(config)
    with reaper(config.run_dir):
        try:
            stack.up()
            admin = kafka_auth.client_config(config)
            specs = [TopicSpec(f"{tenant_prefix(t)}telemetry") for t in TENANTS]
            ensure_topics(config.kafka_bootstrap, specs, 1, security=admin)
            producer = Producer({"bootstrap.servers": config.kafka_bootstrap, **admin})
            for t in TENANTS:
                kafka_auth.add_tenant_consumer(config, t)
                producer.produce(f"{tenant_prefix(t)}telemetry", f"for {t}".encode())
            assert producer.flush(30) == 0
            yield stack
        finally:
            stack.down()


def _consumer(stack: Stack, username: str, password: str, group: str) -> Consumer:
    cfg = stack.config
    return Consumer(
        {
            "bootstrap.servers": cfg.kafka_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": username,
            "sasl.password": password,
            "ssl.ca.location": str(kafka_auth.ca_file(cfg)),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _tenant_secret(stack: Stack, tenant: str) -> str:
    secret = read_secret(kafka_auth.secret_path(stack.config, f"tenant-{tenant}"))
    assert secret
    return secret


def _first(
    consumer: Consumer, topic: str, timeout: float = 60.0
) -> tuple[bytes | None, bytes] | KafkaError:
    """The first record of ``topic`` (key, value), or the error the broker answered with."""
    consumer.subscribe([topic])
    try:
        for _ in range(int(timeout)):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                return err
            value = msg.value()
            assert value is not None
            key = msg.key()
            return key if isinstance(key, bytes) else None, value
        raise AssertionError(f"nothing from {topic} in {timeout} s")
    finally:
        consumer.close()


def test_tenant_reads_its_own_topics_and_is_refused_another_tenants(secured: Stack) -> None:
    own = _consumer(secured, "tenant-acme", _tenant_secret(secured, "acme"), "iot.acme.g1")
    assert _first(own, "iot.acme.telemetry") == (None, b"for acme")
    other = _consumer(secured, "tenant-acme", _tenant_secret(secured, "acme"), "iot.acme.g2")
    refused = _first(other, "iot.globex.telemetry")
    assert isinstance(refused, KafkaError)
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_wrong_scram_secret_is_refused(secured: Stack) -> None:
    cfg = secured.config
    errors: list[KafkaError] = []
    settings: dict[str, Any] = {
        "bootstrap.servers": cfg.kafka_bootstrap,
        **kafka_auth.client_config(cfg, "bridge"),
        "sasl.password": "not-" + uuid.uuid4().hex,
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "error_cb": errors.append,
    }
    consumer = Consumer(settings)
    try:
        consumer.subscribe(["iot.telemetry"])
        for _ in range(30):  # the error callback is served by poll()
            assert consumer.poll(0.5) is None
            if errors:
                break
    finally:
        consumer.close()
    assert errors, "no error for a wrong secret"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors


def test_plaintext_clients_are_not_served(secured: Stack) -> None:
    """A client without TLS and SASL learns nothing (the listener speaks TLS only)."""
    admin = AdminClient({"bootstrap.servers": secured.config.kafka_bootstrap})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=10)


def test_a_devices_telemetry_reaches_kafka_through_the_secured_bridge(secured: Stack) -> None:
    """The simulator's device publishes over MQTT; the bridge, logged in to Kafka as its own
    SCRAM principal over TLS, writes it to iot.telemetry, read here as the launcher's admin."""
    cfg = secured.config
    consumer = Consumer(
        {
            "bootstrap.servers": cfg.kafka_bootstrap,
            **kafka_auth.client_config(cfg),
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    record = _first(consumer, "iot.telemetry", timeout=90.0)
    assert isinstance(record, tuple), record
    key, value = record
    assert key == b"dev-00000"
    assert orjson.loads(value)["seq"] >= 1


def test_the_doors_reach_kafka_as_their_own_principals(secured: Stack) -> None:
    """iot-api's MR topic list comes from Kafka, read as principal `api` over SASL_SSL."""
    cfg = secured.config
    with urllib.request.urlopen(f"http://{cfg.connect_host}:{cfg.api_port}/readyz") as resp:
        assert resp.status == 200
    for name in ("api", "amqp"):
        log_text = (cfg.log_dir / f"{name}.log").read_text()
        assert "SASL authentication error" not in log_text
    # iot-amqp's amqps listener is up with `up`, its server certificate from the stack's CA
    context = ssl.create_default_context(cafile=str(mqtt_tls.ca_dir(cfg) / "ca.crt"))
    address = (cfg.connect_host, cfg.amqp_tls_port)
    with (
        socket.create_connection(address, timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(b"AMQP\x03\x01\x00\x00")  # SASL: it answers with its own header
        assert tls.recv(8) == b"AMQP\x03\x01\x00\x00"
    assert f"amqps://{cfg.connect_host}:{cfg.amqp_tls_port}" in secured.endpoints()["amqp"]


def test_secrets_stay_in_private_files(secured: Stack) -> None:
    cfg = secured.config
    kafka_dir = cfg.secrets_dir / "kafka"
    assert isinstance(secured.kafka, KafkaServer)
    for path in [*kafka_dir.iterdir(), secured.kafka.properties_path]:
        assert Path(path).stat().st_mode & 0o077 == 0, path
    bridge_secret = read_secret(kafka_auth.secret_path(cfg, "bridge"))
    assert bridge_secret
    assert bridge_secret not in (cfg.log_dir / "bridge.log").read_text()


def test_a_three_node_cluster_replicates_over_sasl_ssl(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Brokers and controllers log each other in (SCRAM between brokers, PLAIN over TLS between
    controllers): the three nodes form a quorum and the design's topics get 3 in-sync replicas."""
    # insecure_anonymous: Mosquitto's logins are not what this test is about; Kafka's are
    config = StackConfig.servers_on_free_ports(
        tmp_path_factory.mktemp("kafka-sasl-3"), 3, "384m", 3,
        insecure_anonymous=True, kafka_jvm_options=kafka_jvm_options(),
    ).with_changes(kafka_security="sasl_ssl", start_timeout=240.0)  # fmt: skip
    stack = Stack(config)
    with reaper(config.run_dir):
        try:
            stack.up()
            admin = AdminClient({"bootstrap.servers": config.kafka_bootstrap,
                                 **kafka_auth.client_config(config)})  # fmt: skip
            meta = admin.list_topics(timeout=60)
            assert sorted(meta.brokers) == [1, 2, 3]
            isr = {len(p.isrs) for p in meta.topics["iot.telemetry"].partitions.values()}
            assert isr == {3}
            # `iot-stack status` logs its quorum tool in too (the active controller's line)
            lines = health_lines(config.kafka_bootstrap, kafka_auth.client_config(config))
            assert any(re.match(r"kafka quorum leader: node [123] \(", line) for line in lines)
        finally:
            stack.down()


def _produce_error(stack: Stack, principal: str, topic: str) -> KafkaError | None:
    """Produce one record as ``principal``: the broker's error, or None once written."""
    cfg = stack.config
    producer = Producer(
        {
            "bootstrap.servers": cfg.kafka_bootstrap,
            **kafka_auth.client_config(cfg, principal),
            "message.timeout.ms": 30000,
        }
    )
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"acl probe", on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(40) == 0
    return outcome[0]


def _service_consumer(stack: Stack, principal: str, group: str) -> Consumer:
    secret = read_secret(kafka_auth.secret_path(stack.config, principal))
    assert secret
    return _consumer(stack, principal, secret, group)


def _code(outcome: object) -> object:
    return outcome.code() if isinstance(outcome, KafkaError) else outcome


def test_the_bridge_writes_telemetry_but_never_commands_or_the_registry(secured: Stack) -> None:
    """A compromised bridge cannot command devices, forge registry records or read commands."""
    assert _produce_error(secured, "bridge", "iot.telemetry") is None
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    for topic in ("iot.commands", "iot.command-status", "iot.registry"):
        assert _code(_produce_error(secured, "bridge", topic)) == denied, topic
    reader = _service_consumer(secured, "bridge", f"iot-registry-load-{uuid.uuid4().hex[:8]}")
    assert _code(_first(reader, "iot.commands")) == denied
    # the command path's consumer group is not the bridge's, even on a topic it may read
    group = _service_consumer(secured, "bridge", "iot-bridge-commands")
    assert _code(_first(group, "iot.registry")) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_the_command_path_runs_as_its_own_principal_and_only_on_its_topics(
    secured: Stack,
) -> None:
    """A command written by the launcher's admin gets its status from the `commands` principal
    (it read iot.commands in its group and wrote iot.command-status); it may not write
    telemetry."""
    cfg = secured.config
    client = CommandClient(cfg.kafka_bootstrap, extra=kafka_auth.client_config(cfg))
    try:
        command_id = client.send("dev-00000", "ping", timeout_ms=5000)
        assert client.status(command_id, timeout_s=90.0) is not None
    finally:
        client.close()
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(_produce_error(secured, "commands", "iot.telemetry")) == denied
    log_text = (cfg.log_dir / "commands.log").read_text()
    assert "AUTHORIZATION_FAILED" not in log_text


def test_analytics_reads_telemetry_but_not_commands(secured: Stack) -> None:
    reader = _service_consumer(secured, "analytics", f"spark-kafka-source-{uuid.uuid4().hex}")
    assert isinstance(_first(reader, "iot.telemetry", timeout=90.0), tuple)
    refused = _service_consumer(secured, "analytics", f"spark-kafka-source-{uuid.uuid4().hex}")
    assert _code(_first(refused, "iot.commands")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(_produce_error(secured, "analytics", "iot.telemetry")) == denied


def test_the_doors_may_not_delete_the_appliances_topics_nor_amqp_write_the_registry(
    secured: Stack,
) -> None:
    cfg = secured.config
    admin = AdminClient({"bootstrap.servers": cfg.kafka_bootstrap,
                         **kafka_auth.client_config(cfg, "api")})  # fmt: skip
    future = admin.delete_topics(["iot.telemetry"], operation_timeout=10)["iot.telemetry"]
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _code(_produce_error(secured, "amqp", "iot.registry")) == denied
    # an MR topic of a user's choosing: the doors keep broad topic rights (create, write)
    topic = f"mr-acl-{uuid.uuid4().hex[:8]}"
    ensure_topics(cfg.kafka_bootstrap, [TopicSpec(topic)], 1,
                  security=kafka_auth.client_config(cfg, "amqp"))  # fmt: skip
    assert _produce_error(secured, "amqp", topic) is None
    for name in ("bridge", "api", "amqp"):
        assert "AUTHORIZATION_FAILED" not in (cfg.log_dir / f"{name}.log").read_text(), name


def test_up_takes_back_an_earlier_versions_broad_grants(secured: Stack) -> None:
    """A cluster whose services once had ALL on every topic and group (the grants before least
    privilege) keeps its ACLs across an upgrade: `up`/`topics` (kafka_auth.prepare) deletes
    every ACL of a service principal that service_grants does not hold."""
    cfg = secured.config
    broad = [Grant("User:bridge", r, "*", "literal", "all") for r in ("topic", "group")]
    kafka_auth.create_grants(cfg, broad)
    probe = f"iot-acl-probe-{uuid.uuid4().hex[:8]}"  # a group no grant of the bridge names
    assert isinstance(_first(_service_consumer(secured, "bridge", probe), "iot.registry"), tuple)
    kafka_auth.prepare(cfg)
    admin = AdminClient({"bootstrap.servers": cfg.kafka_bootstrap,
                         **kafka_auth.client_config(cfg)})  # fmt: skip
    found: list[Any] = kafka_auth.acls_of(admin, "User:bridge", 30)  # the stubs' unions
    assert sorted((b.restype.name, b.name, b.operation.name, b.permission_type.name)
                  for b in found) == sorted(
        (g.resource.replace("cluster", "broker").upper(), g.name, g.operation.upper(),
         g.permission.upper()) for g in service_grants("bridge")
    )  # fmt: skip
    refused = _first(_service_consumer(secured, "bridge", probe), "iot.registry")
    assert _code(refused) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_iot_devices_writes_the_registry_as_the_registry_principal(secured: Stack) -> None:
    """`iot-devices` logged in as `registry` (its own topics, the iot-registry transactional
    id): a tenant created and listed back; run as a process, as an operator runs it."""
    cfg = secured.config
    tenant = f"acl-{uuid.uuid4().hex[:8]}"
    base = [
        str(Path(sys.executable).with_name("iot-devices")),
        "--kafka-bootstrap", cfg.kafka_bootstrap, "--kafka-security-protocol", "SASL_SSL",
        "--kafka-sasl-username", "registry",
        "--kafka-sasl-password-file", str(kafka_auth.secret_path(cfg, "registry")),
        "--kafka-ssl-ca-file", str(kafka_auth.ca_file(cfg)),
        "--mqtt-host", cfg.connect_host, "--mqtt-port", str(cfg.mqtt_port),
        "--admin-password-file", str(admin_secret(cfg.secrets_dir)),
    ]  # fmt: skip
    for args in (["tenant", "create", tenant], ["tenant", "list"]):
        done = subprocess.run(
            [*base, *args], check=False, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    assert tenant in done.stdout
    assert "AUTHORIZATION" not in done.stderr
