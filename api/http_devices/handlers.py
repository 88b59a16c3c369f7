"""HTTP devices (Hono's HTTP adapter): telemetry, events and command replies over HTTP, with
the device's registry credentials; commands waited for in the same request (``hono-ttd``).

- Upload: the bridge's own mapping (``api.http_devices.model.map_http``) makes the record; it is
  answered 202 (or 200 with a command) only once Kafka holds it; a bad payload is answered 400
  (413 oversized, 429 over the tenant's quota) with the bridge's error code after its DLQ record
  is in Kafka, exactly the record the bridge writes.
- Commands: the device's own persistent MQTT session (``api.http_devices.mqtt``), opened by this
  service with its `api` account; the PUBACK of a command goes out only after the HTTP answer
  carrying it was written.
- Replies: published as the device's MQTT reply; 202 once Mosquitto took it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from api.config import ApiConfig
from api.errors import ApiError
from api.http_devices.credentials import DeviceCredentials
from api.http_devices.kafka import DeviceProducer, DeviceRecordError
from api.http_devices.model import (
    EMPTY_NOTIFICATION,
    DeviceRef,
    ReplyError,
    TtdError,
    command_id_ok,
    error_body,
    map_http,
    over_quota,
    parse_device_user,
    parse_ttd,
    path_device,
    reply_payload,
    reply_topic,
)
from api.http_devices.mqtt import DeviceLinkError, DeviceLinks, Held, MqttSettings
from api.plumbing.auth import RegistryAuthenticator, basic_credentials
from api.plumbing.kafka_admin import TopicAdmin
from api.plumbing.limits import Gate
from bridge.mapping import ErrorCode, KafkaRecord, Topics, tenant_topics
from bridge.quota import TenantQuotas, parse_rates
from bridge.topics import DEFAULT_TENANT, Channel

log = logging.getLogger(__name__)
_REALM = {"WWW-Authenticate": 'Basic realm="iot-api devices"'}
# the hash the request's secret was checked against
_VERIFIED_HASH = web.RequestKey("http_device_secret_hash", str)
# the status of a refused upload, by the bridge's error code (the rest are 400)
_STATUS = {ErrorCode.OVERSIZED: 413, ErrorCode.QUOTA_EXCEEDED: 429}


def _refuse(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(error_body(code, detail)),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class DeviceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.messages = Counter(
            "iot_api_device_messages", "HTTP device uploads by channel and outcome "
            "(accepted: in Kafka; rejected: dead-lettered)", ["channel", "outcome"],
            registry=registry,
        )  # fmt: skip
        self.rejected = Counter(
            "iot_api_device_rejected", "HTTP device requests refused, by code", ["code"],
            registry=registry,
        )  # fmt: skip
        self.commands = Counter(
            "iot_api_device_commands", "Commands to HTTP devices: delivered (written in an "
            "answer), kept (the client left first), none (ttd ran out)", ["outcome"],
            registry=registry,
        )  # fmt: skip
        self.replies = Counter(
            "iot_api_device_replies", "Command replies of HTTP devices handed to Mosquitto",
            registry=registry,
        )  # fmt: skip
        self.waiting = Gauge(
            "iot_api_device_waiting", "HTTP device requests waiting for a command",
            registry=registry,
        )  # fmt: skip
        self.sessions = Gauge(
            "iot_api_device_sessions", "Open MQTT connections acting for HTTP devices",
            registry=registry,
        )  # fmt: skip


class DeviceHandlers:
    """The device routes (api.routes.DEVICE_ROUTES); their own auth: a device, not an account."""

    def __init__(
        self,
        cfg: ApiConfig,
        auth: RegistryAuthenticator | None,
        admin: TopicAdmin,
        registry: CollectorRegistry,
        long_polls: Gate,
    ) -> None:
        self.cfg = cfg
        self.auth = auth
        self.admin = admin
        self.long_polls = long_polls
        self.stats = DeviceMetrics(registry)
        self.topics = Topics(
            telemetry=cfg.topic_telemetry, events=cfg.topic_events, dlq=cfg.topic_dlq
        )
        self.producer = DeviceProducer(
            cfg.kafka_bootstrap, linger_ms=cfg.kafka_linger_ms, timeout_ms=cfg.publish_timeout_ms
        )
        self.links = DeviceLinks(
            MqttSettings(
                cfg.mqtt_host,
                cfg.mqtt_port,
                cfg.mqtt_username,
                _password(cfg),
                cfg.device_session_expiry_s,
            ),
            cfg.device_session_idle_s,
        )
        self.quotas = TenantQuotas()
        self._static_rates = parse_rates(cfg.tenant_quotas)
        self._ready: set[str] = {DEFAULT_TENANT}
        self.credentials = None if auth is None else DeviceCredentials(auth)

    def start(self) -> None:
        self.producer.start()
        self.links.start()
        self.quotas.set_rates(dict(self._static_rates), time.monotonic())

    async def close(self, timeout_s: float) -> None:
        await self.links.close()
        self.producer.close(timeout_s)

    # --- who is posting --------------------------------------------------------------------

    async def _device(self, request: web.Request) -> DeviceRef | web.Response:
        """The authenticated device (checked against a device named in the path), or the
        refusal to answer."""
        named = None
        if "device" in request.match_info:
            named = path_device(request.match_info["tenant"], request.match_info["device"])
            if named is None:
                return self._no(400, "bad_device", "invalid tenant or device id in the path")
        if self.auth is None:  # --insecure-anonymous: the path names the device
            if named is None:
                return self._no(401, "unauthorized", "anonymous mode: name the device in the "
                                "path (/telemetry/{tenant}/{device})", _REALM)  # fmt: skip
            return named
        creds = basic_credentials(request.headers.get("Authorization"))
        ref = None if creds is None else parse_device_user(creds[0])
        verified = None
        if creds is not None and ref is not None and self.credentials is not None:
            verified = await self.credentials.verified(ref, creds[1])
        if ref is None or verified is None:
            return self._no(401, "unauthorized", "device credentials missing or wrong", _REALM)
        request[_VERIFIED_HASH] = verified
        if named is not None and named != ref:
            return self._no(403, "forbidden", f"{ref.username} may post only for itself")
        return ref

    async def _still_allowed(self, request: web.Request, ref: DeviceRef) -> web.Response | None:
        """The refusal if the device was disabled, deleted or re-keyed while its request was in
        flight (checked right before the request acts), else None."""
        if self.credentials is None or await self.credentials.still_allowed(
            ref, request.get(_VERIFIED_HASH)
        ):
            return None
        return self._no(401, "unauthorized", "device disabled, deleted or re-keyed", _REALM)

    def _no(
        self, status: int, code: str, detail: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        self.stats.rejected.labels(code).inc()
        return _refuse(status, code, detail, headers)

    def _groups(self, ref: DeviceRef) -> tuple[str, ...]:
        if self.auth is None:
            return ()
        device = self.auth.registry.state.devices.get((ref.tenant, ref.device))
        return tuple(sorted(device.groups)) if device is not None else ()

    def _rates(self) -> None:
        """The registry's msgs/s quotas (they win over the static setting), as the bridge."""
        auth = self.auth
        if auth is None:
            return
        state = auth.registry.state
        self.quotas.follow(
            self._static_rates, state.tenants, state.tenants_version, time.monotonic()
        )

    async def _tenant_ready(self, tenant: str) -> None:
        """The tenant's topics exist (created as the bridge does: the default tenant's
        partition count) before its first record."""
        if tenant in self._ready:
            return
        names = await self.admin.topics()
        own = tenant_topics(self.topics, tenant)
        for base, name in zip(self.topics.all()[:3], own.all()[:3], strict=True):
            if name not in names:
                await self.admin.ensure(name, names.get(base, 0))
        self._ready.add(tenant)

    # --- uploads ---------------------------------------------------------------------------

    async def device_telemetry(self, request: web.Request) -> web.StreamResponse:
        return await self._upload(request, Channel.TELEMETRY)

    async def device_event(self, request: web.Request) -> web.StreamResponse:
        return await self._upload(request, Channel.EVENTS)

    async def _body(self, request: web.Request) -> bytes | None:
        """The body, or None when it is larger than a message may be at all."""
        limit = self.cfg.max_message_bytes
        if request.content_length is not None and request.content_length > limit:
            return None
        chunks, size = [], 0
        async for chunk in request.content.iter_chunked(65536):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def _upload(self, request: web.Request, channel: Channel) -> web.StreamResponse:
        found = await self._device(request)
        if isinstance(found, web.Response):
            return found
        ref = found
        try:
            ttd = parse_ttd(
                request.headers.get("hono-ttd", request.query.get("hono-ttd")),
                float(self.cfg.device_ttd_max_s),
            )
        except TtdError as exc:
            return self._no(400, "bad_ttd", str(exc))
        body = await self._body(request)
        if body is None:
            return self._no(413, ErrorCode.OVERSIZED.value,
                            f"body over {self.cfg.max_message_bytes} bytes")  # fmt: skip
        empty = not body and (
            ttd > 0 or request.headers.get("Content-Type", "").startswith(EMPTY_NOTIFICATION)
        )
        refused = await self._still_allowed(request, ref)
        if refused is not None:
            return refused
        if not empty:  # an empty notification only asks for commands (Hono)
            refused = await self._produce(ref, channel, body)
            if refused is not None:
                return refused
        if ttd <= 0:
            return web.Response(status=202)
        return await self._wait_for_command(request, ref, ttd)

    async def _produce(self, ref: DeviceRef, channel: Channel, body: bytes) -> web.Response | None:
        now_ms = time.time_ns() // 1_000_000
        self._rates()
        rec: KafkaRecord
        if self.quotas.buckets and not self.quotas.allow(ref.tenant, time.monotonic()):
            rate = self.quotas.buckets[ref.tenant].rate
            rec = over_quota(ref, channel, body, now_ms, topics=self.topics, rate=rate)
        else:
            rec = map_http(
                ref, channel, body, now_ms,
                topics=self.topics, max_payload_bytes=self.cfg.max_payload_bytes,
            )  # fmt: skip
        try:
            await self._tenant_ready(ref.tenant)
            await self.producer.produce(rec)
        except (DeviceRecordError, ApiError) as exc:
            self.stats.rejected.labels("kafka_unavailable").inc()
            return _refuse(503, "kafka_unavailable", f"Kafka did not take the record: {exc}")
        if rec.error is not None:
            self.stats.messages.labels(channel.value, "rejected").inc()
            return self._no(_STATUS.get(rec.error, 400), rec.error.value, rec.detail)
        self.stats.messages.labels(channel.value, "accepted").inc()
        return None

    # --- commands --------------------------------------------------------------------------

    async def _wait_for_command(
        self, request: web.Request, ref: DeviceRef, ttd: float
    ) -> web.StreamResponse:
        try:
            self.long_polls.enter()
        except ApiError:
            # the upload is in Kafka: say so, without a command (the device polls again)
            return web.Response(status=202, headers={"iot-cmd-wait": "refused: too many waits"})
        try:
            try:
                link = await self.links.get(ref, self._groups(ref))
            except (DeviceLinkError, OSError) as exc:
                log.warning("no MQTT session for %s: %s", ref.username, exc)
                return web.Response(status=202, headers={"iot-cmd-wait": "unavailable"})
            self.stats.sessions.set(len(self.links))
            link.waiters += 1
            self.stats.waiting.inc()
            try:
                held = await link.take(ttd)
            finally:
                link.waiters -= 1
                link.last_used = time.monotonic()
                self.stats.waiting.dec()
            if held is None:
                self.stats.commands.labels("none").inc()
                return web.Response(status=202)
            refused = await self._still_allowed(request, ref)
            if refused is not None:  # the command stays in its session, not handed over
                link.give_back(held)
                self.stats.commands.labels("kept").inc()
                return refused
            return await self._hand_over(request, link, held)
        finally:
            self.long_polls.leave()

    async def _hand_over(self, request: web.Request, link: Any, held: Held) -> web.StreamResponse:
        """Write the command; acknowledge it to Mosquitto only once written, else keep it."""
        written = False
        try:
            if request.transport is None or request.transport.is_closing():
                raise ConnectionResetError("client disconnected before the command was written")
            response = web.StreamResponse(status=200, headers=held.command.headers())
            response.content_type = "application/json"
            response.content_length = len(held.command.payload)
            await response.prepare(request)
            await response.write(held.command.payload)
            await response.write_eof()
            written = True
        finally:
            if written:
                link.ack(held)
                self.stats.commands.labels("delivered").inc()
            else:  # cancelled or reset: the next request of the device gets it
                link.give_back(held)
                self.stats.commands.labels("kept").inc()
        return response

    async def device_command_reply(self, request: web.Request) -> web.StreamResponse:
        found = await self._device(request)
        if isinstance(found, web.Response):
            return found
        ref = found
        command_id = request.match_info["reqId"]
        if not command_id_ok(command_id):
            return self._no(400, "bad_command_id", "the request id is not a command id")
        body = await self._body(request)
        if body is None or len(body) > self.cfg.max_payload_bytes:
            return self._no(413, ErrorCode.OVERSIZED.value,
                            f"reply over {self.cfg.max_payload_bytes} bytes")  # fmt: skip
        try:
            payload = reply_payload(body, request.headers.get("hono-cmd-status"))
        except ReplyError as exc:
            return self._no(400, "bad_status", str(exc))
        refused = await self._still_allowed(request, ref)
        if refused is not None:
            return refused
        try:
            link = await self.links.get(ref, self._groups(ref))
            reason = await link.publish(reply_topic(ref, command_id), payload)
        except (DeviceLinkError, OSError) as exc:
            return self._no(503, "mqtt_unavailable", f"Mosquitto did not take the reply: {exc}")
        if reason == 0x10:  # nobody subscribes to replies: the command path is not there
            return self._no(503, "no_command_path", "no subscriber for replies (command path)")
        if reason >= 0x80:
            return self._no(403 if reason == 0x87 else 503, "mqtt_refused",
                            f"Mosquitto refused the reply: reason 0x{reason:02x}")  # fmt: skip
        self.stats.replies.inc()
        return web.Response(status=202)


def _password(cfg: ApiConfig) -> str:
    if cfg.mqtt_password_file:
        with open(cfg.mqtt_password_file, encoding="utf-8") as file:
            return file.readline().strip()
    return cfg.mqtt_password
