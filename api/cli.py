"""`iot-api`: the HTTP door (DMaaP Message Router compatible pub/sub over Kafka)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from api.config import ApiConfig, add_arguments, from_namespace
from api.console import config as console_config
from api.errors import ConfigError
from api.service import ApiService
from appconfig import kafka_security


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iot-api",
        description="HTTP pub/sub over Kafka, DMaaP Message Router compatible: POST "
        "/events/{topic}, GET /events/{topic}/{group}/{id}, /topics; /openapi.json, /metrics, "
        "/healthz, /readyz. Refuses to start without authentication unless "
        "--insecure-anonymous is given.",
    )
    add_arguments(parser)
    console_config.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg: ApiConfig = from_namespace(args)
        kafka_security.use_config(cfg, ConfigError)
        service = ApiService(cfg, console_config.from_namespace(args))
    except ConfigError as exc:
        print(f"iot-api: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(service.run())
    except OSError as exc:  # the port is taken, Kafka's address does not resolve...
        print(f"iot-api: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:  # found at start: the TLS certificate cannot be loaded
        print(f"iot-api: {exc}", file=sys.stderr)
        return 2
    return 0
