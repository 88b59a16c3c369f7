"""What the ``/ops`` handlers share: the caller of a request, its JSON body and answer, and the
registry's refusals as MR's error bodies."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from api.errors import (
    ACCESS_NOT_PERMITTED,
    CREATE_TOPIC_FAIL,
    RESOURCE_NOT_FOUND,
    SERVER_UNAVAILABLE,
    ApiError,
)
from api.operator.model import Caller, bad_request
from api.plumbing.access import Principal
from api.plumbing.topic_access import PRINCIPAL
from registry.errors import (
    ConflictError,
    ForbiddenError,
    MosquittoOutOfStepError,
    NotFoundError,
    RegistryError,
)
from registry.model import Role
from registry.permissions import Actor

ANONYMOUS = Caller("anonymous", (Role.ADMIN,), None)  # --insecure-anonymous only


def json_response(data: Any, status: int = 200) -> web.Response:
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


def actor_of(caller: Caller) -> Actor:
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


async def read_body(request: web.Request, limit: int = 1 << 20) -> Any:
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        raise bad_request("The body is too large.")
    if not raw:
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("The body is not JSON.") from None
