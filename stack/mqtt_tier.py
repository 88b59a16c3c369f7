"""The stack's MQTT tier: one Mosquitto, or `--mqtt-shards N` Mosquitto shards behind HAProxy
(docs/operations.md, "MQTT shards"); a base class of :class:`~stack.launcher.Stack`, as
:class:`~stack.app_services.AppServices` is for the appliance's own processes."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Sequence
from typing import Protocol

from registry.dynsec_plan import Command
from stack.config import StackConfig
from stack.errors import StackError
from stack.haproxy_server import HaproxyServer
from stack.mosquitto_server import MosquittoServer, shard_name
from stack.mqtt_shards import shard_ports
from stack.process import ManagedProcess
from stack.supervisor_link import SupervisorLink


class Service(Protocol):
    """What the launcher starts, stops and watches: a server or one of the services."""

    process: ManagedProcess

    def start(self) -> None: ...
    def stop(self, timeout: float = ...) -> bool: ...
    def running(self) -> bool: ...


class MqttTier:
    config: StackConfig

    def _init_mqtt_tier(self, config: StackConfig, link: SupervisorLink | None) -> None:
        # `--mqtt-shards N` (N > 1): shards 1..N (the first is `mosquitto`) behind HAProxy
        shards = range(1, config.mqtt_shards + 1) if config.mqtt_shards > 1 else range(0)
        self.mqtt_shards = [MosquittoServer(config, i) for i in shards]
        self.mosquitto = self.mqtt_shards[0] if self.mqtt_shards else MosquittoServer(config)
        self.haproxy = HaproxyServer(config)
        servers: list[Service] = [self.mosquitto, *self.mqtt_shards, self.haproxy]
        for server in servers:
            server.process.supervisor = link

    def mqtt_tier(self) -> list[tuple[str, Service]]:
        """Mosquitto; or its shards, then HAProxy in front of them."""
        if not self.mqtt_shards:
            return [("mosquitto", self.mosquitto)]
        return [*((s.name, s) for s in self.mqtt_shards), ("haproxy", self.haproxy)]

    def mqtt_tier_known(self) -> list[tuple[str, Service]]:
        """The MQTT tier as `down`/`status` must find it: also the shards and HAProxy an
        earlier `up --mqtt-shards N` left pid files for, whatever this call's flags."""
        names = [path.stem for path in self.config.run_dir.glob("mosquitto-*.pid")]
        # a shard the supervisor is restarting has no pid file: the recorded count names it too
        recorded = len(self.recorded_shard_ports())
        found = {int(n[10:]) for n in names if n[10:].isdigit()} | set(range(1, recorded + 1))
        seen = sorted(i for i in found if i >= 2)
        ours = dict(self.mqtt_tier())
        more: list[tuple[str, Service]] = [
            (s.name, s)
            for s in (MosquittoServer(self.config, i) for i in seen)
            if s.name not in ours
        ]
        if not self.mqtt_shards and (recorded or self.haproxy.process.record() is not None):
            more.append(("haproxy", self.haproxy))
        return [*self.mqtt_tier(), *more]

    def apply_offline(self, commands: Sequence[Command]) -> None:
        """Dynsec ``commands`` into every shard's file (each stopped and started again)."""
        for server in self.mqtt_shards or [self.mosquitto]:
            server.apply_offline(commands)

    def recorded_shard_ports(self) -> list[int]:
        """The MQTT shards' ports of the last `up` (`--mqtt-shards N`; none: one Mosquitto),
        whatever flags this call has: `provision` and `status` need no `--mqtt-shards`."""
        if self.mqtt_shards:
            return [server.port for server in self.mqtt_shards]
        try:
            recorded = json.loads((self.config.data_dir / "stack.json").read_text())
            shards = str(recorded.get("mqtt_shards", ""))
        except (OSError, ValueError, AttributeError):
            return []
        return shard_ports(self.config.mqtt_port, int(shards)) if shards.isdigit() else []

    def shard_endpoint(self, name: str, service: object) -> str | None:
        """`status`'s endpoint of a shard or of HAProxy (None: neither)."""
        if name == "mosquitto" and self.recorded_shard_ports():
            return f"mqtt://{self.config.connect_host}:{self.config.mqtt_port + 1} (shard 1)"
        if isinstance(service, MosquittoServer) and service.shard:
            return f"{service.url} (shard {service.shard})"
        if isinstance(service, HaproxyServer):
            shards = len(self.recorded_shard_ports()) or self.config.mqtt_shards
            return f"{self.config.mqtt_url} -> {shards} MQTT shards"
        return None

    def reload_crl(self) -> str:
        """Make the TLS listener check new connections against the CA's current CRL (after
        `iot-devices cert revoke`): HAProxy's, through its admin socket, with shards; one
        Mosquitto's, by SIGHUP. Connections already open stay. What was done, in words."""
        if self.recorded_shard_ports():
            if not self.haproxy.running():
                raise StackError("HAProxy is not running: it reads the CRL when it starts")
            self.haproxy.reload_crl()
            return "HAProxy's TLS front took the new CRL"
        pid = self.mosquitto.process.pid()
        if pid is None and self.haproxy.admin_socket.exists():
            # `iot-stack serve mqtt-front` (docker-compose.shards.yml: `docker-compose exec
            # mosquitto iot-stack reload-crl`): HAProxy without a pid file of ours
            self.haproxy.reload_crl()
            return "HAProxy's TLS front took the new CRL"
        if pid is None:
            raise StackError("Mosquitto is not running: it reads the CRL when it starts")
        os.kill(pid, signal.SIGHUP)
        return f"sent SIGHUP to Mosquitto (pid {pid}): it re-reads the CRL"

    def recorded_tier_names(self) -> set[str]:
        """The shards and HAProxy the last `up --mqtt-shards N` started (none: one Mosquitto),
        which `status` must list even while one is down."""
        shards = len(self.recorded_shard_ports())
        return {shard_name(i) for i in range(1, shards + 1)} | {"haproxy"} if shards else set()


def is_server(name: str) -> bool:
    """Mosquitto (or a shard), HAProxy or Kafka: the servers, not the appliance's services."""
    return name in {"mosquitto", "kafka", "haproxy"} or name.startswith("mosquitto-")
