"""Commands and devices over HTTP (issue 14 item 6): the handlers of the ``/ops`` routes.

Authenticated like the rest of iot-api (the app's wrapper puts the caller on the request), then
checked here against :data:`api.operator_model.ROLE_OPERATIONS` and the caller's tenant; the
registry checks its own rights again and audits every change under the caller's name
(``apikey/<key>`` or the account). Registry access is the console's (:class:`Operators`: a
shared reader, one writer per change, Mosquitto's dynamic security updated with it); fleet
knowledge comes from :class:`FleetFeed`; commands go through :class:`CommandPath`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from aiohttp import web

from api import sawmill, sawmill_kafka
from api.access import Principal
from api.config import ApiConfig
from api.console.operators import Operators
from api.errors import (
    ACCESS_NOT_PERMITTED,
    CREATE_TOPIC_FAIL,
    RESOURCE_NOT_FOUND,
    SERVER_UNAVAILABLE,
    ApiError,
)
from api.kafka_admin import NoSuchTopicError
from api.operator_feed import FleetFeed
from api.operator_kafka import CommandPath
from api.operator_model import (
    Caller,
    CommandFilter,
    Operation,
    bad_request,
    command_tenant,
    command_view,
    device_view,
    groups_of,
    not_found,
    parse_limit,
    parse_ms,
    parse_seconds,
    parse_send,
    presence_matches,
    reaches,
    require,
    scoped_tenant,
    sse_event,
    visible_commands,
)
from api.topic_access import PRINCIPAL
from bridge.topics import tenant_kafka_topic
from registry.errors import (
    ConflictError,
    ForbiddenError,
    MosquittoOutOfStepError,
    NotFoundError,
    RegistryError,
)
from registry.model import Quotas, Role
from registry.permissions import Actor
from registry.service import Registry
from registry.topics import device_username

log = logging.getLogger(__name__)
T = TypeVar("T")
ANONYMOUS = Caller("anonymous", (Role.ADMIN,), None)  # --insecure-anonymous only
_WAIT_STEP_S = 0.05
_REPLY_GRACE_S = 3.0


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )  # fmt: skip


def caller_of(request: web.Request) -> Caller:
    found = request.get(PRINCIPAL)
    if isinstance(found, Principal):
        name = f"apikey/{found.name}" if found.kind == "apikey" else found.name
        return Caller(name, found.roles, found.tenant)
    return ANONYMOUS


def _actor(caller: Caller) -> Actor:
    return Actor(caller.name, caller.roles, caller.tenant)


def registry_error(exc: RegistryError) -> ApiError:
    """The registry's refusal as MR's error body."""
    if isinstance(exc, NotFoundError):
        return ApiError(404, RESOURCE_NOT_FOUND, str(exc))
    if isinstance(exc, ForbiddenError):
        return ApiError(403, ACCESS_NOT_PERMITTED, str(exc))
    if isinstance(exc, ConflictError):
        return ApiError(409, CREATE_TOPIC_FAIL, str(exc))  # MR's "already exists"
    if isinstance(exc, MosquittoOutOfStepError):
        return ApiError(503, SERVER_UNAVAILABLE, str(exc))
    return bad_request(str(exc))


async def _body(request: web.Request, limit: int = 1 << 20) -> Any:
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        raise bad_request("The body is too large.")
    if not raw:
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("The body is not JSON.") from None


class OperatorHandlers:
    def __init__(self, cfg: ApiConfig) -> None:
        self.cfg = cfg
        self.operators = Operators(
            cfg.kafka_bootstrap, cfg.registry_topic, cfg.registry_mqtt_host,
            cfg.registry_mqtt_port, cfg.registry_admin_password_file,
        )  # fmt: skip
        self.feed = FleetFeed(cfg.kafka_bootstrap, cfg.topic_command_status,
                              cfg.topic_command_replies)  # fmt: skip
        self.path: CommandPath | None = None
        self._started = asyncio.Lock()
        self.closing = asyncio.Event()

    async def _ready(self) -> None:
        """Registry reader, command producer and fleet feed, on the first request."""
        async with self._started:
            if self.operators.registry is None:
                await asyncio.to_thread(self.operators.start)
            if self.path is None:
                cfg = self.cfg
                self.path = await asyncio.to_thread(
                    CommandPath, cfg.kafka_bootstrap, cfg.topic_commands,
                    cfg.topic_command_status, cfg.topic_command_replies,
                )  # fmt: skip
        await self.feed.ensure_started()

    async def close(self) -> None:
        self.closing.set()
        await asyncio.to_thread(self.feed.stop)
        # librdkafka frees a producer only with the object, and the handlers outlive the
        # service while anything references the app: let go of the command path, or its
        # two producers stay alive (and reconnect to a stopped Kafka) as long as they do
        path, self.path = self.path, None
        if path is not None:
            await asyncio.to_thread(path.close)
        self.operators.close()

    async def _read(self, caller: Caller, what: Callable[[Registry], T]) -> T:
        await self._ready()
        try:
            return await self.operators.aread(_actor(caller), what)
        except RegistryError as exc:
            raise registry_error(exc) from None

    async def _write(self, caller: Caller, change: Callable[[Registry], T]) -> T:
        await self._ready()
        try:
            return await self.operators.awrite(_actor(caller), change)
        except RegistryError as exc:
            raise registry_error(exc) from None
        except ValueError as exc:
            raise bad_request(str(exc)) from None

    def _device_path(self, request: web.Request, caller: Caller) -> tuple[str, str]:
        tenant, device_id = request.match_info["tenant"], request.match_info["id"]
        if not reaches(caller, tenant):  # another tenant's: as if it did not exist
            raise not_found(f"no device {device_id!r} in tenant {tenant!r}")
        return tenant, device_id

    # --- commands ----------------------------------------------------------------------------

    async def send_command(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.SEND)
        wanted = parse_send(await _body(request), caller)
        wait_s = parse_seconds(request.query.get("wait"), "wait", self.cfg.command_wait_max_s)
        if wanted.group is None:  # a device of the caller's tenant, known to the registry
            await self._read(caller, lambda r: r.device(wanted.tenant, wanted.key))
        await self._ready()
        assert self.path is not None
        cid = await asyncio.to_thread(self.path.send, wanted)
        log.info("command %s (%s) to %s/%s by %s", cid, wanted.name, wanted.tenant, wanted.key,
                 caller.name)  # fmt: skip
        found: dict[str, Any] | None = None
        deadline = time.monotonic() + wait_s
        while wait_s > 0 and time.monotonic() < deadline:
            found = self.feed.command(cid)
            if found is not None and command_view(found)["final"]:
                break
            await asyncio.sleep(_WAIT_STEP_S)
        # the reply travels on its own topic: a final state may be read before it
        answered = wanted.reply_expected and found is not None and found.get("state") in (
            "succeeded", "failed",
        )  # fmt: skip
        deadline = min(deadline, time.monotonic() + _REPLY_GRACE_S)
        while answered and found is not None and not found.get("replies"):
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(_WAIT_STEP_S)
            found = self.feed.command(cid) or found
        view = command_view(found or {"command_id": cid, "device_id": wanted.key,
                                      "name": wanted.name, "args": wanted.args})  # fmt: skip
        view["tenant"] = wanted.tenant
        return _json(view, 200 if view["final"] else 202)

    async def get_command(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        await self._ready()
        cid = request.match_info["command_id"]
        found = self.feed.command(cid)
        if found is None:
            assert self.path is not None
            found = await asyncio.to_thread(self.path.last_status, cid)
        if found is None or not reaches(caller, command_tenant(found)):
            raise not_found(f"No command [{cid}].")
        return _json(command_view(found))

    async def list_commands(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        q = request.query
        tenant = q.get("tenant")
        if tenant is not None and not reaches(caller, tenant):
            raise not_found(f"No tenant [{tenant}].")
        since = parse_ms(q.get("since"), "since")
        until = parse_ms(q.get("until"), "until")
        wanted = CommandFilter(q.get("device") or None, q.get("status") or None, since, until)
        limit = parse_limit(q.get("limit"), 100, 1000)
        await self._ready()
        assert self.path is not None
        found = await asyncio.to_thread(
            self.path.history, since, until, self.cfg.command_history_scan_max
        )
        merged = {e["command_id"]: e for e in found}
        merged |= {e["command_id"]: e for e in self.feed.commands()}  # with replies
        entries = [e for e in merged.values() if tenant is None or command_tenant(e) == tenant]
        return _json({"commands": visible_commands(entries, caller, wanted, limit)})

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
        return _json(
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
        return _json(view)

    async def device_telemetry_stream(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the device's telemetry records as they arrive."""
        caller = caller_of(request)
        require(caller, Operation.READ)
        tenant, device_id = self._device_path(request, caller)
        await self._read(caller, lambda r: r.device(tenant, device_id))
        topic = tenant_kafka_topic(self.cfg.topic_telemetry, tenant)
        try:
            follower = await asyncio.to_thread(
                sawmill_kafka.Follower, self.cfg.kafka_bootstrap, topic, sawmill.parse_start("end")
            )
        except NoSuchTopicError:
            raise not_found(f"No telemetry yet for tenant [{tenant}] ({topic}).") from None
        try:
            return await self._stream(request, follower, device_id.encode())
        finally:
            await asyncio.to_thread(follower.close)

    async def _stream(
        self, request: web.Request, follower: sawmill_kafka.Follower, key: bytes
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=sawmill.SSE_HEADERS)
        await response.prepare(request)
        await response.write(sawmill.sse_retry(1000))
        quiet_since = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            while not self.closing.is_set():
                batch = await asyncio.to_thread(follower.poll, 500, 0.5)
                chunks = [
                    sse_event("telemetry", f"{m.partition}:{m.offset}", m.value)
                    for m in batch
                    if m.key == key and b"\n" not in m.value
                ]
                if chunks:
                    await response.write(b"".join(chunks))
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since >= self.cfg.sse_heartbeat_s:
                    await response.write(sawmill.SSE_HEARTBEAT)  # also finds a client gone
                    quiet_since = time.monotonic()
            await response.write_eof()
        return response

    # --- registry: devices and their credentials --------------------------------------------

    async def add_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        body = await _body(request)
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
        return _json(
            {"device": device_view(device, {}), "secret": issued.secret,
             "username": device_username(tenant, device_id)}, 201,
        )  # fmt: skip

    async def _change(self, request: web.Request, change: Callable[..., Any]) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        tenant, device_id = self._device_path(request, caller)
        body = await _body(request)
        changed = await self._write(caller, lambda r: change(r, tenant, device_id, body))
        return _json({"device": device_view(changed, self.feed.seen(tenant, device_id))})

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
        return _json({"device": device_view(issued.entity, {}), "secret": issued.secret,
                      "username": device_username(tenant, device_id)})  # fmt: skip

    async def delete_device(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.DEVICES)
        tenant, device_id = self._device_path(request, caller)
        await self._write(caller, lambda r: r.delete_device(tenant, device_id))
        return _json({"deleted": device_username(tenant, device_id)})

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
        return _json({"groups": [{"tenant": t, "name": g, "devices": sorted(ids)}
                                 for (t, g), ids in sorted(groups.items())]})  # fmt: skip

    # --- registry: tenants -------------------------------------------------------------------

    async def list_tenants(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.READ)
        found = await self._read(caller, lambda r: r.tenants())
        return _json({"tenants": [_tenant_view(t) for t in found if reaches(caller, t.id)]})

    async def create_tenant(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.TENANTS)
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            raise bad_request('Give {"id": "<tenant>"} (and "devices", "msgs_per_s" quotas).')
        try:
            quotas = Quotas(devices=body.get("devices"), msgs_per_s=body.get("msgs_per_s"))
        except (RegistryError, TypeError) as exc:
            raise bad_request(str(exc)) from None
        tenant = await self._write(caller, lambda r: r.create_tenant(body["id"], quotas))
        return _json(_tenant_view(tenant), 201)

    async def _tenant_disabled(self, request: web.Request, disabled: bool) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.TENANTS)
        name = request.match_info["tenant"]
        tenant = await self._write(caller, lambda r: r.set_tenant_disabled(name, disabled))
        return _json(_tenant_view(tenant))

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
        return _json({"deleted": name})


def _tenant_view(tenant: Any) -> dict[str, Any]:
    return {"id": tenant.id, "disabled": tenant.disabled, "quotas": vars(tenant.quotas),
            "created_at": tenant.created_at, "updated_at": tenant.updated_at}  # fmt: skip
