"""The launcher's one typed config: defaults < IOT_* environment < command-line flags.

The settings themselves, their parsing and checks are :class:`stack.settings.StackSettings`
(pure); this adapter adds the servers on ports free now, for tests and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stack.kafka_layout import PORT_STEP
from stack.ports import free_port_run, free_ports
from stack.settings import MQTT_AUTOSAVE_CHANGES, StackSettings
from stack.settings_checks import COMMANDS_MODES

__all__ = ["COMMANDS_MODES", "MQTT_AUTOSAVE_CHANGES", "StackConfig"]


@dataclass(frozen=True)
class StackConfig(StackSettings):
    """Where the local stack keeps its data, which ports it listens on, what it starts."""

    @classmethod
    def servers_on_free_ports(
        cls,
        data_dir: Path,
        partitions: int = 12,
        kafka_heap: str = "768m",
        kafka_nodes: int = 1,
        *,
        insecure_anonymous: bool = False,
        mqtt_autosave_changes: int | None = None,
        kafka_jvm_options: str = "",
        mqtt_shards: int = 1,
    ) -> StackConfig:
        """Only Mosquitto and Kafka (one node, or a cluster), on ports free now: for tests and
        benchmarks.

        Not supervised: fault tests stop, kill and restart the servers themselves. Mosquitto
        logs clients in as `up` does (dynamic security, the service accounts provisioned once
        Kafka is up) unless ``insecure_anonymous`` is asked for explicitly. Mosquitto saves
        every ``mqtt_autosave_changes`` changes (None: the stack's default; the environment is
        not read). ``mqtt_shards`` N > 1: HAProxy on the MQTT port, the shards on the N ports
        after it (`--mqtt-shards N`).
        """
        if kafka_nodes > 1:
            # the nodes take consecutive ports: client, controller, client, controller, ...
            kafka_port = free_port_run(PORT_STEP * kafka_nodes)
            controller_port = kafka_port + 1
            taken = range(kafka_port, kafka_port + PORT_STEP * kafka_nodes)
            mqtt_port, tls_port = [
                p for p in free_ports(PORT_STEP * kafka_nodes + 2) if p not in taken
            ][:2]
        else:
            mqtt_port, kafka_port, controller_port, tls_port = free_ports(4)
        if mqtt_shards > 1:  # HAProxy's port, then the shards' ports, in one run
            mqtt_port = free_port_run(mqtt_shards + 1)
            while {kafka_port, controller_port, tls_port} & set(
                range(mqtt_port, mqtt_port + mqtt_shards + 1)
            ):
                mqtt_port = free_port_run(mqtt_shards + 1)
        return cls(
            data_dir=data_dir,
            mqtt_port=mqtt_port,
            mqtt_tls_port=tls_port,
            kafka_port=kafka_port,
            kafka_controller_port=controller_port,
            kafka_nodes=kafka_nodes,
            partitions=partitions,
            kafka_heap=kafka_heap,
            kafka_jvm_options=kafka_jvm_options,
            mqtt_shards=mqtt_shards,
            with_bridge=False,
            with_api=False,
            with_analytics=False,
            supervise=False,
            insecure_anonymous=insecure_anonymous,
            mqtt_autosave_changes=(
                MQTT_AUTOSAVE_CHANGES if mqtt_autosave_changes is None else mqtt_autosave_changes
            ),
        )
