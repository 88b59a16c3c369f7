"""The SASL_SSL listener block, SCRAM format arguments and ACL grants (pure, issue 33): the
services' least-privilege grants checked against Kafka's ACL rules (a DENY wins, READ/WRITE imply
DESCRIBE) and against the topic names the services use."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from api.config import ApiConfig
from api.console.config import ConsoleConfig
from bridge.mapping import Topics
from bridge.topics import tenant_kafka_topic
from commands.config import CommandConfig
from registry.kafka_store import AUDIT_TOPIC, REGISTRY_TOPIC, TRANSACTIONAL_ID
from stack.config import StackConfig
from stack.errors import StackError
from stack.kafka_security import (
    ADMIN,
    API_TOPICS,
    BROKER,
    CLUSTER,
    COMMAND_TOPICS,
    COMMANDS,
    COMMANDS_DLQ,
    INTERNAL_TOPICS,
    REGISTRY_TOPICS,
    REGISTRY_TXN,
    REPLIES,
    SERVICES,
    STATUS,
    TELEMETRY_TOPICS,
    Grant,
    TlsFiles,
    client_settings,
    java_client_properties,
    listener_lines,
    scram_format_args,
    service_grants,
    tenant_grants,
)
from stack.kafka_server import KafkaServer
from stack.topics import DESIGN_TOPICS

TLS = TlsFiles("/d/kafka/tls/node-1.pem", "/d/ca/ca.crt")


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_plaintext_is_the_one_machine_default() -> None:
    props = _props(listener_lines("plaintext", client="h:1", controller="h:2", advertised="a:1"))
    assert props["listeners"] == "PLAINTEXT://h:1,CONTROLLER://h:2"
    assert props["advertised.listeners"] == "PLAINTEXT://a:1"
    assert "authorizer.class.name" not in props


def test_sasl_ssl_secures_clients_brokers_and_controllers() -> None:
    text = listener_lines(
        "sasl_ssl", client="0.0.0.0:9092", controller="0.0.0.0:9093", advertised="kafka-1:9092",
        tls=TLS, broker_secret="s3cret",
    )  # fmt: skip
    props = _props(text)
    assert props["listeners"] == "SASL_SSL://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL"
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert props["ssl.keystore.location"] == TLS.keystore
    assert props["super.users"] == f"User:{BROKER};User:{ADMIN}"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert "PLAINTEXT://" not in text


def test_sasl_ssl_needs_its_files_and_secret() -> None:
    with pytest.raises(StackError):
        listener_lines("sasl_ssl", client="h:1", controller="h:2", advertised="h:1")
    with pytest.raises(StackError, match="kafka_security"):
        listener_lines("ssl", client="h:1", controller="h:2", advertised="h:1")


def test_scram_arguments_name_every_principal() -> None:
    args = scram_format_args({"bridge": "abc_-1", "kafka-broker": "xyz"})
    assert args == [
        "--add-scram", "SCRAM-SHA-512=[name=bridge,password=abc_-1]",
        "--add-scram", "SCRAM-SHA-512=[name=kafka-broker,password=xyz]",
    ]  # fmt: skip
    with pytest.raises(StackError):
        scram_format_args({"bridge": "a,b]"})


def test_a_tenant_reads_only_its_prefix() -> None:
    grants = tenant_grants("acme")
    assert {(g.resource, g.name, g.pattern, g.operation) for g in grants} == {
        ("topic", "iot.acme.", "prefixed", "read"),
        ("topic", "iot.acme.", "prefixed", "describe"),
        ("group", "iot.acme.", "prefixed", "read"),
        ("group", "iot.acme.", "prefixed", "describe"),
    }
    assert {g.principal for g in grants} == {"User:tenant-acme"}
    assert {g.principal for g in service_grants("bridge")} == {"User:bridge"}


def test_the_rendered_node_config_is_private_and_secured(tmp_path: Path) -> None:
    cfg = StackConfig(data_dir=tmp_path, kafka_security="sasl_ssl")
    path = KafkaServer(cfg).render_config()
    assert path.stat().st_mode & 0o077 == 0
    props = _props(path.read_text())
    assert props["listeners"].startswith("SASL_SSL://")
    assert Path(props["ssl.keystore.location"]).read_text().startswith("-----BEGIN PRIVATE KEY")
    assert (tmp_path / "secrets" / "kafka" / "kafka-broker.secret").stat().st_mode & 0o077 == 0


def test_sasl_ssl_is_for_the_stacks_own_kafka(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="external"):
        StackConfig(data_dir=tmp_path, kafka_security="sasl_ssl", external_kafka="k:9092")


def test_nodes_sharing_the_secrets_volume_agree_on_each_secret(tmp_path: Path) -> None:
    """The kafka3 compose stack's nodes start at once on one secrets volume, each iot-stack
    with the same pid: every one must get the same secret, none an error (they once collided
    on a temporary file named after the pid)."""
    from stack import kafka_auth

    cfg = StackConfig(data_dir=tmp_path, kafka_security="sasl_ssl")
    start = threading.Barrier(12)

    def node() -> dict[str, str]:
        start.wait()
        return kafka_auth.format_secrets(cfg)

    with ThreadPoolExecutor(12) as pool:
        got = list(pool.map(lambda _: node(), range(12)))
    assert all(g == got[0] for g in got)
    assert sorted(p.name for p in (tmp_path / "secrets" / "kafka").iterdir()) == sorted(
        f"{name}.secret" for name in got[0]
    )  # no temporary file left behind


def test_the_java_tools_get_the_same_login_as_a_properties_file() -> None:
    settings = client_settings("kafka-admin", "s3cret", "/ca/ca.crt")
    props = dict(line.split("=", 1) for line in java_client_properties(settings).splitlines())
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="kafka-admin" password="s3cret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca/ca.crt",
    }
    assert java_client_properties({}) == ""  # plaintext: no --command-config


# --- the services' least-privilege grants ---------------------------------------------------

_IMPLY_DESCRIBE = {"read", "write", "delete", "alter"}


def _matches(grant: Grant, resource: str, name: str) -> bool:
    if grant.resource != resource:
        return False
    if grant.pattern == "prefixed":
        return name.startswith(grant.name)
    return grant.name in ("*", name)


def _may(service: str, resource: str, name: str, operation: str) -> bool:
    """Kafka's StandardAuthorizer on these grants: a matching DENY wins; READ, WRITE, DELETE
    and ALTER imply DESCRIBE."""
    grants = [g for g in service_grants(service) if _matches(g, resource, name)]
    if any(g.permission == "deny" and g.operation in (operation, "all") for g in grants):
        return False
    ok = {operation, "all"} | (_IMPLY_DESCRIBE if operation == "describe" else set())
    return any(g.permission == "allow" and g.operation in ok for g in grants)


def test_every_grant_says_why_and_names_its_own_principal() -> None:
    for service in SERVICES:
        grants = service_grants(service)
        assert grants, service
        for g in grants:
            assert len(g.reason) > 20, g
            assert g.principal == f"User:{service}"
            assert g.permission in ("allow", "deny")
            assert g.pattern in ("literal", "prefixed")
            assert g.resource in ("topic", "group", "cluster", "transactional_id")
    with pytest.raises(StackError, match="no Kafka grants"):
        service_grants("devices")


def test_the_bridge_writes_every_tenants_telemetry_and_nothing_of_the_others() -> None:
    for topic in ("iot.telemetry", "iot.events", "iot.dlq", "iot.presence",
                  tenant_kafka_topic("iot.telemetry", "acme"),
                  tenant_kafka_topic("iot.presence", "registry")):  # fmt: skip
        assert _may("bridge", "topic", topic, "write"), topic
        assert _may("bridge", "topic", topic, "create"), topic
        assert not _may("bridge", "topic", topic, "read"), topic
    assert _may("bridge", "topic", "iot.registry", "read")  # tenants and quotas
    for topic in INTERNAL_TOPICS:
        assert not _may("bridge", "topic", topic, "write"), topic
        assert not _may("bridge", "topic", topic, "create"), topic
    assert not _may("bridge", "topic", "iot.commands", "read")
    assert not _may("bridge", "topic", "iot.telemetry", "delete")
    assert not _may("bridge", "topic", "other", "write")
    # another service's consumer group (the command path's), MR groups
    assert not _may("bridge", "group", "iot-bridge-commands", "read")
    assert not _may("bridge", "group", "mr-group--topic", "read")
    assert _may("bridge", "group", "iot-registry-load-1a2b3c4d", "read")


def test_the_command_path_reads_commands_and_writes_only_their_fate() -> None:
    assert _may("commands", "topic", COMMANDS, "read")
    # `iot-cmd send` run in its container (compose): its MQTT account reaches every device anyway
    assert _may("commands", "topic", COMMANDS, "write")
    assert _may("commands", "topic", REPLIES, "read")  # `iot-cmd send --wait`
    for topic in (STATUS, REPLIES, COMMANDS_DLQ):
        assert _may("commands", "topic", topic, "write"), topic
    assert _may("commands", "topic", STATUS, "read")  # adopts pending commands at start
    for topic in (*TELEMETRY_TOPICS, "iot.acme.commands", *REGISTRY_TOPICS):
        assert not _may("commands", "topic", topic, "write"), topic
        assert not _may("commands", "topic", topic, "read"), topic
    assert not _may("commands", "topic", STATUS, "create")
    assert _may("commands", "group", CommandConfig().command_group_id, "read")
    assert _may("commands", "group", "iot-bridge-commands-shard-2", "read")
    assert not _may("commands", "group", "iot-registry-load-1", "read")


def test_analytics_only_reads_telemetry_and_presence() -> None:
    for topic in ("iot.telemetry", "iot.presence", "iot.acme.telemetry"):
        assert _may("analytics", "topic", topic, "read"), topic
        assert not _may("analytics", "topic", topic, "write"), topic
    for topic in INTERNAL_TOPICS:
        assert not _may("analytics", "topic", topic, "read"), topic
    assert _may("analytics", "group", "spark-kafka-source-5e1f-driver-0", "read")
    assert not _may("analytics", "cluster", CLUSTER, "idempotent_write")  # it never produces


def test_the_registry_writer_owns_the_registry_topics_alone() -> None:
    for topic in REGISTRY_TOPICS:
        assert _may("registry", "topic", topic, "write"), topic
    assert _may("registry", "transactional_id", REGISTRY_TXN, "write")
    assert not _may("registry", "topic", "iot.telemetry", "read")
    assert not _may("registry", "topic", "iot.registry.telemetry", "write")  # tenant registry
    for service in ("bridge", "commands", "analytics", "amqp"):
        assert not _may(service, "transactional_id", REGISTRY_TXN, "write"), service
        assert not _may(service, "topic", "iot.registry", "write"), service
    assert _may("api", "transactional_id", REGISTRY_TXN, "write")  # /apiKeys, /ops


def test_the_doors_keep_broad_topic_rights_but_never_delete_the_appliances_topics() -> None:
    for door in ("api", "amqp"):
        for topic in ("mr.any-name", "iot.commands", "iot.api.queue-markers"):
            assert _may(door, "topic", topic, "write"), (door, topic)
            assert _may(door, "topic", topic, "read"), (door, topic)
        assert _may(door, "group", "anyone--mr.any-name", "read")
        for topic in ("iot.telemetry", "iot.acme.events", *INTERNAL_TOPICS):
            assert not _may(door, "topic", topic, "delete"), (door, topic)
    assert _may("api", "topic", "mr.any-name", "delete")  # MR's DELETE /topics/{name}
    assert not _may("amqp", "topic", "mr.any-name", "delete")


def test_no_service_alters_anything_nor_uses_the_cluster_beyond_idempotent_writes() -> None:
    for service in SERVICES:
        for g in service_grants(service):
            assert g.operation not in ("all", "alter", "alter_configs"), g
            if g.resource == "cluster" and g.permission == "allow":
                assert g.operation == "idempotent_write", g
        idempotent = _may(service, "cluster", CLUSTER, "idempotent_write")
        assert idempotent == (service != "analytics"), service  # every producer is idempotent


def test_the_grants_name_the_topics_the_services_use() -> None:
    """The names kafka_security keeps are the design's and the services' defaults."""
    assert {s.name for s in DESIGN_TOPICS} == {*TELEMETRY_TOPICS, *COMMAND_TOPICS}
    assert set(Topics().all()) == set(TELEMETRY_TOPICS)
    cmd = CommandConfig()
    assert (
        cmd.topic_commands,
        cmd.topic_command_status,
        cmd.topic_command_replies,
        cmd.topic_commands_dlq,
    ) == (COMMAND_TOPICS)
    assert (REGISTRY_TOPIC, AUDIT_TOPIC) == REGISTRY_TOPICS
    assert TRANSACTIONAL_ID == REGISTRY_TXN == ApiConfig().registry_transactional_id
    api = ApiConfig()
    assert {api.registry_topic, api.registry_audit_topic} == set(REGISTRY_TOPICS)
    assert {api.queue_markers_topic, api.queue_settings_topic} < set(API_TOPICS)
    assert ConsoleConfig().console_audit_topic in API_TOPICS
    assert tenant_kafka_topic("iot.telemetry", "acme").startswith("iot.")


def test_sasl_ssl_refuses_the_inline_command_path(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="commands_mode separate"):
        StackConfig(data_dir=tmp_path, kafka_security="sasl_ssl", commands_mode="inline")
    StackConfig(data_dir=tmp_path, kafka_security="sasl_ssl", commands_mode="off")
