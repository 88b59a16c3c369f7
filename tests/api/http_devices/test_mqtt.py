"""An HTTP device's MQTT session against the real Mosquitto: a command not written to a client
is kept (given back, or sent again by Mosquitto after a reconnect) until it is acknowledged."""

from __future__ import annotations

import asyncio
import uuid

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from api.http_devices.model import DeviceRef
from api.http_devices.mqtt import DeviceLink, MqttSettings
from tests.commands.harness import forget_session
from tests.conftest import Endpoints
from tests.plugins.mqtt_logins import set_login

pytestmark = pytest.mark.integration


def _send_command(stack: Endpoints, topic: str, command_id: str) -> None:
    """What the command path publishes: QoS 1 with the command id as a user property."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    set_login(client, stack.mqtt_port)
    client.connect(stack.mqtt_host, stack.mqtt_port)
    client.loop_start()
    try:
        props = Properties(PacketTypes.PUBLISH)
        props.UserProperty = [("command_id", command_id), ("attempt", "1")]
        info = client.publish(topic, b'{"command_id": "%s"}' % command_id.encode(), 1,
                              properties=props)  # fmt: skip
        info.wait_for_publish(10)
        assert info.is_published()
    finally:
        client.disconnect()
        client.loop_stop()


def test_a_command_not_acknowledged_is_kept_across_give_back_and_reconnect(
    stack: Endpoints,
) -> None:
    ref = DeviceRef("default", f"http-{uuid.uuid4().hex[:8]}")
    assert stack.login is not None  # iot-api logs in (as svc/api in a stack; here svc/tests)
    login = stack.login
    settings = MqttSettings(
        stack.mqtt_host, stack.mqtt_port, login.username, login.password, session_expiry_s=300
    )

    async def scenario() -> list[object]:
        seen: list[object] = []
        first = DeviceLink(settings, ref, ())
        await first.connect()
        assert await first.take(0.2) is None
        await asyncio.to_thread(
            _send_command, stack, f"devices/{ref.device}/commands/reboot", "c-1"
        )
        held = await first.take(10)
        assert held is not None
        seen.append(held.command.command_id)
        first.give_back(held)  # the client left before it was written
        again = await first.take(1)
        assert again is not None
        seen.append(again.command.command_id)
        first.close()  # closed without a PUBACK: Mosquitto keeps it in the session

        second = DeviceLink(settings, ref, ())
        await second.connect()
        redelivered = await second.take(10)
        assert redelivered is not None
        seen.append((redelivered.command.command_id, redelivered.command.name))
        second.ack(redelivered)  # written: Mosquitto may forget it
        await asyncio.sleep(0.5)  # the PUBACK on its way before the connection ends
        second.close()

        third = DeviceLink(settings, ref, ())
        await third.connect()
        seen.append(await third.take(1.5))  # nothing left
        third.close()
        return seen

    try:
        assert asyncio.run(scenario()) == ["c-1", "c-1", ("c-1", "reboot"), None]
    finally:
        forget_session(stack.mqtt_host, stack.mqtt_port, f"iot-api/{ref.username}")
