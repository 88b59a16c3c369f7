"""The generated server configs carry the stack's settings (no server needed)."""

from __future__ import annotations

from pathlib import Path

from stack.config import StackConfig
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


def test_cluster_ids_are_kafka_uuids_that_never_look_like_an_option() -> None:
    import base64

    from stack.kafka_server import cluster_id

    ids = [cluster_id() for _ in range(2000)]  # ~31 would start with "-" if not excluded
    assert not any(i.startswith("-") for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
