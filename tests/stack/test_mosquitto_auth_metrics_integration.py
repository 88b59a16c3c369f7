"""The Mosquitto plugin that counts refused log-ins and publishes per user name
(mosquitto/plugins/iot_auth_metrics.c), on a real Mosquitto 2.0.11 with dynamic security."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from stack import paths
from tests.bridge.helpers import wait_for
from tests.plugins.mqtt_logins import provision_devices

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not paths.auth_metrics_plugin().exists(), reason="plugin not built (`make setup`)"
    ),
]


def _connect(port: int, user: str, secret: str) -> tuple[mqtt.Client, Any]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv5)
    client.username_pw_set(user, secret)
    got: dict[str, Any] = {}
    client.on_connect = lambda _c, _u, _f, rc, _p: got.setdefault("rc", rc)
    client.connect("127.0.0.1", port)
    client.loop_start()
    wait_for(lambda: "rc" in got, 10, f"CONNACK for {user}")
    return client, got["rc"]


def _counts(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def test_refused_logins_and_publishes_are_counted_per_user(local_stack_factory: Any) -> None:
    local = local_stack_factory(partitions=1)
    path = local.mosquitto.auth_metrics_path
    wait_for(lambda: "users" in _counts(path), 10, "the plugin's first file")
    a, b = (f"am-{uuid.uuid4().hex[:6]}-{n}" for n in ("a", "b"))
    secrets = provision_devices(
        local.kafka_bootstrap, local.mqtt_host, local.mqtt_port, local.config.secrets_dir, [a, b]
    )
    # refused log-ins: a wrong secret (twice) and a user name nobody registered
    for user, secret in ((a, "wrong"), (a, "wrong again"), ("nobody-" + a, "x")):
        client, rc = _connect(local.mqtt_port, user, secret)
        client.loop_stop()
        client.disconnect()
        assert isinstance(rc, ReasonCode), (user, rc)
        assert rc.value == 0x87, (user, rc)  # Not authorized
    # a's own telemetry is allowed; b's topic and a topic no device may use are refused
    client, rc = _connect(local.mqtt_port, a, secrets[a])
    assert not rc.is_failure
    try:
        own = [client.publish(f"devices/{a}/telemetry", b"{}", qos=1) for _ in range(5)]
        foreign = [client.publish(f"devices/{b}/telemetry", b"{}", qos=1) for _ in range(3)]
        foreign.append(client.publish("somewhere/else", b"{}", qos=1))
        for info in own + foreign:
            info.wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()

    def counted() -> bool:
        users = _counts(path).get("users", {})
        return (
            users.get(a, {}).get("auth_failures") == 2
            and users.get(a, {}).get("denied_publishes") == 4
            and users.get("nobody-" + a, {}).get("auth_failures") == 1
        )

    try:
        wait_for(counted, 15, "the plugin's counts")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {_counts(path)}") from exc
    users = _counts(path)["users"]
    assert b not in users  # nothing refused for b: b never connected
    time.sleep(2.5)  # one more write interval: no late miscount of the allowed publishes
    assert _counts(path)["users"][a] == {"auth_failures": 2, "denied_publishes": 4}
