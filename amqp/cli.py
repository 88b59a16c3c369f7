"""`iot-amqp`: the AMQP 1.0 door (devices publish telemetry and events as to Hono's AMQP
adapter)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from amqp.config import AmqpConfig, add_arguments, from_namespace
from amqp.errors import ConfigError
from amqp.service import AmqpService
from appconfig import kafka_security


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iot-amqp",
        description="AMQP 1.0 for devices (Eclipse Hono's AMQP adapter): telemetry and events "
        "into Kafka as the bridge writes them; SASL PLAIN against the registry "
        "(--registry-auth; on the amqps port also SASL EXTERNAL with a device certificate of "
        "the appliance CA) or, for development only, --insecure-anonymous.",
    )
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg: AmqpConfig = from_namespace(args)
        kafka_security.use_config(cfg, ConfigError)
        service = AmqpService(cfg)
    except ConfigError as exc:
        print(f"iot-amqp: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(service.run())
    except OSError as exc:  # the port is taken, ...
        print(f"iot-amqp: {exc}", file=sys.stderr)
        return 1
    return 0
