from __future__ import annotations

from api.console.overview import History, Sample, by_label, parse_prometheus, point, total

BRIDGE_1 = """# HELP iot_bridge_received_total MQTT messages received, by channel
# TYPE iot_bridge_received_total counter
iot_bridge_received_total{channel="telemetry"} 100.0
iot_bridge_received_total{channel="events"} 20.0
iot_bridge_produced_total{kind="telemetry"} 110.0
iot_bridge_dlq_total{code="not_json"} 4.0
iot_bridge_produce_latency_seconds_count 100.0
iot_bridge_produce_latency_seconds_sum 2.0
"""
BRIDGE_2 = (
    BRIDGE_1.replace("} 100.0", "} 300.0")
    .replace('"} 110.0', '"} 306.0')
    .replace('"not_json"} 4.0', '"not_json"} 14.0')
)


def test_parse_prometheus_drops_total_suffix_and_reads_labels() -> None:
    m = parse_prometheus(BRIDGE_1)
    assert total(m, "iot_bridge_received") == 120.0
    assert total(m, "iot_bridge_received", channel="events") == 20.0
    assert by_label(m, "iot_bridge_dlq", "code") == {"not_json": 4.0}
    assert parse_prometheus('garbage line\nx{a="1"} nan-ish') == {}


def test_rates_between_two_samples() -> None:
    first = Sample(10.0, {"bridge": True}, {"bridge": parse_prometheus(BRIDGE_1)}, http_in=5)
    second = Sample(12.0, {"bridge": True}, {"bridge": parse_prometheus(BRIDGE_2)}, http_in=9,
                    command_states={"succeeded": 4})  # fmt: skip
    p = point(first, second)
    assert p["mqtt_in"] == 100.0  # (320 - 120) / 2 s
    assert p["kafka_out"] == 98.0  # (306 - 110) / 2 s
    assert p["http_in"] == 2.0
    assert p["dlq"] == {"not_json": 5.0}
    assert p["bridge_pending"] == 0.0  # 320 received - 306 produced - 14 dead letters
    assert p["commands"]["succeeded"] == 2.0


TENANTS_1 = """iot_bridge_tenant_received_total{tenant="acme"} 10.0
iot_bridge_tenant_received_total{tenant="default"} 100.0
iot_bridge_tenant_dlq_total{tenant="acme",code="quota_exceeded"} 2.0
"""
TENANTS_2 = """iot_bridge_tenant_received_total{tenant="acme"} 30.0
iot_bridge_tenant_received_total{tenant="default"} 104.0
iot_bridge_tenant_dlq_total{tenant="acme",code="quota_exceeded"} 12.0
"""


def test_tenant_rates_add_up_every_bridge_instance() -> None:
    def sample(at: float, text: str) -> Sample:
        m = parse_prometheus(text)
        # two instances sharing the traffic, and a service that is not a bridge
        return Sample(at, {}, {"bridge-1": m, "bridge-2": m, "commands": m})

    p = point(sample(10.0, TENANTS_1), sample(12.0, TENANTS_2))
    assert p["tenants"] == {
        "acme": {"in": 20.0, "dlq": {"quota_exceeded": 10.0}},  # 2 x (30 - 10) / 2 s
        "default": {"in": 4.0, "dlq": {}},
    }
    history = History()
    history.add(sample(10.0, TENANTS_1))  # the first point has no rates (0 for everyone)
    history.add(sample(12.0, TENANTS_2))
    assert history.tenant_rates(last=1)["acme"]["in"] == 20.0
    history.add(sample(14.0, TENANTS_2))  # nothing new: 0 msgs/s
    assert history.tenant_rates(last=5)["acme"]["in"] == 10.0  # the first point has no rates
    assert history.tenant_rates(last=5)["acme"]["dlq"] == {"quota_exceeded": 5.0}


def test_a_restarted_service_never_gives_negative_rates() -> None:
    first = Sample(10.0, {}, {"bridge": parse_prometheus(BRIDGE_2)})
    second = Sample(11.0, {}, {"bridge": parse_prometheus(BRIDGE_1)})
    assert point(first, second)["mqtt_in"] == 0.0


def test_history_is_bounded() -> None:
    history = History(size=3)
    for i in range(5):
        history.add(Sample(float(i), {"bridge": False}, {}))
    assert [p["at"] for p in history.points()] == [2.0, 3.0, 4.0]
    assert history.points()[-1]["bridge_pending"] is None  # no metrics: unknown, not zero


def test_a_full_data_dir_the_bridge_watches_is_in_the_point() -> None:
    stores = (
        'iot_bridge_store_free_bytes{store="kafka",path="/k"} 0.0\n'
        'iot_bridge_store_free_bytes{store="mosquitto",path="/m"} 5.0e+07\n'
        'iot_bridge_store_full{store="kafka",path="/k"} 1.0\n'
        'iot_bridge_store_full{store="mosquitto",path="/m"} 0.0\n'
    )
    sample = Sample(1.0, {"bridge": True}, {"bridge": parse_prometheus(BRIDGE_1 + stores)})
    assert point(None, sample)["disk_full"] == {"kafka": 0.0}
    quiet = Sample(1.0, {"bridge": True}, {"bridge": parse_prometheus(BRIDGE_1)})
    assert point(None, quiet)["disk_full"] == {}


def test_every_shards_command_path_is_added_up() -> None:
    """`iot-stack up --mqtt-shards 2`: `commands-1` and `commands-2`, as the bridges are."""
    one, two = (
        parse_prometheus("iot_commands_pending 3\n"),
        parse_prometheus("iot_commands_pending 4\n"),
    )
    sharded = point(None, Sample(1.0, {}, {"commands-1": one, "commands-2": two, "bridge-1": one}))
    assert sharded["commands_pending"] == 7.0
    assert point(None, Sample(1.0, {}, {"commands": one}))["commands_pending"] == 3.0
    assert point(None, Sample(1.0, {}, {"bridge": one}))["commands_pending"] is None
