"""The command benchmark's command line: its options and their checks (no I/O)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from bench.argtable import add_numbers

HALF = "half"
MAX_WARMUP_S = 2.0  # left out of the maximum's measurement
DESCRIPTION = (
    "Command round trip benchmark: ``python -m bench.commands_rtt`` (``make bench-commands``)."
)


def parse_telemetry_rate(text: str) -> float | None:
    """``half`` -> None (half the maximum measured in the run); else a rate >= 0 in msgs/s."""
    if text.strip().lower() == HALF:
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number or 'half': {text!r}") from exc
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"telemetry rate must be >= 0, got {text!r}")
    return value


def has_setting(name: str) -> bool:
    """Whether ``name`` is a CommandConfig field (an ``IOT_*`` setting of the bridge or the
    command path)."""
    from commands.config import CommandConfig

    return name in {f.name for f in dataclasses.fields(CommandConfig)}


def setting_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not has_setting(name):
        raise argparse.ArgumentTypeError(f"not NAME=VALUE of a BridgeConfig setting: {text!r}")
    return name, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.commands_rtt",
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_numbers(
        parser,
        [
            ("--devices", int, 1000, "online command devices"),
            ("--rate", float, 1000.0, "commands per second"),
            ("--duration", float, 30.0, "measured seconds of sending"),
            (
                "--warmup-load",
                float,
                60.0,
                "seconds of commands (and telemetry) at the measured rates before the measured "
                "window, not measured: a broker a minute old still spends CPU compiling (its "
                "JIT); 60 s took the Kafka CPU in the window from 0.43 to 0.31 of a core",
            ),
        ],
    )
    parser.add_argument(
        "--command-path",
        choices=["separate", "inline"],
        default="separate",
        help="separate (what iot-stack runs): iot-bridge + `iot-cmd serve` as its own process; "
        "inline: iot-bridge with IOT_COMMANDS_ENABLED=1",
    )
    parser.add_argument(
        "--responder",
        choices=["raw", "sim"],
        default="raw",
        help="who answers: bench/responder.py (raw-socket MQTT 5) or iot-sim (gmqtt)",
    )
    add_numbers(
        parser,
        [
            ("--responder-processes", int, 1, "processes of the raw responder"),
            ("--sim-processes", int, 1, "iot-sim processes (--responder sim)"),
        ],
    )
    parser.add_argument(
        "--telemetry-rate",
        type=parse_telemetry_rate,
        default=None,
        metavar="MSGS_PER_S|half",
        help="telemetry msgs/s through the bridge meanwhile; 'half' (default) = half the "
        "bridge's maximum: the higher of the one measured first in this run and the one "
        "recorded in bench/results/ingest.json",
    )
    add_numbers(
        parser,
        [
            ("--telemetry-payload", int, 1024, "telemetry payload bytes"),
            (
                "--telemetry-devices",
                int,
                1000,
                "telemetry devices (own connections and ids, apart from the command devices)",
            ),
            ("--telemetry-processes", int, 2, "telemetry publisher processes"),
            (
                "--telemetry-window",
                int,
                20_000,
                "telemetry published but not yet in Kafka at most (bounds Mosquitto's backlog)",
            ),
            (
                "--max-duration",
                float,
                8.0,
                f"seconds of the maximum measurement (the first {MAX_WARMUP_S:.0f} s left out)",
            ),
            ("--partitions", int, 12, "partitions per topic"),
            (
                "--mosquitto-autosave-changes",
                int,
                None,
                "the private Mosquitto saves its database every this many changes (0 = every "
                "5 s; default: the stack's)",
            ),
            ("--warmup-timeout", float, 60.0, "seconds for every device to answer once"),
            ("--drain-timeout", float, 30.0, "seconds to wait for the last statuses"),
            (
                "--mqtt-port",
                int,
                None,
                "use this Mosquitto on 127.0.0.1 (with --kafka-bootstrap) instead of a private "
                "stack",
            ),
        ],
    )
    parser.add_argument("--kafka-bootstrap", default=None, help="use this Kafka")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--setting",
        type=setting_arg,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a BridgeConfig setting for the bridge and the command path, e.g. "
        "command_mqtt_publishers=8 (repeatable)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write commands.json and commands.md here (e.g. bench/results)",
    )
    return parser


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a parsed command line beyond each option's type, or None."""
    if args.rate <= 0 or args.duration <= 0 or args.devices < 1:
        return "--rate, --duration and --devices must be positive"
    if args.max_duration <= MAX_WARMUP_S + 1:
        return f"--max-duration must be above {MAX_WARMUP_S + 1:.0f} s"
    if min(args.responder_processes, args.telemetry_processes, args.telemetry_devices) < 1:
        return "process and device counts must be positive"
    if (args.mosquitto_autosave_changes or 0) < 0:
        return "--mosquitto-autosave-changes must be >= 0"
    if (args.mqtt_port is None) != (args.kafka_bootstrap is None):
        return "--mqtt-port and --kafka-bootstrap go together"
    return None
