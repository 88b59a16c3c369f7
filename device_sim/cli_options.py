"""What ``iot-sim``'s subcommands share: ``IOT_*`` defaults, the endpoint options, arg mapping.

Endpoints and topics come from flags, else from the same ``IOT_*`` environment variables the
bridge reads, else from the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from device_sim.errors import SimConfigError

T = TypeVar("T")
DEFAULT_RUNS_DIR = "var/sim-runs"
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def env_value(environ: Mapping[str, str], name: str, default: T, kind: Callable[[str], T]) -> T:
    """``environ[name]`` as ``kind``, or ``default`` when unset or empty."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        raise SimConfigError(f"{name}={raw!r} is not a valid value") from exc


@dataclass(frozen=True, slots=True)
class EnvOption:
    """A flag whose default comes from an ``IOT_*`` variable (named in its help)."""

    flag: str
    env: str
    default: Any
    kind: Callable[[str], Any]
    help: str

    def add_to(self, group: Any, environ: Mapping[str, str]) -> None:
        shown = f", default {self.default}" if self.default != "" else ""
        group.add_argument(
            self.flag,
            type=self.kind,
            default=env_value(environ, self.env, self.default, self.kind),
            help=f"{self.help} [env {self.env}{shown}]",
        )


ENDPOINT_OPTIONS = (
    EnvOption("--mqtt-host", "IOT_MQTT_HOST", "localhost", str, "Mosquitto host"),
    EnvOption("--mqtt-port", "IOT_MQTT_PORT", 1883, int, "Mosquitto port"),
    EnvOption(
        "--mqtt-username", "IOT_SIM_MQTT_USERNAME", "", str, "MQTT user name for every device"
    ),
    EnvOption(
        "--mqtt-password", "IOT_SIM_MQTT_PASSWORD", "", str, "MQTT password for every device"
    ),
    EnvOption(
        "--kafka-bootstrap", "IOT_KAFKA_BOOTSTRAP", "localhost:9092", str, "Kafka bootstrap servers"
    ),
    EnvOption(
        "--topic-telemetry", "IOT_TOPIC_TELEMETRY", "iot.telemetry", str, "Kafka telemetry topic"
    ),
    EnvOption("--topic-dlq", "IOT_TOPIC_DLQ", "iot.dlq", str, "Kafka dead-letter topic"),
    EnvOption("--topic-events", "IOT_TOPIC_EVENTS", "iot.events", str, "Kafka events topic"),
    EnvOption(
        "--runs-dir", "IOT_SIM_RUNS_DIR", Path(DEFAULT_RUNS_DIR), Path, "run manifests and reports"
    ),
)


def add_endpoint_args(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> None:
    """The endpoint, runs-dir and log-level options every subcommand takes."""
    group = parser.add_argument_group("endpoints (each also settable as an IOT_* variable)")
    for option in ENDPOINT_OPTIONS:
        option.add_to(group, environ)
    group.add_argument(
        "--log-level",
        default=env_value(environ, "IOT_LOG_LEVEL", "WARNING", str).upper(),
        choices=LOG_LEVELS,
        help="log level [env IOT_LOG_LEVEL, default WARNING]",
    )


def probability(text: str) -> float:
    """An argparse type: a float in [0, 1]."""
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def from_args(cls: Callable[..., T], args: argparse.Namespace, **given: Any) -> T:
    """Build dataclass ``cls`` from the options named as its fields (``given`` overrides)."""
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    found = {name: getattr(args, name) for name in fields if hasattr(args, name)}
    return cls(**{**found, **given})
