"""The console's settings (``IOT_CONSOLE_*``), parsed with iot-api's own flags."""

from __future__ import annotations

from dataclasses import dataclass

from api.errors import ConfigError
from appconfig import settings as appsettings

_setting = appsettings.setting


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    """Settings of the operator console (served by iot-api under /console)."""

    console: bool = _setting(
        False, "Serve the operator console under /console (login with registry operator accounts)."
    )
    console_session_ttl_s: float = _setting(
        8 * 3600.0, "A console session ends this long after login, whatever its use (s)."
    )
    console_idle_s: float = _setting(1800.0, "A console session unused this long ends (s).")
    console_secure_cookies: bool = _setting(
        False,
        "Mark the session cookie Secure even on plain HTTP (behind a TLS proxy); it is always "
        "Secure when the request came over TLS or X-Forwarded-Proto says https.",
    )
    console_services: str = _setting(
        "bridge=http://127.0.0.1:9100,commands=http://127.0.0.1:9101,"
        "analytics=http://127.0.0.1:9102",
        "Health/metrics endpoints the Overview watches: name=url,... (each serves /healthz "
        "and /metrics).",
    )
    console_mqtt_host: str = _setting("127.0.0.1", "Mosquitto for registry changes (dynsec).")
    console_mqtt_port: int = _setting(1883, "Mosquitto port for registry changes.")
    console_mqtt_shard_ports: str = _setting(
        "",
        "With `iot-stack up --mqtt-shards N`: the shards' own ports (comma separated); device "
        "changes then go to each shard instead of console_mqtt_port.",
    )
    console_admin_password_file: str = _setting(
        "",
        "File with the password of Mosquitto's svc/registry admin client; without it device "
        "changes are saved in the registry but not applied to Mosquitto.",
    )
    console_warehouse: str = _setting(
        "var/warehouse", "Directory of the analytics tables (fleet_minute, anomalies)."
    )
    console_report: str = _setting(
        "var/report/report.html",
        "The fleet report (`iot-analytics report --format html`) the Analytics page links.",
    )
    console_audit_topic: str = _setting(
        "iot.console.audit", "Topic of the console's audit records (replay, discard, commands)."
    )
    console_sites_password_file: str = _setting(
        "",
        "File with the secret of a central account that may read the edge sites' state "
        "(role bridge, as `iot-stack status` uses); empty: no Sites panel.",
    )
    console_sites_username: str = _setting(
        "svc/bridge", "The MQTT user name of that account (docs/edge.md)."
    )
    console_sample_s: float = _setting(2.0, "Seconds between two Overview samples.")

    def __post_init__(self) -> None:
        checks = [
            (self.console_session_ttl_s > 0, "console_session_ttl_s must be > 0"),
            (self.console_idle_s > 0, "console_idle_s must be > 0"),
            (0 < self.console_mqtt_port < 65536, "console_mqtt_port must be 1-65535"),
            (0.2 <= self.console_sample_s <= 60, "console_sample_s must be 0.2-60"),
        ]
        try:
            self.services()
        except ValueError as exc:
            checks.append((False, str(exc)))
        appsettings.check_all(checks, "console", ConfigError)

    def services(self) -> dict[str, str]:
        """``console_services`` as {name: base url}."""
        out: dict[str, str] = {}
        for item in filter(None, (p.strip() for p in self.console_services.split(","))):
            name, sep, url = item.partition("=")
            if not sep or not name or not url.startswith(("http://", "https://")):
                raise ValueError(f"console_services item {item!r} is not name=http(s)://...")
            out[name.strip()] = url.strip().rstrip("/")
        return out


PARSER = appsettings.SettingsParser(ConsoleConfig, "console settings", ConfigError)
add_arguments = PARSER.add_arguments
from_namespace = PARSER.from_namespace
