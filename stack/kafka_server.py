"""Apache Kafka (KRaft) run from the Maven-fetched jars as background processes: one node, or
a cluster of combined broker+controller nodes started together."""

from __future__ import annotations

import base64
import shlex
import shutil
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from string import Template

from stack import kafka_auth, kafka_cds, paths
from stack.config import StackConfig
from stack.errors import StackError
from stack.kafka_layout import Replication, quorum_voters
from stack.kafka_security import BROKER, listener_lines, scram_format_args
from stack.ports import port_open
from stack.process import ManagedProcess
from stack.secret_files import write_private

READY_LINE = "Kafka Server started"


def cluster_id() -> str:
    """A KRaft cluster id in Kafka's Uuid text form: 16 random bytes, URL-safe base64, unpadded.

    Like Kafka's own Uuid.randomUuid(), never one that starts with "-": the storage tool's
    argument parser would take it for an option (one start in 64 failed that way).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def broker_classpath() -> str:
    libs = paths.broker_libs_dir()
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise StackError(
            f"no Kafka broker jars in {libs}; run `make setup` (it fetches them with Maven)"
        )
    return f"{libs}/*"


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise StackError("java not found: install OpenJDK 17 or newer (`make setup` checks)")
    return java


def collector_options(jvm_options: str) -> list[str]:
    """G1 with short pauses, as Kafka's own scripts run it, unless ``jvm_options``
    (IOT_KAFKA_JVM_OPTS) picks a collector itself: the JVM refuses to start with two."""
    options = shlex.split(jvm_options)
    if any(o.startswith("-XX:+Use") and o.endswith("GC") for o in options):
        return []
    return ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]


def _megabytes(heap: str) -> int:
    """-Xmx text (768m, 1g, 1024k) in MiB, for an -Xms that never exceeds it."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024}
    text = heap.strip().lower()
    if text and text[-1] in units:
        return max(1, int(float(text[:-1]) * units[text[-1]]))
    return max(1, int(text) // 1024**2) if text.isdigit() else 256


class KafkaServer:
    """One Kafka node: the stack's only one (`kafka`), or node N of a cluster (`kafka-N`)."""

    def __init__(self, config: StackConfig, node_id: int = 1) -> None:
        self.config = config
        self.node = config.kafka_layout[node_id - 1]
        self.clustered = config.kafka_nodes > 1
        if self.clustered:
            self.name = f"kafka-{node_id}"
            self.home = config.data_dir / "kafka" / f"node-{node_id}"
        else:
            self.name = "kafka"
            self.home = config.data_dir / "kafka"
        self.log_dirs = self.home / "data"
        self.properties_path = self.home / "server.properties"
        self.process = ManagedProcess(
            self.name, config.run_dir, config.log_dir / f"{self.name}.log"
        )

    @property
    def bootstrap(self) -> str:
        """This node's own client address."""
        return self.node.address

    def render_config(self) -> Path:
        cfg, node = self.config, self.node
        template = Template((paths.kafka_config_dir() / "server.properties.template").read_text())
        replication = Replication.for_brokers(cfg.kafka_nodes)
        own_hosts = bool(cfg.kafka_node_hosts.strip())
        if self.clustered:
            quorum = f"controller.quorum.voters={quorum_voters(cfg.kafka_layout)}"
        else:
            quorum = f"controller.quorum.bootstrap.servers={node.host}:{node.controller_port}"
        # peers on other hosts reach the controller listener through the bind address
        controller_bind = cfg.bind_host if own_hosts else node.host
        advertised_host = node.host if own_hosts else cfg.kafka_advertised_host or node.host
        secure = kafka_auth.enabled(cfg)
        listeners = listener_lines(
            cfg.kafka_security,
            client=f"{cfg.bind_host}:{node.port}",
            controller=f"{controller_bind}:{node.controller_port}",
            advertised=f"{advertised_host}:{node.port}",
            tls=kafka_auth.node_tls(cfg, node) if secure else None,
            broker_secret=kafka_auth.ensure_secret(cfg, BROKER) if secure else "",
        )
        text = template.substitute(
            node_id=node.node_id,
            quorum=quorum,
            listeners=listeners,
            log_dirs=self.log_dirs,
            partitions=cfg.partitions,
            replicas=replication.factor,
            min_isr=replication.min_insync,
            session_timeout_ms=cfg.kafka_session_timeout_ms,
            heartbeat_ms=max(250, cfg.kafka_session_timeout_ms // 6),
            retention_hours=cfg.kafka_retention_hours,
            # a cluster shares the machine three ways: smaller segments and thread pools
            segment_bytes=64 * 1024**2 if self.clustered else 256 * 1024**2,
            network_threads=2 if self.clustered else 3,
            io_threads=2 if self.clustered else 4,
        )
        self.home.mkdir(parents=True, exist_ok=True)
        # 0600: with sasl_ssl it holds the brokers' own secret (their JAAS login)
        write_private(self.properties_path, text)
        return self.properties_path

    def cluster_id(self) -> str:
        """The id every node is formatted with: configured, or generated once and kept."""
        if self.config.kafka_cluster_id:
            return self.config.kafka_cluster_id
        path = self.config.data_dir / "kafka" / "cluster.id"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            new = cluster_id()
            path.write_text(new + "\n")
            return new

    def format_storage(self) -> bool:
        """Format the log dir once (KRaft needs it); False when it already was."""
        if (self.log_dirs / "meta.properties").exists():
            return False
        # the SCRAM credentials (sasl_ssl) go in an argument file of mode 0600, never on the
        # command line (java expands @files in the application's arguments too)
        argfile = self.home / ".format-args"
        if not kafka_auth.enabled(self.config):
            return self._format(argfile)
        scram = scram_format_args(kafka_auth.format_secrets(self.config))
        write_private(argfile, "\n".join(scram) + "\n")
        try:
            return self._format(argfile)
        finally:
            argfile.unlink(missing_ok=True)

    def _format(self, argfile: Path) -> bool:
        result = subprocess.run(
            [
                java_binary(),
                # a tool that runs for a second: C1 only and the serial collector took its CPU
                # from 2.8 to 1.8 s (measured), no optimising compiler to pay for
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                *kafka_cds.use_options(self.config.kafka_jvm_options),
                "-cp",
                broker_classpath(),
                "kafka.tools.StorageTool",
                "format",
                # one node: a dynamic quorum of itself; a cluster: its static voters
                *([] if self.clustered else ["--standalone"]),
                f"--cluster-id={self.cluster_id() if self.clustered else cluster_id()}",
                "--config",
                str(self.properties_path),
                *([f"@{argfile}"] if kafka_auth.enabled(self.config) else []),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise StackError(f"formatting Kafka storage failed:\n{result.stdout}{result.stderr}")
        return True

    def command(self) -> list[str]:
        """Render the config, format storage if new, and return the broker's argv."""
        self.render_config()
        self.format_storage()
        return [
            java_binary(),
            f"-Xmx{self.config.kafka_heap_size}",
            f"-Xms{min(256, _megabytes(self.config.kafka_heap_size))}m",
            *collector_options(self.config.kafka_jvm_options),
            "-Djava.awt.headless=true",
            *kafka_cds.use_options(self.config.kafka_jvm_options),
            *shlex.split(self.config.kafka_jvm_options),
            f"-Dlog4j2.configurationFile={paths.kafka_config_dir() / 'log4j2.xml'}",
            f"-Dkafka.logs.dir={self.config.log_dir}",
            "-cp",
            broker_classpath(),
            "kafka.Kafka",
            str(self.properties_path),
        ]

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process without waiting: a cluster node waits for its peers' quorum."""
        self.process.start(self.command())

    def wait_ready(self) -> None:
        self.process.wait_ready(
            lambda: (
                READY_LINE in self.process.log_since_start()
                and port_open(self.node.host, self.node.port)
            ),
            self.config.start_timeout,
            f"'{READY_LINE}' logged and {self.bootstrap} accepting connections",
        )

    def stop(self, timeout: float = 60.0) -> bool:
        # A clean shutdown writes the recovery checkpoints; Kafka takes a few seconds for it.
        return self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def running(self) -> bool:
        return self.process.running()


class KafkaCluster:
    """The nodes of a local cluster as one service of the stack: started together (a node
    reports itself started only once a majority of the quorum is up), stopped together."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.nodes = [KafkaServer(config, n.node_id) for n in config.kafka_layout]
        self.process = self.nodes[0].process  # for the launcher's Service protocol

    @property
    def bootstrap(self) -> str:
        return self.config.kafka_bootstrap

    def node(self, node_id: int) -> KafkaServer:
        return self.nodes[node_id - 1]

    def start(self) -> None:
        """Start the nodes that are not running, then wait for every one of them."""
        for node in self.nodes:
            if not node.running():
                node.launch()
        for node in self.nodes:
            node.wait_ready()

    def stop(self, timeout: float = 60.0) -> bool:
        # All at once: stopped one by one, the last node would lose its quorum and wait out
        # its controlled shutdown to the timeout.
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            stopped = list(pool.map(lambda n: n.stop(timeout), self.nodes))
        return any(stopped)

    def running(self) -> bool:
        return all(node.running() for node in self.nodes)
