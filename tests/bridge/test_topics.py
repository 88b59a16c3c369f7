import pytest

from bridge.topics import Channel, device_id_hint, device_topic, parse_device_topic


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
