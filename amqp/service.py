"""The running iot-amqp (service): the AMQP listener, the registry (when authentication is on),
the Kafka producer and admin, /metrics, /healthz and /readyz (health.server).

SIGTERM (``stop``): the listener closes, every connection is closed with
``amqp:connection:forced`` without settling what Kafka has not acknowledged (so clients
resend: at least once), then the producer is flushed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

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
from amqp.tls import PeerCert, peer_cert, revoked, server_context
from amqp.topic_links import TopicLinks
from amqp.uploads import Uploads
from api.errors import ApiError
from api.plumbing.auth import RegistryAuthenticator
from api.plumbing.kafka_admin import TopicAdmin
from health.server import HealthServer

log = logging.getLogger(__name__)
_HANDSHAKE_S = 30.0


class Door:
    """What every connection shares."""

    def __init__(self, cfg: AmqpConfig) -> None:
        self.cfg = cfg
        self.registry = CollectorRegistry()
        self.stats = AmqpMetrics(self.registry)
        auth = None
        if cfg.registry_auth:
            auth = RegistryAuthenticator(
                cfg.kafka_bootstrap, cfg.registry_topic, stall_s=cfg.kafka_consumer_stall_s
            )
            self.stats.registry_follower = lambda: auth.follower_stall if auth else None
        self.logins = Logins(auth, lambda cert: revoked(cfg, cert))
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
        self._tls_server: asyncio.Server | None = None
        # the amqps listener's context, made now: a bad certificate stops the start, clearly
        self._tls = server_context(cfg) if cfg.amqps_port else None
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
        if self._tls is not None:
            self._tls_server = await asyncio.start_server(
                self._tls_client, self.cfg.amqp_host, self.cfg.amqps_port
            )
        self.health = HealthServer(
            self.cfg.http_host,
            self.cfg.http_port,
            door.registry,
            alive=lambda: True,
            ready=self._serving,
            thread_name="amqp-http",
        )
        self.health.start()
        if door.logins.auth is not None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_logins())
        log.info(
            "iot-amqp listening on %s:%d (AMQP, SASL %s)%s, metrics on %s:%d",
            self.cfg.amqp_host, self.port, "/".join(door.logins.mechanisms),
            f" and {self.cfg.amqps_port} (AMQP over TLS, SASL EXTERNAL with a client "
            "certificate)" if self._tls_server is not None else "",
            self.cfg.http_host, self.health.port,
        )  # fmt: skip

    def _serving(self) -> bool:
        return all(
            s is not None and s.is_serving()
            for s in (self._server, *([self._tls_server] if self._tls else []))
        )

    async def _tls_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """amqps: the TLS handshake (a client certificate of another CA fails it: one log
        line), then the connection as on the plain port, with the certificate it showed."""
        assert self._tls is not None
        peer = writer.get_extra_info("peername")
        try:
            await writer.start_tls(self._tls, ssl_handshake_timeout=_HANDSHAKE_S)
        except (ssl.SSLError, OSError, TimeoutError) as exc:
            log.info("TLS handshake with %s refused: %s", peer, exc)
            self.door.stats.logins.labels("tls_refused").inc()
            writer.transport.abort()
            return
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        await self._client(reader, writer, peer_cert(der))

    async def _client(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        cert: PeerCert | None = None,
    ) -> None:
        conn = ClientConnection(self.door, reader, writer, cert)
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
        if self._tls_server is not None:
            self._tls_server.close()
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
