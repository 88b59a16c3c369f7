from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.harness import Client, running_api
from tests.conftest import Endpoints


@pytest.fixture(scope="module")
def api(stack: Endpoints) -> Iterator[Client]:
    """An anonymous `iot-api` on the session's Kafka (auth has its own tests)."""
    with running_api(kafka_bootstrap=stack.kafka_bootstrap, insecure_anonymous=True) as svc:
        yield Client(svc.port)
