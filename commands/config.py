"""The command path's one configuration object: the bridge's settings and its own.

The command path reaches the same Mosquitto and Kafka as the bridge, with the same ``IOT_*``
settings (host, port, log-in, ``IOT_KAFKA_EXTRA``, the log format, ...), so :class:`CommandConfig`
extends :class:`~bridge.config.BridgeConfig` instead of declaring them twice, and adds the
settings below. ``iot-cmd serve`` and ``iot-bridge`` (which can run the command path in its own
process, ``commands_enabled``) read it; ``python -m bridge.cli`` reads the bridge's alone. As
there: the environment variable is ``IOT_`` + the field name in upper case, the flag ``--`` +
the name with dashes; defaults < environment < flags; frozen, validated when built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from appconfig import settings as appsettings
from bridge.config import BridgeConfig
from bridge.errors import ConfigError

_TOPIC_RE = appsettings.KAFKA_TOPIC_RE

_setting = appsettings.setting


@dataclass(frozen=True, slots=True)
class CommandConfig(BridgeConfig):
    """The bridge's settings and the command path's (Kafka topics, timeouts, links, port)."""

    describes: ClassVar[str] = "command path"

    # --- Kafka topics --------------------------------------------------------------------------
    topic_commands: str = _setting("iot.commands", "Kafka topic the command path consumes.")
    topic_command_status: str = _setting(
        "iot.command-status", "Kafka topic (compacted) for command states."
    )
    topic_command_replies: str = _setting(
        "iot.command-replies", "Kafka topic for device replies to commands."
    )
    topic_commands_dlq: str = _setting(
        "iot.commands.dlq", "Kafka topic for commands that expired or ran out of attempts."
    )

    # --- Command path (issue 5) ------------------------------------------------------------------
    commands_enabled: bool = _setting(
        False, "Also run the command path (Kafka iot.commands -> devices) in this process."
    )
    command_timeout_ms: int = _setting(
        30000, "Default time a command waits for the device's reply (ms)."
    )
    command_max_attempts: int = _setting(3, "Default delivery attempts per command.")
    command_group_id: str = _setting(
        "iot-bridge-commands", "Kafka consumer group of the command path."
    )
    command_mqtt_client_id: str = _setting(
        "iot-bridge-commands",
        "MQTT client id of the command path (its own persistent session: replies that arrive "
        "while the bridge is down wait there).",
    )
    command_mqtt_publishers: int = _setting(
        16,
        "MQTT connections the command path publishes commands on, besides the one that receives "
        "replies (0 = that one publishes too). Mosquitto reads one packet per connection per "
        "pass of its event loop, so under telemetry load one connection queues commands.",
    )
    command_linger_ms: int = _setting(
        5,
        "linger.ms of the command path's producer (statuses, replies, dead letters): every "
        "status waits this long at most; longer batches cost the broker less per command.",
    )
    command_fetch_wait_ms: int = _setting(
        5,
        "How long a fetch of iot.commands waits for more records (ms): the command path's "
        "added latency at most, traded for far fewer fetch requests at high command rates.",
    )
    command_max_inflight: int = _setting(
        1000, "Command publishes in flight to Mosquitto (unacknowledged QoS 1) at most."
    )
    command_shards: int = _setting(
        1,
        "MQTT shards of the appliance (`iot-stack up --mqtt-shards N`); with more than 1 this "
        "command path sends only the commands of the devices of shard command_shard (crc32 of "
        "the device id mod N, bridge/shards.py) and group commands, and connects to that shard.",
    )
    command_shard: int = _setting(
        0, "Which MQTT shard (0-based) this command path serves, with command_shards > 1."
    )
    command_consumer_stall_s: float = _setting(
        30.0,
        "The iot.commands consumer, not paused by flow control, whose partitions have records "
        "past its position that it has not advanced on for this long is replaced by a new "
        "member of its group (s); as iot-api's kafka_consumer_stall_s.",
    )
    command_http_port: int = _setting(
        9101,
        "Port of `iot-cmd serve`'s metrics (/metrics) and health (/healthz, /readyz) endpoint, "
        "on http_host; 0 = no endpoint. (Inline, iot-bridge exports the same metrics on "
        "http_port.)",
    )

    def problems(self) -> list[str]:
        problems = BridgeConfig.problems(self)  # (no zero-argument super() in a slots class)

        def need(ok: bool, message: str) -> None:
            if not ok:
                problems.append(message)

        for name in (
            "topic_commands",
            "topic_command_status",
            "topic_command_replies",
            "topic_commands_dlq",
        ):
            need(bool(_TOPIC_RE.match(getattr(self, name))), f"{name} is not a valid Kafka topic")
        need(self.command_timeout_ms >= 1, "command_timeout_ms must be >= 1")
        need(self.command_max_attempts >= 1, "command_max_attempts must be >= 1")
        need(bool(self.command_group_id), "command_group_id must not be empty")
        need(
            0 < len(self.command_mqtt_client_id) <= 120,
            "command_mqtt_client_id must be 1-120 characters (publisher links add -pN)",
        )
        need(
            1 <= self.command_shards <= 64 and 0 <= self.command_shard < self.command_shards,
            "need 1 <= command_shards <= 64 and 0 <= command_shard < command_shards",
        )
        need(1 <= self.command_max_inflight <= 65535, "command_max_inflight must be 1-65535")
        need(0 <= self.command_mqtt_publishers <= 64, "command_mqtt_publishers must be 0-64")
        need(0 <= self.command_fetch_wait_ms <= 1000, "command_fetch_wait_ms must be 0-1000")
        need(0 <= self.command_linger_ms <= 1000, "command_linger_ms must be 0-1000")
        need(self.command_consumer_stall_s > 0, "command_consumer_stall_s must be > 0")
        need(0 <= self.command_http_port <= 65535, "command_http_port must be 0-65535")
        return problems


PARSER = appsettings.SettingsParser(CommandConfig, "bridge and command path settings", ConfigError)
add_arguments = PARSER.add_arguments  # one flag per setting, the bridge's and the command path's
from_namespace = PARSER.from_namespace  # defaults < environment < parsed flags < overrides
