"""What the console's handlers share: the app key, JSON answers, the request's session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from api.console.sessions import Session

if TYPE_CHECKING:
    from api.console.app import Console

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
