"""Secret files under the data dir: created 0600 from the start, replaced atomically (pure).

The launcher keeps the secrets it issues (the registry admin's, the services', the simulated
devices') only here: the registry stores hashes, so a lost file means a rotate, never a look-up.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path


def admin_secret(secrets_dir: Path) -> Path:
    """The password of Mosquitto's registry admin client (svc/registry)."""
    return secrets_dir / "registry-admin.secret"


def account_secret(secrets_dir: Path, account: str) -> Path:
    """The password of service account ``account`` (user name svc/<account>)."""
    return secrets_dir / f"{account}.secret"


def device_credentials(secrets_dir: Path) -> Path:
    """The simulated devices' ``{device_id: secret}`` (``iot-sim run --credentials``)."""
    return secrets_dir / "devices.json"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 (never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # writers never share one
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def read_secret(path: Path) -> str | None:
    """The first line of a secret file, or None when it does not exist or is empty."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    return lines[0].strip() if lines and lines[0].strip() else None


def write_secret(path: Path, secret: str) -> None:
    write_private(path, secret + "\n")


def read_credentials(path: Path) -> dict[str, str]:
    """The ``{device_id: secret}`` file the simulator reads; {} when absent."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): str(v) for k, v in doc.items() if isinstance(v, str) and v}


def write_credentials(path: Path, credentials: dict[str, str]) -> None:
    write_private(path, json.dumps(dict(sorted(credentials.items())), indent=1) + "\n")


def connect_token_secret(secrets_dir: Path) -> Path:
    """The bearer token of the Spark Connect endpoint (``spark.connect.authenticate.token``)."""
    return secrets_dir / "spark-connect.token"
