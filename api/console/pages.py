"""The data behind each page (``/console/api/...``): JSON for the browser, rights checked here
(the console's role table) and again by the registry for its own changes. Here the Overview,
Analytics and Tenants pages and the route table; the Devices and Commands pages' data is in
:mod:`api.console.device_pages`, the Topics and Dead letters pages' in
:mod:`api.console.letter_pages`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from api.console import device_pages, letter_pages, roles
from api.console.analytics import read_table
from api.console.context import (
    CONSOLE_KEY,
    json_body,
    json_response,
    need,
    now_ms,
    problem,
)
from registry.errors import RegistryError
from registry.model import Quotas
from registry.topics import device_username

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
    session = need(request, roles.VIEW_FLEET)
    console = request.app[CONSOLE_KEY]
    tenant = session.actor.tenant
    return json_response(
        {"history": [scoped({"point": p}, tenant)["point"]
                     for p in console.sampler.history.points()],
         "latest": scoped(console.sampler.latest, tenant),
         "services": list(console.cfg.services()),
         "sites_watched": console.sites is not None}
    )  # fmt: skip


# --- analytics, tenants --------------------------------------------------------------------


async def analytics(request: web.Request) -> web.Response:
    need(request, roles.VIEW_FLEET)
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
    need(request, roles.VIEW_FLEET)
    folder = Path(request.app[CONSOLE_KEY].cfg.console_report).parent.resolve()
    path = (folder / request.match_info["name"]).resolve()
    if path.parent != folder or not path.is_file():
        return problem(404, "no such report file: run iot-analytics report --format html")
    return web.FileResponse(path)


async def tenants(request: web.Request) -> web.Response:
    session = need(request, roles.VIEW_TENANTS)
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
    now = now_ms()
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
    session = need(request, roles.VIEW_TENANTS)
    console = request.app[CONSOLE_KEY]
    body = await json_body(request)
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
    get("/api/devices", device_pages.devices)
    post("/api/devices", device_pages.provision)
    get("/api/devices/{tenant}/{id}", device_pages.device)
    post("/api/devices/{tenant}/{id}/{action}", device_pages.change_device)
    get("/api/commands", device_pages.commands)
    post("/api/commands", device_pages.send_command)
    get("/api/commands/{cid}", device_pages.command)
    get("/api/topics", letter_pages.topics)
    get("/api/topics/{topic}/records", letter_pages.records)
    get("/api/dead-letters", letter_pages.dead_letters)
    post("/api/dead-letters/{ref}/{action}", letter_pages.dead_letter_action)
    get("/api/analytics", analytics)
    get("/report/{name}", report_file)
    get("/api/tenants", tenants)
    post("/api/tenants/{tenant}/quotas", set_quotas)
