"""The ``/ops`` routes on the registry: devices (read with their presence, added, changed,
their credentials), groups and tenants. Checked against the caller's role and tenant here; the
registry checks its own rights again and audits every change under the caller's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from api.console.operators import Operators
from api.operator.feed import FleetFeed
from api.operator.model import (
    Caller,
    Operation,
    bad_request,
    command_tenant,
    command_view,
    device_view,
    groups_of,
    not_found,
    parse_limit,
    presence_matches,
    reaches,
    require,
    scoped_tenant,
)
from api.operator.requests import actor_of, caller_of, json_response, read_body, registry_error
from registry.errors import RegistryError
from registry.model import Quotas
from registry.service import Registry
from registry.topics import device_username

T = TypeVar("T")


class RegistryRoutes:
    """The registry's half of :class:`api.operator.app.OperatorHandlers` (its base class)."""

    operators: Operators
    feed: FleetFeed

    async def _ready(self) -> None:
        raise NotImplementedError  # OperatorHandlers starts the registry reader and the feed

    async def _read(self, caller: Caller, what: Callable[[Registry], T]) -> T:
        await self._ready()
        try:
            return await self.operators.aread(actor_of(caller), what)
        except RegistryError as exc:
            raise registry_error(exc) from None

    async def _write(self, caller: Caller, change: Callable[[Registry], T]) -> T:
        await self._ready()
        try:
            return await self.operators.awrite(actor_of(caller), change)
        except RegistryError as exc:
            raise registry_error(exc) from None
        except ValueError as exc:
            raise bad_request(str(exc)) from None

    def _device_path(self, request: web.Request, caller: Caller) -> tuple[str, str]:
        tenant, device_id = request.match_info["tenant"], request.match_info["id"]
        if not reaches(caller, tenant):  # another tenant's: as if it did not exist
            raise not_found(f"no device {device_id!r} in tenant {tenant!r}")
        return tenant, device_id

    # --- devices -----------------------------------------------------------------------------

    async def list_devices(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        q = request.query
        asked = q.get("tenant")
        tenant = scoped_tenant(caller, asked) if asked or caller.tenant else None
        found = await self._read(
            caller,
            lambda r: r.devices(tenant=tenant, search=q.get("q") or None,
                                group=q.get("group") or None),
        )  # fmt: skip
        rows = [device_view(d, self.feed.seen(d.tenant, d.id)) for d in found]
        state = q.get("state")
        rows = [r for r in rows if presence_matches(r, state)]
        limit = parse_limit(q.get("limit"), 1000, 10000)
        offset = int(q["offset"]) if q.get("offset", "").isdigit() else 0
        return json_response(
            {"total": len(rows), "online": sum(1 for r in rows if r["online"]),
             "devices": rows[offset : offset + limit]}
        )  # fmt: skip

    async def get_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        tenant, device_id = self._device_path(request, caller)
        device = await self._read(caller, lambda r: r.device(tenant, device_id))
        view = device_view(device, self.feed.seen(tenant, device_id))
        recent = [
            command_view(c) for c in self.feed.commands()
            if c.get("device_id") == device_id and command_tenant(c) == tenant
        ]  # fmt: skip
        view["username"] = device_username(tenant, device_id)
        view["commands"] = recent[::-1][:20]
        return json_response(view)

    # --- registry: devices and their credentials --------------------------------------------

    async def add_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        body = await read_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            raise bad_request('Give {"id": "<device id>"} (and tenant, groups, certificate).')
        asked = body.get("tenant")
        tenant = scoped_tenant(caller, asked if isinstance(asked, str) else None)
        device_id, groups = body["id"], groups_of(body.get("groups"))
        cert = body.get("certificate")
        if cert is not None and not isinstance(cert, str):
            raise bad_request("certificate must be a SHA-256 fingerprint (hex).")
        with_secret = body.get("secret", True) is not False
        issued = await self._write(
            caller, lambda r: r.add_device(tenant, device_id, groups, cert, with_secret)
        )
        device = issued.entity
        return json_response(
            {"device": device_view(device, {}), "secret": issued.secret,
             "username": device_username(tenant, device_id)}, 201,
        )  # fmt: skip

    async def _change(self, request: web.Request, change: Callable[..., Any]) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        tenant, device_id = self._device_path(request, caller)
        body = await read_body(request)
        changed = await self._write(caller, lambda r: change(r, tenant, device_id, body))
        return json_response({"device": device_view(changed, self.feed.seen(tenant, device_id))})

    async def disable_device(self, request: web.Request) -> web.Response:
        return await self._change(request, lambda r, t, d, _b: r.set_device_disabled(t, d, True))

    async def enable_device(self, request: web.Request) -> web.Response:
        return await self._change(request, lambda r, t, d, _b: r.set_device_disabled(t, d, False))

    async def set_device_groups(self, request: web.Request) -> web.Response:
        def change(r: Registry, tenant: str, device_id: str, body: Any) -> Any:
            if not isinstance(body, dict):
                raise bad_request('Give {"add": [...], "remove": [...]}.')
            add, remove = groups_of(body.get("add"), "add"), groups_of(body.get("remove"), "remove")
            return r.set_device_groups(tenant, device_id, add, remove)

        return await self._change(request, change)

    async def set_device_certificate(self, request: web.Request) -> web.Response:
        def change(r: Registry, tenant: str, device_id: str, body: Any) -> Any:
            fingerprint = body.get("fingerprint") if isinstance(body, dict) else None
            if not isinstance(fingerprint, str):
                raise bad_request('Give {"fingerprint": "<SHA-256 of the certificate>"}.')
            r.device(tenant, device_id)  # an unknown device is 404, not added
            return r.record_certificate(tenant, device_id, fingerprint)

        return await self._change(request, change)

    async def rotate_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        tenant, device_id = self._device_path(request, caller)
        issued = await self._write(caller, lambda r: r.rotate_device(tenant, device_id))
        return json_response({"device": device_view(issued.entity, {}), "secret": issued.secret,
                      "username": device_username(tenant, device_id)})  # fmt: skip

    async def delete_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        tenant, device_id = self._device_path(request, caller)
        await self._write(caller, lambda r: r.delete_device(tenant, device_id))
        return json_response({"deleted": device_username(tenant, device_id)})

    async def list_groups(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        asked = request.query.get("tenant")
        tenant = scoped_tenant(caller, asked) if asked or caller.tenant else None
        found = await self._read(caller, lambda r: r.devices(tenant=tenant))
        groups: dict[tuple[str, str], list[str]] = {}
        for d in found:
            for g in d.groups:
                groups.setdefault((d.tenant, g), []).append(d.id)
        return json_response({"groups": [{"tenant": t, "name": g, "devices": sorted(ids)}
                                 for (t, g), ids in sorted(groups.items())]})  # fmt: skip

    # --- registry: tenants -------------------------------------------------------------------

    async def list_tenants(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        found = await self._read(caller, lambda r: r.tenants())
        return json_response({"tenants": [_tenant_view(t) for t in found if reaches(caller, t.id)]})

    async def create_tenant(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.TENANTS)
        body = await read_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            raise bad_request('Give {"id": "<tenant>"} (and "devices", "msgs_per_s" quotas).')
        try:
            quotas = Quotas(devices=body.get("devices"), msgs_per_s=body.get("msgs_per_s"))
        except (RegistryError, TypeError) as exc:
            raise bad_request(str(exc)) from None
        tenant = await self._write(caller, lambda r: r.create_tenant(body["id"], quotas))
        return json_response(_tenant_view(tenant), 201)

    async def _tenant_disabled(self, request: web.Request, disabled: bool) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.TENANTS)
        name = request.match_info["tenant"]
        tenant = await self._write(caller, lambda r: r.set_tenant_disabled(name, disabled))
        return json_response(_tenant_view(tenant))

    async def disable_tenant(self, request: web.Request) -> web.Response:
        return await self._tenant_disabled(request, True)

    async def enable_tenant(self, request: web.Request) -> web.Response:
        return await self._tenant_disabled(request, False)

    async def delete_tenant(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.TENANTS)
        name = request.match_info["tenant"]
        cascade = request.query.get("cascade", "").lower() in ("1", "true", "yes")
        await self._write(caller, lambda r: r.delete_tenant(name, cascade))
        return json_response({"deleted": name})


def _tenant_view(tenant: Any) -> dict[str, Any]:
    return {"id": tenant.id, "disabled": tenant.disabled, "quotas": vars(tenant.quotas),
            "created_at": tenant.created_at, "updated_at": tenant.updated_at}  # fmt: skip
