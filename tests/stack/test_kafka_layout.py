"""Kafka node layout, replication per cluster size, the quorum tool's output (pure)."""

from __future__ import annotations

import pytest

from stack.errors import StackError
from stack.kafka_layout import (
    KafkaNode,
    PartitionState,
    Replication,
    bootstrap,
    node_layout,
    parse_quorum_status,
    quorum_voters,
    under_replicated,
)


def test_one_node_keeps_the_historical_ports() -> None:
    assert node_layout(1, "127.0.0.1", 9092, 9093) == [KafkaNode(1, "127.0.0.1", 9092, 9093)]


def test_nodes_on_one_host_take_two_ports_each() -> None:
    nodes = node_layout(3, "127.0.0.1", 9092, 9093)
    assert [(n.node_id, n.port, n.controller_port) for n in nodes] == [
        (1, 9092, 9093),
        (2, 9094, 9095),
        (3, 9096, 9097),
    ]
    assert bootstrap(nodes) == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    assert quorum_voters(nodes) == "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"


def test_nodes_on_their_own_hosts_share_the_ports() -> None:
    nodes = node_layout(3, "ignored", 9092, 9093, ("kafka", "kafka-2", "kafka-3"))
    assert quorum_voters(nodes) == "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert bootstrap(nodes) == "kafka:9092,kafka-2:9092,kafka-3:9092"


@pytest.mark.parametrize(
    ("count", "port", "controller", "hosts"),
    [
        (0, 9092, 9093, ()),  # no node
        (3, 9092, 9094, ()),  # node 2's client port is node 1's controller port
        (3, 65532, 65533, ()),  # past the last port
        (3, 9092, 9093, ("a", "b")),  # a host short
    ],
)
def test_impossible_layouts_are_refused(
    count: int, port: int, controller: int, hosts: tuple[str, ...]
) -> None:
    with pytest.raises(StackError):
        node_layout(count, "127.0.0.1", port, controller, hosts)


@pytest.mark.parametrize(
    ("brokers", "factor", "min_isr"), [(0, 1, 1), (1, 1, 1), (2, 2, 1), (3, 3, 2), (5, 3, 2)]
)
def test_replication_follows_the_cluster_size(brokers: int, factor: int, min_isr: int) -> None:
    assert Replication.for_brokers(brokers) == Replication(factor, min_isr)


QUORUM_4X = """ClusterId:              4Yn8IJFrSzm5DvfmdUzrlA
LeaderId:               2
LeaderEpoch:            7
HighWatermark:          245
MaxFollowerLag:         0
MaxFollowerLagTimeMs:   142
CurrentVoters:          [{"id": 1, "endpoints": ["CONTROLLER://127.0.0.1:39792"]}, {"id": 3, "endpoints": ["CONTROLLER://127.0.0.1:39796"]}, {"id": 2, "endpoints": ["CONTROLLER://127.0.0.1:39794"]}]
CurrentObservers:       []
"""  # noqa: E501 - the tool's real output line


def test_quorum_status_of_kafka_4() -> None:
    status = parse_quorum_status(QUORUM_4X)
    assert (status.leader_id, status.leader_epoch, status.voters) == (2, 7, (1, 2, 3))
    assert status.max_follower_lag == 0


def test_quorum_status_of_the_older_plain_voter_list() -> None:
    text = "LeaderId: 1\nLeaderEpoch: 3\nMaxFollowerLag: 12\nCurrentVoters: [1,2,3]\n"
    status = parse_quorum_status(text)
    assert (status.leader_id, status.voters, status.max_follower_lag) == (1, (1, 2, 3), 12)


def test_quorum_status_without_a_leader_is_an_error() -> None:
    with pytest.raises(StackError, match="LeaderId"):
        parse_quorum_status("Error: timed out\n")


def test_under_replicated_are_short_of_replicas_or_leaderless() -> None:
    healthy = PartitionState("t", 0, 1, (1, 2, 3), (1, 2, 3))
    short = PartitionState("t", 1, 2, (1, 2, 3), (2, 3))
    leaderless = PartitionState("t", 2, -1, (1,), (1,))
    assert under_replicated([healthy, short, leaderless]) == [short, leaderless]
