"""Mosquitto (Debian's package) run with a config generated from mosquitto/.

By default with the dynamic-security plugin and ``allow_anonymous false``: every client logs in
with credentials the registry (registry/) issued. On first start the dynsec file is written with
the registry's admin client only, its secret in a 0600 file (docs/security.md).
``insecure_anonymous`` keeps the old anonymous broker, for development, loudly logged.
"""

from __future__ import annotations

import getpass
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from string import Template

from registry import dynsec_config
from registry.dynsec_file import DynsecDocument
from registry.dynsec_plan import Command
from registry.hashing import generate_secret
from stack import mqtt_tls, paths
from stack.config import StackConfig
from stack.errors import StackError
from stack.ports import port_open
from stack.process import ManagedProcess
from stack.secret_files import admin_secret, read_secret, write_secret

log = logging.getLogger(__name__)

READY_LINE = "running"  # "mosquitto version 2.0.x running"
DYNSEC_PLUGIN = "mosquitto_dynamic_security.so"
AUTH_METRICS_INTERVAL_S = 2  # how often the plugin rewrites its counts (when they changed)
INSECURE_WARNING = (
    "INSECURE: Mosquitto at %s accepts anonymous clients (--insecure-anonymous / "
    "IOT_STACK_INSECURE_ANONYMOUS): anyone who reaches it may publish as any device and read "
    "every command. For development only."
)


def dynsec_plugin() -> Path:
    """Where Debian's mosquitto package put the dynamic-security plugin."""
    for candidate in (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib/aarch64-linux-gnu")):
        if (candidate / DYNSEC_PLUGIN).exists():
            return candidate / DYNSEC_PLUGIN
    found = sorted(Path("/usr/lib").glob(f"**/{DYNSEC_PLUGIN}"))
    if not found:
        raise StackError(f"{DYNSEC_PLUGIN} not found: Debian's `mosquitto` package ships it")
    return found[0]


def shard_name(shard: int) -> str:
    """Shard 1 (or the one Mosquitto) is `mosquitto`, with the data dir it always had; shard
    i > 1 is `mosquitto-i`."""
    return "mosquitto" if shard <= 1 else f"mosquitto-{shard}"


class MosquittoServer:
    """One Mosquitto: the stack's only one (``shard`` 0), or shard ``i`` (1-based) of
    `--mqtt-shards N`, listening on mqtt_port + i on the connect host (HAProxy holds
    mqtt_port); with the TLS listener on, HAProxy terminates it and hands the shard its
    devices over the shard's front socket (:func:`stack.mqtt_tls.front_socket`). A shard
    that is a host of its own (`iot-stack serve mosquitto --mqtt-shard I`, a container of
    docker-compose.shards.yml) listens on bind_host:mqtt_port instead (``own_host``)."""

    def __init__(self, config: StackConfig, shard: int = 0, *, own_host: bool = False) -> None:
        self.config = config
        self.shard = shard
        self.name = shard_name(shard)
        if shard and not own_host:
            self.host, self.port = config.connect_host, config.mqtt_port + shard
        else:
            self.host, self.port = config.bind_host, config.mqtt_port
        self.home = config.data_dir / self.name
        self.conf_path = self.home / "mosquitto.conf"
        # In Mosquitto's own (writable) dir: the plugin rewrites the file on every change.
        self.dynsec_path = self.home / "dynsec.json"
        # refused log-ins and publishes per user, written by the metrics plugin; the bridge
        # exports them per tenant (docs/security.md, "Metrics per tenant")
        self.auth_metrics_path = self.home / "auth_metrics.json"
        self.process = ManagedProcess(
            self.name, config.run_dir, config.log_dir / f"{self.name}.log"
        )

    @property
    def url(self) -> str:
        return f"mqtt://{self.config.connect_host}:{self.port}"

    def _binary(self) -> str:
        found = shutil.which("mosquitto") or (
            "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
        )
        if found is None:
            raise StackError("mosquitto not found: `make setup` installs Debian's package")
        return found

    def ensure_dynsec_file(self) -> bool:
        """Write the first dynsec file (the registry admin only) and its secret; True if new.

        An existing file is Mosquitto's live state (every device and account): never replaced.
        """
        secret_path = admin_secret(self.config.secrets_dir)
        first = self.config.data_dir / shard_name(1) / self.dynsec_path.name
        if self.shard > 1 and not self.dynsec_path.exists() and first.exists():
            # a new shard starts from shard 1's clients (every change then goes to each)
            self.home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(first, self.dynsec_path)
            self.dynsec_path.chmod(0o600)
        if self.dynsec_path.exists():
            if read_secret(secret_path) is None:
                raise StackError(
                    f"{self.dynsec_path} exists but the registry admin secret {secret_path} is "
                    "missing: restore it, or delete the dynsec file to start over (every "
                    "device and account then needs `iot-devices mosquitto sync` and a rotate)"
                )
            return False
        secret = read_secret(secret_path)
        if secret is None:
            secret = generate_secret()
            write_secret(secret_path, secret)
        self.home.mkdir(parents=True, exist_ok=True)
        self.dynsec_path.write_text(dynsec_config.render(secret))
        self.dynsec_path.chmod(0o600)
        return True

    def apply_offline(self, commands: Sequence[Command]) -> None:
        """Apply dynsec ``commands`` to the dynsec file with Mosquitto stopped, writing it once
        (registry.dynsec_file: a bulk of devices over $CONTROL costs O(N²) in 2.0.11), then
        start Mosquitto again if it ran. Nothing is written if a command cannot be applied."""
        doc = DynsecDocument(json.loads(self.dynsec_path.read_text()))
        doc.apply(commands)  # OfflineDynsecError before anything changed
        was_running = self.running()
        if was_running:
            self.stop()
        try:
            # read again: Mosquitto saved its own state as it stopped
            doc = DynsecDocument(json.loads(self.dynsec_path.read_text()))
            doc.apply(commands)
            tmp = self.dynsec_path.with_suffix(".json.new")
            tmp.write_text(json.dumps(doc.document(), indent=2) + "\n")
            tmp.chmod(0o600)
            tmp.replace(self.dynsec_path)
        finally:
            if was_running:
                self.start()

    def _auth_lines(self) -> str:
        # Run as whoever runs the stack: as root Mosquitto would otherwise switch to the
        # `mosquitto` user, which can write neither our data dir nor the dynsec file.
        user = f"user {getpass.getuser()}"
        if self.config.insecure_anonymous:
            return f"allow_anonymous true\n{user}"
        if self.ensure_dynsec_file():
            log.info("wrote the first dynamic-security file %s", self.dynsec_path)
        return (
            f"allow_anonymous false\n{user}\n"
            + self._metrics_plugin_lines()
            + self._front_plugin_lines()
            + f"plugin {dynsec_plugin()}\n"
            f"plugin_opt_config_file {self.dynsec_path}"
        )

    def _metrics_plugin_lines(self) -> str:
        # before dynsec: it sees every check and defers (mosquitto/plugins/iot_auth_metrics.c)
        plugin = paths.auth_metrics_plugin()
        if not plugin.exists():
            log.warning(
                "%s not built (`make setup` builds it): refused log-ins and publishes are not "
                "counted per user",
                plugin,
            )
            return ""
        return (
            f"plugin {plugin}\nplugin_opt_file {self.auth_metrics_path}\n"
            f"plugin_opt_interval_s {AUTH_METRICS_INTERVAL_S}\n"
        )

    def _behind_tls_front(self) -> bool:
        return self.shard > 0 and mqtt_tls.enabled(self.config)

    def _front_plugin_lines(self) -> str:
        # before dynsec: a log-in on the front socket is decided here, any other is deferred
        if not self._behind_tls_front():
            return ""
        plugin = paths.front_auth_plugin()
        if not plugin.exists():
            raise StackError(
                f"{plugin} not built (`make setup` builds it): the MQTT shards cannot take "
                "TLS devices from HAProxy without it (or add --no-mqtt-tls)"
            )
        socket = mqtt_tls.front_socket(self.config, self.shard)
        return f"plugin {plugin}\nplugin_opt_socket {socket}\n"

    def _listener_lines(self) -> str:
        if not self.shard:
            return mqtt_tls.listener_lines(self.config)
        if not self._behind_tls_front():
            return ""
        mqtt_tls.ensure_front_dir(self.config)
        return (
            "# HAProxy's TLS front hands devices it checked against their certificate to this\n"
            "# unix socket (a 0700 directory): iot_front_auth logs them in as their client id\n"
            f"listener 0 {mqtt_tls.front_socket(self.config, self.shard)}\n"
        )

    def render_config(self, log_to_stdout: bool = False) -> Path:
        cfg = self.config
        self.home.mkdir(parents=True, exist_ok=True)
        text = Template(paths.mosquitto_template().read_text()).substitute(
            port=self.port,
            bind_host=self.host,
            auth=self._auth_lines(),
            tls_listener=self._listener_lines(),
            data_dir=self.home,
            # on changes: the interval counts changes, no longer seconds (one or the other)
            autosave_on_changes="true" if cfg.mqtt_autosave_changes else "false",
            autosave_interval=cfg.mqtt_autosave_changes or cfg.mqtt_autosave_interval,
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
                and port_open(self.config.connect_host, self.port)
                and (
                    self.shard > 0
                    or not mqtt_tls.enabled(self.config)
                    or port_open(self.config.connect_host, self.config.mqtt_tls_port)
                )
            ),
            self.config.start_timeout,
            f"listening on {self.url}",
        )

    def stop(self, timeout: float = 30.0) -> bool:
        # SIGTERM makes Mosquitto write its persistence database before it exits.
        return self.process.stop(timeout)

    def kill(self) -> None:
        self.process.kill()

    def running(self) -> bool:
        return self.process.running()
