"""Where each Kafka node of the stack listens, and what a replicated cluster needs (pure).

One node keeps the stack's historical layout (client port, controller port = client + 1). A
cluster of N combined broker+controller nodes on one machine shifts both ports by 2 per node
(9092/9093, 9094/9095, 9096/9097); with one host name per node (containers, machines) every
node uses the same two ports on its own host. Also: the replication a topic gets on a cluster
of a given size, and reading `kafka-metadata-quorum describe --status`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stack.errors import StackError

PORT_STEP = 2  # client + controller port per node on a shared host
MAX_REPLICAS = 3


@dataclass(frozen=True)
class KafkaNode:
    node_id: int
    host: str  # what clients and the other nodes reach this node by
    port: int  # client (PLAINTEXT) listener
    controller_port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def node_layout(
    count: int, host: str, port: int, controller_port: int, hosts: tuple[str, ...] = ()
) -> list[KafkaNode]:
    """The nodes of a cluster of `count`, ids 1..count."""
    if count < 1:
        raise StackError(f"kafka_nodes must be >= 1, got {count}")
    if hosts:
        if len(hosts) != count:
            raise StackError(f"{len(hosts)} Kafka node hosts given for {count} nodes")
        return [KafkaNode(i + 1, h, port, controller_port) for i, h in enumerate(hosts)]
    nodes = [
        KafkaNode(i + 1, host, port + PORT_STEP * i, controller_port + PORT_STEP * i)
        for i in range(count)
    ]
    used = [n.port for n in nodes] + [n.controller_port for n in nodes]
    if len(set(used)) != len(used) or max(used) > 65535:
        raise StackError(
            f"Kafka ports {sorted(used)} collide or overflow: pick a Kafka port and a "
            f"controller port at least {PORT_STEP * count} apart"
        )
    return nodes


def bootstrap(nodes: list[KafkaNode]) -> str:
    return ",".join(n.address for n in nodes)


def quorum_voters(nodes: list[KafkaNode]) -> str:
    """`controller.quorum.voters`: id@host:controller_port for every node."""
    return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in nodes)


@dataclass(frozen=True)
class Replication:
    """Replication factor and min.insync.replicas for a cluster of `brokers` brokers.

    3 replicas with min ISR 2 where there are 3 or more brokers: an acks=all write survives
    the loss of any one broker and is never acknowledged by fewer than 2. With 2 brokers
    min ISR 1 (else losing either would stop every write); with 1 there is nothing to copy.
    """

    factor: int
    min_insync: int

    @classmethod
    def for_brokers(cls, brokers: int) -> Replication:
        factor = max(1, min(MAX_REPLICAS, brokers))
        return cls(factor, 2 if factor >= MAX_REPLICAS else 1)


@dataclass(frozen=True)
class QuorumStatus:
    leader_id: int
    leader_epoch: int
    voters: tuple[int, ...]
    max_follower_lag: int | None


_FIELD = re.compile(r"^(\w+):\s*(.*)$", re.MULTILINE)


def parse_quorum_status(text: str) -> QuorumStatus:
    """`MetadataQuorumCommand describe --status` output -> the fields `status` shows."""
    fields = dict(_FIELD.findall(text))
    try:
        leader = int(fields["LeaderId"])
        epoch = int(fields["LeaderEpoch"])
    except (KeyError, ValueError) as exc:
        raise StackError(f"no LeaderId/LeaderEpoch in the quorum status:\n{text.strip()}") from exc
    raw_voters = fields.get("CurrentVoters", "")
    # 4.x prints JSON objects ({"id": 1, ...}); older releases a plain [1,2,3]
    ids = re.findall(r'"id":\s*(\d+)', raw_voters) or re.findall(r"\d+", raw_voters)
    lag = fields.get("MaxFollowerLag", "").strip()
    return QuorumStatus(
        leader, epoch, tuple(sorted(int(i) for i in ids)), int(lag) if lag.isdigit() else None
    )


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1 = no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def under_replicated(partitions: list[PartitionState]) -> list[PartitionState]:
    """Partitions whose in-sync set is smaller than their replica set (or that have no leader)."""
    return [p for p in partitions if p.leader < 0 or len(p.isr) < len(p.replicas)]
