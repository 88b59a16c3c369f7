"""iot-amqp in a thread of the test process (as tests/api/harness.py runs iot-api), on free
ports, with a registry on fresh topics of the session's Kafka; and rhea (npm), an independent
client, through tests/amqp/rhea_client.js."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


RHEA = Path(__file__).with_name("rhea_client.js")
NODE_MODULES = Path(sys.prefix) / "node" / "node_modules"  # the virtualenv's (.ci/setup)


def rhea(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """tests/amqp/rhea_client.js under node, with the rhea that .ci/setup installs."""
    assert (NODE_MODULES / "rhea").is_dir(), f"no rhea in {NODE_MODULES}: run .ci/setup"
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES), **(env or {})}
    return subprocess.Popen(["node", str(RHEA), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
