"""The one configuration of a site (`iot-edge init`): defaults < ``IOT_*`` environment < flags.

Every setting is a field of :class:`EdgeConfig` (env ``IOT_`` + name upper case, flag ``--`` +
name with dashes), as the bridge's. ``iot-edge init`` stores the result as ``site.json`` in the
site directory; ``up``/``down``/``status`` read it from there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appconfig import settings as appsettings
from edge.errors import ConfigError
from edge.sizing import QueuePlan, plan_queues
from registry import ids, topics

_setting = appsettings.setting
SITE_FILE = "site.json"


@dataclass(frozen=True, slots=True)
class EdgeConfig:
    """All settings of one site."""

    site: str = _setting("", "Site name = its edge account in the central registry.")
    tenant: str = _setting(ids.DEFAULT_TENANT, "Tenant of the site and its devices.")
    central: str = _setting("", "The central Mosquitto the site dials out to (HOST:PORT).")
    site_dir: str = _setting("var/edge", "Directory of the site's config, store and logs.")
    account_secret_file: str = _setting(
        "", "File holding the site account's secret (from `iot-devices account create`)."
    )
    devices_file: str = _setting(
        "", "JSON file {device id: secret} of the devices that connect to this site."
    )
    listen_host: str = _setting("0.0.0.0", "Address of the site's device listener.")
    listen_port: int = _setting(1883, "Port of the site's device listener.")
    outage_s: float = _setting(3600.0, "Longest link outage to survive without loss (s).")
    rate_msgs_per_s: float = _setting(100.0, "Messages/s the site's devices send together.")
    message_bytes: int = _setting(512, "Typical payload size (bytes) for the queue byte cap.")
    autosave_changes: int = _setting(
        1000,
        "Save the store every N changes: a kill -9 or power cut loses fewer than N "
        "acknowledged messages; smaller N costs publish throughput (docs/edge.md).",
    )
    keepalive_s: int = _setting(10, "Bridge keepalive (s): the centre notices a dead link "
                                "after 1.5 x this.")  # fmt: skip
    restart_min_s: int = _setting(2, "First reconnect delay of the bridge (s).")
    restart_max_s: int = _setting(30, "Longest reconnect delay of the bridge (s, backoff cap).")
    tls_ca_file: str = _setting("", "CA certificate of the centre's TLS listener (TLS on).")
    tls_cert_file: str = _setting("", "The site's client certificate for the centre (optional).")
    tls_key_file: str = _setting("", "Key of the site's client certificate.")
    insecure_plain_link: bool = _setting(
        False, "Allow a link to the centre without TLS (its secret then crosses in clear)."
    )
    status_interval_s: float = _setting(5.0, "How often the site publishes its status (s).")

    def __post_init__(self) -> None:
        if not self.site:
            raise ConfigError("--site is required")
        try:
            ids.account_name(self.site)
            ids.tenant_id(self.tenant)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        self.central_address()
        if not self.account_secret_file:
            raise ConfigError("--account-secret-file is required (the site account's secret)")
        if not self.tls_ca_file and not self.insecure_plain_link:
            raise ConfigError(
                "the link to the centre needs TLS (--tls-ca-file); --insecure-plain-link "
                "allows plain TCP, with the site's secret in clear on the wire"
            )
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ConfigError("--tls-cert-file and --tls-key-file go together")
        if not 0 < self.listen_port < 65536:
            raise ConfigError("listen port out of range")
        if (
            self.keepalive_s < 5
            or self.restart_min_s < 1
            or self.restart_max_s < self.restart_min_s
        ):
            raise ConfigError("keepalive >= 5 s, 1 <= restart min <= restart max")
        if self.status_interval_s <= 0:
            raise ConfigError("status interval must be > 0")
        self.queues()  # sizes are validated there

    def central_address(self) -> tuple[str, int]:
        host, sep, port = self.central.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"--central must be HOST:PORT, got {self.central!r}")
        return host, int(port)

    def queues(self) -> QueuePlan:
        return plan_queues(
            self.outage_s, self.rate_msgs_per_s, self.message_bytes, self.autosave_changes
        )

    @property
    def root(self) -> str:
        """The tenant's topic prefix ('' for the default tenant)."""
        return topics.tenant_root(self.tenant)

    @property
    def state_topic(self) -> str:
        """Where the bridge announces link up (1) / down (0, its will), at both ends."""
        return site_topic(self.tenant, self.site, "state")

    @property
    def status_topic(self) -> str:
        return site_topic(self.tenant, self.site, "status")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EdgeConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown settings in {SITE_FILE}: {sorted(unknown)}")
        return cls(**data)

    @classmethod
    def load(
        cls,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> EdgeConfig:
        return PARSER.load(argv, environ, **overrides)


def site_topic(tenant: str, site: str, leaf: str) -> str:
    """``{tenant root}sites/{site}/{leaf}``: a site's own topics at the centre."""
    return f"{topics.site_root(tenant, site)}/{leaf}"


PARSER = appsettings.SettingsParser(EdgeConfig, "site settings", ConfigError)
add_arguments = PARSER.add_arguments
from_namespace = PARSER.from_namespace


def read_site(site_dir: Path) -> EdgeConfig:
    path = site_dir / SITE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} not found: run `iot-edge init` first") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return EdgeConfig.from_json(data)
