import pytest

from bridge.topics import (
    DEFAULT_TENANT,
    TENANT_RE,
    Channel,
    device_id_hint,
    device_topic,
    parse_device_topic,
    parse_device_topic_cached,
    parse_tenant_topic,
    tenant_kafka_topic,
    tenant_mqtt_root,
)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("devices/d1/telemetry", ("d1", Channel.TELEMETRY)),
        ("devices/d1/events", ("d1", Channel.EVENTS)),
        ("devices/d1/status", ("d1", Channel.STATUS)),
        ("devices/a_b.c:d-1/telemetry", ("a_b.c:d-1", Channel.TELEMETRY)),
        ("devices/" + "x" * 128 + "/telemetry", ("x" * 128, Channel.TELEMETRY)),
        ("devices/" + "x" * 129 + "/telemetry", None),
        ("devices//telemetry", None),
        ("devices/d 1/telemetry", None),
        ("devices/d1/telemetry/extra", None),
        ("devices/d1/commands", None),
        ("device/d1/telemetry", None),
        ("devices/d1", None),
        ("devices/d\u00e9/telemetry", None),
        ("", None),
    ],
)
def test_parse_device_topic(topic: str, expected: tuple[str, Channel] | None) -> None:
    assert parse_device_topic(topic) == expected


def test_hint_and_build() -> None:
    assert device_id_hint("devices/d1/whatever/x") == "d1"
    assert device_id_hint("other/d1") is None
    assert device_topic("d9", Channel.EVENTS) == "devices/d9/events"


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("devices/a/telemetry", ("default", "a", Channel.TELEMETRY)),
        ("tenants/acme/devices/a/telemetry", ("acme", "a", Channel.TELEMETRY)),
        ("tenants/acme/devices/a/events", ("acme", "a", Channel.EVENTS)),
        ("tenants/acme/devices/a/status", ("acme", "a", Channel.STATUS)),
        ("tenants/default/devices/a/telemetry", None),  # one spelling per device
        ("tenants/Acme/devices/a/telemetry", None),  # not a tenant id
        ("tenants/acme/devices/a b/telemetry", None),
        ("tenants/acme/groups/a/telemetry", None),
        ("tenants/acme/devices/a/commands", None),
        ("tenants/acme/devices/a/telemetry/x", None),
        ("tenants//devices/a/telemetry", None),
    ],
)
def test_parse_tenant_topic(topic: str, expected: tuple[str, str, Channel] | None) -> None:
    assert parse_tenant_topic(topic) == expected
    cached = parse_device_topic_cached(topic)
    if expected is None:
        assert cached is None
    else:
        assert cached == (
            expected[1],
            expected[2],
            expected[1].encode(),
            topic.encode(),
            expected[0],
        )


def test_tenant_kafka_topic_and_root() -> None:
    assert tenant_kafka_topic("iot.telemetry", "default") == "iot.telemetry"
    assert tenant_kafka_topic("iot.telemetry", "acme") == "iot.acme.telemetry"
    assert tenant_kafka_topic("iot.commands.dlq", "acme") == "iot.acme.commands.dlq"
    assert tenant_kafka_topic("tel-1", "acme") == "tel-1.acme"
    assert tenant_mqtt_root("default") == ""
    assert tenant_mqtt_root("acme") == "tenants/acme/"
    assert device_id_hint("tenants/acme/devices/p-1/bogus") == "p-1"


def test_tenant_pattern_equals_the_registrys() -> None:
    from registry import ids, topics

    assert TENANT_RE.pattern == ids.TENANT_RE.pattern
    assert DEFAULT_TENANT == ids.DEFAULT_TENANT
    for tenant in ("default", "acme"):
        assert tenant_mqtt_root(tenant) == topics.tenant_root(tenant)
