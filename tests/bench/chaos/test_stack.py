"""The chaos stack's addresses (bench/chaos/stack.py): one Kafka node, or the 3-node cluster
whose node N listens on the Kafka port + 2(N-1) and is supervised as `kafka-N`."""

from __future__ import annotations

from pathlib import Path

from bench.chaos.stack import ChaosStack

PORTS = {
    "mqtt": 1883, "mqtt_tls": 8883, "kafka": 20000, "controller": 20001, "bridge": 9100,
    "commands": 9101, "api": 3904, "analytics": 9102,
}  # fmt: skip


def test_one_node_keeps_the_single_kafka(tmp_path: Path) -> None:
    stack = ChaosStack(tmp_path, PORTS, False, {})
    assert stack.bootstrap == "127.0.0.1:20000"
    assert stack.kafka_services == ["kafka"]
    assert "--kafka-nodes" not in stack.args


def test_three_nodes_each_on_its_ports_and_every_one_in_the_bootstrap(tmp_path: Path) -> None:
    stack = ChaosStack(tmp_path, PORTS, False, {}, kafka_nodes=3)
    assert stack.bootstrap == "127.0.0.1:20000,127.0.0.1:20002,127.0.0.1:20004"
    assert stack.kafka_services == ["kafka-1", "kafka-2", "kafka-3"]
    assert stack.kafka_ports == [20000, 20002, 20004]
    args = stack.args
    assert args[args.index("--kafka-nodes") + 1] == "3"  # `up` and `down` alike
    assert args[args.index("--kafka-controller-port") + 1] == "20001"
