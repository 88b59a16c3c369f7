"""``mosquitto sync`` on a real dynsec Mosquitto: the registry wins, secrets excepted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from registry.dynsec import DynsecClient
from registry.dynsec_plan import Command
from registry.errors import RegistryError
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from registry.sync import sync_mosquitto
from registry.topics import ADMIN_USERNAME
from tests.registry.conftest import DynsecBroker
from tests.registry.mqtt_probe import Probe, connack_of

pytestmark = pytest.mark.integration


def test_sync_converges_mosquitto_on_the_registry(
    dynsec_broker: DynsecBroker, store_factory: Callable[[], KafkaStore]
) -> None:
    port = dynsec_broker.port
    admin = DynsecClient("127.0.0.1", port, ADMIN_USERNAME, dynsec_broker.admin_password)
    admin.start()
    store = store_factory()
    try:
        online = Registry.open(store, local_admin("t"), admin, write=True)
        online.create_tenant("default")
        kept = online.add_device("default", "kept").secret
        assert kept is not None
        # changes Mosquitto missed: made while the registry had no admin connection
        offline = Registry(store, local_admin("t"))
        offline.state = online.state
        offline.add_device("default", "missed")
        offline.set_device_disabled("default", "kept", True)
        offline.create_account("viewer", [Role.VIEWER])
        # and a client nobody registered, made behind the registry's back
        admin.call([Command({"command": "createClient", "username": "rogue", "password": "pw"})])
        assert not connack_of(port, "rogue", "pw").is_failure
        assert not connack_of(port, "kept", kept).is_failure

        with pytest.raises(RegistryError, match="no Mosquitto"):
            sync_mosquitto(offline)
        report = sync_mosquitto(online)
        assert report["deleted"] == ["rogue"]
        assert report["created_need_rotate"] == ["missed"]
        assert connack_of(port, "rogue", "pw").is_failure
        assert connack_of(port, "kept", kept).is_failure  # disabled, as the registry says
        assert sorted(admin.list_clients()) == sorted([ADMIN_USERNAME, "kept", "missed"])

        fresh = online.rotate_device("default", "missed").secret
        assert fresh is not None
        probe = Probe(port, "missed", fresh)
        assert probe.connected
        assert not probe.subscribe("devices/missed/commands/#").is_failure  # role restored
        probe.close()
        assert sync_mosquitto(online)["deleted"] == []  # idempotent
    finally:
        admin.close()
