"""`iot-stack`: run the appliance's services as local processes where there is no Docker."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bridge import __version__
from bridge.stack.config import StackConfig
from bridge.stack.errors import StackError
from bridge.stack.launcher import Stack


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iot-stack",
        description="Start, inspect and stop the local appliance stack (Mosquitto + Kafka).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, help="data, logs and pid files (default var/, env IOT_DATA_DIR)"
    )
    common.add_argument("--mqtt-port", type=int, help="Mosquitto port (default 1883)")
    common.add_argument("--kafka-port", type=int, help="Kafka port (default 9092)")
    common.add_argument(
        "--kafka-controller-port", type=int, help="KRaft controller port (default Kafka port + 1)"
    )
    common.add_argument("--bind-host", help="address to listen on (default 127.0.0.1)")
    common.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = sub.add_parser("up", parents=[common], help="start the stack and print its endpoints")
    up.add_argument("--partitions", type=int, help="partitions of the data topics (default 12)")
    up.add_argument("--timeout", type=float, help="seconds to wait for each server (default 90)")
    sub.add_parser("down", parents=[common], help="stop every service of the stack")
    sub.add_parser("status", parents=[common], help="show which services run, and where")
    return parser


def _config(args: argparse.Namespace) -> StackConfig:
    return StackConfig.from_env(
        data_dir=args.data_dir,
        mqtt_port=args.mqtt_port,
        kafka_port=args.kafka_port,
        kafka_controller_port=args.kafka_controller_port,
        bind_host=args.bind_host,
        partitions=getattr(args, "partitions", None),
        start_timeout=getattr(args, "timeout", None),
    )


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        stack = Stack(_config(args))
        if args.command == "up":
            stack.up(progress=_say)
            for name, value in stack.endpoints().items():
                print(f"{name:10} {value}")
            return 0
        if args.command == "down":
            stopped = stack.down(progress=_say)
            _say(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
            return 0
        statuses = stack.status()
        for st in statuses:
            state = f"running (pid {st.pid})" if st.running else "stopped"
            reach = "reachable" if st.reachable else "unreachable"
            print(f"{st.name:10} {state:22} {st.endpoint:28} {reach}")
        return 0 if all(st.running for st in statuses) else 1
    except StackError as exc:
        _say(f"iot-stack: error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
