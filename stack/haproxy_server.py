"""HAProxy (Debian's package) in front of the MQTT shards of `iot-stack up --mqtt-shards N`:
the one MQTT listener address (mqtt_port), every connection sent to the shard of its client
id. Its config is :func:`stack.haproxy_config.render`'s, checked with ``haproxy -c`` first.
With the TLS listener on, HAProxy also holds mqtt_tls_port and terminates its mutual TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from stack import mqtt_tls
from stack.config import StackConfig
from stack.errors import StackError
from stack.haproxy_config import ShardAddress, TlsFront, render
from stack.ports import port_open
from stack.process import ManagedProcess


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if found is None:
        raise StackError("haproxy not found: `make setup` installs Debian's package")
    return found


def check_config(path: Path) -> None:
    """``haproxy -c -f path``; StackError with HAProxy's own words when it refuses it."""
    # not -q: it silences the ALERT lines that say why, too
    done = subprocess.run(
        [haproxy_binary(), "-c", "-f", str(path)], check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        alerts = [line for line in (done.stderr + done.stdout).splitlines() if "[ALERT]" in line]
        raise StackError(f"haproxy refused {path}: {' '.join(alerts) or done.stderr.strip()}")


class HaproxyServer:
    """HAProxy of `up --mqtt-shards N`, before the shards on mqtt_port + 1 .. + N of the
    connect host; or before ``shard_hosts`` (host, port), each shard a host of its own
    (`iot-stack serve mqtt-front`, docker-compose.shards.yml)."""

    name = "haproxy"

    def __init__(self, config: StackConfig, shard_hosts: Sequence[tuple[str, int]] = ()) -> None:
        self.config = config
        self.shard_hosts = list(shard_hosts)
        self.home = config.data_dir / "haproxy"
        self.conf_path = self.home / "haproxy.cfg"
        self.process = ManagedProcess("haproxy", config.run_dir, config.log_dir / "haproxy.log")

    @property
    def endpoint(self) -> str:
        shards = len(self.shard_hosts or self.config.mqtt_shard_ports)
        return f"{self.config.mqtt_url} -> {shards} shards"

    def _tls_front(self) -> TlsFront | None:
        """The TLS listener's files: the appliance CA (made on first start) and its CRL, and
        the server certificate with its key in one 0600 file, as HAProxy's `crt` wants."""
        cfg = self.config
        if not mqtt_tls.enabled(cfg):
            return None
        store, _made = mqtt_tls.ensure_ca(cfg)
        pem = self.home / "mqtt-tls.pem"
        pem.touch(mode=0o600)
        pem.chmod(0o600)
        pem.write_bytes(store.server_cert.read_bytes() + store.server_key.read_bytes())
        return TlsFront(
            cfg.mqtt_tls_port,
            str(pem),
            str(store.ca_cert.resolve()),
            str(store.crl.resolve()),
            str(self.admin_socket),
        )

    @property
    def admin_socket(self) -> Path:
        return mqtt_tls.checked_socket_path(self.home.resolve() / "admin.sock")

    def _admin(self, command: str) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(self.admin_socket))
            sock.sendall(command.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace").strip()

    def reload_crl(self) -> None:
        """Hand the running HAProxy the CA's current CRL through its admin socket (its
        runtime API: set, then commit), so new TLS connections are checked against it and no
        connection is dropped. StackError with HAProxy's words when it refuses."""
        crl = mqtt_tls.ensure_ca(self.config)[0].crl.resolve()
        try:
            pem = crl.read_text().strip()
            said = self._admin(f"set ssl crl-file {crl} <<\n{pem}\n\n")
            if "transaction created" in said:
                said = self._admin(f"commit ssl crl-file {crl}\n")
        except OSError as exc:
            raise StackError(f"HAProxy's admin socket {self.admin_socket}: {exc}") from exc
        if "Success!" not in said:
            raise StackError(f"HAProxy did not take the CRL {crl}: {said}")

    def render_config(self) -> Path:
        cfg = self.config
        self.home.mkdir(parents=True, exist_ok=True)
        tls = self._tls_front()
        addresses = self.shard_hosts or [(cfg.connect_host, p) for p in cfg.mqtt_shard_ports]
        shards = [
            ShardAddress(host, port, str(mqtt_tls.front_socket(cfg, i)) if tls else "")
            for i, (host, port) in enumerate(addresses, start=1)
        ]
        text = render(cfg.bind_host, cfg.mqtt_port, shards, tls=tls, resolve=bool(self.shard_hosts))
        self.conf_path.write_text(text)
        check_config(self.conf_path)
        return self.conf_path

    def command(self) -> list[str]:
        # -db: in the foreground, as the supervisor expects its children
        return [haproxy_binary(), "-db", "-f", str(self.render_config())]

    def start(self) -> None:
        self.process.start(self.command())
        self.process.wait_ready(
            lambda: (
                port_open(self.config.connect_host, self.config.mqtt_port)
                and (
                    not mqtt_tls.enabled(self.config)
                    or port_open(self.config.connect_host, self.config.mqtt_tls_port)
                )
            ),
            self.config.start_timeout,
            f"listening on {self.config.mqtt_url}",
        )

    def stop(self, timeout: float = 10.0) -> bool:
        return self.process.stop(timeout)

    def running(self) -> bool:
        return self.process.running()
