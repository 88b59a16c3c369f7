"""How a running device answers commands: parse, decide (:mod:`device_sim.commands`), reply later.

Replies go out at QoS 1 after the seeded latency, with the command's MQTT 5 correlation data.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gmqtt import Client

from device_sim.commands import Reply, Responder, parse_command
from device_sim.counters import DeviceRecord, Stats
from device_sim.device import DeviceScript, rng_for

log = logging.getLogger(__name__)


class CommandReplier:
    """The ``on_message`` handler of one device; counts into ``stats`` and ``record``."""

    def __init__(self, script: DeviceScript, *, stats: Stats, record: DeviceRecord) -> None:
        spec = script.spec
        self.id = script.device_id
        self.stats = stats
        self.record = record
        self.responder = Responder(
            self.id,
            rng_for(spec.seed, script.index, "commands"),
            spec.reply_latency_ms,
            spec.reply_fail_rate,
            script.silent,
        )

    def on_message(
        self, client: Client, topic: str, payload: bytes, qos: int, properties: Any
    ) -> int:
        command = parse_command(self.id, topic, payload, properties or {})
        if command is None:
            return 0
        self.stats.commands += 1
        self.record.commands += 1
        reply = self.responder.reply(command)
        if reply is None:
            self.record.ignored += 1
            return 0
        asyncio.get_running_loop().call_later(reply.delay_s, self._send, client, reply)
        return 0

    def _send(self, client: Client, reply: Reply) -> None:
        props: dict[str, Any] = {}
        if reply.correlation_data is not None:
            props["correlation_data"] = reply.correlation_data
        try:
            client.publish(reply.topic, reply.payload, qos=1, **props)
        except Exception:
            log.debug("reply from %s failed", self.id, exc_info=True)
            self.stats.errors += 1
            return
        self.stats.replies += 1
        if reply.ok:
            self.record.replied_ok += 1
        else:
            self.record.replied_error += 1
