"""What the console's handlers share: the app key, JSON answers and bodies, the request's
session and its rights, query numbers, where a scan read from."""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from api.console import roles
from api.console.kafka_records import Scan
from api.console.runtime import Console
from api.console.sessions import Session

CONSOLE_KEY: web.AppKey[Console] = web.AppKey("console")


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def problem(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status)


def session_of(request: web.Request) -> Session:
    found = request.get("console_session")
    if not isinstance(found, Session):
        raise web.HTTPUnauthorized(reason="not logged in")
    return found


def need(request: web.Request, capability: str) -> Any:
    session = session_of(request)
    if not roles.may(session.actor, capability):
        raise web.HTTPForbidden(reason=f"your role may not {capability.replace('_', ' ')}")
    return session


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=orjson.loads)
    except ValueError:
        raise web.HTTPBadRequest(reason="the body is not JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(reason="the body must be a JSON object")
    return body


def int_param(text: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(text or default), low), high)
    except ValueError:
        return default


def now_ms() -> int:
    return int(time.time() * 1000)


def scan_note(scan: Scan | None, topic: str) -> dict[str, Any]:
    if scan is None:
        return {"source": "memory", "scanned": 0, "complete": True, "oldest": None}
    return {"source": f"kafka:{topic}", "scanned": scan.scanned, "complete": scan.complete,
            "oldest": scan.oldest_ms}  # fmt: skip
