"""Run and supervise one site broker (service): the broker, its monitor, the status.

The broker is restarted when it exits without being asked to (a crash, a kill -9, an OOM
kill): with persistence and ``autosave_on_changes`` it comes back with its store and the
bridge's queue, less at most the autosave bound. Every ``status_interval_s`` the supervisor
writes ``status.json`` (for ``iot-edge status``) and publishes the status to the centre.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from edge.broker import SiteBroker
from edge.config import EdgeConfig
from edge.errors import EdgeError
from edge.monitor import SiteMonitor
from edge.render import MONITOR_USER, SitePaths
from edge.status import SiteStatus, site_status

log = logging.getLogger(__name__)

RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0)


def local_host(config: EdgeConfig) -> str:
    """Where a local client reaches the device listener."""
    return "127.0.0.1" if config.listen_host in ("0.0.0.0", "", "::") else config.listen_host


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    tmp.replace(path)


class SiteSupervisor:
    def __init__(
        self, config: EdgeConfig, paths: SitePaths, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.paths = paths
        self._clock = clock
        host = local_host(config)
        self.broker = SiteBroker(paths, host, config.listen_port)
        secret = paths.monitor_secret.read_text().strip()
        self.monitor = SiteMonitor(
            host, config.listen_port, MONITOR_USER, secret, config.state_topic
        )
        self.restarts = 0

    def status(self) -> SiteStatus:
        return site_status(
            self.config.site,
            self.config.tenant,
            int(self._clock() * 1000),
            sys_values=self.monitor.values(),
            state_payload=self.monitor.values().get(self.config.state_topic),
            broker_running=self.broker.running(),
            broker_restarts=self.restarts,
        )

    def _report(self) -> None:
        status = self.status()
        data = json.loads(status.to_json())
        data["broker_pid"] = self.broker.pid if self.broker.running() else None
        data["supervisor_pid"] = os.getpid()
        _write_json(self.paths.status, data)
        if status.broker_running:
            self.monitor.publish_status(self.config.status_topic, status.to_json())

    def _restart(self, stop: threading.Event) -> None:
        code = self.broker.exit_code()
        log.warning("site broker exited (code %s): restarting", code)
        self.monitor.forget()
        for delay in RESTART_DELAYS_S * 1000:  # bounded only by stop
            self.restarts += 1
            try:
                self.broker.start()
            except EdgeError as exc:
                log.error("site broker did not start: %s", exc)
                self._report()
                if stop.wait(delay):
                    return
                continue
            log.info("site broker running again (pid %s)", self.broker.pid)
            return

    def run(self, stop: threading.Event) -> None:
        self.paths.supervisor_pid.write_text(f"{os.getpid()}\n")
        try:
            self.broker.start()
            log.info("site broker running (pid %s)", self.broker.pid)
            self.monitor.start()
            next_report = 0.0
            while not stop.is_set():
                if not self.broker.running():
                    self._restart(stop)
                now = time.monotonic()
                if now >= next_report:
                    self._report()
                    next_report = now + self.config.status_interval_s
                stop.wait(0.2)
        finally:
            self.monitor.stop()
            self.broker.stop()
            self._report()
            self.paths.supervisor_pid.unlink(missing_ok=True)
