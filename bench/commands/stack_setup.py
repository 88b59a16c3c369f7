"""Where the command benchmark runs: Mosquitto + Kafka (its own or given), this run's fresh
topics, and the ``IOT_*`` settings the bridge and the command path get."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.progress import say
from stack.topics import TopicSpec, ensure_topics

COMPACTED = frozenset({"topic_presence", "topic_command_status"})


@dataclass
class Servers:
    mqtt_host: str
    mqtt_port: int
    bootstrap: str
    mosquitto_pid: Callable[[], int | None] = lambda: None
    kafka_pid: Callable[[], int | None] = lambda: None


@contextlib.contextmanager
def own_stack(
    data_dir: Path, partitions: int, autosave_changes: int | None = None
) -> Iterator[Servers]:
    """A private Mosquitto + Kafka on free ports under ``data_dir`` (the project's launcher);
    ``autosave_changes`` None keeps the stack's Mosquitto save setting."""
    from stack.config import StackConfig
    from stack.launcher import Stack

    # anonymous, explicitly: the benchmark measures the data path, not the log-in
    config = StackConfig.servers_on_free_ports(
        data_dir, partitions, insecure_anonymous=True, mqtt_autosave_changes=autosave_changes
    )
    stack = Stack(config)
    say(f"starting Mosquitto + Kafka under {data_dir} ...")
    stack.up()
    try:
        yield Servers(
            stack.mqtt_host,
            stack.mqtt_port,
            stack.kafka_bootstrap,
            mosquitto_pid=stack.mosquitto.process.pid,
            kafka_pid=stack.kafka.process.pid,
        )
    finally:
        stack.down()


def run_topics(tag: str) -> dict[str, str]:
    """This run's topics by BridgeConfig setting name: fresh ones, nothing left from before."""
    names = {
        "topic_telemetry": "telemetry",
        "topic_events": "events",
        "topic_dlq": "dlq",
        "topic_presence": "presence",
        "topic_commands": "commands",
        "topic_command_status": "command-status",
        "topic_command_replies": "command-replies",
        "topic_commands_dlq": "commands-dlq",
    }
    return {key: f"bench.{name}.{tag}" for key, name in names.items()}


def create_topics(servers: Servers, topics: Mapping[str, str], partitions: int) -> None:
    ensure_topics(
        servers.bootstrap,
        [TopicSpec(name, compacted=key in COMPACTED) for key, name in topics.items()],
        partitions,
    )


def bridge_settings(
    servers: Servers,
    tag: str,
    topics: Mapping[str, str],
    overrides: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """BridgeConfig settings of the bridge and the command path (``--setting`` wins)."""
    return {
        "mqtt_host": servers.mqtt_host,
        "mqtt_port": servers.mqtt_port,
        "kafka_bootstrap": servers.bootstrap,
        "mqtt_client_id": f"bench-bridge-{tag}",
        "command_mqtt_client_id": f"bench-cmd-{tag}",
        "command_group_id": f"bench-cmd-{tag}",
        # no session outlives the run: a dead bridge's persistent session would keep queueing
        # all telemetry in Mosquitto (and its autosave would write it every few seconds)
        "mqtt_session_expiry_s": 0,
        "command_timeout_ms": 30000,
        "log_format": "json",
        "log_level": "WARNING",
        **topics,
        **dict(overrides),
    }
