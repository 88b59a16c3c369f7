"""CommandClient's producer: made at the first send, freed at close (no broker needed: the
bootstrap address answers nothing, and a record times out in half a second)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

import commands.client as client_module
from commands.client import CommandClient

_NOWHERE = "127.0.0.1:9"  # discard port: nothing listens, nothing is sent anywhere else


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Producer]:
    """Every real Producer the client module makes."""
    producers: list[Producer] = []

    class Recorded(Producer):
        def __init__(self, settings: dict[str, Any]) -> None:
            super().__init__(settings)
            producers.append(self)

    monkeypatch.setattr(client_module, "Producer", Recorded)
    return producers


def test_a_client_that_sends_nothing_makes_no_producer(made: list[Producer]) -> None:
    client = CommandClient(_NOWHERE)
    client.flush(1)
    client.close()
    assert made == []


def test_the_first_send_makes_one_producer_and_close_lets_it_go(made: list[Producer]) -> None:
    client = CommandClient(_NOWHERE, extra={"message.timeout.ms": "500"})
    client.send_raw(b"dev-1", b"{}", flush=False)
    client.send_raw(b"dev-2", b"{}", flush=False)
    assert len(made) == 1
    client.close()
    assert client._made is None  # the object, and with it librdkafka's threads, can go
    made.clear()
