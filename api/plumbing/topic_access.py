"""Topic access for iot-api's handlers: the tenant and ACL checks of ``api.plumbing.access``
applied to requests, topic metadata (owner, description, ACLs) kept in the registry, and MR's
``/topics/{topic}/producers|consumers`` endpoints.

Without authentication (``--insecure-anonymous``) every check passes and a description lives in
the answering instance only (as phase 1).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.errors import ACCESS_NOT_PERMITTED, ApiError
from api.plumbing.access import Access, Principal, may_access, topic_tenant, visible
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.params import topic_details
from registry.model import TopicAcl

GET_PUBLISHERS_BY_TOPIC = 6005
GET_CONSUMERS_BY_TOPIC = 6006
PERMIT_PUBLISHER = 6007
REVOKE_PUBLISHER = 6008
PERMIT_CONSUMER = 6009
REVOKE_CONSUMER = 6010
# what each handler with a {topic} does to it; another handler: GET reads, others write
ROUTE_ACCESS: dict[str, Access] = {
    "publish": Access.WRITE,
    "consume": Access.READ,
    "topic_details": Access.READ,
    "delete_topic": Access.MANAGE,
    "producers": Access.READ,
    "consumers": Access.READ,
    "permit_producer": Access.MANAGE,
    "revoke_producer": Access.MANAGE,
    "permit_consumer": Access.MANAGE,
    "revoke_consumer": Access.MANAGE,
    "queue_receive": Access.READ,  # receiving, acking and nacking are a reader's work
    "queue_ack": Access.READ,
    "queue_nack": Access.READ,
    "queue_settings": Access.MANAGE,  # a queue's timeout and maximum: its administrators'
}
PRINCIPAL = web.RequestKey("principal", Principal)  # the authenticated caller of a request


def principal_of(request: web.Request) -> Principal | None:
    return request.get(PRINCIPAL)


def denied(principal: Principal, access: Access, topic: str) -> ApiError:
    """403 with MR's notPermitted text (MR answers 401 here; a caller who authenticated is
    refused, not unknown, so ours is 403 with mrstatus 4002 ACCESS_NOT_PERMITTED)."""
    return ApiError(
        403,
        ACCESS_NOT_PERMITTED,
        f"Access Denied.User does not have permission to perform {access} operation on "
        f"Topic:{topic} (caller {principal.name})",
    )


def _acl_json(users: tuple[str, ...]) -> dict[str, Any]:
    return {"enabled": True, "users": list(users)}


class TopicGuard:
    def __init__(self, auth: RegistryAuthenticator | None) -> None:
        self.auth = auth
        self._descriptions: dict[str, str] = {}  # anonymous mode only

    def route_access(self, handler: str, method: str) -> Access:
        return ROUTE_ACCESS.get(handler, Access.READ if method == "GET" else Access.WRITE)

    def check(self, request: web.Request, topic: str, access: Access) -> None:
        principal = principal_of(request)
        if self.auth is None or principal is None:
            return
        acl = self.auth.acl(topic)
        if not may_access(principal, topic, access, acl, self.auth.tenants()):
            raise denied(principal, access, topic)

    def visible(self, request: web.Request, names: list[str]) -> list[str]:
        if self.auth is None:
            return sorted(names)
        return visible(principal_of(request), names, self.auth.acls(), self.auth.tenants())

    def owner(self, topic: str) -> str:
        acl = self.auth.acl(topic) if self.auth is not None else None
        return acl.owner if acl is not None else ""

    async def created(self, request: web.Request, topic: str, description: str) -> dict[str, Any]:
        """Record the creator as owner (MR: the creating api key) and the description; the
        TopicBean of the new topic."""
        principal = principal_of(request)
        if self.auth is None or principal is None:
            self._descriptions[topic] = description
            return topic_details(topic, description)
        tenant = topic_tenant(topic, self.auth.tenants())
        owner = principal.key
        acl = await self.auth.write(
            principal,
            lambda reg: reg.set_topic_acl(
                topic, tenant, owner=owner, description=description, writers=(), readers=()
            ),
        )
        return self.details(acl.topic, acl)

    def details(self, topic: str, acl: TopicAcl | None = None) -> dict[str, Any]:
        if self.auth is None:
            return topic_details(topic, self._descriptions.get(topic, ""))
        acl = acl or self.auth.acl(topic)
        if acl is None:
            return topic_details(topic)
        body = topic_details(topic, acl.description, acl.owner)
        body["readerAcl"], body["writerAcl"] = _acl_json(acl.readers), _acl_json(acl.writers)
        return body

    async def deleted(self, request: web.Request, topic: str) -> None:
        self._descriptions.pop(topic, None)
        principal = principal_of(request)
        if self.auth is not None and principal is not None and self.auth.acl(topic) is not None:
            await self.auth.write(principal, lambda reg: reg.delete_topic_acl(topic))


class AclHandlers:
    """MR's ``/topics/{topic}/producers|consumers[/{apiKey}]`` (the list is MR's writerAcl /
    readerAcl; a non-empty list admits only its keys, the owner and administrating roles)."""

    def __init__(self, guard: TopicGuard, topic_exists: Any) -> None:
        self.guard = guard
        self._exists = topic_exists  # async (topic) -> bool

    async def _topic(self, request: web.Request, code: int, what: str) -> str:
        topic = request.match_info["topic"]
        if not await self._exists(topic):
            raise ApiError(404, code, f"{what} for topic: {topic}. Topic [{topic}] does not exist.")
        return topic

    async def producers(self, request: web.Request) -> web.Response:
        topic = await self._topic(
            request, GET_PUBLISHERS_BY_TOPIC,
            "Error while fetching list of publishers for topic: Failed to retrieve publishers list",
        )  # fmt: skip
        return _json(self.guard.details(topic)["writerAcl"])

    async def consumers(self, request: web.Request) -> web.Response:
        topic = await self._topic(
            request, GET_CONSUMERS_BY_TOPIC,
            "Error while fetching list of consumers for topic: Failed to retrieve consumers list",
        )  # fmt: skip
        return _json(self.guard.details(topic)["readerAcl"])

    async def _change(self, request: web.Request, code: int, side: str, grant: bool) -> str:
        topic = await self._topic(request, code, "Failed to change the access list")
        key = request.match_info["apiKey"]
        auth, principal = self.guard.auth, principal_of(request)
        if auth is None or principal is None:
            raise ApiError(
                400, code, "Access lists need authentication (the service runs anonymous)."
            )
        tenant = topic_tenant(topic, auth.tenants())

        def change(reg: Any) -> TopicAcl:
            acl = reg.topic_acl(topic)
            users = list(getattr(acl, side) if acl is not None else ())
            if grant and key not in users:
                users.append(key)
            if not grant:
                users = [u for u in users if u != key]
            result: TopicAcl = reg.set_topic_acl(topic, tenant, **{side: tuple(users)})
            return result

        await auth.write(principal, change)
        return topic

    async def permit_producer(self, request: web.Request) -> web.Response:
        await self._change(request, PERMIT_PUBLISHER, "writers", grant=True)
        return _text("Write access has been granted to publisher.")

    async def revoke_producer(self, request: web.Request) -> web.Response:
        await self._change(request, REVOKE_PUBLISHER, "writers", grant=False)
        return _text("Write access has been revoked for publisher.")

    async def permit_consumer(self, request: web.Request) -> web.Response:
        topic = await self._change(request, PERMIT_CONSUMER, "readers", grant=True)
        key = request.match_info["apiKey"]
        return _text(f"Read access has been granted for consumer [{key}] for topic [{topic}].")

    async def revoke_consumer(self, request: web.Request) -> web.Response:
        topic = await self._change(request, REVOKE_CONSUMER, "readers", grant=False)
        key = request.match_info["apiKey"]
        return _text(f"Read access has been revoked for consumer [{key}] for topic [{topic}].")


def _json(data: Any) -> web.Response:
    return web.json_response(data)


def _text(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")
