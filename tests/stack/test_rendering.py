"""The generated server configs carry the stack's settings (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.config import MQTT_AUTOSAVE_CHANGES, StackConfig
from stack.errors import StackError
from stack.kafka_server import KafkaServer
from stack.mosquitto_server import MosquittoServer


def _props(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#")
    return {k.strip(): v.strip() for k, v in pairs}


def test_kafka_properties(tmp_path: Path) -> None:
    cfg = StackConfig(
        data_dir=tmp_path, kafka_port=19092, kafka_controller_port=19193, partitions=5
    )
    props = _props(KafkaServer(cfg).render_config().read_text())
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19193"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19193"
    assert props["num.partitions"] == "5"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.dirs"] == str(tmp_path / "kafka" / "data")


def test_mosquitto_conf(tmp_path: Path) -> None:
    cfg = StackConfig(data_dir=tmp_path, mqtt_port=11883, mqtt_max_queued_messages=1234)
    lines = MosquittoServer(cfg).render_config().read_text().splitlines()
    assert "listener 11883 127.0.0.1" in lines
    assert "persistence true" in lines
    assert f"persistence_location {tmp_path / 'mosquitto'}/" in lines
    assert "max_queued_messages 1234" in lines
    assert not any("${" in line for line in lines)


def test_mosquitto_refuses_anonymous_clients_by_default(tmp_path: Path) -> None:
    import json
    import stat

    from registry.dynsec_config import check_pbkdf2

    server = MosquittoServer(StackConfig(data_dir=tmp_path, mqtt_port=11883))
    lines = server.render_config().read_text().splitlines()
    assert "allow_anonymous false" in lines
    assert "allow_anonymous true" not in lines
    assert any(line.startswith("plugin /") and "dynamic_security" in line for line in lines)
    assert f"plugin_opt_config_file {tmp_path / 'mosquitto' / 'dynsec.json'}" in lines
    secret_file = tmp_path / "secrets" / "registry-admin.secret"
    for path in (secret_file, server.dynsec_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret_file.parent.stat().st_mode) == 0o700
    secret = secret_file.read_text().strip()
    (admin,) = json.loads(server.dynsec_path.read_text())["clients"]
    assert admin["username"] == "svc/registry"
    assert check_pbkdf2(secret, admin)
    # a second render keeps both: the dynsec file is Mosquitto's live state
    before = server.dynsec_path.read_text()
    server.render_config()
    assert server.dynsec_path.read_text() == before
    assert secret_file.read_text().strip() == secret


def test_insecure_anonymous_keeps_the_open_broker(tmp_path: Path) -> None:
    cfg = StackConfig(data_dir=tmp_path, mqtt_port=11883, insecure_anonymous=True)
    lines = MosquittoServer(cfg).render_config().read_text().splitlines()
    assert "allow_anonymous true" in lines
    assert not any(line.startswith("plugin ") for line in lines)
    assert not (tmp_path / "secrets").exists()


def test_a_dynsec_file_without_its_admin_secret_is_an_error(tmp_path: Path) -> None:
    import pytest

    from stack.errors import StackError

    server = MosquittoServer(StackConfig(data_dir=tmp_path, mqtt_port=11883))
    server.render_config()
    (tmp_path / "secrets" / "registry-admin.secret").unlink()
    with pytest.raises(StackError, match="admin secret"):
        server.render_config()


def test_cluster_ids_are_kafka_uuids_that_never_look_like_an_option() -> None:
    import base64

    from stack.kafka_server import cluster_id

    ids = [cluster_id() for _ in range(2000)]  # ~31 would start with "-" if not excluded
    assert not any(i.startswith("-") for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)


def test_kafka_cluster_nodes_share_voters_and_replicate_by_three(tmp_path: Path) -> None:
    cfg = StackConfig(data_dir=tmp_path, kafka_port=19092, kafka_nodes=3)
    servers = [KafkaServer(cfg, n) for n in (1, 2, 3)]
    props = [_props(s.render_config().read_text()) for s in servers]
    voters = "1@127.0.0.1:19093,2@127.0.0.1:19095,3@127.0.0.1:19097"
    for n, p in enumerate(props, start=1):
        port, controller = 19092 + 2 * (n - 1), 19093 + 2 * (n - 1)
        assert p["node.id"] == str(n)
        assert p["controller.quorum.voters"] == voters
        assert "controller.quorum.bootstrap.servers" not in p
        assert p["listeners"] == f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
        assert p["log.dirs"] == str(tmp_path / "kafka" / f"node-{n}" / "data")
        for key in (
            "default.replication.factor",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
            "share.coordinator.state.topic.replication.factor",
        ):
            assert p[key] == "3", key
        for key in (
            "min.insync.replicas",
            "transaction.state.log.min.isr",
            "share.coordinator.state.topic.min.isr",
        ):
            assert p[key] == "2", key
        assert p["unclean.leader.election.enable"] == "false"
        assert p["broker.session.timeout.ms"] == str(cfg.kafka_session_timeout_ms)
    assert [s.name for s in servers] == ["kafka-1", "kafka-2", "kafka-3"]
    # one id for the whole cluster, kept for the next start
    assert {s.cluster_id() for s in servers} == {
        (tmp_path / "kafka" / "cluster.id").read_text().strip()
    }


def test_one_kafka_node_replicates_nothing(tmp_path: Path) -> None:
    props = _props(KafkaServer(StackConfig(data_dir=tmp_path)).render_config().read_text())
    assert props["default.replication.factor"] == props["offsets.topic.replication.factor"] == "1"
    assert props["min.insync.replicas"] == props["transaction.state.log.min.isr"] == "1"


def test_kafka_nodes_on_their_own_hosts_listen_on_the_bind_address(tmp_path: Path) -> None:
    cfg = StackConfig(
        data_dir=tmp_path,
        bind_host="0.0.0.0",
        kafka_nodes=3,
        kafka_node_hosts="kafka,kafka-2,kafka-3",
        kafka_cluster_id="Zm9vYmFyYmF6cXV1eDEyMw",
    )
    props = _props(KafkaServer(cfg, 2).render_config().read_text())
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://kafka-2:9092"
    assert props["controller.quorum.voters"] == "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert KafkaServer(cfg, 3).cluster_id() == "Zm9vYmFyYmF6cXV1eDEyMw"


def test_kafka_jvm_options_come_before_the_main_class_and_are_read_from_the_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(KafkaServer, "format_storage", lambda self: False)  # no JVM run here
    monkeypatch.setenv("IOT_KAFKA_JVM_OPTS", "-XX:TieredStopAtLevel=1  -Dx='a b'")
    argv = KafkaServer(StackConfig.from_env(data_dir=tmp_path)).command()
    main = argv.index("kafka.Kafka")
    assert "-XX:TieredStopAtLevel=1" in argv[:main]
    assert "-Dx=a b" in argv[:main]
    plain = KafkaServer(StackConfig(data_dir=tmp_path / "plain")).command()
    assert not any(arg.startswith("-XX:TieredStopAtLevel") for arg in plain)


def test_g1_unless_the_jvm_options_pick_a_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(KafkaServer, "format_storage", lambda self: False)  # no JVM run here
    plain = KafkaServer(StackConfig(data_dir=tmp_path / "plain")).command()
    assert [a for a in plain if "GC" in a] == ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]
    # two collectors: the JVM would refuse to start ("Multiple garbage collectors selected")
    serial = StackConfig(data_dir=tmp_path, kafka_jvm_options="-XX:+UseSerialGC -Xss1m")
    assert [a for a in KafkaServer(serial).command() if "GC" in a] == ["-XX:+UseSerialGC"]


def test_cluster_nodes_get_a_smaller_heap_by_default(tmp_path: Path) -> None:
    assert StackConfig(data_dir=tmp_path).kafka_heap_size == "768m"
    assert StackConfig(data_dir=tmp_path, kafka_nodes=3).kafka_heap_size == "384m"
    assert StackConfig(data_dir=tmp_path, kafka_nodes=3, kafka_heap="1g").kafka_heap_size == "1g"


def test_mosquitto_saves_every_n_seconds_by_default_or_every_n_changes(tmp_path: Path) -> None:
    def lines(changes: int = MQTT_AUTOSAVE_CHANGES, seconds: int = 5) -> list[str]:
        cfg = StackConfig(
            data_dir=tmp_path, mqtt_autosave_changes=changes, mqtt_autosave_interval=seconds
        )
        return MosquittoServer(cfg).render_config().read_text().splitlines()

    default = MosquittoServer(StackConfig(data_dir=tmp_path)).render_config().read_text()
    # a save every 5 s: saves on changes come back to back once Mosquitto holds a backlog
    assert MQTT_AUTOSAVE_CHANGES == 0
    assert {"autosave_on_changes false", "autosave_interval 5"} <= set(default.splitlines())
    assert {"autosave_on_changes true", "autosave_interval 200"} <= set(lines(200))
    seconds = lines(0, 7)
    assert {"autosave_on_changes false", "autosave_interval 7"} <= set(seconds)
    with pytest.raises(StackError):
        StackConfig(data_dir=tmp_path, mqtt_autosave_changes=-1)


def test_servers_on_free_ports_take_an_autosave_setting_or_keep_the_default(
    tmp_path: Path,
) -> None:
    assert StackConfig.servers_on_free_ports(tmp_path).mqtt_autosave_changes == (
        MQTT_AUTOSAVE_CHANGES
    )
    every_5_s = StackConfig.servers_on_free_ports(tmp_path, mqtt_autosave_changes=0)
    assert every_5_s.mqtt_autosave_changes == 0
