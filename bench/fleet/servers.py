"""The fleet benchmark's own Mosquitto + Kafka, with each device its own credentials.

Authentication is on unless asked otherwise: the launcher's Mosquitto with dynamic security,
the registry's service accounts (the bridge logs in as ``svc/bridge``), then every device of
the fleet provisioned through the registry in one bulk (scrypt 2^10 for simulated devices,
written into Mosquitto's dynsec file with Mosquitto stopped: docs/security.md). The devices'
secrets come back from the launcher's 0600 file; only their hashes reach Mosquitto's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.commands.stack_setup import Servers
from bench.progress import say


@dataclass
class FleetServers:
    servers: Servers
    # device id -> secret (None: anonymous, --insecure-anonymous)
    credentials: dict[str, str] | None = None
    # the bridge's MQTT login as BridgeConfig settings ({} when anonymous)
    bridge_login: dict[str, Any] = field(default_factory=dict)
    provision_s: float | None = None


@contextlib.contextmanager
def fleet_servers(
    data_dir: Path, partitions: int, device_ids: Sequence[str], *, anonymous: bool = False
) -> Iterator[FleetServers]:
    """A private stack on free ports; unless ``anonymous``, ``device_ids`` provisioned."""
    from device_sim.credentials import load_credentials, require_all
    from stack.config import StackConfig
    from stack.launcher import Stack
    from stack.provisioning import account_login, provision
    from stack.secret_files import device_credentials

    cfg = StackConfig.servers_on_free_ports(data_dir, partitions)
    cfg = dataclasses.replace(cfg, insecure_anonymous=anonymous)
    stack = Stack(cfg)
    say(f"starting Mosquitto + Kafka under {data_dir} ({'anonymous' if anonymous else 'auth'}) ...")
    stack.up()  # with auth: dynsec, the registry's topics and service accounts
    try:
        found = FleetServers(
            Servers(
                cfg.connect_host,
                cfg.mqtt_port,
                cfg.kafka_bootstrap,
                mosquitto_pid=stack.mosquitto.process.pid,  # read anew: a bulk restarts it
                kafka_pid=stack.kafka.process.pid,
            )
        )
        if not anonymous:
            started = time.monotonic()
            provision(
                cfg.kafka_bootstrap, cfg.connect_host, cfg.mqtt_port, cfg.secrets_dir,
                list(device_ids), progress=say, offline=stack.mosquitto.apply_offline,
            )  # fmt: skip
            found.provision_s = round(time.monotonic() - started, 1)
            path = device_credentials(cfg.secrets_dir)
            creds = load_credentials(path)
            require_all(creds, device_ids, path)
            found.credentials = {d: creds[d] for d in device_ids}
            login = account_login(cfg.secrets_dir, "bridge")
            found.bridge_login = {
                "mqtt_username": login.username,
                "mqtt_password_file": str(login.password_file),
            }
            say(f"{len(device_ids):,} devices provisioned in {found.provision_s:.1f} s")
        yield found
    finally:
        stack.down()
