"""The bench's peers with persistent MQTT sessions (mq-bridge, Telegraf) leave them behind when
stopped; `discard_session` must end them, or Mosquitto queues every later run's messages for a
client that never comes back. A bare anonymous Mosquitto on a free port (its own: the session
stack's requires logins, and the test needs none of Kafka)."""

from __future__ import annotations

import getpass
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from bench.process_sinks import discard_session
from stack.ports import free_port
from tests.plugins.mosquitto_process import running_mosquitto

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[int]:
    port, log = free_port(), tmp_path / "mosquitto.log"
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        f"user {getpass.getuser()}\nlistener {port} 127.0.0.1\nallow_anonymous true\n"
        f"log_dest file {log}\n"
    )
    with running_mosquitto(conf, port, log):
        yield port


def _session(port: int, client_id: str, subscribe: bool) -> tuple[bool, list[bytes]]:
    """Connect with a persistent session; (session present, messages received in 1 s)."""
    got: list[bytes] = []
    connected = threading.Event()
    present: list[bool] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)

    def on_connect(c: mqtt.Client, _u: object, flags: mqtt.ConnectFlags, *_: object) -> None:
        present.append(flags.session_present)
        if subscribe:
            c.subscribe("devices/+/telemetry", qos=1)
        connected.set()

    client.on_connect = on_connect
    client.on_message = lambda _c, _u, msg: got.append(bytes(msg.payload))
    client.connect("127.0.0.1", port)
    client.loop_start()
    assert connected.wait(10)
    time.sleep(1.0)  # a queued message arrives at once after CONNACK; 1 s shows there is none
    client.disconnect()
    client.loop_stop()
    return present[0], got


def _publish(port: int) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pub")
    client.connect("127.0.0.1", port)
    client.loop_start()
    client.publish("devices/d1/telemetry", b"queued", qos=1).wait_for_publish(10)
    client.disconnect()
    client.loop_stop()


def test_a_discarded_session_is_gone_and_queues_nothing(broker: int) -> None:
    _session(broker, "peer-a", subscribe=True)
    _session(broker, "peer-b", subscribe=True)
    _publish(broker)
    assert discard_session("127.0.0.1", broker, "peer-a")
    # the session left alone keeps its subscription and the message queued for it
    assert _session(broker, "peer-b", subscribe=False) == (True, [b"queued"])
    # the discarded one: no session, nothing queued
    assert _session(broker, "peer-a", subscribe=False) == (False, [])
