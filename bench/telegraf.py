"""Telegraf (InfluxData, Go) as an MQTT -> Kafka route: the peer IoT users actually run.

Built once from the Go module proxy with only the plugins this route uses (Telegraf's custom
build tags): ``inputs.mqtt_consumer``, ``outputs.kafka``, ``parsers.value`` and
``serializers.template``, into ``~/.cache/iot-appliance/telegraf-<version>/`` (``IOT_TELEGRAF``
names another binary). Configured for the guarantees our bridge gives as far as Telegraf offers
them (docs/benchmarks.md says where it falls short):

- QoS 1 with a persistent session: Telegraf then turns paho's automatic acknowledgement off and
  acknowledges a message only once every output delivered its metric (at least once);
  ``max_undelivered_messages`` is its in-flight window, set to our bridge's.
- Kafka ``required_acks = -1`` (all in-sync replicas) with idempotent writes, keyed by the
  device id parsed from the topic (``routing_tag``), so a device's records share a partition.
- The payload passes through untouched: the ``value`` parser keeps it as one string field and
  the ``template`` serializer writes that field back out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

VERSION = "1.37.0"
MODULE = "github.com/influxdata/telegraf/cmd/telegraf"
BUILD_TAGS = ("custom", "inputs.mqtt_consumer", "outputs.kafka", "parsers.value",
              "serializers.template")  # fmt: skip
# sarama's codec numbers (Telegraf's compression_codec): our bridge's default is lz4
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class TelegrafUnavailableError(Exception):
    """No Telegraf binary, and none could be built."""


def binary_path(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("IOT_TELEGRAF"):
        return Path(env["IOT_TELEGRAF"])
    return Path.home() / ".cache" / "iot-appliance" / f"telegraf-{VERSION}" / "telegraf"


def build_command(gobin: Path) -> tuple[list[str], dict[str, str]]:
    """``go install`` of Telegraf with only our plugins, into ``gobin``."""
    argv = ["go", "install", "-tags", ",".join(BUILD_TAGS), f"{MODULE}@v{VERSION}"]
    return argv, {**os.environ, "GOBIN": str(gobin), "GOFLAGS": ""}


def ensure_binary() -> Path:
    """The binary, built first if missing (a few minutes once: the Go proxy, then the compile)."""
    path = binary_path()
    if path.is_file():
        return path
    if "IOT_TELEGRAF" in os.environ:
        raise TelegrafUnavailableError(f"IOT_TELEGRAF={path} is not a file")
    if shutil.which("go") is None:
        raise TelegrafUnavailableError("no `go` on PATH to build Telegraf with (Debian: golang)")
    path.parent.mkdir(parents=True, exist_ok=True)
    argv, env = build_command(path.parent)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.is_file():
        raise TelegrafUnavailableError(f"building Telegraf failed:\n{done.stderr[-3000:]}")
    return path


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_config(
    *,
    mqtt_url: str,
    mqtt_topic: str,
    client_id: str,
    bootstrap: str,
    topic: str,
    window: int,
    batch: int = 1000,
    flush_ms: int = 100,
    compression: str = "lz4",
) -> str:
    """The route's telegraf.conf (pure)."""
    if compression not in CODECS:
        raise ValueError(f"compression must be one of {', '.join(CODECS)}")
    parts = mqtt_topic.split("/")
    if parts.count("+") != 1:
        raise ValueError(f"the topic filter needs one '+' for the device id: {mqtt_topic!r}")
    tags = "/".join("device" if p == "+" else "_" for p in parts)
    brokers = ", ".join(_toml_string(b) for b in bootstrap.split(","))
    return f"""\
[agent]
  interval = "10s"
  flush_interval = "{flush_ms}ms"
  metric_batch_size = {batch}
  metric_buffer_limit = {max(window * 2, batch * 10)}
  omit_hostname = true

[[inputs.mqtt_consumer]]
  servers = [{_toml_string(mqtt_url)}]
  topics = [{_toml_string(mqtt_topic)}]
  qos = 1
  persistent_session = true
  client_id = {_toml_string(client_id)}
  max_undelivered_messages = {window}
  data_format = "value"
  data_type = "string"
  [[inputs.mqtt_consumer.topic_parsing]]
    topic = {_toml_string(mqtt_topic)}
    tags = {_toml_string(tags)}

[[outputs.kafka]]
  brokers = [{brokers}]
  topic = {_toml_string(topic)}
  routing_tag = "device"
  required_acks = -1
  idempotent_writes = true
  max_retry = 10
  compression_codec = {CODECS[compression]}
  data_format = "template"
  template = '{{{{ .Field "value" }}}}'
"""
