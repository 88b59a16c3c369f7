"""`iot-api` running: Kafka clients, the aiohttp server, SIGTERM -> graceful stop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
from collections.abc import Callable

from aiohttp import web

from api.app import Handlers, build_app
from api.config import ApiConfig
from api.console.app import build_console_app
from api.console.config import ConsoleConfig
from api.console.runtime import Console
from api.docs_page import DocsPageHandlers
from api.http_devices.handlers import DeviceHandlers
from api.mr.apikeys import ApiKeyHandlers
from api.mr.consumers import ConsumerPool
from api.mr.metrics import ApiMetrics
from api.operator.app import OperatorHandlers
from api.plumbing.auth import RegistryAuthenticator, load_master
from api.plumbing.kafka_admin import TopicAdmin
from api.plumbing.kafka_health import KafkaHealth
from api.plumbing.kafka_producer import KafkaPublisher
from api.plumbing.kafka_renew import RenewalCollector, Renewed
from api.plumbing.loop_watch import LoopWatch
from api.plumbing.tls import server_context
from api.plumbing.topic_access import AclHandlers, TopicGuard
from api.queues.app import QueueHandlers
from api.sawmill.app import SawmillHandlers
from api.sawmill.kafka import StreamWatch
from kafka_watch import retired
from kafka_watch.stall import StallJudge

log = logging.getLogger(__name__)
# blocking Kafka calls (long-poll chunks, commits, admin) run in threads: more than the default 6
_THREADS = 64


class ApiService:
    def __init__(self, cfg: ApiConfig, console: ConsoleConfig | None = None) -> None:
        cfg.check_can_start()
        self.cfg = cfg
        self.console_cfg = console if console is not None and console.console else None
        self.port = 0
        self.admin = TopicAdmin(cfg.kafka_bootstrap)
        self.publisher = KafkaPublisher(
            cfg.kafka_bootstrap,
            linger_ms=cfg.kafka_linger_ms,
            timeout_ms=cfg.publish_timeout_ms,
            max_bytes=cfg.max_message_bytes,
        )
        self.pool = ConsumerPool(
            cfg.kafka_bootstrap,
            idle_s=cfg.consumer_idle_s,
            max_consumers=cfg.max_consumers,
            stall_s=cfg.kafka_consumer_stall_s,
        )
        self.auth = (
            None
            if cfg.insecure_anonymous
            else RegistryAuthenticator(
                cfg.kafka_bootstrap,
                cfg.registry_topic,
                audit_topic=cfg.registry_audit_topic,
                transactional_id=cfg.registry_transactional_id,
                master=load_master(cfg.api_key_master_file),
                window_s=cfg.hmac_window_s,
                stall_s=cfg.kafka_consumer_stall_s,
            )
        )
        self.sawmill: SawmillHandlers | None = None
        self.queues: QueueHandlers | None = None
        self.operator: OperatorHandlers | None = None
        self.devices: DeviceHandlers | None = None
        self.health: KafkaHealth | None = None
        self._runner: web.AppRunner | None = None
        self.loop_watch = LoopWatch()
        self.started = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(_THREADS, "api-io"))
        self.loop_watch.start()
        self.admin.start()
        self.publisher.start()
        self.pool.start()
        if self.auth is not None:
            await self.auth.start()
        handlers = Handlers(self.cfg, self.admin, self.publisher, self.pool, ApiMetrics())
        self.sawmill = SawmillHandlers(self.cfg, self.admin, self.publisher, self.auth)
        self.queues = QueueHandlers(self.cfg, self.admin, self.publisher, self.pool.draining)
        self.queues.start()
        self.operator = OperatorHandlers(self.cfg)  # commands and devices over HTTP
        streams = StreamWatch(self.cfg.kafka_consumer_stall_s)  # every SSE stream's reader
        self.sawmill.stream_watch = self.operator.stream_watch = streams
        handlers.guard = TopicGuard(self.auth)
        self.health = KafkaHealth(self.cfg.kafka_bootstrap)
        self.health.start()
        health = self.health
        handlers.kafka_up = lambda: health.up
        handlers.kafka_ready = health.ready
        self.devices = DeviceHandlers(  # HTTP devices (Hono's HTTP adapter)
            self.cfg, self.auth, self.admin, handlers.stats.registry, handlers.long_polls
        )
        self.devices.start()
        extra = (
            ApiKeyHandlers(self.auth),
            AclHandlers(handlers.guard, self.admin.exists),
            self.sawmill,
            self.queues,
            self.operator,
            self.devices,
            DocsPageHandlers(),  # GET /docs: Swagger UI over /openapi.json
        )
        app = build_app(handlers, self.auth, extra)
        # the long-lived clients replaced when they stop answering, on /metrics (issue 32)
        # and the long-lived consumers replaced when they stall (receive nothing, records there)
        renewing: list[Renewed] = [self.admin.renewing, health.renewing, self.operator.feed.stall,
                                   self.pool.stall, self.queues.stall,
                                   self.queues.settings.stall,
                                   self.queues.tracker.stall, streams.tally]  # fmt: skip
        followers: list[Callable[[], StallJudge | None]] = []  # the registry's, once started
        if self.auth is not None:
            followers.append(lambda: self.auth.follower_stall if self.auth else None)

        def clients() -> list[Renewed]:
            return renewing + [j for f in followers if (j := f()) is not None]

        handlers.stats.registry.register(RenewalCollector(clients))
        handlers.stats.registry.register(self.loop_watch)
        if self.console_cfg is not None:  # the operator console (docs/console.md)
            published = handlers.stats.registry
            console = Console(
                self.console_cfg, self.cfg.kafka_bootstrap, self.cfg.registry_topic,
                lambda: published.get_sample_value("iot_api_published_messages_total") or 0.0,
                stall_s=self.cfg.kafka_consumer_stall_s,
            )  # fmt: skip
            app.add_subapp("/console", build_console_app(console))
            renewing += [console.kafka.admin, console.kafka.group_offsets, console.tailer.stall]
            followers.append(lambda: console.operators.follower_stall)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=self.cfg.shutdown_timeout_s,
            handler_cancellation=True,  # a client gone mid long poll ends its request
        )
        await self._runner.setup()
        if self.cfg.tls_port:  # the same app over HTTPS (docs/api.md), up before HTTP answers
            context = await asyncio.to_thread(server_context, self.cfg)
            tls = web.TCPSite(
                self._runner, self.cfg.api_host, self.cfg.tls_port, ssl_context=context
            )
            await tls.start()
            log.info("iot-api listening on https://%s:%d", self.cfg.api_host, self.cfg.tls_port)
        site = web.TCPSite(self._runner, self.cfg.api_host, self.cfg.api_port)
        await site.start()
        server = site._server  # the bound port when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.cfg.api_port
        log.info(
            "iot-api listening on http://%s:%d (auth: %s)",
            self.cfg.api_host,
            self.port,
            "anonymous (insecure)" if self.auth is None else "registry accounts and api keys",
        )
        self.started.set()

    async def stop(self) -> None:
        """Also after a failed :meth:`start`: every Kafka client made so far is freed."""
        self.pool.draining.set()  # long polls and receives answer now with what they have
        try:
            if self.sawmill is not None:
                self.sawmill.close()  # event streams end; their clients resume from their id
            if self.operator is not None:
                self.operator.closing.set()  # device telemetry streams end too
            if self._runner is not None:
                await self._runner.cleanup()  # stop accepting; the answers in flight finish
            if self.queues is not None:
                await self.queues.close()
            if self.operator is not None:
                await self.operator.close()
            if self.devices is not None:
                await self.devices.close(self.cfg.shutdown_timeout_s)
            await self.pool.close()
        finally:
            if self.health is not None:
                await self.health.close()
            await asyncio.to_thread(self.publisher.close, self.cfg.shutdown_timeout_s)
            self.admin.close()
            if self.auth is not None:
                self.auth.close()
            self.loop_watch.stop()
            # the replaced and closed long-lived clients, freed off the loop (kafka_watch.retired)
            await asyncio.to_thread(retired.drain, self.cfg.shutdown_timeout_s + 10)
        log.info("iot-api stopped")

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
            await stop.wait()
        finally:
            await self.stop()
