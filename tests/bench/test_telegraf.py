"""Telegraf as a bench contender: its route's config and its binary (bench/telegraf.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from bench import telegraf


def _config(**changes: object) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "mqtt_url": "tcp://127.0.0.1:1883", "mqtt_topic": "devices/+/telemetry",
        "client_id": "bench-telegraf-1", "bootstrap": "127.0.0.1:9092,127.0.0.1:9094",
        "topic": "bench.t", "window": 20_000,
    } | changes  # fmt: skip
    return tomllib.loads(telegraf.render_config(**kwargs))


def test_the_route_acks_after_kafka_keyed_by_device_with_the_payload_untouched() -> None:
    conf = _config()
    [mqtt] = conf["inputs"]["mqtt_consumer"]
    # QoS 1 on a persistent session: Telegraf then acknowledges only what its outputs delivered
    assert (mqtt["qos"], mqtt["persistent_session"], mqtt["client_id"]) == (
        1,
        True,
        "bench-telegraf-1",
    )
    assert mqtt["max_undelivered_messages"] == 20_000
    assert (mqtt["data_format"], mqtt["data_type"]) == ("value", "string")
    assert mqtt["topic_parsing"] == [{"topic": "devices/+/telemetry", "tags": "_/device/_"}]
    [kafka] = conf["outputs"]["kafka"]
    assert kafka["brokers"] == ["127.0.0.1:9092", "127.0.0.1:9094"]
    assert (kafka["required_acks"], kafka["idempotent_writes"]) == (-1, True)
    assert kafka["routing_tag"] == "device"
    assert kafka["compression_codec"] == telegraf.CODECS["lz4"]
    assert (kafka["data_format"], kafka["template"]) == ("template", '{{ .Field "value" }}')
    assert conf["agent"]["metric_buffer_limit"] >= 20_000


@pytest.mark.parametrize(
    "changes",
    [{"mqtt_topic": "devices/telemetry"}, {"mqtt_topic": "+/+/x"}, {"compression": "brotli"}],
)
def test_bad_route_settings_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"needs one|compression must be"):
        _config(**changes)


def test_the_binary_is_built_once_into_the_cache_or_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert telegraf.binary_path({}).parts[-2:] == (f"telegraf-{telegraf.VERSION}", "telegraf")
    named = tmp_path / "telegraf"
    assert telegraf.binary_path({"IOT_TELEGRAF": str(named)}) == named
    monkeypatch.setenv("IOT_TELEGRAF", str(named))
    with pytest.raises(telegraf.TelegrafUnavailableError, match="is not a file"):
        telegraf.ensure_binary()
    argv, env = telegraf.build_command(tmp_path)
    assert argv[:3] == ["go", "install", "-tags"]
    assert set(argv[3].split(",")) == set(telegraf.BUILD_TAGS)
    assert argv[4] == f"{telegraf.MODULE}@v{telegraf.VERSION}"
    assert env["GOBIN"] == str(tmp_path)
