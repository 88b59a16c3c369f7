"""The conftest's option 2 on a real engine (issue 33): the session servers with Kafka in a
container started by testcontainers, from the appliance's own image. Runs with
`pytest --containers` (`make test-containers`): see tests/plugins/containers.py."""

from __future__ import annotations

from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from confluent_kafka.admin import AdminClient
from paho.mqtt.enums import CallbackAPIVersion

from stack.topics import DESIGN_TOPICS
from tests.commands.harness import wait_for
from tests.conftest import _containers

pytestmark = [pytest.mark.containers, pytest.mark.integration, pytest.mark.slow]


def test_testcontainers_kafka_serves_the_session_stack(app_image: str, tmp_path: Path) -> None:
    with _containers(tmp_path) as endpoints:
        assert endpoints.kafka_bootstrap.startswith("127.0.0.1:")
        topics = AdminClient({"bootstrap.servers": endpoints.kafka_bootstrap}).list_topics(
            timeout=30
        )
        assert {t.name for t in DESIGN_TOPICS} <= set(topics.topics)
        # a device registered through the registry (on the container's Kafka) logs in
        secret = endpoints.device_logins(["tc-dev-1"])["tc-dev-1"]
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tc-dev-1")
        client.username_pw_set("tc-dev-1", secret)
        client.connect(endpoints.mqtt_host, endpoints.mqtt_port)
        client.loop_start()
        try:
            wait_for(client.is_connected, 30, "the device's MQTT log-in")
        finally:
            client.disconnect()
            client.loop_stop()
