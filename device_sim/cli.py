"""``iot-sim``: run a simulated device fleet (``run``) and verify what reached Kafka (``verify``).

Endpoints and topics come from flags, else from the same ``IOT_*`` environment variables the
bridge reads (``IOT_MQTT_HOST``, ``IOT_MQTT_PORT``, ``IOT_KAFKA_BOOTSTRAP``,
``IOT_TOPIC_TELEMETRY``, ``IOT_TOPIC_DLQ``, ...), else from the defaults. Exit codes: 0 ok,
1 runtime error or a failed verification, 2 usage error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from device_sim.cli_run import add_run_parser, run_command
from device_sim.cli_verify import add_verify_parser, verify_command
from device_sim.errors import ManifestError, SimConfigError, SimError


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="iot-sim",
        description="Simulated IoT device fleet (MQTT) and end-to-end verifier (Kafka).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,verify}")
    add_run_parser(sub, env)
    add_verify_parser(sub, env)
    return parser


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def main(argv: list[str] | None = None) -> int:
    env: dict[str, Any] = dict(os.environ)
    try:
        parser = build_parser(env)
    except SimConfigError as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    _configure_logging(args.log_level)
    try:
        if args.command == "run":
            return run_command(args, env)
        return verify_command(args)
    except SimConfigError as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 2
    except (ManifestError, SimError) as exc:
        sys.stderr.write(f"iot-sim: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
