"""``python -m bridge.cli``: the MQTT -> Kafka telemetry bridge alone.

``iot-bridge`` is this bridge with the command path's settings too, and the command path in
its process when ``commands_enabled`` (``commands/inline.py``; the bridge does not import the
command path). Both share :func:`build_parser` and :func:`run`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from bridge import config as config_mod
from bridge.config import BridgeConfig
from bridge.console import new_parser, parse_args
from bridge.errors import ConfigError
from bridge.runner import SidePathFactory, serve

DESCRIPTION = (
    "Bridge device telemetry from Mosquitto (MQTT 5, persistent session) into Kafka. "
    "QoS 1 messages are acknowledged only after Kafka confirmed them, in arrival order. "
    "Every setting can also be given as an IOT_<NAME> environment variable; flags win."
)


def build_parser(
    add_arguments: Callable[[argparse.ArgumentParser], None] = config_mod.add_arguments,
) -> argparse.ArgumentParser:
    """``iot-bridge``'s parser with the settings ``add_arguments`` adds (the bridge's)."""
    parser = new_parser("iot-bridge", DESCRIPTION)
    add_arguments(parser)
    return parser


def run(
    argv: list[str] | None,
    parser: argparse.ArgumentParser,
    config_of: Callable[[argparse.Namespace], BridgeConfig],
    side: Callable[[BridgeConfig], SidePathFactory | None] = lambda cfg: None,
) -> int:
    """Parse ``argv``, build the config, and run the bridge (with the side path ``side`` gives
    for that config, if any) until stopped; the exit code."""
    ns = parse_args(parser, argv)
    if isinstance(ns, int):
        return ns
    try:
        cfg = config_of(ns)
    except ConfigError as exc:
        print(f"iot-bridge: {exc}", file=sys.stderr)
        return 2
    from bridge import logs

    logs.configure(cfg.log_level, cfg.log_format)
    try:
        return asyncio.run(serve(cfg, side(cfg)))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled inside the loop
        return 0


def main(argv: list[str] | None = None) -> int:
    return run(argv, build_parser(), config_mod.from_namespace)


if __name__ == "__main__":
    sys.exit(main())
