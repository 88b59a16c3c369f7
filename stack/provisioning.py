"""Who may log in to the stack's Mosquitto: the registry's service accounts and devices.

Run by ``iot-stack up`` once Kafka and Mosquitto are up (and by docker-compose's one-shot
``auth-init`` service): creates the registry topics and the default tenant, the accounts of the
bridge (role ``bridge``) and of the command path (role ``commands``), and the simulator's
devices, in bulk and only the missing ones. Idempotent: secrets issued before are kept in 0600
files under the secrets dir and reused; a secret that was lost (or no longer verifies) is
rotated, never looked up (the registry keeps only hashes).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from registry import ids
from registry.dynsec import DynsecClient, Shard, admin_client
from registry.dynsec_plan import Command
from registry.errors import RegistryError
from registry.hashing import ScryptParams
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from registry.sync import sync_mosquitto
from registry.topics import ADMIN_USERNAME, account_username, device_username
from stack.errors import StackError
from stack.secret_files import (
    account_secret,
    admin_secret,
    device_credentials,
    read_credentials,
    read_secret,
    write_credentials,
    write_secret,
)

log = logging.getLogger(__name__)

ACTOR = "iot-stack"
# From this many new devices on, their Mosquitto clients are written into the dynsec file
# with Mosquitto stopped (when the caller can, see `offline`), not sent over $CONTROL:
# Mosquitto 2.0.11 rewrites the whole file after every change, O(N²) for a fleet.
OFFLINE_MIN_DEVICES = 200
# The simulated fleet's secrets are hashed with scrypt at 2**10 (1 MiB, about 3 ms) instead of
# the registry's 2**14 (16 MiB, 34-56 ms), or 20,000 devices would take 10 to 20 minutes of
# CPU. Acceptable for simulated devices only: each secret is 256 random bits, so the hash
# cost was never what stops guessing (registry/hashing.py), and the parameters travel with
# each hash, which the registry recognises as below today's (`needs_rehash`). Devices added
# any other way (iot-devices, the API, the console) keep the full cost.
SIMULATED_FLEET_HASH = ScryptParams(log2_n=10)
Offline = Callable[[Sequence[Command]], None]  # applies dynsec commands to a stopped Mosquitto
# account name -> its role; the user name is svc/<name> (registry.topics)
# (`api`: iot-api's MQTT sessions for HTTP devices' commands, docs/api.md "HTTP devices")
SERVICE_ACCOUNTS: dict[str, Role] = {
    "bridge": Role.BRIDGE,
    "commands": Role.COMMANDS,
    "api": Role.API,
}


@dataclass(frozen=True)
class Login:
    """What a service needs to log in: its user name and the file holding its password."""

    username: str
    password_file: Path


def account_login(secrets_dir: Path, name: str) -> Login:
    return Login(account_username(name), account_secret(secrets_dir, name))


@dataclass
class Provisioned:
    """What one run changed (for `up`'s progress lines and the tests)."""

    accounts_created: list[str]
    accounts_rotated: list[str]
    devices_added: int
    devices_rotated: int


def provision(
    kafka_bootstrap: str,
    mqtt_host: str,
    mqtt_port: int,
    secrets_dir: Path,
    device_ids: Sequence[str],
    *,
    progress: Callable[[str], None] = log.info,
    offline: Offline | None = None,
    shard_ports: Sequence[Shard] = (),
    kafka_security: Mapping[str, str] | None = None,
) -> Provisioned:
    """Service accounts and devices, the missing ones. With ``offline`` (the launcher, which
    owns Mosquitto), a bulk of new devices reaches Mosquitto through its dynsec file. With
    ``shard_ports`` (`--mqtt-shards N`), every change goes to each shard on its own port."""
    try:
        with registry_session(
            kafka_bootstrap, mqtt_host, mqtt_port, secrets_dir, actor=ACTOR, progress=progress,
            shard_ports=shard_ports, kafka_security=kafka_security,
        ) as (registry, mosquitto):  # fmt: skip
            return _provision(
                registry, mosquitto, secrets_dir, device_ids, progress, offline=offline
            )
    except RegistryError as exc:
        raise StackError(f"provisioning through the registry failed: {exc}") from exc


@contextlib.contextmanager
def registry_session(
    kafka_bootstrap: str,
    mqtt_host: str,
    mqtt_port: int,
    secrets_dir: Path,
    *,
    actor: str,
    progress: Callable[[str], None] = log.info,
    shard_ports: Sequence[Shard] = (),
    kafka_security: Mapping[str, str] | None = None,
) -> Iterator[tuple[Registry, DynsecClient]]:
    """The registry, writable as the local admin ``actor``, with Mosquitto's dynsec behind it
    (the admin secret from ``secrets_dir``; every shard's with ``shard_ports``); both closed
    on exit."""
    admin = read_secret(admin_secret(secrets_dir))
    if admin is None:
        raise StackError(f"no registry admin secret in {admin_secret(secrets_dir)}")
    # right after a 3-node cluster starts, its transaction coordinator took 34 s to answer
    # (the 50-partition, 3-replica transaction-state topic is created on first use)
    store = KafkaStore(kafka_bootstrap, timeout=120.0, security=kafka_security)
    mosquitto: DynsecClient | None = None
    try:
        created = store.ensure_topics()
        if created:
            progress(f"created registry topics: {', '.join(created)}")
        mosquitto = admin_client(mqtt_host, mqtt_port, ADMIN_USERNAME, admin, shard_ports).start()
        yield Registry.open(store, local_admin(actor), mosquitto, write=True), mosquitto
    finally:
        if mosquitto is not None:
            mosquitto.close()
        store.close()


def _provision(
    registry: Registry,
    mosquitto: DynsecClient,
    secrets_dir: Path,
    device_ids: Sequence[str],
    progress: Callable[[str], None],
    *,
    offline: Offline | None = None,
) -> Provisioned:
    tenant = ids.DEFAULT_TENANT
    if tenant not in registry.state.tenants:
        registry.create_tenant(tenant)
    known = set(mosquitto.list_clients())
    wanted = [account_username(a) for a in SERVICE_ACCOUNTS if a in registry.state.accounts]
    wanted += [
        device_username(tenant, d) for d in device_ids if (tenant, d) in registry.state.devices
    ]
    if any(name not in known for name in wanted):
        # Mosquitto lost its dynsec file: recreate what the registry knows; their secrets
        # could not be restored (only hashes are kept), so they are rotated below.
        progress("Mosquitto misses clients the registry knows: syncing it")
        sync_mosquitto(registry)
    result = Provisioned([], [], 0, 0)
    for name, role in SERVICE_ACCOUNTS.items():
        path = account_login(secrets_dir, name).password_file
        kept = read_secret(path)
        if name not in registry.state.accounts:
            issued = registry.create_account(name, [role])
            result.accounts_created.append(name)
        elif registry.state.accounts[name].disabled:
            # an operator's decision: not undone here (the service will be refused)
            log.warning("service account svc/%s is disabled in the registry", name)
            progress(f"WARNING: service account svc/{name} is disabled: that service is refused")
            continue
        elif (
            kept is None
            or account_username(name) not in known
            or registry.authenticate_account(name, kept) is None
        ):
            issued = registry.rotate_account(name)
            result.accounts_rotated.append(name)
        else:
            continue
        assert issued.secret is not None
        write_secret(path, issued.secret)
    result.devices_added, result.devices_rotated = _devices(
        registry, known, secrets_dir, device_ids, offline=offline, progress=progress
    )
    if result.accounts_created or result.accounts_rotated:
        done = result.accounts_created + result.accounts_rotated
        progress(f"service accounts ready: {', '.join(account_username(a) for a in done)}")
    if result.devices_added or result.devices_rotated:
        progress(
            f"devices provisioned: {result.devices_added} added, "
            f"{result.devices_rotated} re-keyed (secrets in {device_credentials(secrets_dir)})"
        )
    return result


def _devices(
    registry: Registry,
    known: set[str],
    secrets_dir: Path,
    device_ids: Sequence[str],
    *,
    offline: Offline | None = None,
    progress: Callable[[str], None] = log.info,
) -> tuple[int, int]:
    """Add the missing devices in bulk; re-key registered ones whose secret was not kept.

    The re-keying goes over $CONTROL first (Mosquitto must be up); then a bulk of new devices
    goes into the stopped Mosquitto's file when ``offline`` is given."""
    tenant = ids.DEFAULT_TENANT
    path = device_credentials(secrets_dir)
    creds = read_credentials(path)
    missing = [d for d in device_ids if (tenant, d) not in registry.state.devices]
    lost = [
        d
        for d in device_ids
        if (tenant, d) in registry.state.devices
        and (d not in creds or device_username(tenant, d) not in known)
    ]
    if not missing and not lost:
        return 0, 0
    for device_id in lost:
        secret = registry.rotate_device(tenant, device_id).secret
        assert secret is not None
        creds[device_id] = secret
    bulk = offline is not None and len(missing) >= OFFLINE_MIN_DEVICES
    deferred: list[Command] | None = [] if bulk else None
    started = time.monotonic()
    issued = registry.add_devices(
        tenant, missing, hash_params=SIMULATED_FLEET_HASH, deferred=deferred
    )
    for device_id, one in zip(missing, issued, strict=True):
        assert one.secret is not None
        creds[device_id] = one.secret
    # the secrets first: if Mosquitto cannot be updated, the next `up` syncs and re-keys
    write_credentials(path, creds)
    if missing:
        progress(f"{len(missing)} devices registered in {time.monotonic() - started:.1f} s")
    if deferred and offline is not None:
        started = time.monotonic()
        offline(deferred)
        progress(
            f"{len(missing)} devices written into Mosquitto's dynsec file "
            f"(Mosquitto restarted) in {time.monotonic() - started:.1f} s"
        )
    return len(missing), len(lost)
