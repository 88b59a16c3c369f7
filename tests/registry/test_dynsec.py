"""Registry -> Mosquitto dynamic security, on a real Mosquitto 2.0.11 with the dynsec plugin
and a real Kafka: who may connect, publish and subscribe, and how fast a change bites."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from registry.dynsec import DynsecClient, DynsecError
from registry.errors import ConflictError, NotFoundError
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from registry.topics import ADMIN_USERNAME
from tests.registry.conftest import DynsecBroker
from tests.registry.mqtt_probe import Probe, connack_of, wait_for

pytestmark = pytest.mark.integration

NOT_AUTHORIZED = 0x87
ADMINISTRATIVE_ACTION = 0x98
NO_MATCHING_SUBSCRIBERS = 0x10


@pytest.fixture
def registry(
    dynsec_broker: DynsecBroker, store_factory: Callable[[], KafkaStore]
) -> Iterator[Registry]:
    mosquitto = DynsecClient(
        "127.0.0.1", dynsec_broker.port, ADMIN_USERNAME, dynsec_broker.admin_password
    ).start()
    reg = Registry.open(store_factory(), local_admin("test"), mosquitto, write=True)
    reg.create_tenant("default")
    reg.create_tenant("t1")
    try:
        yield reg
    finally:
        mosquitto.close()


def _secret(reg: Registry, tenant: str, device: str, groups: tuple[str, ...] = ()) -> str:
    secret = reg.add_device(tenant, device, groups).secret
    assert secret is not None
    return secret


def test_admin_login_is_checked(dynsec_broker: DynsecBroker) -> None:
    with pytest.raises(DynsecError, match="login failed"):
        DynsecClient("127.0.0.1", dynsec_broker.port, ADMIN_USERNAME, "wrong", timeout=5).start()


def test_who_may_connect(registry: Registry, dynsec_broker: DynsecBroker) -> None:
    port = dynsec_broker.port
    secret = _secret(registry, "default", "d1")
    anonymous = connack_of(port, None, None)
    wrong = connack_of(port, "d1", "not-the-secret")
    unknown = connack_of(port, "nobody", secret)
    stolen_id = connack_of(port, "d1", secret, client_id="d2")
    print(
        f"MEASURED connack anonymous={anonymous!r} wrong={wrong!r} unknown={unknown!r} "
        f"other-client-id={stolen_id!r}"
    )
    assert anonymous.value == NOT_AUTHORIZED
    # measured on 2.0.11 + dynsec: 0x87 for every refusal, never 0x86 (bad user name or password)
    assert wrong.value == NOT_AUTHORIZED
    assert unknown.value == NOT_AUTHORIZED
    assert stolen_id.is_failure  # client id pinned to the user name
    ok = connack_of(port, "d1", secret)
    assert not ok.is_failure


def test_a_device_speaks_only_for_itself(registry: Registry, dynsec_broker: DynsecBroker) -> None:
    port = dynsec_broker.port
    a = Probe(port, "dA", _secret(registry, "default", "dA", ("floor",)))
    b = Probe(port, "dB", _secret(registry, "default", "dB"))
    cmd = registry.create_account("cmd", [Role.COMMANDS])
    reader = registry.create_account("bridge", [Role.BRIDGE])
    assert cmd.secret
    assert reader.secret
    sender = Probe(port, "svc/cmd", cmd.secret)
    bridge = Probe(port, "svc/bridge", reader.secret)
    try:
        assert a.connected
        assert b.connected
        assert sender.connected
        assert bridge.connected
        assert not bridge.subscribe("devices/+/telemetry").is_failure
        assert not bridge.subscribe("$share/b/tenants/+/devices/+/events").is_failure
        assert bridge.subscribe("devices/#").value == NOT_AUTHORIZED
        assert a.subscribe("$share/x/devices/dA/commands/#").value == NOT_AUTHORIZED
        assert a.subscribe("devices/dA/#").value == NOT_AUTHORIZED
        assert a.subscribe("#").value == NOT_AUTHORIZED
        assert a.subscribe("$SYS/#").value == NOT_AUTHORIZED
        assert a.subscribe("devices/dB/commands/#").value == NOT_AUTHORIZED
        assert a.subscribe("devices/+/telemetry").value == NOT_AUTHORIZED
        assert not a.subscribe("devices/dA/commands/#").is_failure
        assert not a.subscribe("groups/floor/commands/#").is_failure
        assert not b.subscribe("devices/dB/commands/#").is_failure
        assert b.subscribe("groups/floor/commands/#").value == NOT_AUTHORIZED

        own = a.publish("devices/dA/telemetry", b'{"seq":1}')
        forged = a.publish("devices/dB/telemetry", b'{"seq":666}')
        to_command = a.publish("devices/dB/commands/reboot")
        print(f"MEASURED puback own={own!r} forged={forged!r} command={to_command!r}")
        assert own.value in (0, NO_MATCHING_SUBSCRIBERS)
        assert forged.value == NOT_AUTHORIZED
        assert to_command.value == NOT_AUTHORIZED
        assert a.connected  # a denied publish does not cost the connection

        assert not sender.publish("devices/dB/commands/reboot").is_failure
        assert not sender.publish("groups/floor/commands/blink").is_failure
        # end markers, published last: once they arrived, anything else would have too
        assert not sender.publish("devices/dB/commands/end").is_failure
        assert not sender.publish("groups/floor/commands/end").is_failure
        assert a.publish("devices/dA/telemetry", b"end").value == 0
        assert wait_for(lambda: ("devices/dB/commands/end", b"{}") in b.messages)
        assert wait_for(lambda: ("groups/floor/commands/end", b"{}") in a.messages)
        assert wait_for(lambda: ("devices/dA/telemetry", b"end") in bridge.messages)
        assert b.messages == [
            ("devices/dB/commands/reboot", b"{}"),
            ("devices/dB/commands/end", b"{}"),
        ]
        assert a.messages == [
            ("groups/floor/commands/blink", b"{}"),
            ("groups/floor/commands/end", b"{}"),
        ]
        assert bridge.messages == [  # not the forged one
            ("devices/dA/telemetry", b'{"seq":1}'),
            ("devices/dA/telemetry", b"end"),
        ]
    finally:
        for probe in (a, b, sender, bridge):
            probe.close()


def test_tenants_with_the_same_device_id(registry: Registry, dynsec_broker: DynsecBroker) -> None:
    port = dynsec_broker.port
    plain = Probe(port, "pump", _secret(registry, "default", "pump"))
    tenant = Probe(port, "t1/pump", _secret(registry, "t1", "pump"))
    try:
        assert plain.connected
        assert tenant.connected
        assert tenant.publish("tenants/t1/devices/pump/telemetry").value in (
            0,
            NO_MATCHING_SUBSCRIBERS,
        )
        assert tenant.publish("devices/pump/telemetry").value == NOT_AUTHORIZED
        assert plain.publish("tenants/t1/devices/pump/telemetry").value == NOT_AUTHORIZED
        assert plain.subscribe("tenants/t1/devices/pump/commands/#").value == NOT_AUTHORIZED
    finally:
        plain.close()
        tenant.close()


def test_disable_drops_within_5s_and_refuses_after(
    registry: Registry, dynsec_broker: DynsecBroker
) -> None:
    port = dynsec_broker.port
    secret = _secret(registry, "default", "d1")
    other = Probe(port, "d2", _secret(registry, "default", "d2"))
    live = Probe(port, "d1", secret)
    assert live.connected
    started = time.monotonic()
    registry.set_device_disabled("default", "d1", True)
    assert live.wait_gone(5.0), "still connected 5 s after disable"
    assert live.disconnected_at is not None
    print(
        f"MEASURED disable->disconnect {live.disconnected_at - started:.3f} s "
        f"reason={live.disconnect!r}"
    )
    assert live.disconnect is not None
    assert live.disconnect.value == ADMINISTRATIVE_ACTION
    refused = connack_of(port, "d1", secret)
    assert refused.is_failure
    assert other.connected  # nobody else was dropped
    registry.set_device_disabled("default", "d1", False)
    again = connack_of(port, "d1", secret)
    assert not again.is_failure
    live.close()
    other.close()


def test_rotate_and_delete(registry: Registry, dynsec_broker: DynsecBroker) -> None:
    port = dynsec_broker.port
    old = _secret(registry, "default", "d1")
    live = Probe(port, "d1", old)
    new = registry.rotate_device("default", "d1").secret
    assert new is not None
    assert live.wait_gone(5.0)
    refused = connack_of(port, "d1", old)
    assert refused.is_failure
    accepted = connack_of(port, "d1", new)
    assert not accepted.is_failure
    live.close()
    live = Probe(port, "d1", new)
    registry.delete_device("default", "d1")
    assert live.wait_gone(5.0)
    gone = connack_of(port, "d1", new)
    assert gone.is_failure
    live.close()
    # the secrets crossed Mosquitto in the clear, but it neither logged nor stored them
    for text in (dynsec_broker.log.read_text(), dynsec_broker.config.read_text()):
        assert old not in text
        assert new not in text
    assert "setClientPassword | username=d1 | password=******" in dynsec_broker.log.read_text()


def test_disabling_a_tenant_drops_its_devices(
    registry: Registry, dynsec_broker: DynsecBroker
) -> None:
    port = dynsec_broker.port
    t1 = Probe(port, "t1/d1", _secret(registry, "t1", "d1"))
    site = registry.create_account("site", [Role.EDGE], tenant="t1").secret
    assert site is not None
    edge = Probe(port, "svc/site", site)
    plain = Probe(port, "d1", _secret(registry, "default", "d1"))
    assert edge.connected
    registry.set_tenant_disabled("t1", True)
    assert t1.wait_gone(5.0)
    assert edge.wait_gone(5.0)
    assert plain.connected
    assert connack_of(port, "svc/site", site).is_failure
    registry.set_tenant_disabled("t1", False)
    assert not connack_of(port, "svc/site", site).is_failure
    for probe in (t1, edge, plain):
        probe.close()


def test_mqtt311_and_qos0_denials_are_silent(
    registry: Registry, dynsec_broker: DynsecBroker
) -> None:
    """What a device that cannot be told sees: a plain PUBACK (3.1.1) or nothing (QoS 0)."""
    port = dynsec_broker.port
    reader = registry.create_account("bridge", [Role.BRIDGE]).secret
    assert reader is not None
    bridge = Probe(port, "svc/bridge", reader)
    assert not bridge.subscribe("devices/+/telemetry").is_failure
    secret = _secret(registry, "default", "old")
    acks: dict[int, ReasonCode] = {}
    connacks: list[ReasonCode] = []
    v311 = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="old", protocol=mqtt.MQTTv311)
    v311.username_pw_set("old", secret)
    v311.on_connect = lambda _c, _u, _f, rc, _p: connacks.append(rc)
    v311.on_publish = lambda _c, _u, mid, rc, _p: acks.__setitem__(mid, rc)
    v311.connect("127.0.0.1", port)
    v311.loop_start()
    try:
        assert wait_for(lambda: bool(connacks))
        assert not connacks[0].is_failure
        forged = v311.publish("devices/other/telemetry", b"forged", qos=1)
        v311.publish("devices/other/telemetry", b"forged0", qos=0)
        own = v311.publish("devices/old/telemetry", b"own", qos=1)
        assert wait_for(lambda: forged.mid in acks and own.mid in acks)
        assert not acks[forged.mid].is_failure  # 3.1.1 PUBACK carries no reason code
        assert not acks[own.mid].is_failure
        assert wait_for(lambda: len(bridge.messages) > 0)  # own was published last
        assert bridge.messages == [("devices/old/telemetry", b"own")]
        assert "Denied PUBLISH from old" in dynsec_broker.log.read_text()
    finally:
        v311.disconnect()
        v311.loop_stop()
        bridge.close()


def test_group_membership_changes_apply_at_once(
    registry: Registry, dynsec_broker: DynsecBroker
) -> None:
    """2.0.11's dynsec drops a client whose groups change (0x98), so the device reconnects
    under its new rules: measured, not chosen."""
    port = dynsec_broker.port
    cmd = registry.create_account("cmd", [Role.COMMANDS]).secret
    assert cmd is not None
    secret = _secret(registry, "default", "d1", ("floor",))
    sender = Probe(port, "svc/cmd", cmd)
    bystander = Probe(port, "d2", _secret(registry, "default", "d2", ("floor",)))
    member = Probe(port, "d1", secret)
    try:
        assert not member.subscribe("groups/floor/commands/#").is_failure
        assert sender.publish("groups/floor/commands/a").value == 0
        _secret(registry, "default", "d3", ("floor",))  # a new member: nobody else dropped
        # a SUBACK now proves the connection outlived the change (Mosquitto kicks before it
        # answers the dynsec command that the registry waited for)
        assert not member.subscribe("devices/d1/commands/#").is_failure
        assert not bystander.subscribe("devices/d2/commands/#").is_failure
        registry.set_device_groups("default", "d1", remove=["floor"])
        assert member.wait_gone(5.0)
        assert member.disconnect is not None
        assert member.disconnect.value == ADMINISTRATIVE_ACTION
        assert bystander.connected  # only the changed device is dropped
        member.close()
        member = Probe(port, "d1", secret)
        assert member.connected
        assert member.subscribe("groups/floor/commands/#").value == NOT_AUTHORIZED
        registry.set_device_groups("default", "d1", add=["lab"])
        assert member.wait_gone(5.0)
        member.close()
        member = Probe(port, "d1", secret)
        assert not member.subscribe("groups/lab/commands/#").is_failure
    finally:
        for probe in (sender, bystander, member):
            probe.close()


def test_edge_site_acts_for_its_own_devices_only(
    registry: Registry, dynsec_broker: DynsecBroker
) -> None:
    """Issue 16: a site publishes and receives only for the devices registered to it."""
    registry.create_tenant("t2")
    secret = registry.create_account("site-1", [Role.EDGE], tenant="t1").secret
    assert registry.create_account("site-2", [Role.EDGE], tenant="t1").secret
    assert secret is not None
    registry.add_device("t1", "x", site="site-1")
    registry.add_device("t1", "y", site="site-2")
    registry.add_device("t1", "z")
    registry.add_device("t2", "x")
    edge = Probe(dynsec_broker.port, "svc/site-1", secret)
    try:
        assert edge.publish("tenants/t1/devices/x/telemetry").value in (0, NO_MATCHING_SUBSCRIBERS)
        for other in ("y", "z"):  # another site's device, a central device
            assert edge.publish(f"tenants/t1/devices/{other}/telemetry").value == NOT_AUTHORIZED
        assert edge.publish("devices/x/telemetry").value == NOT_AUTHORIZED
        assert edge.publish("tenants/t2/devices/x/telemetry").value == NOT_AUTHORIZED
        assert not edge.subscribe("tenants/t1/devices/x/commands/#").is_failure
        assert edge.subscribe("tenants/t1/devices/y/commands/#").value == NOT_AUTHORIZED
        assert edge.subscribe("tenants/t1/devices/+/commands/#").value == NOT_AUTHORIZED
        assert edge.subscribe("tenants/t2/devices/+/commands/#").value == NOT_AUTHORIZED
        # moving a device between sites moves the right with it, on the live connection
        registry.set_device_site("t1", "y", "site-1")
        assert edge.publish("tenants/t1/devices/y/telemetry").value in (0, NO_MATCHING_SUBSCRIBERS)
        registry.set_device_site("t1", "x", None)
        assert edge.publish("tenants/t1/devices/x/telemetry").value == NOT_AUTHORIZED
        with pytest.raises(NotFoundError):  # a site of another tenant
            registry.set_device_site("t2", "x", "site-1")
        with pytest.raises(ConflictError):  # still has device y
            registry.delete_account("site-1")
    finally:
        edge.close()


def test_bulk_provisioning(registry: Registry, dynsec_broker: DynsecBroker) -> None:
    """A fleet in one call (one Kafka transaction, batched dynsec commands); measured."""
    ids = [f"dev-{i:05d}" for i in range(300)]
    started = time.monotonic()
    issued = registry.add_devices("default", ids, ["fleet"])
    took = time.monotonic() - started
    print(
        f"MEASURED bulk add of {len(ids)} devices: {took:.2f} s "
        f"({took / len(ids) * 1000:.1f} ms each)"
    )
    for n in (0, 150, 299):
        secret = issued[n].secret
        assert secret is not None
        probe = Probe(dynsec_broker.port, ids[n], secret)
        assert probe.connected
        assert not probe.subscribe("groups/fleet/commands/#").is_failure
        assert probe.publish(f"devices/{ids[(n + 1) % 300]}/telemetry").value == NOT_AUTHORIZED
        probe.close()
