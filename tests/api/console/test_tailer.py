from __future__ import annotations

from api.console.runtime import TOPICS
from api.console.tailer import tenant_copies


def test_tenant_copies_of_the_watched_topics() -> None:
    names = [
        "iot.telemetry", "iot.acme.telemetry", "iot.acme.presence", "iot.beta.events",
        "iot.acme.dlq",
        "iot.acme.command-status", "iot.Bad.telemetry", "iot.a.b.telemetry", "other.acme.telemetry",
    ]  # fmt: skip
    assert tenant_copies(TOPICS, names) == {
        "iot.acme.telemetry": ("telemetry", "acme"),
        "iot.acme.presence": ("presence", "acme"),
        "iot.beta.events": ("events", "beta"),
        "iot.acme.dlq": ("dlq", "acme"),
    }
    assert tenant_copies({"telemetry": "flat"}, ["flat", "flat.acme"]) == {}
