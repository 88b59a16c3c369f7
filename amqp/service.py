"""The running iot-amqp (service): the AMQP listener, the registry (when authentication is on),
the Kafka producer and admin, /metrics, /healthz and /readyz (health.server).

SIGTERM (``stop``): the listener closes, every connection is closed with
``amqp:connection:forced`` without settling what Kafka has not acknowledged (so clients
resend: at least once), then the producer is flushed.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry

from amqp.commands import Commands
from amqp.config import AmqpConfig
from amqp.connection import ClientConnection
from amqp.kafka import UploadProducer
from amqp.login import Logins
from amqp.metrics import AmqpMetrics
from amqp.model import Cond
from amqp.northbound import Northbound
from amqp.queue_links import QueueLinks
from amqp.send_links import SendLinks
from amqp.topic_links import TopicLinks
from amqp.uploads import Uploads
from api.errors import ApiError
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.kafka_admin import TopicAdmin
from health.server import HealthServer

log = logging.getLogger(__name__)


class Door:
    """What every connection shares."""

    def __init__(self, cfg: AmqpConfig) -> None:
        self.cfg = cfg
        self.registry = CollectorRegistry()
        self.stats = AmqpMetrics(self.registry)
        auth = None
        if cfg.registry_auth:
            auth = RegistryAuthenticator(cfg.kafka_bootstrap, cfg.registry_topic)
        self.logins = Logins(auth)
        self.producer = UploadProducer(
            cfg.kafka_bootstrap,
            linger_ms=cfg.kafka_linger_ms,
            timeout_ms=cfg.publish_timeout_ms,
            max_bytes=cfg.max_message_bytes,
        )
        self.admin = TopicAdmin(cfg.kafka_bootstrap)
        self.uploads = Uploads(self)
        self.commands = Commands(self)
        self.north = Northbound(self)
        self.senders = SendLinks(self)  # the client sends to a queue or topic
        self.queues = QueueLinks(self)  # queue/{q}
        self.topics = TopicLinks(self)  # topic/{name}[::{group}]


class AmqpService:
    def __init__(self, cfg: AmqpConfig) -> None:
        cfg.check_can_start()
        self.cfg = cfg
        self.door = Door(cfg)
        self.connections: set[ClientConnection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.health: HealthServer | None = None
        self.port = 0
        self._stopped: asyncio.Event | None = None
        self._watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        door = self.door
        door.producer.start()
        door.admin.start()
        door.uploads.start()
        door.commands.start()
        door.queues.start()
        if door.logins.auth is not None:
            await door.logins.auth.start()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(
            self._client, self.cfg.amqp_host, self.cfg.amqp_port
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.health = HealthServer(
            self.cfg.http_host,
            self.cfg.http_port,
            door.registry,
            alive=lambda: True,
            ready=lambda: self._server is not None and self._server.is_serving(),
            thread_name="amqp-http",
        )
        self.health.start()
        if door.logins.auth is not None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_logins())
        log.info(
            "iot-amqp listening on %s:%d (AMQP, SASL %s), metrics on %s:%d",
            self.cfg.amqp_host, self.port, "/".join(door.logins.mechanisms),
            self.cfg.http_host, self.health.port,
        )  # fmt: skip

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ClientConnection(self.door, reader, writer)
        self.connections.add(conn)
        try:
            await conn.run()
        except Exception:  # one connection's bug must not end the others
            log.exception("connection failed")
        finally:
            self.connections.discard(conn)

    async def _watch_logins(self) -> None:
        """Close the connection of a device disabled, deleted or re-keyed (or of its tenant)
        since it logged in, within ``login_check_s`` (Hono's terminal error, Mosquitto's
        DISCONNECT 0x98). One read barrier per round for all connections (the registry's
        follower reads only what changed); a round Kafka does not answer decides nothing."""
        logins = self.door.logins
        assert logins.auth is not None
        while True:
            await asyncio.sleep(self.cfg.login_check_s)
            if not self.connections:
                continue
            try:
                await logins.auth.synced()
            except ApiError as exc:
                log.warning("registry not readable, open connections not re-checked: %s", exc)
                continue
            for conn in list(self.connections):
                if not logins.still_allowed(conn.login):
                    log.info("closing the connection of %s: no longer allowed", conn.login)
                    conn.close_with(Cond.UNAUTHORIZED, "disabled, deleted or re-keyed")

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT, then stop."""
        import signal

        await self.start()
        loop = asyncio.get_running_loop()
        assert self._stopped is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        await self._stopped.wait()
        await self.stop()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._watch is not None:
            self._watch.cancel()
        for conn in list(self.connections):
            conn.close_with(Cond.FORCED, "iot-amqp is shutting down; resend what was not accepted")
        await asyncio.sleep(0)
        door = self.door
        await door.commands.close()
        await door.north.close()
        door.topics.close()
        await door.queues.close()
        await asyncio.to_thread(door.producer.close, self.cfg.shutdown_timeout_s)
        door.admin.close()
        if door.logins.auth is not None:
            door.logins.auth.close()
        if self.health is not None:
            self.health.stop()
        if self._server is not None:
            self._server = None
