"""Write a site's directory from its config (adapter: the file system).

Secrets: the site account's secret is read from its file and written into mosquitto.conf
(Mosquitto needs it in clear for the bridge); devices' secrets only as PBKDF2 hashes in passwd.
The directory is 0700 and every file holding a secret 0600.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
from pathlib import Path

from edge import render
from edge.config import SITE_FILE, EdgeConfig
from edge.errors import ConfigError
from edge.render import SitePaths


def _read_secret(path: str, what: str) -> str:
    try:
        secret = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc}") from exc
    if not secret:
        raise ConfigError(f"{what} {path} is empty")
    return secret


def read_devices(path: str) -> dict[str, str]:
    """``{device id: secret}`` (the format of iot-stack's var/secrets/devices.json)."""
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"devices file {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in data.items()
    ):
        raise ConfigError(f"devices file {path}: expected a JSON object {{id: secret}}")
    return data


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    tmp.replace(path)


def install(config: EdgeConfig) -> SitePaths:
    """Create or rewrite the site directory; the store (data/) is kept across re-inits."""
    paths = SitePaths(Path(config.site_dir).resolve())
    account_secret = _read_secret(config.account_secret_file, "account secret file")
    devices = read_devices(config.devices_file)
    paths.root.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.root, 0o700)
    paths.data.mkdir(exist_ok=True)
    monitor = (
        paths.monitor_secret.read_text().strip() if paths.monitor_secret.exists() else ""
    ) or secrets.token_urlsafe(32)
    user = getpass.getuser()
    _write(paths.passwd, render.password_file(config, devices, monitor), 0o600)
    _write(paths.acl, render.acl_file(config, list(devices)), 0o644)
    conf = render.mosquitto_conf(config, paths, account_secret, list(devices), user)
    _write(paths.conf, conf, 0o600)
    _write(paths.monitor_secret, monitor + "\n", 0o600)
    _write(paths.root / SITE_FILE, json.dumps(config.to_json(), indent=2) + "\n", 0o600)
    return paths
