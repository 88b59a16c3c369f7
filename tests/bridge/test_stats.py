from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bridge.stats import BridgeCollector, BridgeStats


def test_collector_exports_counters_histogram_and_gauges() -> None:
    stats = BridgeStats()
    stats.received["telemetry"] += 3
    stats.dlq["not_json"] += 2
    stats.acked = 3
    for seconds in (0.0005, 0.003, 0.003, 99.0):
        stats.latency.observe(seconds)
    stats.ack_lag.observe(0.2)
    reg = CollectorRegistry()
    reg.register(
        BridgeCollector(
            stats, lambda: {"iot_bridge_pending_messages": ("help", 4.0)}, lambda: {"connect": 1}
        )
    )
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(generate_latest(reg).decode())
        for s in fam.samples
    }
    assert samples[("iot_bridge_received_total", (("channel", "telemetry"),))] == 3
    assert samples[("iot_bridge_dlq_total", (("code", "not_json"),))] == 2
    assert samples[("iot_bridge_acked_total", ())] == 3
    assert samples[("iot_bridge_mqtt_errors_total", (("kind", "connect"),))] == 1
    assert samples[("iot_bridge_pending_messages", ())] == 4
    assert samples[("iot_bridge_produce_latency_seconds_bucket", (("le", "0.001"),))] == 1
    assert samples[("iot_bridge_produce_latency_seconds_bucket", (("le", "0.005"),))] == 3
    assert samples[("iot_bridge_produce_latency_seconds_bucket", (("le", "30.0"),))] == 3
    assert samples[("iot_bridge_produce_latency_seconds_bucket", (("le", "+Inf"),))] == 4
    assert samples[("iot_bridge_produce_latency_seconds_count", ())] == 4
    assert samples[("iot_bridge_ack_lag_seconds_bucket", (("le", "0.15"),))] == 0
    assert samples[("iot_bridge_ack_lag_seconds_bucket", (("le", "0.2"),))] == 1
    assert samples[("iot_bridge_ack_lag_seconds_count", ())] == 1
