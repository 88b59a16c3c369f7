"""A running device's command handler: counts, the delayed reply, correlation data, silence."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from device_sim.command_replies import CommandReplier
from device_sim.counters import DeviceRecord, Stats
from device_sim.device import DeviceScript
from device_sim.spec import FleetSpec


class FakeClient:
    """Records what would have been published."""

    def __init__(self, fail: bool = False) -> None:
        self.published: list[tuple[str, bytes, int, dict[str, Any]]] = []
        self.fail = fail

    def publish(self, topic: str, payload: bytes, qos: int = 0, **props: Any) -> None:
        if self.fail:
            raise OverflowError("in-flight window full")
        self.published.append((topic, payload, qos, props))


def _replier(**spec: Any) -> tuple[CommandReplier, Stats, DeviceRecord]:
    script = DeviceScript(FleetSpec(devices=1, reply_latency_ms=1.0, **spec), 0, "run-1")
    stats = Stats()
    record = DeviceRecord(device=script.device_id, groups=[], qos=1, skew_ms=0, silent=False)
    return CommandReplier(script, stats=stats, record=record), stats, record


async def _deliver(replier: CommandReplier, client: FakeClient, topic: str, props: Any) -> int:
    code = replier.on_message(client, topic, b"{}", 1, props)
    await asyncio.sleep(0.05)  # the reply latency is 0.5..1.5 ms
    return code


def test_reply_published_later_with_correlation_data() -> None:
    replier, stats, record = _replier()
    client = FakeClient()
    topic = f"devices/{replier.id}/commands/ping"
    props = {"correlation_data": [b"c-1"], "response_topic": ["r/c-1"]}
    assert asyncio.run(_deliver(replier, client, topic, props)) == 0
    assert len(client.published) == 1
    reply_topic, payload, qos, sent_props = client.published[0]
    assert (reply_topic, qos, sent_props) == ("r/c-1", 1, {"correlation_data": b"c-1"})
    assert orjson.loads(payload)["status"] == "ok"
    assert (stats.commands, stats.replies, stats.errors) == (1, 1, 0)
    assert (record.commands, record.replied_ok, record.replied_error) == (1, 1, 0)


def test_not_a_command_is_not_counted() -> None:
    replier, stats, record = _replier()
    client = FakeClient()
    asyncio.run(_deliver(replier, client, "devices/other/commands/ping", {}))
    assert client.published == []
    assert (stats.commands, record.commands) == (0, 0)


def test_silent_device_ignores_and_failed_publish_is_an_error() -> None:
    silent, stats, record = _replier(silent_fraction=1.0)
    asyncio.run(_deliver(silent, FakeClient(), f"devices/{silent.id}/commands/x", {}))
    assert (stats.commands, record.commands, record.ignored) == (1, 1, 1)
    replier, stats, record = _replier(reply_fail_rate=1.0)
    props = {"correlation_data": [b"c-2"]}
    asyncio.run(_deliver(replier, FakeClient(fail=True), f"devices/{replier.id}/commands/x", props))
    assert (stats.replies, stats.errors, record.replied_error) == (0, 1, 0)
