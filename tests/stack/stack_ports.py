"""The free ports of one `iot-stack up` in an integration test, and the CLI flags naming them
(the same for `up`, `status` and `down`), beside each test's `_cli`/`_status` helpers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stack.ports import free_ports


@dataclass(frozen=True)
class StackPorts:
    data_dir: Path
    mqtt: int
    kafka: int
    controller: int
    bridge_http: int
    commands_http: int
    api_http: int
    mqtt_tls: int  # the mutual-TLS listener, on by default with authentication

    @classmethod
    def free(cls, tmp_path: Path) -> StackPorts:
        """Ports free now, the data dir `tmp_path/var`."""
        return cls((tmp_path / "var").resolve(), *free_ports(7))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka}"

    @property
    def listeners(self) -> list[int]:
        """Every port the stack listens on."""
        return [
            self.mqtt, self.kafka, self.controller, self.bridge_http, self.commands_http,
            self.api_http, self.mqtt_tls,
        ]  # fmt: skip

    @property
    def args(self) -> list[str]:
        return [
            "--data-dir", str(self.data_dir),
            "--mqtt-port", str(self.mqtt),
            "--mqtt-tls-port", str(self.mqtt_tls),
            "--kafka-port", str(self.kafka),
            "--kafka-controller-port", str(self.controller),
            "--bridge-http-port", str(self.bridge_http),
            "--commands-http-port", str(self.commands_http),
            "--api-port", str(self.api_http),
        ]  # fmt: skip


def running_pid(status_line: str) -> int | None:
    """The pid in an `iot-stack status` line (`... running (pid N)`), None when not running."""
    if "running (pid " not in status_line:
        return None
    return int(status_line.split("running (pid ", 1)[1].split(")", 1)[0])
