"""The SASL_SSL listener block, SCRAM format arguments and ACL grants (pure, issue 33)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stack.config import StackConfig
from stack.errors import StackError
from stack.kafka_security import (
    ADMIN,
    BROKER,
    TlsFiles,
    client_settings,
    java_client_properties,
    listener_lines,
    scram_format_args,
    service_grants,
    tenant_grants,
)
from stack.kafka_server import KafkaServer

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
