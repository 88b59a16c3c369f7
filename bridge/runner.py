"""The bridge's process: the telemetry path, its metrics and health endpoint, the signals, and
optionally a path that runs beside it in the same process.

That side path is the command path when ``iot-bridge`` runs with ``commands_enabled``:
``commands/inline.py`` builds it and hands it in. The bridge does not import the command path
(``commands`` imports ``bridge``, never the other way); it only starts what it is given, with
its metrics on the bridge's ``/metrics``, and stops it after telemetry.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from bridge import __version__
from bridge.config import BridgeConfig

log = logging.getLogger(__name__)

__all__ = ["SidePath", "SidePathFactory", "serve"]


class SidePath(Protocol):
    """A path run in the bridge's process beside telemetry (the command path, inline)."""

    name: str  # for the log: "command path"

    def start(self) -> None:
        """Connect and start; blocking, so it is called off the event loop."""

    def stop(self, timeout_s: float) -> None:
        """Stop, waiting at most ``timeout_s`` for what is in flight."""


# builds the side path and registers its metrics on the bridge's registry
SidePathFactory = Callable[[CollectorRegistry], SidePath]


async def serve(cfg: BridgeConfig, side: SidePathFactory | None = None) -> int:
    """Run the bridge until SIGTERM/SIGINT or a fatal error; the process's exit code."""
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
    if cfg.store_dirs:
        from bridge.store_watch import StoreCollector
        from bridge.stores import parse_store_dirs

        registry.register(StoreCollector(parse_store_dirs(cfg.store_dirs)))
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
    started: SidePath | None = None
    bridge_task = asyncio.create_task(bridge.run(), name="telemetry")
    code = 0
    try:
        if side is not None:
            started = side(registry)  # its metrics on this /metrics, as its own process's
            try:
                # start() may take a while (the command path rebuilds its pending set from
                # Kafka and connects): off the loop, so the telemetry path runs meanwhile
                await asyncio.to_thread(started.start)
                log.info("%s started", started.name)
            except Exception as exc:
                log.critical("%s failed to start: %s", started.name, exc, exc_info=True)
                started = None
                code = 1
                bridge.request_stop()
        code = max(code, await bridge_task)
    finally:
        if not bridge_task.done():
            bridge.request_stop()
            await bridge_task
        if started is not None:
            await asyncio.to_thread(started.stop, cfg.shutdown_timeout_s)
        http.stop()
    log.info("exiting with code %d", code)
    return code


def _on_signal(bridge: Any, sig: signal.Signals) -> None:
    log.info("%s received: stopping gracefully", sig.name)
    bridge.request_stop()
