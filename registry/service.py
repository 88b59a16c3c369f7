"""The registry service: rules (model, permissions) + Kafka store + Mosquitto (service).

Order of every change: check the actor's rights, validate, commit entity + audit records to
Kafka in one transaction (the source of truth), update the in-memory state, then apply the
change to Mosquitto. If Mosquitto fails after Kafka committed, MosquittoOutOfStepError says so
(``iot-devices mosquitto sync`` re-applies everything except secrets; a secret that did not
reach Mosquitto needs a rotate, since the registry never keeps it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from registry import dynsec_plan as plan
from registry import hashing, ids
from registry.api_access import AccessKeys
from registry.core import Issued
from registry.dynsec import DynsecClient
from registry.errors import (
    ConflictError,
    NotFoundError,
)
from registry.kafka_store import KafkaStore
from registry.model import (
    Credentials,
    Device,
    Entity,
    Quotas,
    Role,
    ServiceAccount,
    Tenant,
    bump,
)
from registry.permissions import READ, WRITE, Actor


class Registry(AccessKeys):
    @classmethod
    def open(
        cls,
        store: KafkaStore,
        actor: Actor,
        mosquitto: DynsecClient | None = None,
        write: bool = False,
    ) -> Registry:
        """Load the state (after becoming the single writer when ``write``)."""
        registry = cls(store, actor, mosquitto)
        if write:
            store.open_writer()
            registry.writer = True
        registry.reload()
        return registry

    # --- tenants -------------------------------------------------------------------------------

    def tenants(self) -> list[Tenant]:
        return [t for _, t in sorted(self.state.tenants.items()) if self._may("tenant", READ, t.id)]

    def create_tenant(self, tenant_id: str, quotas: Quotas | None = None) -> Tenant:
        self._check("tenant", WRITE, None)
        if tenant_id in self.state.tenants:
            raise ConflictError(f"tenant {tenant_id!r} exists")
        now = self._now()
        tenant = Tenant(tenant_id, quotas or Quotas(), created_at=now, updated_at=now)
        self._commit("tenant.create", put=[tenant], detail={"quotas": vars(tenant.quotas)})
        return tenant

    def set_tenant_disabled(self, tenant_id: str, disabled: bool) -> Tenant:
        self._check("tenant", WRITE, None)
        old = self.tenant(tenant_id)
        new = bump(old, self._now(), disabled=disabled)
        cmds = plan.set_devices_enabled(self.state.devices_of(tenant_id), not disabled)
        cmds += plan.set_accounts_enabled(self._accounts_of(tenant_id), not disabled)
        self._commit("tenant.disable" if disabled else "tenant.enable", put=[new], commands=cmds)
        return new

    def set_quotas(self, tenant_id: str, quotas: Quotas) -> Tenant:
        self._check("tenant", WRITE, None)
        new = bump(self.tenant(tenant_id), self._now(), quotas=quotas)
        self._commit("tenant.quotas", put=[new], detail={"quotas": vars(quotas)})
        return new

    def delete_tenant(self, tenant_id: str, cascade: bool = False) -> None:
        self._check("tenant", WRITE, None)
        tenant = self.tenant(tenant_id)
        devices = self.state.devices_of(tenant_id)
        accounts = self._accounts_of(tenant_id)
        if (devices or accounts) and not cascade:
            raise ConflictError(
                f"tenant {tenant_id!r} has {len(devices)} device(s) and {len(accounts)} "
                "account(s): delete them first or use cascade"
            )
        cmds = [c for d in devices for c in plan.delete_device(d)]
        cmds += [c for a in accounts for c in plan.delete_account(a)]
        cmds += plan.delete_groups(tenant_id, (g for d in devices for g in d.groups))
        keys = [k for k in self.state.api_keys.values() if k.tenant == tenant_id]
        acls = [a for a in self.state.topic_acls.values() if a.tenant == tenant_id]
        gone: list[Entity] = [*devices, *accounts, *keys, *acls, tenant]
        self._commit("tenant.delete", delete=gone, commands=cmds)

    def _accounts_of(self, tenant_id: str) -> list[ServiceAccount]:
        return [a for _, a in sorted(self.state.accounts.items()) if a.tenant == tenant_id]

    # --- devices -------------------------------------------------------------------------------

    def device(self, tenant: str, device_id: str) -> Device:
        self._check("device", READ, tenant)
        found = self.state.devices.get((tenant, device_id))
        if found is None:
            raise NotFoundError(f"no device {device_id!r} in tenant {tenant!r}")
        return found

    def devices(
        self, tenant: str | None = None, search: str | None = None, group: str | None = None
    ) -> list[Device]:
        """Devices the actor may read, optionally of one tenant, whose id contains ``search``,
        in ``group``."""
        return [
            d
            for (t, i), d in sorted(self.state.devices.items())
            if (tenant is None or t == tenant)
            and (search is None or search.lower() in i.lower())
            and (group is None or group in d.groups)
            and self._may("device", READ, t)
        ]

    def add_device(
        self,
        tenant: str,
        device_id: str,
        groups: Iterable[str] = (),
        cert_fingerprint: str | None = None,
        with_secret: bool = True,
        *,
        site: str | None = None,
    ) -> Issued:
        fingerprint = hashing.normalise_fingerprint(cert_fingerprint) if cert_fingerprint else None
        return self.add_devices(tenant, [device_id], groups, fingerprint, with_secret, site=site)[0]

    def add_devices(
        self,
        tenant: str,
        device_ids: Sequence[str],
        groups: Iterable[str] = (),
        fingerprint: str | None = None,
        with_secret: bool = True,
        *,
        site: str | None = None,
        hash_params: hashing.ScryptParams = hashing.DEFAULT_PARAMS,
        deferred: list[plan.Command] | None = None,
    ) -> list[Issued]:
        """Register devices in one transaction and one batch of Mosquitto changes (bulk
        provisioning, e.g. a simulated fleet); all or none are added. With ``site`` they are
        behind that edge site: only it may publish and receive for them. The secrets are
        hashed on every core; ``hash_params`` lowers the scrypt cost for simulated fleets
        only (stack.provisioning says why that is acceptable there). With ``deferred`` the
        Mosquitto commands are appended to it instead of sent: the caller applies them."""
        self._check("device", WRITE, tenant)
        owner = self.tenant(tenant)
        self._check_site(tenant, site)
        if not device_ids:
            return []
        taken = [d for d in device_ids if (tenant, d) in self.state.devices]
        if taken or len(set(device_ids)) != len(device_ids):
            what = ", ".join(taken) if taken else "a repeated id"
            raise ConflictError(f"device(s) {what}: already exists in tenant {tenant!r}")
        limit = owner.quotas.devices
        if limit is not None and len(self.state.devices_of(tenant)) + len(device_ids) > limit:
            raise ConflictError(f"tenant {tenant!r} would exceed its quota of {limit} device(s)")
        now, group_list = self._now(), tuple(groups)
        issued: list[Issued] = []
        cmds: list[plan.Command] = []
        secrets = [hashing.generate_secret() if with_secret else None for _ in device_ids]
        hashes = iter(_hash_all([s for s in secrets if s], hash_params))
        for device_id, secret in zip(device_ids, secrets, strict=True):
            creds = Credentials(secret and next(hashes), fingerprint)
            device = Device(tenant, device_id, group_list, credentials=creds, site=site)
            device = replace(device, created_at=now, updated_at=now)
            cmds += plan.add_device(device, secret, owner.disabled)
            issued.append(Issued(device, secret))
        kinds = Credentials("-" if with_secret else None, fingerprint).kinds
        detail = {"groups": list(group_list), "credentials": kinds, "site": site}
        self._commit(
            "device.add",
            put=[i.entity for i in issued],
            commands=cmds,
            detail=detail,
            deferred=deferred,
        )
        return issued

    def _change_device(
        self, tenant: str, device_id: str, action: str, secret: str | None = None, **changes: Any
    ) -> Device:
        self._check("device", WRITE, tenant)
        old = self.device(tenant, device_id)
        new = bump(old, self._now(), **changes)
        cmds = plan.update_device(old, new, secret, self._tenant_disabled(tenant))
        detail = {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
        detail.pop("credentials", None)
        self._commit(action, put=[new], commands=cmds, detail=detail)
        return new

    def set_device_disabled(self, tenant: str, device_id: str, disabled: bool) -> Device:
        action = "device.disable" if disabled else "device.enable"
        return self._change_device(tenant, device_id, action, disabled=disabled)

    def rotate_device(self, tenant: str, device_id: str) -> Issued:
        """A new secret; the old one stops working at once (Mosquitto drops its connection)."""
        old = self.device(tenant, device_id)
        secret = hashing.generate_secret()
        creds = Credentials(hashing.hash_secret(secret), old.credentials.cert_fingerprint)
        new = self._change_device(
            tenant, device_id, "device.rotate", secret=secret, credentials=creds
        )
        return Issued(new, secret)

    def record_certificate(self, tenant: str, device_id: str, fingerprint: str) -> Device:
        """Record the fingerprint of the device's newest client certificate (``iot-devices
        cert``); a device not yet registered is added with this certificate only (no secret).
        The certificate itself is checked by Mosquitto against the CA and its CRL."""
        fp = hashing.normalise_fingerprint(fingerprint)
        if (tenant, device_id) not in self.state.devices:
            added = self.add_device(tenant, device_id, cert_fingerprint=fp, with_secret=False)
            assert isinstance(added.entity, Device)
            return added.entity
        old = self.device(tenant, device_id)
        creds = Credentials(old.credentials.secret_hash, fp)
        return self._change_device(tenant, device_id, "device.cert", credentials=creds)

    def set_device_groups(
        self, tenant: str, device_id: str, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Device:
        old = self.device(tenant, device_id)
        gone = set(remove)
        groups = [g for g in old.groups if g not in gone]
        groups += [g for g in dict.fromkeys(add) if g not in groups]
        return self._change_device(tenant, device_id, "device.groups", groups=tuple(groups))

    def _check_site(self, tenant: str, site: str | None) -> None:
        """A device's site must be an edge account of the device's own tenant."""
        if site is None:
            return
        account = self.state.accounts.get(site)
        if account is None or Role.EDGE not in account.roles or account.tenant != tenant:
            raise NotFoundError(f"no edge site {site!r} in tenant {tenant!r}")

    def site_devices(self, site: str) -> list[Device]:
        """The devices registered to the edge site ``site``."""
        account = self.account(site)
        return [d for d in self.devices(account.tenant) if d.site == site]

    def set_device_site(self, tenant: str, device_id: str, site: str | None) -> Device:
        """Put a device behind an edge site (or none): the old site loses its rules for it,
        the new one gains them."""
        self._check_site(tenant, site)
        return self._change_device(tenant, device_id, "device.site", site=site)

    def delete_device(self, tenant: str, device_id: str) -> None:
        self._check("device", WRITE, tenant)
        device = self.device(tenant, device_id)
        self._commit("device.delete", delete=[device], commands=plan.delete_device(device))

    def verify_device(self, tenant: str, device_id: str, secret: str) -> bool:
        """True if the device exists, is enabled (tenant too) and ``secret`` is its secret."""
        device = self.state.devices.get((tenant, device_id))
        usable = device is not None and not device.disabled and not self._tenant_disabled(tenant)
        stored = device.credentials.secret_hash if device is not None and usable else None
        return hashing.verify_in_constant_time(secret, stored)

    # --- service accounts ----------------------------------------------------------------------

    def account(self, name: str) -> ServiceAccount:
        found = self.state.accounts.get(name)
        if found is None:
            raise NotFoundError(f"no account {name!r}")
        self._check("account", READ, found.tenant)
        return found

    def accounts(self) -> list[ServiceAccount]:
        return [
            a
            for _, a in sorted(self.state.accounts.items())
            if self._may("account", READ, a.tenant)
        ]

    def create_account(
        self, name: str, roles: Sequence[Role], tenant: str | None = None, action: str = "create"
    ) -> Issued:
        self._check("account", WRITE, tenant)
        if name in self.state.accounts:
            raise ConflictError(f"account {name!r} exists")
        if tenant is not None:
            self.tenant(tenant)
        secret = hashing.generate_secret()
        now = self._now()
        account = ServiceAccount(
            ids.account_name(name),
            tuple(dict.fromkeys(roles)),
            tenant,
            credentials=Credentials(hashing.hash_secret(secret)),
            created_at=now,
            updated_at=now,
        )
        detail = {"roles": [str(r) for r in account.roles], "tenant": tenant}
        linked = [
            d
            for d in self.state.devices.values()
            if d.site == account.name and not d.disabled and not self._tenant_disabled(d.tenant)
        ]
        cmds = plan.add_account(account, secret, self._tenant_disabled(tenant), linked)
        self._commit(f"account.{action}", put=[account], commands=cmds, detail=detail)
        return Issued(account, secret)

    def bootstrap_admin(self, name: str) -> Issued:
        """The first administrator; refused once any administrator exists."""
        if any(Role.ADMIN in a.roles for a in self.state.accounts.values()):
            raise ConflictError("an administrator exists already: bootstrap is for the first one")
        return self.create_account(name, [Role.ADMIN], action="bootstrap")

    def _change_account(
        self, name: str, action: str, secret: str | None = None, **changes: Any
    ) -> ServiceAccount:
        old = self.account(name)
        self._check("account", WRITE, old.tenant)
        new = bump(old, self._now(), **changes)
        detail = {k: v for k, v in changes.items() if k != "credentials"}
        cmds = plan.update_account(old, new, secret, self._tenant_disabled(new.tenant))
        self._commit(action, put=[new], commands=cmds, detail=detail)
        return new

    def set_account_disabled(self, name: str, disabled: bool) -> ServiceAccount:
        action = "account.disable" if disabled else "account.enable"
        return self._change_account(name, action, disabled=disabled)

    def rotate_account(self, name: str) -> Issued:
        secret = hashing.generate_secret()
        new = self._change_account(
            name, "account.rotate", secret, credentials=Credentials(hashing.hash_secret(secret))
        )
        return Issued(new, secret)

    def delete_account(self, name: str) -> None:
        account = self.account(name)
        self._check("account", WRITE, account.tenant)
        linked = [d.id for d in self.state.devices.values() if d.site == name]
        if linked:
            raise ConflictError(
                f"edge site {name!r} still has {len(linked)} device(s): move them first"
            )
        self._commit("account.delete", delete=[account], commands=plan.delete_account(account))

    def authenticate_account(self, name: str, secret: str) -> Actor | None:
        """The actor behind ``name``/``secret`` (for the HTTP service), or None."""
        account = self.state.accounts.get(name)
        stored = None
        if (
            account is not None
            and not account.disabled
            and not self._tenant_disabled(account.tenant)
        ):
            stored = account.credentials.secret_hash
        if account is None or not hashing.verify_in_constant_time(secret, stored):
            return None
        return Actor(f"svc/{account.name}", account.roles, account.tenant)


def _hash_all(secrets: Sequence[str], params: hashing.ScryptParams) -> list[str]:
    """:func:`hashing.hash_secret` of each, one thread per CPU: OpenSSL's scrypt runs without
    the GIL, so a bulk of devices is hashed on every core."""
    if len(secrets) < 2:
        return [hashing.hash_secret(s, params) for s in secrets]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda s: hashing.hash_secret(s, params), secrets))
