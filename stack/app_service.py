"""The appliance's own processes in the local stack: the bridge, the analytics job, devices."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence

from stack.config import StackConfig
from stack.process import ManagedProcess
from stack.supervisor_link import SupervisorLink


def http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - our loopback URL
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    return check


def alive_for(seconds: float) -> Callable[[], bool]:
    """Ready once the process has stayed up this long (for jobs without a health endpoint)."""
    started = time.monotonic()
    return lambda: time.monotonic() - started >= seconds


class AppService:
    """A Python console entry point run in the background with IOT_* settings."""

    def __init__(
        self,
        config: StackConfig,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        ready: Callable[[], Callable[[], bool]],
        ready_what: str,
        endpoint: str = "",
        supervisor: SupervisorLink | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.ready = ready
        self.ready_what = ready_what
        self.endpoint = endpoint
        self.process = ManagedProcess(
            name, config.run_dir, config.log_dir / f"{name}.log", supervisor
        )

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        self.process.start(self.argv, env=env, cwd=self.config.data_dir)
        self.process.wait_ready(self.ready(), self.config.start_timeout, self.ready_what)

    def stop(self, timeout: float = 60.0) -> bool:
        return self.process.stop(timeout)

    def running(self) -> bool:
        return self.process.running()
