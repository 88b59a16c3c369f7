"""Commands and devices over HTTP (issue 14 item 6): the handlers of the ``/ops`` routes.

Authenticated like the rest of iot-api (the app's wrapper puts the caller on the request), then
checked here against :data:`api.operator.model.ROLE_OPERATIONS` and the caller's tenant; the
registry checks its own rights again and audits every change under the caller's name
(``apikey/<key>`` or the account). Registry access is the console's (:class:`Operators`: a
shared reader, one writer per change, Mosquitto's dynamic security updated with it); fleet
knowledge comes from :class:`FleetFeed`; commands go through :class:`CommandPath`. Here:
commands and a device's telemetry stream; the registry's routes (devices, groups, tenants) are
its base class's (:mod:`api.operator.registry_routes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web

from api.config import ApiConfig
from api.console.operators import Operators
from api.operator.feed import FleetFeed
from api.operator.kafka import CommandPath
from api.operator.model import (
    CommandFilter,
    Operation,
    command_tenant,
    command_view,
    not_found,
    parse_limit,
    parse_ms,
    parse_seconds,
    parse_send,
    reaches,
    require,
    sse_event,
    visible_commands,
)
from api.operator.registry_routes import RegistryRoutes
from api.operator.requests import caller_of, json_response, read_body
from api.plumbing.kafka_admin import NoSuchTopicError
from api.sawmill import kafka as sawmill_kafka
from api.sawmill import model as sawmill
from api.sawmill.events import stream_events
from bridge.topics import tenant_kafka_topic

log = logging.getLogger(__name__)
_WAIT_STEP_S = 0.05
_REPLY_GRACE_S = 3.0


class OperatorHandlers(RegistryRoutes):
    def __init__(self, cfg: ApiConfig) -> None:
        self.cfg = cfg
        self.operators = Operators(
            cfg.kafka_bootstrap, cfg.registry_topic, cfg.registry_mqtt_host,
            cfg.registry_mqtt_port, cfg.registry_admin_password_file,
            shard_ports=cfg.registry_mqtt_shard_ports,
        )  # fmt: skip
        self.feed = FleetFeed(cfg.kafka_bootstrap, cfg.topic_command_status,
                              cfg.topic_command_replies, cfg.kafka_consumer_stall_s)  # fmt: skip
        self.path: CommandPath | None = None
        self.stream_watch: sawmill_kafka.StreamWatch | None = None  # telemetry streams' stall check
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

    # --- commands ----------------------------------------------------------------------------

    async def send_command(self, request: web.Request) -> web.Response:
        caller = caller_of(request)
        require(caller, Operation.SEND)
        wanted = parse_send(await read_body(request), caller)
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
        return json_response(view, 200 if view["final"] else 202)

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
        return json_response(command_view(found))

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
        return json_response({"commands": visible_commands(entries, caller, wanted, limit)})

    async def device_telemetry_stream(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: the device's telemetry records as they arrive."""
        caller = caller_of(request)
        require(caller, Operation.READ)
        tenant, device_id = self._device_path(request, caller)
        await self._read(caller, lambda r: r.device(tenant, device_id))
        topic = tenant_kafka_topic(self.cfg.topic_telemetry, tenant)
        try:
            follower = await asyncio.to_thread(
                sawmill_kafka.Follower,
                self.cfg.kafka_bootstrap,
                topic,
                sawmill.parse_start("end"),
                self.stream_watch,
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
        def render(batch: list[sawmill.Message]) -> list[bytes]:
            return [
                sse_event("telemetry", f"{m.partition}:{m.offset}", m.value)
                for m in batch
                if m.key == key and b"\n" not in m.value
            ]

        return await stream_events(
            request, follower, render, self.closing, self.cfg.sse_heartbeat_s
        )
