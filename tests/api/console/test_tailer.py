from __future__ import annotations

from api.console.app import TOPICS
from api.console.tailer import tenant_copies


def test_tenant_copies_of_the_watched_topics() -> None:
    names = [
        "iot.telemetry", "iot.acme.telemetry", "iot.acme.presence", "iot.beta.events",
        "iot.acme.dlq",  # a tenant's dead letters: not followed (letters are named by offset)
        "iot.acme.command-status", "iot.Bad.telemetry", "iot.a.b.telemetry", "other.acme.telemetry",
    ]  # fmt: skip
    assert tenant_copies(TOPICS, names) == {
        "iot.acme.telemetry": "telemetry",
        "iot.acme.presence": "presence",
        "iot.beta.events": "events",
    }
    assert tenant_copies({"telemetry": "flat"}, ["flat", "flat.acme"]) == {}
