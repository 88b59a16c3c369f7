"""What `iot-stack status` shows of a Kafka cluster: its brokers, the KRaft quorum leader and the
under-replicated partitions (adapter: Kafka's admin protocol and its quorum tool)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from stack.errors import StackError
from stack.kafka_layout import PartitionState, QuorumStatus, parse_quorum_status, under_replicated
from stack.kafka_security import java_client_properties
from stack.kafka_server import broker_classpath, java_binary


def quorum_status(
    bootstrap: str, timeout: float = 60.0, security: Mapping[str, str] | None = None
) -> QuorumStatus:
    """The raft leader as the quorum reports it. Not AdminClient's `controller_id`: that names
    some broker, not the active controller (field notes A.1, gotchas). ``security``: the
    librdkafka login of a ``sasl_ssl`` cluster, handed to the tool in a private file."""
    with tempfile.TemporaryDirectory(prefix="iot-quorum-") as private:  # 0700
        login = java_client_properties(security or {})
        config = []
        if login:
            path = Path(private) / "client.properties"
            path.write_text(login)
            config = ["--command-config", str(path)]
        result = subprocess.run(
            [
                # a short-lived client: C1 JIT and the serial GC start it in ~2/3 of the time
                java_binary(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-cp", broker_classpath(),
                "org.apache.kafka.tools.MetadataQuorumCommand",
                "--bootstrap-server", bootstrap, *config, "describe", "--status",
            ],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    if result.returncode != 0:
        raise StackError(f"quorum status failed: {(result.stderr or result.stdout).strip()}")
    return parse_quorum_status(result.stdout)


@dataclass(frozen=True)
class ClusterView:
    brokers: dict[int, str]  # id -> host:port, the live brokers
    partitions: list[PartitionState]

    @property
    def under_replicated(self) -> list[PartitionState]:
        return under_replicated(self.partitions)


def cluster_view(
    bootstrap: str, timeout: float = 10.0, security: Mapping[str, str] | None = None
) -> ClusterView:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise StackError(f"Kafka at {bootstrap} did not answer: {exc.args[0]}") from exc
    brokers = {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}
    partitions = [
        PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
        for name, topic in meta.topics.items()
        for p in topic.partitions.values()
    ]
    return ClusterView(brokers, partitions)


def health_lines(bootstrap: str, security: Mapping[str, str] | None = None) -> list[str]:
    """`status` lines on the Kafka cluster: brokers, quorum leader, under-replicated
    partitions (for a local cluster and an external one)."""
    try:
        view = cluster_view(bootstrap, security=security)
    except StackError as exc:
        return [f"kafka: {exc}"]
    lines = [
        "kafka brokers: " + ", ".join(f"{i} {addr}" for i, addr in sorted(view.brokers.items()))
    ]
    try:
        quorum = quorum_status(bootstrap, security=security)
        voters = ",".join(str(v) for v in quorum.voters)
        lines.append(
            f"kafka quorum leader: node {quorum.leader_id} (epoch {quorum.leader_epoch}, "
            f"voters {voters})"
        )
    except (StackError, OSError, subprocess.TimeoutExpired) as exc:
        lines.append(f"kafka quorum leader: unknown ({exc})")
    urp = view.under_replicated
    text = ", ".join(f"{p.topic}/{p.partition} isr {list(p.isr)}" for p in urp[:10])
    more = f" (+{len(urp) - 10} more)" if len(urp) > 10 else ""
    lines.append(
        f"kafka under-replicated partitions: {len(urp)}" + (f": {text}{more}" if urp else "")
    )
    return lines
