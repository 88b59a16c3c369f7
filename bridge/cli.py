"""``iot-bridge``: the MQTT -> Kafka telemetry bridge (and, if enabled, the command path)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from bridge import __version__
from bridge import config as config_mod
from bridge.config import BridgeConfig
from bridge.console import new_parser, parse_args
from bridge.errors import ConfigError

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "iot-bridge",
        "Bridge device telemetry from Mosquitto (MQTT 5, persistent session) into Kafka. "
        "QoS 1 messages are acknowledged only after Kafka confirmed them, in arrival order. "
        "Every setting can also be given as an IOT_<NAME> environment variable; flags win.",
    )
    config_mod.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parse_args(parser, argv)
    if isinstance(ns, int):
        return ns
    try:
        cfg = config_mod.from_namespace(ns)
    except ConfigError as exc:
        print(f"iot-bridge: {exc}", file=sys.stderr)
        return 2
    from bridge import logs

    logs.configure(cfg.log_level, cfg.log_format)
    try:
        return asyncio.run(_serve(cfg))
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled inside the loop
        return 0


async def _serve(cfg: BridgeConfig) -> int:
    from prometheus_client import CollectorRegistry

    from bridge.service import TelemetryBridge
    from bridge.stats import BridgeCollector
    from health.server import HealthServer

    bridge = TelemetryBridge(cfg)
    registry = CollectorRegistry()
    registry.register(BridgeCollector(bridge.stats, bridge.gauges, bridge.mqtt_errors))
    if cfg.mqtt_auth_metrics_file:
        from bridge.broker_auth import BrokerAuthCollector

        path = Path(cfg.mqtt_auth_metrics_file)
        registry.register(BrokerAuthCollector(path, lambda: bridge.ready_tenants))
    http = HealthServer(
        cfg.http_host,
        cfg.http_port,
        registry,
        alive=lambda: bridge.alive,
        ready=lambda: bridge.ready,
    )
    try:
        http.start()
    except OSError as exc:
        log.critical("cannot listen on %s:%s: %s", cfg.http_host, cfg.http_port, exc)
        return 1
    log.info(
        "iot-bridge %s: metrics/health on http://%s:%d (/metrics /healthz /readyz)",
        __version__,
        cfg.http_host,
        http.port,
        extra={"http_port": http.port, "event": "http_listening"},
    )
    log.info("settings", extra={"settings": cfg.redacted()})
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, bridge, sig)
    commands: Any = None
    bridge_task = asyncio.create_task(bridge.run(), name="telemetry")
    code = 0
    try:
        if cfg.commands_enabled:
            from bridge.commands.metrics import CommandCollector
            from bridge.commands.service import CommandService  # lazy: only when enabled

            commands = CommandService(cfg)
            registry.register(CommandCollector(commands))  # same metrics as `iot-cmd serve`
            try:
                # start() rebuilds the pending set from Kafka and connects: off the loop, so
                # the telemetry path runs meanwhile
                await asyncio.to_thread(commands.start)
                log.info("command path started")
            except Exception as exc:
                log.critical("command path failed to start: %s", exc, exc_info=True)
                commands = None
                code = 1
                bridge.request_stop()
        code = max(code, await bridge_task)
    finally:
        if not bridge_task.done():
            bridge.request_stop()
            await bridge_task
        if commands is not None:
            await asyncio.to_thread(commands.stop, cfg.shutdown_timeout_s)
        http.stop()
    log.info("exiting with code %d", code)
    return code


def _on_signal(bridge: Any, sig: signal.Signals) -> None:
    log.info("%s received: stopping gracefully", sig.name)
    bridge.request_stop()


if __name__ == "__main__":
    sys.exit(main())
