"""The site broker's files, rendered from a site's config (pure).

- ``mosquitto.conf``: the device listener (password + ACL files, no anonymous access),
  persistence with ``autosave_on_changes`` (the kill -9 loss bound), queue caps from
  sizing.py, and the bridge to the centre: MQTT 3.1.1 (2.0.11's v5 bridge lost every command
  published during an outage, field notes B.5 o1/o2), ``cleansession false`` so both ends keep
  the session, a retained link-state notification with a will (the centre sees up/down), TLS
  when a CA is given. It holds the site account's secret (Mosquitto needs it in clear): 0600.
- ``passwd``: the site's devices and the local monitor, PBKDF2-SHA512 (Mosquitto's ``$7$``).
- ``acl``: each device may publish its own up-link and read its own commands, as centrally
  (registry.acl.device_rules); the monitor reads ``$SYS`` and writes the site's status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from edge.config import EdgeConfig
from edge.errors import ConfigError
from registry import acl, ids, topics
from registry.dynsec_config import pbkdf2_entry

MONITOR_USER = "svc/edge-monitor"  # local only; "svc/" names no device (registry.topics)
PASSWORD_ITERATIONS = 20_000  # site logins are per connect, 101 (Mosquitto's own) is weak
UPLINK = ("telemetry", "events", "status", "replies/+")


@dataclass(frozen=True)
class SitePaths:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "mosquitto.conf"

    @property
    def passwd(self) -> Path:
        return self.root / "passwd"

    @property
    def acl(self) -> Path:
        return self.root / "acl"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "mosquitto.log"

    @property
    def monitor_secret(self) -> Path:
        return self.root / "monitor.secret"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def supervisor_pid(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def supervisor_log(self) -> Path:
        return self.root / "supervisor.log"


def connection_name(config: EdgeConfig) -> str:
    return f"edge-{config.site}"


def mosquitto_conf(
    config: EdgeConfig, paths: SitePaths, account_secret: str, device_ids: list[str], user: str
) -> str:
    """The site broker's config; comments on their own lines (field notes B.1)."""
    q = config.queues()
    host, port = config.central_address()
    name = connection_name(config)
    lines = [
        f"# iot-edge site {config.site} (tenant {config.tenant}); written by `iot-edge init`,",
        "# re-run init rather than editing: it is rendered from site.json",
        "per_listener_settings false",
        f"user {user}",
        f"listener {config.listen_port} {config.listen_host}",
        "allow_anonymous false",
        "# a device's client id is its user name: no session takeover by client id",
        "use_username_as_clientid true",
        f"password_file {paths.passwd}",
        f"acl_file {paths.acl}",
        "persistence true",
        f"persistence_location {paths.data}/",
        "# save after every N changes: a kill -9 loses fewer than N acknowledged messages",
        "autosave_on_changes true",
        f"autosave_interval {q.autosave_changes}",
        f"# sized for {config.outage_s:g} s at {config.rate_msgs_per_s:g} msg/s "
        f"(the default 1000 drops acknowledged messages)",
        f"max_queued_messages {q.max_queued_messages}",
        f"max_queued_bytes {q.max_queued_bytes}",
        "sys_interval 2",
        f"log_dest file {paths.log}",
        "log_type error",
        "log_type warning",
        "log_type notice",
        "log_type information",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
        "",
        f"connection {name}",
        f"address {host}:{port}",
        "# v3.1.1: the v5 bridge of 2.0.11 loses commands sent while the site is away",
        "bridge_protocol_version mqttv311",
        f"remote_clientid {name}",
        f"local_clientid {name}.local",
        f"remote_username {topics.account_username(config.site)}",
        f"remote_password {account_secret}",
        "cleansession false",
        f"keepalive_interval {config.keepalive_s}",
        f"restart_timeout {config.restart_min_s} {config.restart_max_s}",
        "notifications true",
        f"notification_topic {config.state_topic}",
    ]
    if config.tls_ca_file:
        lines += [f"bridge_cafile {config.tls_ca_file}", "bridge_insecure false"]
        if config.tls_cert_file:
            lines += [
                f"bridge_certfile {config.tls_cert_file}",
                f"bridge_keyfile {config.tls_key_file}",
            ]
    root = config.root
    # up: every device's up-link (the local ACL keeps each device to its own topics; the
    # centre refuses anything not registered to this site); the site's status
    lines += [f"topic {root}devices/+/{channel} out 1" for channel in UPLINK]
    lines.append(f"topic {config.status_topic} out 0")
    # down: each device's commands, literal (the centre refuses a wildcard subscription)
    lines += [
        f"topic {topics.device_root(config.tenant, d)}/commands/# in 1" for d in sorted(device_ids)
    ]
    return "\n".join(lines) + "\n"


def _check_device(device_id: str) -> str:
    try:
        ids.device_id(device_id)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if ":" in device_id:  # Mosquitto's password file separates user and hash with ':'
        raise ConfigError(f"device id {device_id!r}: a site cannot serve ids containing ':'")
    return device_id


def password_line(username: str, secret: str, iterations: int = PASSWORD_ITERATIONS) -> str:
    entry = pbkdf2_entry(secret, iterations)
    return f"{username}:$7${entry['iterations']}${entry['salt']}${entry['password']}"


def password_file(config: EdgeConfig, devices: Mapping[str, str], monitor_secret: str) -> str:
    lines = [
        password_line(topics.device_username(config.tenant, _check_device(d)), secret)
        for d, secret in sorted(devices.items())
    ]
    lines.append(password_line(MONITOR_USER, monitor_secret))
    return "\n".join(lines) + "\n"


def acl_file(config: EdgeConfig, device_ids: list[str]) -> str:
    lines: list[str] = []
    for device in sorted(device_ids):
        lines.append(f"user {topics.device_username(config.tenant, _check_device(device))}")
        for rule in acl.device_rules(config.tenant, device):
            if rule.acltype == acl.PUBLISH:
                lines.append(f"topic write {rule.topic}")
            elif rule.acltype == acl.RECEIVE:
                lines.append(f"topic read {rule.topic}")
        lines.append("")
    lines += [
        f"user {MONITOR_USER}",
        "topic read $SYS/#",
        f"topic read {config.state_topic}",
        f"topic write {config.status_topic}",
    ]
    return "\n".join(lines) + "\n"
