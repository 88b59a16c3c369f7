"""The console's aiohttp sub-application, mounted by iot-api under ``/console``.

Security: a session cookie (HttpOnly, SameSite=Strict, Secure over TLS) from a login with a
registry operator account; every change (POST) must carry the session's CSRF token in
``X-CSRF-Token`` and, when the browser sends one, an Origin of this host. Pages are static
files; data comes from ``/console/api/*`` as JSON and the Overview's live stream as SSE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from api.console import pages
from api.console.config import ConsoleConfig
from api.console.context import CONSOLE_KEY, json_response, problem, session_of
from api.console.kafka_view import KafkaDownError
from api.console.roles import capabilities
from api.console.runtime import Console
from api.console.sessions import COOKIE, Session, csrf_ok

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
PAGES = ("overview", "devices", "device", "commands", "topics", "dead-letters", "analytics",
         "tenants", "login")  # fmt: skip
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _secure(request: web.Request, cfg: ConsoleConfig) -> bool:
    forwarded = request.headers.get("X-Forwarded-Proto", "").lower() == "https"
    return cfg.console_secure_cookies or request.secure or forwarded


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # not a browser's cross-site request (those always carry Origin on POST)
    return urlsplit(origin).netloc == request.host


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = request.app[CONSOLE_KEY]
    path = request.path
    api = path.startswith("/console/api/")
    report = path.startswith("/console/report/")  # the fleet report: logged-in operators only
    try:
        if (api and path != "/console/api/login") or report:
            session = console.sessions.get(request.cookies.get(COOKIE))
            if session is not None and not await asyncio.to_thread(
                console.operators.still_valid, session.actor
            ):  # the registry read to its end first: a disabled operator is out at once
                console.sessions.end(request.cookies.get(COOKIE))
                session = None
            if session is None:
                if path == "/console/api/me":  # the page asks before login: not an error
                    return json_response(None)
                return problem(401, "not logged in (or the session expired)")
            request["console_session"] = session
            if request.method not in ("GET", "HEAD", "OPTIONS") and (
                not _same_origin(request)
                or not csrf_ok(session, request.headers.get("X-CSRF-Token"))
            ):
                return problem(403, "missing or wrong CSRF token")
        elif api and not _same_origin(request):
            return problem(403, "cross-site login refused")
        response = await handler(request)
    except KafkaDownError as exc:
        response = problem(503, f"Kafka is unavailable: {exc}")
    except web.HTTPException as exc:
        if not api or exc.status < 400:
            raise
        response = problem(exc.status, exc.reason)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


async def shell(request: web.Request) -> web.StreamResponse:
    page = request.match_info.get("page", "overview") or "overview"
    if page not in PAGES:
        raise web.HTTPNotFound()
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def to_shell(_request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("/console/overview")


async def login(request: web.Request) -> web.Response:
    console = request.app[CONSOLE_KEY]
    try:
        body = await request.json(loads=orjson.loads)
        name, secret = str(body["name"]), str(body["secret"])
    except (ValueError, KeyError, TypeError):
        return problem(400, "give name and secret")
    actor = await asyncio.to_thread(console.operators.login, name, secret)
    if actor is None:
        log.info("console: login refused for %r from %s", name[:64], request.remote)
        await asyncio.sleep(0.5)  # a guessing script gets two tries a second, not thousands
        return problem(401, "wrong account name or secret, or not an operator account")
    token, session = console.sessions.create(actor)
    response = json_response(me_of(session))
    response.set_cookie(
        COOKIE, token, path="/console", httponly=True, samesite="Strict",
        secure=_secure(request, console.cfg), max_age=int(console.cfg.console_session_ttl_s),
    )  # fmt: skip
    log.info("console: %s logged in", actor.name)
    return response


async def logout(request: web.Request) -> web.Response:
    console = request.app[CONSOLE_KEY]
    console.sessions.end(request.cookies.get(COOKIE))
    response = json_response({"ok": True})
    response.del_cookie(COOKIE, path="/console")
    return response


def me_of(session: Session) -> dict[str, Any]:
    actor = session.actor
    return {
        "name": actor.name.removeprefix("svc/"),
        "roles": [str(r) for r in actor.roles],
        "tenant": actor.tenant,
        "capabilities": sorted(capabilities(actor)),
        "csrf": session.csrf,
    }


async def me(request: web.Request) -> web.Response:
    return json_response(me_of(session_of(request)))


async def stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one ``overview`` event per sample."""
    console = request.app[CONSOLE_KEY]
    tenant = session_of(request).actor.tenant
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                 "X-Accel-Buffering": "no"}
    )  # fmt: skip
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    await response.prepare(request)
    await response.write(b"retry: 2000\n\n")
    while console.sessions.get(request.cookies.get(COOKIE)) is not None:
        latest = pages.scoped(await console.sampler.wait(15), tenant)
        data = orjson.dumps(latest, option=orjson.OPT_NON_STR_KEYS)
        await response.write(b"event: overview\ndata: " + data + b"\n\n")
    return response


def build_console_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[CONSOLE_KEY] = console
    app.router.add_get("", to_shell)
    app.router.add_get("/", to_shell)
    app.router.add_static("/static/", STATIC, append_version=False)
    app.router.add_post("/api/login", login)
    app.router.add_post("/api/logout", logout)
    app.router.add_get("/api/me", me)
    app.router.add_get("/api/stream", stream)
    pages.add_routes(app.router)
    app.router.add_get("/{page}", shell)
    app.router.add_get("/{page}/{rest:.*}", shell)

    async def started(_app: web.Application) -> None:
        await console.start()

    async def stopped(_app: web.Application) -> None:
        await console.stop()

    app.on_startup.append(started)
    app.on_cleanup.append(stopped)
    return app
