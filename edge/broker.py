"""The site's Mosquitto as a child process (adapter: a subprocess)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from edge.errors import EdgeError
from edge.render import SitePaths


def mosquitto_binary() -> str:
    found = shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
    )
    if found is None:
        raise EdgeError("mosquitto not found: apt-get install mosquitto")
    return found


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), 0.5).close()
    except OSError:
        return False
    return True


class SiteBroker:
    def __init__(self, paths: SitePaths, host: str, port: int) -> None:
        self.paths = paths
        self.host, self.port = host, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout_s: float = 20.0) -> None:
        with self.paths.supervisor_log.open("ab") as out:
            self.proc = subprocess.Popen(
                [mosquitto_binary(), "-c", str(self.paths.conf)], stdout=out, stderr=out
            )
        deadline = time.monotonic() + timeout_s
        while not port_open(self.host, self.port):
            if self.proc.poll() is not None:
                raise EdgeError(
                    f"mosquitto exited with {self.proc.returncode}: see {self.paths.log}"
                )
            if time.monotonic() > deadline:
                raise EdgeError(f"mosquitto not listening on {self.port} after {timeout_s} s")
            time.sleep(0.05)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: Mosquitto saves its store and the bridge's queue before it exits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
