"""Where iot-amqp's time goes: py-spy's raw (collapsed) stacks -> a breakdown by layer (pure).

Each sample is charged to the *deepest* frame of its stack that names a layer (as
bench.profile_breakdown does for the bridge): proton's C engine called from our code counts as
"proton binding/FFI", librdkafka's produce called from the upload path as "Kafka client". The
event loop's own frames never override the layer that called them. Stacks are py-spy's
``--format raw`` lines (bench.profile_breakdown.parse_raw), with ``--native`` C frames such as
``pn_message_decode (libqpid-proton-core.so)`` or ``rd_kafka_producev (librdkafka.so)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

PROTON = "proton binding/FFI"
OURS = "our amqp code"
MAPPING = "mapping/validation"
KAFKA = "Kafka client (produce, poll, consume)"
METRICS = "metrics (prometheus_client)"
EVENT_LOOP = "event loop, sockets"
OTHER = "other"
LAYERS = (PROTON, OURS, MAPPING, KAFKA, METRICS, EVENT_LOOP, OTHER)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<where>[^()]*)\)$")

# (layer, a substring of the frame's location); the first that matches names the layer
# py-spy names a file by its last two path components (``amqp/uploads.py``, ``proton/_data.py``)
_PLACES: tuple[tuple[str, str], ...] = (
    (PROTON, "proton/"),
    (PROTON, "cproton"),
    (PROTON, "qpid-proton"),
    (PROTON, "_cffi_backend"),
    (KAFKA, "confluent_kafka/"),
    (KAFKA, "cimpl"),
    (KAFKA, "librdkafka"),
    (KAFKA, "amqp/kafka.py"),
    (KAFKA, "amqp/north_kafka.py"),
    (KAFKA, "plumbing/kafka_producer.py"),
    (METRICS, "prometheus_client/"),
    (MAPPING, "bridge/mapping.py"),
    (MAPPING, "bridge/quota.py"),
    (MAPPING, "bridge/topics.py"),
    (MAPPING, "bridge/validation"),
    (MAPPING, "http_devices/model.py"),
    (MAPPING, "amqp/model.py"),
    (MAPPING, "amqp/north_model.py"),
    (MAPPING, "amqp/command_model.py"),
    (MAPPING, "json/"),
    (OTHER, "amqp/__main__.py"),  # the process's root frames, below the event loop
    (OTHER, "amqp/cli.py"),
    (OURS, "amqp/"),
    (EVENT_LOOP, "asyncio/"),
    (EVENT_LOOP, "_asynciomodule"),
    (EVENT_LOOP, "selectors.py"),
    (EVENT_LOOP, "socket"),
)
_NATIVE: tuple[tuple[str, str], ...] = (
    (PROTON, "pn_"),
    (PROTON, "pni_"),
    (KAFKA, "rd_kafka"),
    (KAFKA, "rd_"),
)


def layer_of_frame(frame: str) -> str | None:
    """The layer one frame names (None: none, e.g. libc or the interpreter)."""
    m = _FRAME.match(frame)
    func, where = (frame, "") if m is None else (m.group("func"), m.group("where"))
    for layer, part in _PLACES:
        if part in where:
            return None if layer == OTHER else layer
    for layer, prefix in _NATIVE:
        if func.startswith(prefix):
            return layer
    return None


def classify(stack: str) -> str:
    """The layer of one collapsed stack (``root;...;leaf``): the deepest frame that names one;
    the event loop's frames (its socket writes...) win only over our code that called them."""
    layer = OTHER
    for frame in stack.split(";"):
        found = layer_of_frame(frame.strip())
        if found is not None and (found != EVENT_LOOP or layer in (OTHER, OURS)):
            layer = found
    return layer


def leaf_python(stack: str) -> str:
    """The deepest Python frame of a stack (``func (file.py:LINE)`` without the line), or the
    leaf itself when none is Python: where the interpreter was when sampled."""
    frames = [f.strip() for f in stack.split(";")]
    for frame in reversed(frames):
        m = _FRAME.match(frame)
        if m is not None and ".py" in m.group("where"):
            where = m.group("where").rsplit(":", 1)[0]
            return f"{m.group('func')} ({'/'.join(where.rsplit('/', 2)[-2:])})"
    return frames[-1] if frames else ""


@dataclass(frozen=True)
class Breakdown:
    samples: int
    by_layer: dict[str, int]
    top: list[tuple[str, int]]  # the deepest Python frames with most samples

    def percent(self, layer: str) -> float:
        return 100.0 * self.by_layer.get(layer, 0) / self.samples if self.samples else 0.0


def breakdown(stacks: Mapping[str, int], thread: str | None = None, top: int = 15) -> Breakdown:
    """Samples per layer, and the ``top`` deepest Python frames. ``thread``: only the stacks
    whose first frame names that thread (py-spy's ``--threads``: ``thread (7880): MainThread``),
    None: all."""
    by_layer = dict.fromkeys(LAYERS, 0)
    leaves: dict[str, int] = {}
    total = 0
    for stack, n in stacks.items():
        if thread is not None and thread not in stack.split(";", 1)[0]:
            continue
        by_layer[classify(stack)] += n
        leaf = leaf_python(stack)
        leaves[leaf] = leaves.get(leaf, 0) + n
        total += n
    ranked = sorted(leaves.items(), key=lambda kv: -kv[1])[:top]
    return Breakdown(total, by_layer, ranked)


def table(b: Breakdown, cpu_us_per_msg: float | None, all_samples: int) -> list[str]:
    """Markdown rows: layer, share of ``b``'s samples, and its CPU-µs per message when known.
    py-spy leaves idle threads out, so a sample is CPU time: a layer's µs is its share of all
    threads' ``all_samples`` times the process's CPU-µs per message."""
    rows = ["| layer | share of samples | ~CPU-µs per message |", "|---|---|---|"]
    for layer in LAYERS:
        n = b.by_layer.get(layer, 0)
        us = "" if cpu_us_per_msg is None or not all_samples else \
            f"{n / all_samples * cpu_us_per_msg:.0f}"  # fmt: skip
        rows.append(f"| {layer} | {b.percent(layer):.1f} % | {us} |")
    return rows
