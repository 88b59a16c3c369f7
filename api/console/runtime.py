"""Everything the console runs (registry link, Kafka view, tailer, sampler, sessions), apart
from its routes: the handlers reach it through the app key (``context.CONSOLE_KEY``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import KafkaException

from api.console.config import ConsoleConfig
from api.console.fleet import FleetState
from api.console.kafka_view import KafkaDownError, KafkaView
from api.console.operators import Operators
from api.console.sampler import Sampler
from api.console.sessions import Session, SessionStore
from api.console.sites import SitesWatch
from api.console.tailer import Tailer

log = logging.getLogger(__name__)
TOPICS = {
    "telemetry": "iot.telemetry",
    "events": "iot.events",
    "presence": "iot.presence",
    "dlq": "iot.dlq",
    "status": "iot.command-status",
    "replies": "iot.command-replies",
}


class Console:
    """Everything the console runs: registry link, Kafka view, tailer, sampler, sessions."""

    def __init__(
        self,
        cfg: ConsoleConfig,
        bootstrap: str,
        registry_topic: str,
        http_in: Callable[[], float] = lambda: 0.0,
        stall_s: float = 30.0,
    ) -> None:
        self.cfg = cfg
        self.bootstrap = bootstrap
        self.sessions = SessionStore(cfg.console_session_ttl_s, cfg.console_idle_s)
        self.operators = Operators(
            bootstrap, registry_topic, cfg.console_mqtt_host, cfg.console_mqtt_port,
            cfg.console_admin_password_file, shard_ports=cfg.console_mqtt_shard_ports,
            stall_s=stall_s,
        )  # fmt: skip
        self.kafka = KafkaView(bootstrap)
        self.fleet = FleetState()
        topics = TOPICS | {"audit": cfg.console_audit_topic}
        self.tailer = Tailer(bootstrap, topics, self.fleet, stall_s)  # replaced if it stalls
        self.sites: SitesWatch | None = None
        if cfg.console_sites_password_file:  # docs/edge.md: the sites' retained state/status
            self.sites = SitesWatch(
                cfg.console_mqtt_host, cfg.console_mqtt_port, cfg.console_sites_username,
                cfg.console_sites_password_file,
            )  # fmt: skip
        self.sampler = Sampler(
            cfg.services(), self.kafka, self.tailer, cfg.console_sample_s, http_in=http_in,
            sites=self.sites.views if self.sites is not None else None,
        )  # fmt: skip

    async def start(self) -> None:
        self.kafka.start()
        try:
            await asyncio.to_thread(self.kafka.ensure_topic, self.cfg.console_audit_topic)
        except (KafkaDownError, KafkaException, TimeoutError) as exc:  # the tailer retries
            log.warning("console: audit topic not ensured (%s)", exc)
        await asyncio.to_thread(self.operators.start)
        self.tailer.start()
        if self.sites is not None:
            self.sites.start()
        self.sampler.start()
        log.info("console: serving /console (services watched: %s)", ", ".join(self.cfg.services()))

    async def stop(self) -> None:
        await self.sampler.stop()
        await asyncio.to_thread(self.tailer.stop)
        if self.sites is not None:
            await asyncio.to_thread(self.sites.stop)
        self.kafka.close()
        self.operators.close()

    async def audit(self, session: Session, action: str, ref: str, **detail: Any) -> None:
        doc = {"at": int(time.time() * 1000), "actor": session.actor.name, "action": action,
               "ref": ref, "detail": detail}  # fmt: skip
        await asyncio.to_thread(
            self.kafka.produce, self.cfg.console_audit_topic, ref.encode(), orjson.dumps(doc), []
        )
