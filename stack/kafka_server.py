"""Apache Kafka (KRaft, one node) run from the Maven-fetched jars as a background process."""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from pathlib import Path
from string import Template

from stack import paths
from stack.config import StackConfig
from stack.errors import StackError
from stack.ports import port_open
from stack.process import ManagedProcess

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


class KafkaServer:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.home = config.data_dir / "kafka"
        self.log_dirs = self.home / "data"
        self.properties_path = self.home / "server.properties"
        self.process = ManagedProcess("kafka", config.run_dir, config.log_dir / "kafka.log")

    @property
    def bootstrap(self) -> str:
        return self.config.kafka_bootstrap

    def _classpath(self) -> str:
        libs = paths.broker_libs_dir()
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise StackError(
                f"no Kafka broker jars in {libs}; run `make setup` (it fetches them with Maven)"
            )
        return f"{libs}/*"

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise StackError("java not found: install OpenJDK 17 or newer (`make setup` checks)")
        return java

    def render_config(self) -> Path:
        cfg = self.config
        template = Template((paths.kafka_config_dir() / "server.properties.template").read_text())
        text = template.substitute(
            host=cfg.connect_host,
            bind_host=cfg.bind_host,
            advertised_host=cfg.kafka_advertised_host or cfg.connect_host,
            port=cfg.kafka_port,
            controller_port=cfg.controller_port,
            log_dirs=self.log_dirs,
            partitions=cfg.partitions,
            retention_hours=cfg.kafka_retention_hours,
        )
        self.home.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(text)
        return self.properties_path

    def format_storage(self) -> bool:
        """Format the log dir once (KRaft needs it); False when it already was."""
        if (self.log_dirs / "meta.properties").exists():
            return False
        result = subprocess.run(
            [
                self._java(),
                "-cp",
                self._classpath(),
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                f"--cluster-id={cluster_id()}",
                "--config",
                str(self.properties_path),
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
            self._java(),
            f"-Xmx{self.config.kafka_heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={paths.kafka_config_dir() / 'log4j2.xml'}",
            f"-Dkafka.logs.dir={self.config.log_dir}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(self.properties_path),
        ]

    def start(self) -> None:
        self.process.start(self.command())
        self.process.wait_ready(
            lambda: (
                READY_LINE in self.process.log_since_start()
                and port_open(self.config.connect_host, self.config.kafka_port)
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
