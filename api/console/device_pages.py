"""The Devices and Commands pages' data (``/console/api/devices``, ``/console/api/commands``):
the registry's devices with what the tailer saw of them, provisioning and changes, the command
history (from memory, or read back from ``iot.command-status``) and sending a command."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from api.console import roles
from api.console.context import (
    CONSOLE_KEY,
    int_param,
    json_body,
    json_response,
    need,
    now_ms,
    problem,
    scan_note,
)
from api.console.fleet import FleetState, device_json, letter_view
from api.console.kafka_records import Raw
from commands.client import command_record, new_command_id
from commands.model import parse_target
from registry.errors import RegistryError
from registry.topics import device_username

PAGE_SIZES = (25, 50, 100, 200)
STATUS_TOPIC = "iot.command-status"


# --- devices -------------------------------------------------------------------------------


async def devices(request: web.Request) -> web.Response:
    session = need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    q = request.query
    search = q.get("q") or None
    state = q.get("state", "")
    found = await console.operators.aread(
        session.actor, lambda r: r.devices(tenant=q.get("tenant") or None, search=search)
    )
    now = now_ms()
    with console.tailer.lock:
        rows = [
            device_json(d) | console.fleet.device_row(device_username(d.tenant, d.id), now)
            for d in found
        ]
    if state in ("online", "offline"):
        rows = [r for r in rows if bool(r["online"]) == (state == "online")]
    size = int_param(q.get("size"), 50, 1, max(PAGE_SIZES))
    page = int_param(q.get("page"), 1, 1, 10**6)
    start = (page - 1) * size
    return json_response(
        {"total": len(rows), "page": page, "size": size, "rows": rows[start : start + size],
         "online": sum(1 for r in rows if r["online"])}
    )  # fmt: skip


async def device(request: web.Request) -> web.Response:
    session = need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    tenant, device_id = request.match_info["tenant"], request.match_info["id"]
    try:
        found = await console.operators.aread(session.actor, lambda r: r.device(tenant, device_id))
    except RegistryError as exc:
        return problem(404, str(exc))
    key = device_username(tenant, device_id)
    with console.tailer.lock:
        seen = console.fleet.devices.get(key)
        row = console.fleet.device_row(key, now_ms())
        points = [{"at": at, "metrics": m} for at, m in seen.points] if seen else []
        events = list(seen.events) if seen else []
        commands = [c for c in console.fleet.commands.values() if c.get("device_id") == key]
        letters = [letter_view(x) for x in console.fleet.dlq.values()
                   if (x.tenant, x.key) == (tenant, device_id)]  # fmt: skip
    return json_response(
        device_json(found) | row
        | {"points": points[::-1], "events": events, "commands": commands[::-1][:50],
           "dead_letters": letters[::-1][:50] if roles.may(session.actor, roles.VIEW_DLQ)
           else []}
    )  # fmt: skip


def _groups(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        raise web.HTTPBadRequest(reason="groups must be a list")
    return [str(g).strip() for g in value if str(g).strip()]


async def provision(request: web.Request) -> web.Response:
    session = need(request, roles.MANAGE_DEVICES)
    console = request.app[CONSOLE_KEY]
    body = await json_body(request)
    tenant = str(body.get("tenant") or session.actor.tenant or "default")
    device_id = str(body.get("id", "")).strip()
    groups = _groups(body.get("groups", []))
    try:
        issued = await console.operators.awrite(
            session.actor, lambda r: r.add_device(tenant, device_id, groups)
        )
    except (RegistryError, ValueError) as exc:
        return problem(409 if "exists" in str(exc) else 400, str(exc))
    return json_response(
        {"device": device_json(issued.entity), "secret": issued.secret,
         "username": device_username(tenant, device_id)}
    )  # fmt: skip


async def change_device(request: web.Request) -> web.Response:
    session = need(request, roles.MANAGE_DEVICES)
    console = request.app[CONSOLE_KEY]
    tenant, device_id = request.match_info["tenant"], request.match_info["id"]
    action = request.match_info["action"]
    body = await json_body(request)
    try:
        if action == "rotate":
            issued = await console.operators.awrite(
                session.actor, lambda r: r.rotate_device(tenant, device_id)
            )
            return json_response({"device": device_json(issued.entity), "secret": issued.secret})
        if action == "disable":
            off = bool(body.get("disabled", True))
            changed = await console.operators.awrite(
                session.actor, lambda r: r.set_device_disabled(tenant, device_id, off)
            )
        elif action == "groups":
            add, remove = _groups(body.get("add", [])), _groups(body.get("remove", []))
            changed = await console.operators.awrite(
                session.actor, lambda r: r.set_device_groups(tenant, device_id, add, remove)
            )
        else:
            raise web.HTTPNotFound()
    except (RegistryError, ValueError) as exc:
        return problem(403 if "may not" in str(exc) else 400, str(exc))
    return json_response({"device": device_json(changed)})


# --- commands ------------------------------------------------------------------------------


def _visible_keys(console: Any, actor: Any) -> set[str] | None:
    """Device keys a tenant-scoped actor may see (None: all)."""
    if actor.tenant is None:
        return None
    found = console.operators.read(actor, lambda r: r.devices(tenant=actor.tenant))
    return {device_username(d.tenant, d.id) for d in found}


def _command_rows(
    entries: Any, keys: set[str] | None, target: str | None, state: str | None
) -> list[dict[str, Any]]:
    return [
        c for c in entries
        if (keys is None or c.get("device_id") in keys)
        and (target is None or target in str(c.get("device_id", "")))
        and (state is None or c.get("state") == state)
        and (c.get("states") or c.get("replies"))
    ]  # fmt: skip


def _commands_of(found: list[Raw], memory: FleetState) -> list[dict[str, Any]]:
    """Command entries (newest first) rebuilt from status records a scan found, with the
    replies the console has in memory."""
    state = FleetState()
    for r in sorted(found, key=lambda r: (r.timestamp, r.partition, r.offset)):
        state.apply("status", partition=r.partition, offset=r.offset, key=r.key, value=r.value,
                    headers=r.headers, timestamp=r.timestamp)  # fmt: skip
    out = []
    for cid, entry in reversed(state.commands.items()):
        known = memory.commands.get(cid)
        out.append(entry | {"replies": list(known["replies"]) if known else []})
    return out


async def commands(request: web.Request) -> web.Response:
    """Command history: from memory when it holds the answer (the whole topic, or enough
    matches among the newest), else read back through ``iot.command-status`` (bounded)."""
    session = need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    q = request.query
    keys = await asyncio.to_thread(_visible_keys, console, session.actor)
    target, state = q.get("target") or None, q.get("state") or None
    since = int(q["since"]) if q.get("since", "").isdigit() else None
    until = int(q["until"]) if q.get("until", "").isdigit() else None
    limit = int_param(q.get("limit"), 100, 1, 1000)
    fleet = console.fleet
    with console.tailer.lock:
        rows = _command_rows(reversed(fleet.commands.values()), keys, target, state)
        rows = [c for c in rows if (since is None or c.get("at", 0) >= since)
                and (until is None or c.get("at", 0) <= until)]  # fmt: skip
        rows = orjson.loads(orjson.dumps(rows[:limit]))  # a copy: the tailer changes them
        whole = fleet.complete.get("status", False)
    scan = None
    if not whole and len(rows) < limit:

        def match(r: Raw) -> bool:
            doc = _loads(r.value)
            dev = str(doc.get("device_id") or "") if isinstance(doc, dict) else ""
            return (keys is None or dev in keys) and (target is None or target in dev)

        def enough(found: list[Raw]) -> bool:
            with console.tailer.lock:
                built = _commands_of(found, fleet)
            return len(_command_rows(built, keys, None, state)) >= limit

        scan = await asyncio.to_thread(
            console.kafka.scan_back, STATUS_TOPIC, match, enough, since_ms=since, until_ms=until
        )
        with console.tailer.lock:
            built = _commands_of(scan.matched, fleet)
        rows = _command_rows(built, keys, None, state)[:limit]
    return json_response({"rows": rows} | scan_note(scan, STATUS_TOPIC))


def _loads(value: bytes | None) -> Any:
    try:
        return orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None


async def command(request: web.Request) -> web.Response:
    session = need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    keys = await asyncio.to_thread(_visible_keys, console, session.actor)
    with console.tailer.lock:
        found = console.fleet.commands.get(request.match_info["cid"])
        found = orjson.loads(orjson.dumps(found)) if found else None
    if found is None or (keys is not None and found.get("device_id") not in keys):
        return json_response({"command_id": request.match_info["cid"], "state": None,
                              "states": [], "replies": []})  # fmt: skip
    return json_response(found)


async def send_command(request: web.Request) -> web.Response:
    session = need(request, roles.SEND_COMMANDS)
    console = request.app[CONSOLE_KEY]
    body = await json_body(request)
    kind, target = str(body.get("kind", "device")), str(body.get("target", "")).strip()
    name = str(body.get("name", "")).strip()
    args = body.get("args") or {}
    if not name or not isinstance(args, dict):
        return problem(400, "give a command name and args as a JSON object")
    timeout_ms = int_param(str(body.get("timeout_ms") or ""), 10000, 100, 3_600_000)
    actor = session.actor
    if kind == "group":
        if actor.tenant is not None:
            return problem(
                403, "group commands reach every tenant's devices: not for tenant admins"
            )
        key = f"group:{target}"
    else:
        tenant = str(body.get("tenant") or actor.tenant or "default")
        try:
            await console.operators.aread(actor, lambda r: r.device(tenant, target))
        except RegistryError as exc:
            return problem(404 if "no device" in str(exc) else 403, str(exc))
        key = device_username(tenant, target)
    if parse_target(key) is None:
        return problem(400, f"not a device id or group: {target!r}")
    cid = new_command_id()
    doc = command_record(cid, name, args, timeout_ms=timeout_ms)
    await asyncio.to_thread(
        console.kafka.produce, "iot.commands", key.encode(), orjson.dumps(doc), []
    )
    await console.audit(session, "command.send", cid, target=key, name=name)
    return json_response({"command_id": cid, "target": key})
