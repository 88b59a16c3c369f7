"""Who may log in to the stack's Mosquitto: the registry's service accounts and devices.

Run by ``iot-stack up`` once Kafka and Mosquitto are up (and by docker-compose's one-shot
``auth-init`` service): creates the registry topics and the default tenant, the accounts of the
bridge (role ``bridge``) and of the command path (role ``commands``), and the simulator's
devices, in bulk and only the missing ones. Idempotent: secrets issued before are kept in 0600
files under the secrets dir and reused; a secret that was lost (or no longer verifies) is
rotated, never looked up (the registry keeps only hashes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from registry import ids
from registry.dynsec import DynsecClient
from registry.errors import RegistryError
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
# account name -> its role; the user name is svc/<name> (registry.topics)
SERVICE_ACCOUNTS: dict[str, Role] = {"bridge": Role.BRIDGE, "commands": Role.COMMANDS}


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
) -> Provisioned:
    admin = read_secret(admin_secret(secrets_dir))
    if admin is None:
        raise StackError(f"no registry admin secret in {admin_secret(secrets_dir)}")
    # right after a 3-node cluster starts, its transaction coordinator took 34 s to answer
    # (the 50-partition, 3-replica transaction-state topic is created on first use)
    store = KafkaStore(kafka_bootstrap, timeout=120.0)
    mosquitto: DynsecClient | None = None
    try:
        created = store.ensure_topics()
        if created:
            progress(f"created registry topics: {', '.join(created)}")
        mosquitto = DynsecClient(mqtt_host, mqtt_port, ADMIN_USERNAME, admin).start()
        registry = Registry.open(store, local_admin(ACTOR), mosquitto, write=True)
        return _provision(registry, mosquitto, secrets_dir, device_ids, progress)
    except RegistryError as exc:
        raise StackError(f"provisioning through the registry failed: {exc}") from exc
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
        registry, known, secrets_dir, device_ids
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
    registry: Registry, known: set[str], secrets_dir: Path, device_ids: Sequence[str]
) -> tuple[int, int]:
    """Add the missing devices in bulk; re-key registered ones whose secret was not kept."""
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
    for device_id, issued in zip(missing, registry.add_devices(tenant, missing), strict=True):
        assert issued.secret is not None
        creds[device_id] = issued.secret
    for device_id in lost:
        secret = registry.rotate_device(tenant, device_id).secret
        assert secret is not None
        creds[device_id] = secret
    write_credentials(path, creds)
    return len(missing), len(lost)
