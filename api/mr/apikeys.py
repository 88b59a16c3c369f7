"""MR's ``/apiKeys`` (contract §5): keys issued by the registry, each scoped to a tenant and a
role; the secret is shown once, in the create answer, and never stored.

Who may: a system admin issues keys for any tenant, a tenant-admin for its own tenant; a key
changes or deletes itself (MR), an admin or its tenant's tenant-admin any of that tenant's.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from api.errors import (
    ACCESS_NOT_PERMITTED,
    INCORRECT_JSON,
    RESOURCE_NOT_FOUND,
    SERVER_UNAV,
    SERVER_UNAVAILABLE,
    ApiError,
)
from api.plumbing.access import Principal, may_create_key, may_manage_key, may_see_key
from api.plumbing.auth import RegistryAuthenticator, describe
from api.plumbing.cambria import new_key_id, new_salt
from api.plumbing.topic_access import principal_of
from registry.errors import ConflictError, ForbiddenError, NotFoundError, RegistryError
from registry.ids import DEFAULT_TENANT
from registry.kafka_store import StoreError
from registry.model import API_KEY_ROLES, ApiKey, ModelError, Role

UNABLE_TO_AUTHORIZE = 4003
_TEXT_FIELDS = ("email", "description")


def _no_such_key(key: str) -> ApiError:
    return ApiError(404, RESOURCE_NOT_FOUND, f"Api key [{key}] does not exist.")


def _registry_error(exc: RegistryError) -> ApiError:
    if isinstance(exc, ForbiddenError):
        return ApiError(403, ACCESS_NOT_PERMITTED, f"Access Denied. {exc}")
    if isinstance(exc, NotFoundError):
        return ApiError(404, RESOURCE_NOT_FOUND, str(exc))
    if isinstance(exc, ConflictError):
        return ApiError(409, RESOURCE_NOT_FOUND, str(exc))
    if isinstance(exc, StoreError):
        return ApiError(503, SERVER_UNAVAILABLE, f"{SERVER_UNAV} {exc}")
    return ApiError(400, INCORRECT_JSON, str(exc))


async def _json_body(request: web.Request) -> dict[str, Any]:
    raw = await request.content.read(65536 + 1)
    if len(raw) > 65536:
        raise ApiError(413, INCORRECT_JSON, "An api key request is at most 64 KiB.")
    try:
        data = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, INCORRECT_JSON, f"Incorrect JSON object. {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(data.get(f, ""), str) for f in (*_TEXT_FIELDS, "tenant", "role")
    ):
        raise ApiError(400, INCORRECT_JSON, "Expected an object of strings.")
    return data


class ApiKeyHandlers:
    def __init__(self, auth: RegistryAuthenticator | None) -> None:
        self.auth = auth

    def _auth(self) -> RegistryAuthenticator:
        if self.auth is None:
            raise ApiError(
                400,
                UNABLE_TO_AUTHORIZE,
                "Api keys need --registry-auth (this service is anonymous).",
            )
        return self.auth

    def _visible_key(self, request: web.Request, key: str) -> ApiKey:
        auth, principal = self._auth(), principal_of(request)
        found = auth.api_keys().get(key)
        if found is None or principal is None or not may_see_key(principal, found.tenant, key):
            raise _no_such_key(key)  # another tenant's key is not even said to exist
        return found

    async def list_keys(self, request: web.Request) -> web.Response:
        auth, principal = self._auth(), principal_of(request)
        keys = sorted(
            k.key
            for k in auth.api_keys().values()
            if principal is not None and may_see_key(principal, k.tenant, k.key)
        )
        return web.json_response({"apiKeys": keys})

    async def show_key(self, request: web.Request) -> web.Response:
        return web.json_response(describe(self._visible_key(request, request.match_info["key"])))

    async def create_key(self, request: web.Request) -> web.Response:
        auth, principal = self._auth(), principal_of(request)
        body = await _json_body(request)
        assert principal is not None
        tenant = body.get("tenant") or principal.tenant or DEFAULT_TENANT
        try:
            role = Role(body.get("role") or Role.API)
        except ValueError:
            role = None
        if role is None or role not in API_KEY_ROLES:
            allowed = ", ".join(sorted(API_KEY_ROLES))
            raise ApiError(400, INCORRECT_JSON, f"role must be one of {allowed}.")
        if not may_create_key(principal, tenant, role):
            raise ApiError(
                403, ACCESS_NOT_PERMITTED,
                f"Access Denied. {principal.name} may not issue api keys of tenant {tenant}.",
            )  # fmt: skip
        key, salt = new_key_id(), new_salt()
        secret = auth.issue_secret(key, salt)
        texts = {f: body.get(f, "") for f in _TEXT_FIELDS}
        try:
            made = await auth.write(
                principal,
                lambda reg: reg.create_api_key(
                    key, tenant, role, secret=secret, salt=salt, **texts
                ),
            )
        except (RegistryError, ModelError) as exc:
            raise _registry_error(exc) from None
        return web.json_response(describe(made, secret=secret))

    def _managed(self, request: web.Request, verb: str) -> tuple[str, Principal]:
        """The key of the path and its caller, who must be the key or manage its tenant."""
        key = request.match_info["key"]
        found = self._visible_key(request, key)
        principal = principal_of(request)
        assert principal is not None
        if not may_manage_key(principal, found.tenant, key):
            raise ApiError(403, ACCESS_NOT_PERMITTED, f"Access Denied. Only [{key}] {verb} it.")
        return key, principal

    async def update_key(self, request: web.Request) -> web.Response:
        key, principal = self._managed(request, "changes")
        body = await _json_body(request)
        changes = {f: body[f] for f in _TEXT_FIELDS if f in body}
        try:
            new = await self._auth().write(
                principal, lambda reg: reg.update_api_key(key, **changes)
            )
        except RegistryError as exc:
            raise _registry_error(exc) from None
        return web.json_response(describe(new))

    async def delete_key(self, request: web.Request) -> web.Response:
        key, principal = self._managed(request, "deletes")
        try:
            await self._auth().write(principal, lambda reg: reg.delete_api_key(key))
        except RegistryError as exc:
            raise _registry_error(exc) from None
        return web.Response(text=f"Api key [{key}] deleted successfully.", content_type="text/html")
