"""MQTT logins for the test servers: the suite runs with authentication on (issue 13).

The fixtures' Mosquittos run as `iot-stack up`'s does: the dynamic-security plugin, no
anonymous access, the service accounts provisioned through the registry once Kafka is up. For
the tests that are not about authorization, `provision_test_login` then creates one more
account through the registry, svc/tests, with the bridge's, the command path's and iot-api's
roles (read the up-link, send commands, publish and receive as any device), and records its
login by Mosquitto port: helpers that are given only (host, port) log in with
`login_for(port)` or `set_login(client, port)`. Tests that act as one device get that device's own
credentials from `provision_devices` (the registry's `add_devices`, as `up --devices N`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import paho.mqtt.client as mqtt

from registry.model import Role
from registry.topics import account_username
from stack.provisioning import provision, registry_session
from stack.secret_files import (
    account_secret,
    device_credentials,
    read_credentials,
    write_secret,
)

TEST_ACCOUNT = "tests"
TEST_ROLES = (Role.BRIDGE, Role.COMMANDS, Role.API)


@dataclass(frozen=True)
class MqttLogin:
    username: str
    password: str
    password_file: Path | None = None  # for services that read it from a file (the bridge)


# Mosquitto port -> the test login of the fixture that runs it (ports are unique per machine).
_LOGINS: dict[int, MqttLogin] = {}


def register(port: int, login: MqttLogin) -> None:
    _LOGINS[port] = login


def login_for(port: int) -> MqttLogin | None:
    """The test login of the fixture Mosquitto on ``port``; None = an anonymous broker."""
    return _LOGINS.get(port)


def provision_test_login(
    kafka_bootstrap: str, mqtt_host: str, mqtt_port: int, secrets_dir: Path
) -> MqttLogin:
    """Create (or re-key) svc/tests through the registry; its secret goes into
    ``secrets_dir`` (0600) like the services' ones, and the login is registered."""
    with registry_session(kafka_bootstrap, mqtt_host, mqtt_port, secrets_dir, actor="pytest") as (
        registry,
        _,
    ):
        if TEST_ACCOUNT in registry.state.accounts:
            issued = registry.rotate_account(TEST_ACCOUNT)
        else:
            issued = registry.create_account(TEST_ACCOUNT, list(TEST_ROLES))
    assert issued.secret is not None
    path = account_secret(secrets_dir, TEST_ACCOUNT)
    write_secret(path, issued.secret)
    login = MqttLogin(account_username(TEST_ACCOUNT), issued.secret, path)
    register(mqtt_port, login)
    return login


def provision_devices(
    kafka_bootstrap: str,
    mqtt_host: str,
    mqtt_port: int,
    secrets_dir: Path,
    device_ids: Sequence[str],
) -> dict[str, str]:
    """``{device_id: secret}`` of default-tenant devices registered through the registry as
    `iot-stack up --devices N` registers the simulator's (user name = client id = device id)."""
    provision(kafka_bootstrap, mqtt_host, mqtt_port, secrets_dir, device_ids, progress=_quiet)
    found = read_credentials(device_credentials(secrets_dir))
    return {d: found[d] for d in device_ids}


def _quiet(_line: str) -> None:
    pass


def set_login(client: mqtt.Client, port: int) -> mqtt.Client:
    """Give a paho client the test login of the fixture Mosquitto on ``port`` (if any)."""
    login = login_for(port)
    if login is not None:
        client.username_pw_set(login.username, login.password)
    return client


def bridge_login_settings(port: int) -> dict[str, Any]:
    """``iot-bridge`` settings (BridgeConfig fields) that log in as the test account."""
    login = login_for(port)
    if login is None:
        return {}
    if login.password_file is not None:  # the secret stays off the environment
        return {"mqtt_username": login.username, "mqtt_password_file": str(login.password_file)}
    return {"mqtt_username": login.username, "mqtt_password": login.password}


def sim_login_args(port: int) -> list[str]:
    """``iot-sim run`` flags that log every simulated device in as the test account."""
    login = login_for(port)
    if login is None:
        return []
    # "=": a generated secret is base64url and may begin with "-", which argparse would
    # take for an option if it stood alone
    return [f"--mqtt-username={login.username}", f"--mqtt-password={login.password}"]


class Credentials(TypedDict, total=False):
    username: str
    password: str


def credentials(port: int) -> Credentials:
    """``username=``/``password=`` keyword arguments of the test login (the command path's
    links take them so), or none for an anonymous broker."""
    login = login_for(port)
    return {} if login is None else {"username": login.username, "password": login.password}
