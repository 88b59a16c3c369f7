"""The launcher's settings checked as a whole (pure): ports in range and apart, the bridges'
port run, the command path's mode, the Kafka nodes, the Spark cluster's ports and sizes.
:class:`~stack.settings.StackSettings` runs :func:`check_settings` on construction."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from spark_jobs.config import check_master
from spark_jobs.errors import ConfigError
from stack.errors import StackError
from stack.kafka_security import check_mode
from stack.mqtt_shards import check_shards

if TYPE_CHECKING:
    from stack.settings import StackSettings

COMMANDS_MODES = ("separate", "inline", "off")
MAX_BRIDGES = 16


def check_settings(s: StackSettings) -> None:
    """Raise :class:`StackError` naming the first setting that is out of range."""
    for name in ("mqtt_port", "kafka_port", "kafka_controller_port"):
        value = getattr(s, name)
        if not 0 <= value <= 65535:
            raise StackError(f"{name} must be a TCP port, got {value}")
    tls_port = s.mqtt_tls_port
    if s.mqtt_tls and (not 1 <= tls_port <= 65535 or tls_port == s.mqtt_port):
        raise StackError(
            f"mqtt_tls_port must be a fixed TCP port other than mqtt_port, got {s.mqtt_tls_port}"
        )
    if s.mqtt_port == 0 or s.kafka_port == 0:
        raise StackError("mqtt_port and kafka_port must be fixed ports (use free_port())")
    for name in (
        "bridge_http_port", "commands_http_port", "analytics_http_port", "api_port",
        "amqp_port", "amqp_http_port", "connect_port", "connect_server_port",
    ):  # fmt: skip
        value = getattr(s, name)
        if not 1 <= value <= 65535:
            raise StackError(f"{name} must be a fixed TCP port, got {value}")
    if s.connect_port == s.connect_server_port:
        raise StackError(f"connect_port and connect_server_port are both {s.connect_port}")
    amqps = s.amqp_tls_port
    if s.with_amqp and s.amqp_tls and (not 1 <= amqps <= 65535 or amqps == s.amqp_port):
        raise StackError(
            f"amqp_tls_port must be a fixed TCP port other than amqp_port, got {s.amqp_tls_port}"
        )
    if not 0 <= s.api_tls_port <= 65535:
        raise StackError(f"api_tls_port must be a TCP port or 0, got {s.api_tls_port}")
    if not 1 <= s.bridges <= MAX_BRIDGES:
        raise StackError(f"bridges must be 1-{MAX_BRIDGES}, got {s.bridges}")
    _check_shards(s)
    instances = s.bridge_instances
    bridge_ports = [s.bridge_http_port_of(i) for i in range(1, instances + 1)]
    if bridge_ports[-1] > 65535:
        raise StackError(f"bridge {instances}'s HTTP port {bridge_ports[-1]} is over 65535")
    for name in ("commands_http_port", "analytics_http_port"):
        if instances > 1 and getattr(s, name) in bridge_ports:
            raise StackError(f"{name} {getattr(s, name)} is one of the bridges' ports")
    if s.commands_mode not in COMMANDS_MODES:
        raise StackError(
            f"commands_mode must be one of {', '.join(COMMANDS_MODES)}, got {s.commands_mode!r}"
        )
    if s.commands_mode == "separate" and s.bridge_http_port == s.commands_http_port:
        raise StackError(f"bridge_http_port and commands_http_port are both {s.bridge_http_port}")
    if s.kafka_nodes < 1 or not 1 <= s.kafka_node_id <= s.kafka_nodes:
        raise StackError(
            f"need kafka_nodes >= 1 and 1 <= kafka_node_id <= kafka_nodes, got "
            f"{s.kafka_nodes} and {s.kafka_node_id}"
        )
    s.kafka_layout  # noqa: B018 - raises on colliding ports or a wrong host count
    if check_mode(s.kafka_security) == "sasl_ssl" and s.external_kafka:
        raise StackError(
            "kafka_security sasl_ssl secures the stack's own Kafka, not an external one"
        )
    if s.kafka_security == "sasl_ssl" and s.commands_mode == "inline":
        # one process, one Kafka login: the bridge's principal may not read iot.commands
        raise StackError(
            "kafka_security sasl_ssl gives the command path its own Kafka principal: use "
            "commands_mode separate, not inline (inline would run it as the bridge's)"
        )
    if s.partitions < 1:
        raise StackError(f"partitions must be >= 1, got {s.partitions}")
    if s.mqtt_autosave_changes < 0 or s.mqtt_autosave_interval < 1:
        raise StackError("need mqtt_autosave_changes >= 0 and mqtt_autosave_interval >= 1")
    _check_spark(s)
    if not 0 < s.restart_backoff_initial <= s.restart_backoff_max:
        raise StackError("need 0 < restart_backoff_initial <= restart_backoff_max")


def _check_shards(s: StackSettings) -> None:
    """`--mqtt-shards N`: 1-64 shards on mqtt_port + 1 .. + N, clear of the other ports; one
    bridge per shard (not `--bridges`); the TLS listener is HAProxy's (docs/scaling.md)."""
    others = {"mqtt_tls_port": s.mqtt_tls_port} if s.mqtt_tls else {}
    others |= {
        name: getattr(s, name)
        for name in ("kafka_port", "bridge_http_port", "commands_http_port", "api_port")
    }
    check_shards(s.mqtt_port, s.mqtt_shards, others)
    if s.mqtt_shards == 1:
        return
    if s.bridges > 1:
        raise StackError(
            f"give mqtt_shards ({s.mqtt_shards}) or bridges ({s.bridges}), not both: with "
            "shards, each shard has its own bridge"
        )
    commands = [s.commands_http_port_of(i) for i in range(1, s.mqtt_shards + 1)]
    bridges = {s.bridge_http_port_of(i) for i in range(1, s.mqtt_shards + 1)}
    if commands[-1] > 65535 or bridges & set(commands) or s.analytics_http_port in commands:
        raise StackError(
            f"the command paths of {s.mqtt_shards} shards take ports {commands[0]}, "
            f"{commands[0]} + 10, ... {commands[-1]}: clear of the bridges' and analytics' "
            "ports and at most 65535 (move commands_http_port)"
        )


def _check_spark(s: StackSettings) -> None:
    if s.spark_workers < 0 or s.spark_worker_cores < 1:
        raise StackError("need spark_workers >= 0 and spark_worker_cores >= 1")
    if s.spark_workers and s.spark_master:
        raise StackError(
            "give either spark_workers (a Spark cluster started here) or spark_master "
            f"(one that runs elsewhere), not both: {s.spark_master!r}"
        )
    if s.spark_master:
        try:
            check_master(s.spark_master)
        except ConfigError as exc:
            raise StackError(str(exc)) from exc
    last_worker_ui = s.spark_worker_ui_port + max(s.spark_workers - 1, 0)
    for name, value in (
        ("spark_master_port", s.spark_master_port),
        ("spark_master_ui_port", s.spark_master_ui_port),
        ("spark_app_ui_port", s.spark_app_ui_port),
        ("spark_worker_ui_port", s.spark_worker_ui_port),
        ("spark_worker_ui_port + workers - 1", last_worker_ui),
    ):
        if not 1 <= value <= 65535:
            raise StackError(f"{name} must be a fixed TCP port, got {value}")
    worker_uis = range(s.spark_worker_ui_port, last_worker_ui + 1)
    if s.spark_workers and (
        s.spark_master_ui_port in worker_uis or s.spark_master_port in worker_uis
    ):
        raise StackError("the Spark master's ports overlap the workers' UI ports")
    for name in ("spark_worker_memory", "spark_daemon_memory", "spark_executor_memory"):
        if not re.fullmatch(r"[1-9]\d*[kmgt]?", getattr(s, name), re.IGNORECASE):
            raise StackError(f"{name} must be a JVM size like 512m or 1g")
