"""Mosquitto (Debian's package) run with a config generated from mosquitto/."""

from __future__ import annotations

import getpass
import shutil
from pathlib import Path
from string import Template

from stack import paths
from stack.config import StackConfig
from stack.errors import StackError
from stack.ports import port_open
from stack.process import ManagedProcess

READY_LINE = "running"  # "mosquitto version 2.0.x running"


class MosquittoServer:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.home = config.data_dir / "mosquitto"
        self.conf_path = self.home / "mosquitto.conf"
        self.process = ManagedProcess("mosquitto", config.run_dir, config.log_dir / "mosquitto.log")

    def _binary(self) -> str:
        found = shutil.which("mosquitto") or (
            "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
        )
        if found is None:
            raise StackError("mosquitto not found: `make setup` installs Debian's package")
        return found

    def render_config(self, log_to_stdout: bool = False) -> Path:
        cfg = self.config
        self.home.mkdir(parents=True, exist_ok=True)
        # Run as whoever runs the stack: as root Mosquitto would otherwise switch to the
        # `mosquitto` user, which cannot write our data dir.
        auth = f"allow_anonymous true\nuser {getpass.getuser()}"
        text = Template(paths.mosquitto_template().read_text()).substitute(
            port=cfg.mqtt_port,
            bind_host=cfg.bind_host,
            auth=auth,
            data_dir=self.home,
            autosave_interval=cfg.mqtt_autosave_interval,
            session_expiry=cfg.mqtt_session_expiry,
            max_inflight=cfg.mqtt_max_inflight,
            max_queued_messages=cfg.mqtt_max_queued_messages,
            max_queued_bytes=cfg.mqtt_max_queued_bytes,
            max_packet_size=cfg.mqtt_max_packet_size,
            log_dest="stdout" if log_to_stdout else f"file {self.process.log_path}",
        )
        self.conf_path.write_text(text)
        return self.conf_path

    def command(self, log_to_stdout: bool = False) -> list[str]:
        self.render_config(log_to_stdout)
        return [self._binary(), "-c", str(self.conf_path)]

    def start(self) -> None:
        self.process.start(self.command())
        self.process.wait_ready(
            lambda: (
                READY_LINE in self.process.log_since_start()
                and port_open(self.config.connect_host, self.config.mqtt_port)
            ),
            self.config.start_timeout,
            f"listening on {self.config.mqtt_url}",
        )

    def stop(self, timeout: float = 30.0) -> bool:
        # SIGTERM makes Mosquitto write its persistence database before it exits.
        return self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def running(self) -> bool:
        return self.process.running()
