"""Per-device MQTT credentials for ``iot-sim run --credentials FILE`` (pure: reads one file).

The file is JSON ``{device_id: secret}``, as ``iot-stack up --devices N`` writes it after
provisioning the fleet through the registry. A device of the default tenant logs in with its
id as user name (registry.topics), so the id is the user name here too. Every device of the
run must be in the file: a missing one is an error at start, never a silent anonymous connect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import orjson

from device_sim.errors import SimConfigError


def load_credentials(path: Path) -> dict[str, str]:
    """The ``{device_id: secret}`` map of ``path``; SimConfigError when unreadable or malformed."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SimConfigError(f"cannot read credentials file {path}: {exc}") from exc
    if not isinstance(doc, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in doc.items()
    ):
        raise SimConfigError(f"{path}: expected a JSON object of device id -> non-empty secret")
    return dict(doc)


def require_all(credentials: Mapping[str, str], device_ids: Iterable[str], path: Path) -> None:
    """SimConfigError naming the devices of the run that have no secret in ``credentials``."""
    missing = [d for d in device_ids if d not in credentials]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise SimConfigError(
            f"{len(missing)} device(s) have no secret in {path}: {shown} "
            "(provision them: iot-stack up --devices N, or iot-devices device add)"
        )
