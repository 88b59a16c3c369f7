"""The session fixture's Mosquitto logs every client in (issue 13): no test may pass only
because the broker is open, so this fails if the fixtures ever go back to anonymous."""

from __future__ import annotations

import uuid

import pytest

from device_sim.cli import build_parser
from tests.conftest import Endpoints
from tests.plugins import mqtt_logins
from tests.plugins.mqtt_logins import MqttLogin, login_for, sim_login_args
from tests.registry.mqtt_probe import Probe, connack_of, wait_for

REFUSED = {0x86, 0x87}  # Bad user name or password / Not authorized (dynsec answers 0x87)
SUCCESS = 0


@pytest.mark.integration
def test_session_mosquitto_refuses_anonymous_and_wrong_logins(stack: Endpoints) -> None:
    assert stack.login is not None, "the session stack must provision a test login"
    assert login_for(stack.mqtt_port) == stack.login  # what helpers given (host, port) use
    assert connack_of(stack.mqtt_port, None, None).value in REFUSED
    assert connack_of(stack.mqtt_port, stack.login.username, "not-the-secret").value in REFUSED
    assert connack_of(stack.mqtt_port, stack.login.username, stack.login.password).value == SUCCESS


@pytest.mark.integration
def test_test_login_moves_device_traffic_and_device_logins_are_their_own(
    stack: Endpoints,
) -> None:
    assert stack.login is not None
    device = f"authsuite-{uuid.uuid4().hex[:8]}"
    other = f"authsuite-{uuid.uuid4().hex[:8]}"
    secrets = stack.device_logins([device, other])
    assert connack_of(stack.mqtt_port, device, secrets[other]).value in REFUSED
    reader = Probe(stack.mqtt_port, stack.login.username, stack.login.password)
    publisher = Probe(stack.mqtt_port, device, secrets[device])
    try:
        assert reader.subscribe(f"devices/{device}/telemetry").value == 1  # granted QoS 1
        assert publisher.connected
        assert publisher.publish(f"devices/{device}/telemetry", b'{"t": 1}').value == SUCCESS
        assert wait_for(lambda: len(reader.messages) == 1)
        # a device's login is its own: it may not speak for another device
        assert publisher.publish(f"devices/{other}/telemetry", b'{"t": 2}').value != SUCCESS
    finally:
        reader.close()
        publisher.close()


def test_servers_someone_runs_take_the_login_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.conftest import _env_endpoints

    for name in ("IOT_TEST_MQTT_USERNAME", "IOT_TEST_MQTT_PASSWORD", "IOT_TEST_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    found = _env_endpoints("mqtt://svc%2Fci:s3cret@mq.example:11999", "k:9092")
    assert (found.mqtt_host, found.mqtt_port) == ("mq.example", 11999)
    assert found.login is not None
    assert (found.login.username, found.login.password) == ("svc/ci", "s3cret")
    assert login_for(11999) == found.login  # helpers given only the port log in too
    monkeypatch.setenv("IOT_TEST_MQTT_USERNAME", "svc/other")
    monkeypatch.setenv("IOT_TEST_MQTT_PASSWORD", "pw")
    found = _env_endpoints("mqtt://mq.example:11998", "k:9092")
    assert found.login is not None
    assert (found.login.username, found.login.password) == ("svc/other", "pw")
    monkeypatch.delenv("IOT_TEST_MQTT_USERNAME")
    assert _env_endpoints("mqtt://mq.example:11997", "k:9092").login is None  # anonymous


def test_sim_login_args_carry_a_secret_that_begins_with_a_dash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A generated secret is base64url and begins with "-" one time in 64: the simulator's
    parser must still read it as the password (it once took it for an option)."""
    port = 1  # no fixture Mosquitto runs on port 1; the login is gone after the test
    monkeypatch.setitem(mqtt_logins._LOGINS, port, MqttLogin(username="tests", password="-Ab_9"))
    args = build_parser({}).parse_args(["run", *sim_login_args(port)])
    assert (args.mqtt_username, args.mqtt_password) == ("tests", "-Ab_9")
