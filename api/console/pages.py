"""The data behind each page (``/console/api/...``): JSON for the browser, rights checked here
(the console's role table) and again by the registry for its own changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from api.console import roles
from api.console.analytics import read_table
from api.console.context import CONSOLE_KEY, json_response, problem, session_of
from api.console.fleet import DeadLetter, FleetState, dead_letter, letter_view
from api.console.kafka_view import SCAN_BUDGET_S, SCAN_MAX_RECORDS, Raw, Scan
from api.console.letter_refs import may_see, parse_ref, topics_to_search
from api.console.operators import device_json
from api.console.replay import OTHER_TENANT, Refused, plan_replay
from api.console.tailer import tenant_copies
from bridge.mapping import ErrorCode
from bridge.topics import tenant_kafka_topic
from commands.client import command_record, new_command_id
from commands.model import parse_target
from registry.errors import RegistryError
from registry.model import Quotas
from registry.topics import device_username

PAGE_SIZES = (25, 50, 100, 200)
DLQ_TOPIC = "iot.dlq"
STATUS_TOPIC = "iot.command-status"


def _need(request: web.Request, capability: str) -> Any:
    session = session_of(request)
    if not roles.may(session.actor, capability):
        raise web.HTTPForbidden(reason=f"your role may not {capability.replace('_', ' ')}")
    return session


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=orjson.loads)
    except ValueError:
        raise web.HTTPBadRequest(reason="the body is not JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(reason="the body must be a JSON object")
    return body


def _int(text: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(text or default), low), high)
    except ValueError:
        return default


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- overview ------------------------------------------------------------------------------


def scoped(latest: dict[str, Any], tenant: str | None) -> dict[str, Any]:
    """A sample as a tenant-scoped operator may see it: its own tenant's rates and sites."""
    if tenant is None:
        return latest
    out = dict(latest)
    if isinstance(out.get("point"), dict):
        point = dict(out["point"])
        point["tenants"] = {k: v for k, v in (point.get("tenants") or {}).items() if k == tenant}
        out["point"] = point
    if "tenants" in out:
        out["tenants"] = {k: v for k, v in (out["tenants"] or {}).items() if k == tenant}
    if isinstance(out.get("sites"), list):
        out["sites"] = [s for s in out["sites"] if s.get("tenant") == tenant]
    return out


async def overview(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    tenant = session.actor.tenant
    return json_response(
        {"history": [scoped({"point": p}, tenant)["point"]
                     for p in console.sampler.history.points()],
         "latest": scoped(console.sampler.latest, tenant),
         "services": list(console.cfg.services()),
         "sites_watched": console.sites is not None}
    )  # fmt: skip


# --- devices -------------------------------------------------------------------------------


async def devices(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    q = request.query
    search = q.get("q") or None
    state = q.get("state", "")
    found = await console.operators.aread(
        session.actor, lambda r: r.devices(tenant=q.get("tenant") or None, search=search)
    )
    now = _now_ms()
    with console.tailer.lock:
        rows = [
            device_json(d) | console.fleet.device_row(device_username(d.tenant, d.id), now)
            for d in found
        ]
    if state in ("online", "offline"):
        rows = [r for r in rows if bool(r["online"]) == (state == "online")]
    size = _int(q.get("size"), 50, 1, max(PAGE_SIZES))
    page = _int(q.get("page"), 1, 1, 10**6)
    start = (page - 1) * size
    return json_response(
        {"total": len(rows), "page": page, "size": size, "rows": rows[start : start + size],
         "online": sum(1 for r in rows if r["online"])}
    )  # fmt: skip


async def device(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    tenant, device_id = request.match_info["tenant"], request.match_info["id"]
    try:
        found = await console.operators.aread(session.actor, lambda r: r.device(tenant, device_id))
    except RegistryError as exc:
        return problem(404, str(exc))
    key = device_username(tenant, device_id)
    with console.tailer.lock:
        seen = console.fleet.devices.get(key)
        row = console.fleet.device_row(key, _now_ms())
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
    session = _need(request, roles.MANAGE_DEVICES)
    console = request.app[CONSOLE_KEY]
    body = await _body(request)
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
    session = _need(request, roles.MANAGE_DEVICES)
    console = request.app[CONSOLE_KEY]
    tenant, device_id = request.match_info["tenant"], request.match_info["id"]
    action = request.match_info["action"]
    body = await _body(request)
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


def _scan_note(scan: Scan | None, topic: str) -> dict[str, Any]:
    if scan is None:
        return {"source": "memory", "scanned": 0, "complete": True, "oldest": None}
    return {"source": f"kafka:{topic}", "scanned": scan.scanned, "complete": scan.complete,
            "oldest": scan.oldest_ms}  # fmt: skip


async def commands(request: web.Request) -> web.Response:
    """Command history: from memory when it holds the answer (the whole topic, or enough
    matches among the newest), else read back through ``iot.command-status`` (bounded)."""
    session = _need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    q = request.query
    keys = await asyncio.to_thread(_visible_keys, console, session.actor)
    target, state = q.get("target") or None, q.get("state") or None
    since = int(q["since"]) if q.get("since", "").isdigit() else None
    until = int(q["until"]) if q.get("until", "").isdigit() else None
    limit = _int(q.get("limit"), 100, 1, 1000)
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
    return json_response({"rows": rows} | _scan_note(scan, STATUS_TOPIC))


def _loads(value: bytes | None) -> Any:
    try:
        return orjson.loads(value or b"")
    except orjson.JSONDecodeError:
        return None


async def command(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_FLEET)
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
    session = _need(request, roles.SEND_COMMANDS)
    console = request.app[CONSOLE_KEY]
    body = await _body(request)
    kind, target = str(body.get("kind", "device")), str(body.get("target", "")).strip()
    name = str(body.get("name", "")).strip()
    args = body.get("args") or {}
    if not name or not isinstance(args, dict):
        return problem(400, "give a command name and args as a JSON object")
    timeout_ms = _int(str(body.get("timeout_ms") or ""), 10000, 100, 3_600_000)
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


# --- topics --------------------------------------------------------------------------------


async def topics(request: web.Request) -> web.Response:
    _need(request, roles.VIEW_KAFKA)
    console = request.app[CONSOLE_KEY]
    found, groups = await asyncio.gather(
        asyncio.to_thread(console.kafka.topics), asyncio.to_thread(console.kafka.groups)
    )
    return json_response({"topics": found, "groups": groups})


async def records(request: web.Request) -> web.Response:
    _need(request, roles.VIEW_KAFKA)
    console = request.app[CONSOLE_KEY]
    q = request.query
    partition = int(q["partition"]) if q.get("partition", "").isdigit() else None
    offset = int(q["offset"]) if q.get("offset", "").isdigit() else None
    at = int(q["at"]) if q.get("at", "").isdigit() else None
    if offset is not None and partition is None:
        return problem(400, "an offset needs a partition")
    limit = _int(q.get("limit"), 50, 1, 500)
    try:
        found = await asyncio.to_thread(
            lambda: console.kafka.browse(
                request.match_info["topic"], partition=partition, offset=offset, at_ms=at,
                limit=limit,
            )
        )  # fmt: skip
    except KeyError:
        return problem(404, f"no topic {request.match_info['topic']!r}")
    return json_response({"records": found})


# --- dead letters --------------------------------------------------------------------------


def _dlq_topics(
    console: Any, actor_tenant: str | None, tenant: str | None
) -> list[tuple[str, str]]:
    """The DLQ topics (and their tenants) a search reads: every tenant's an account may see."""
    known = {
        name: t
        for name, (_, t) in tenant_copies({"dlq": DLQ_TOPIC}, console.kafka.topic_names()).items()
    }
    return topics_to_search(DLQ_TOPIC, known, actor_tenant, tenant)


def _scan_many(
    console: Any,
    topics: list[tuple[str, str]],
    match: Callable[[str, Raw], bool],
    *,
    limit: int,
    since_ms: int | None,
    until_ms: int | None,
) -> tuple[list[tuple[str, Raw]], Scan]:
    """Each topic read back (as scan_back) up to ``limit`` matches, within one request's
    record and time bounds; the matches (with their topic's tenant) newest first."""
    found: list[tuple[str, Raw]] = []
    scanned, complete, oldest = 0, True, None
    deadline = time.monotonic() + SCAN_BUDGET_S
    for topic, tenant in topics:
        left = deadline - time.monotonic()
        if left <= 0 or scanned >= SCAN_MAX_RECORDS:
            complete = False
            break
        scan = console.kafka.scan_back(
            topic, lambda r, t=tenant: match(t, r), lambda got: len(got) >= limit,
            since_ms=since_ms, until_ms=until_ms, max_records=SCAN_MAX_RECORDS - scanned,
            budget_s=left,
        )  # fmt: skip
        found += [(tenant, r) for r in scan.matched]
        scanned += scan.scanned
        complete = complete and scan.complete
        if scan.oldest_ms is not None:
            oldest = scan.oldest_ms if oldest is None else min(oldest, scan.oldest_ms)
    found.sort(key=lambda x: (x[1].timestamp, x[1].offset), reverse=True)
    return found, Scan([r for _, r in found], scanned, complete, oldest)


async def dead_letters(request: web.Request) -> web.Response:
    """Dead letters by tenant, code, device, time, status: from memory when it holds the
    answer, else read back through every DLQ topic the account may see (bounded; a time
    filter starts at its offsets). A tenant's account sees its own tenant's letters only."""
    session = _need(request, roles.VIEW_DLQ)
    console = request.app[CONSOLE_KEY]
    mine = session.actor.tenant
    q = request.query
    code, dev, status = q.get("code") or None, q.get("device") or None, q.get("status") or None
    tenant = mine if mine is not None else (q.get("tenant") or None)
    since = int(q["since"]) if q.get("since", "").isdigit() else None
    until = int(q["until"]) if q.get("until", "").isdigit() else None
    limit = _int(q.get("limit"), 100, 1, 1000)

    def keep(v: dict[str, Any]) -> bool:
        return (
            (tenant is None or v["tenant"] == tenant)
            and (code is None or v["code"] == code)
            and (dev is None or dev in str(v["device"] or ""))
            and (status is None or v["status"] == status)
            and (since is None or v["received_at"] >= since)
            and (until is None or v["received_at"] <= until)
        )

    fleet = console.fleet
    with console.tailer.lock:
        views = [letter_view(x) for x in reversed(fleet.dlq.values()) if may_see(mine, x.tenant)]
        whole = fleet.complete.get("dlq", False)
    counts = dict.fromkeys(sorted(e.value for e in ErrorCode), 0)
    for v in views:
        if tenant is None or v["tenant"] == tenant:
            counts[v["code"]] = counts.get(v["code"], 0) + 1
    rows = [v for v in views if keep(v)]
    scan, where = None, DLQ_TOPIC
    if not whole and len(rows) < limit:

        def letter(topic_tenant: str, r: Raw) -> DeadLetter:
            found = dead_letter(
                r.partition, r.offset, key=r.key, value=r.value, headers=r.headers,
                timestamp=r.timestamp, tenant=topic_tenant,
            )  # fmt: skip
            with console.tailer.lock:
                return fleet.dispose(found)

        def match(topic_tenant: str, r: Raw) -> bool:
            one = letter(topic_tenant, r)
            return may_see(mine, one.tenant) and keep(letter_view(one))

        topics = await asyncio.to_thread(_dlq_topics, console, mine, tenant)
        where = ",".join(t for t, _ in topics)
        # record times ~ received_at (the bridge writes at once): widen by a minute
        found, scan = await asyncio.to_thread(
            lambda: _scan_many(
                console, topics, match, limit=limit,
                since_ms=None if since is None else since - 60_000,
                until_ms=None if until is None else until + 60_000,
            )
        )  # fmt: skip
        rows = [letter_view(letter(t, r)) for t, r in found]
    return json_response(
        {"total": len(rows), "rows": rows[:limit], "codes": counts,
         "tenant_column": mine is None} | _scan_note(scan, where)
    )  # fmt: skip


async def _letter(console: Any, ref: str, actor_tenant: str | None) -> DeadLetter | None:
    """A dead letter by ref (letter_refs: ``partition-offset`` in ``iot.dlq``,
    ``tenant:partition-offset`` in a tenant's): from memory, else read from Kafka. None too
    when the account may not see it (a crafted ref learns nothing)."""
    place = parse_ref(ref)
    if place is None:
        return None
    with console.tailer.lock:
        found: DeadLetter | None = console.fleet.dlq.get(str(place))
    if found is None:
        raw = await asyncio.to_thread(
            console.kafka.read_one, place.topic(DLQ_TOPIC), place.partition, place.offset
        )
        if raw is None:
            return None
        found = dead_letter(
            raw.partition, raw.offset, key=raw.key, value=raw.value, headers=raw.headers,
            timestamp=raw.timestamp, tenant=place.tenant,
        )  # fmt: skip
        with console.tailer.lock:
            found = console.fleet.dispose(found)
    return found if may_see(actor_tenant, found.tenant) else None


async def dead_letter_action(request: web.Request) -> web.Response:
    session = _need(request, roles.REPLAY_DLQ)
    console = request.app[CONSOLE_KEY]
    ref, action = request.match_info["ref"], request.match_info["action"]
    if action not in ("replay", "discard"):
        raise web.HTTPNotFound()
    letter = await _letter(console, ref, session.actor.tenant)
    if letter is None:
        return problem(404, f"no dead letter {ref}")
    ref = letter.ref  # its one spelling (the audit trail's key)
    if action == "discard":
        await console.audit(session, "dlq.discard", ref, code=letter.code, tenant=letter.tenant)
        return json_response({"ref": ref, "status": "discarded"})
    body = await _body(request)
    payload = str(body.get("payload", letter.payload.decode("utf-8", "replace"))).encode()
    topic = str(body.get("mqtt_topic") or letter.headers.get("mqtt_topic", ""))
    source = (
        f"{tenant_kafka_topic(DLQ_TOPIC, letter.topic_tenant)}/{letter.partition}-{letter.offset}"
    )
    plan = plan_replay(topic, payload, now_ms=_now_ms(), source=source,
                       actor=session.actor.name, tenant=letter.tenant)  # fmt: skip
    if isinstance(plan, Refused):
        status = 403 if plan.code == OTHER_TENANT else 422
        return problem(status, f"still refused by the bridge's rules: {plan.code}: {plan.detail}"
                       if status == 422 else f"refused: {plan.detail}")  # fmt: skip
    partition, offset = await asyncio.to_thread(
        console.kafka.produce, plan.topic, plan.key, plan.value, plan.headers
    )
    await console.audit(
        session, "dlq.replay", ref, code=letter.code, tenant=letter.tenant,
        to=f"{plan.topic}/{partition}/{offset}",
    )  # fmt: skip
    return json_response(
        {"ref": ref, "status": "replayed", "topic": plan.topic, "partition": partition,
         "offset": offset}
    )  # fmt: skip


# --- analytics, tenants --------------------------------------------------------------------


async def analytics(request: web.Request) -> web.Response:
    _need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    warehouse = Path(console.cfg.console_warehouse)
    report_path = Path(console.cfg.console_report)
    has_report = await asyncio.to_thread(report_path.is_file)
    fleet, anomalies = await asyncio.gather(
        asyncio.to_thread(read_table, warehouse, "fleet_minute", 60),
        asyncio.to_thread(read_table, warehouse, "anomalies", 50),
    )
    return json_response(
        {"fleet_minute": fleet, "anomalies": anomalies,
         "report": has_report, "report_url": "/console/report/" + report_path.name}
    )  # fmt: skip


async def report_file(request: web.Request) -> web.StreamResponse:
    _need(request, roles.VIEW_FLEET)
    folder = Path(request.app[CONSOLE_KEY].cfg.console_report).parent.resolve()
    path = (folder / request.match_info["name"]).resolve()
    if path.parent != folder or not path.is_file():
        return problem(404, "no such report file: run iot-analytics report --format html")
    return web.FileResponse(path)


async def tenants(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_TENANTS)
    console = request.app[CONSOLE_KEY]

    def gather(r: Any) -> list[dict[str, Any]]:
        return [
            {"id": t.id, "disabled": t.disabled, "quotas": vars(t.quotas),
             "devices": [device_username(d.tenant, d.id) for d in r.devices(tenant=t.id)],
             "accounts": sum(1 for a in r.accounts() if a.tenant == t.id)}
            for t in r.tenants()
        ]  # fmt: skip

    found = await console.operators.aread(session.actor, gather)
    rates = console.sampler.history.tenant_rates()
    now = _now_ms()
    with console.tailer.lock:
        for t in found:
            keys = t.pop("devices")
            seen = [console.fleet.devices.get(k) for k in keys]
            t["device_count"] = len(keys)
            t["online"] = sum(1 for s in seen if s is not None and s.online)
            t["telemetry_per_s"] = round(sum(s.rate(now) for s in seen if s is not None), 2)
    for t in found:
        r = rates.get(t["id"], {"in": 0.0, "dlq": {}})
        quota = t["quotas"].get("msgs_per_s")
        t["msgs_per_s"] = round(r["in"], 2)  # at the bridges, every channel
        t["dlq_per_s"] = {c: round(v, 2) for c, v in r["dlq"].items() if v > 0}
        t["over_quota_per_s"] = round(r["dlq"].get("quota_exceeded", 0.0), 2)
        t["quota_use"] = round(r["in"] / quota, 3) if quota else None
    return json_response({"tenants": found, "rates_from": "bridge"})


async def set_quotas(request: web.Request) -> web.Response:
    session = _need(request, roles.VIEW_TENANTS)
    console = request.app[CONSOLE_KEY]
    body = await _body(request)
    tenant = request.match_info["tenant"]
    try:
        quotas = Quotas(
            devices=int(body["devices"]) if body.get("devices") not in (None, "") else None,
            msgs_per_s=float(body["msgs_per_s"]) if body.get("msgs_per_s") not in (None, "")
            else None,
        )  # fmt: skip
        changed = await console.operators.awrite(
            session.actor, lambda r: r.set_quotas(tenant, quotas)
        )
    except (RegistryError, ValueError) as exc:
        return problem(400, str(exc))
    return json_response({"id": changed.id, "quotas": vars(changed.quotas)})


def add_routes(router: web.UrlDispatcher) -> None:
    get, post = router.add_get, router.add_post
    get("/api/overview", overview)
    get("/api/devices", devices)
    post("/api/devices", provision)
    get("/api/devices/{tenant}/{id}", device)
    post("/api/devices/{tenant}/{id}/{action}", change_device)
    get("/api/commands", commands)
    post("/api/commands", send_command)
    get("/api/commands/{cid}", command)
    get("/api/topics", topics)
    get("/api/topics/{topic}/records", records)
    get("/api/dead-letters", dead_letters)
    post("/api/dead-letters/{ref}/{action}", dead_letter_action)
    get("/api/analytics", analytics)
    get("/report/{name}", report_file)
    get("/api/tenants", tenants)
    post("/api/tenants/{tenant}/quotas", set_quotas)
