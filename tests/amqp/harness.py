"""iot-amqp in a thread of the test process (as tests/api/harness.py runs iot-api), on free
ports, with a registry on fresh topics of the session's Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from amqp.config import AmqpConfig
from amqp.service import AmqpService
from tests.api.harness import serving_in_thread


@contextmanager
def running_amqp(**settings: Any) -> Iterator[AmqpService]:
    settings.setdefault("amqp_port", 0)
    settings.setdefault("http_port", 0)
    settings.setdefault("amqps_port", 0)  # no TLS listener unless the test asks (test_tls)
    service = AmqpService(AmqpConfig.load([], environ={}, **settings))
    with serving_in_thread(service, "iot-amqp"):
        yield service
