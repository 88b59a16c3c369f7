"""Where the bridge's time goes: py-spy's raw (collapsed) stacks -> a breakdown by stage (pure).

Each sample is charged to the *deepest* frame of its stack that names a stage, so time spent
in ``produce()`` called from ``on_publish`` counts as "produce call", not as the pipeline's own
bookkeeping. Frames look like ``func (path/file.py:LINE)``; with ``--native`` C frames such as
``rd_kafka_producev (librdkafka.so)`` appear below the Python ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MQTT_READ = "MQTT read/parse"
MAPPING = "validation/mapping"
PRODUCE = "produce call"
DELIVERY = "delivery reports (poll + callbacks)"
DRAIN = "ack window release"
PUBACK = "PUBACK writes"
PIPELINE = "pipeline bookkeeping (stats, window add)"
EVENT_LOOP = "event loop"
OTHER = "other"
STAGES = (MQTT_READ, MAPPING, PRODUCE, DELIVERY, DRAIN, PUBACK, PIPELINE, EVENT_LOOP, OTHER)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<where>[^()]*)\)$")

# (stage, function name or None for any, a substring of the frame's location); the first
# rule that matches a frame names its stage, so the named functions come before whole files
_RULES: tuple[tuple[str, str | None, str], ...] = (
    (MQTT_READ, "_read_ready__data_received", "selector_events.py"),
    (MQTT_READ, "_read_ready__get_buffer", "selector_events.py"),
    (PUBACK, "send_acks", "bridge/mqtt_client.py"),
    (PUBACK, "write", "bridge/mqtt_client.py"),
    (PUBACK, "encode_pubacks", "mqtt_codec/"),
    (PIPELINE, "on_publish", "bridge/pipeline.py"),
    (PIPELINE, "_new_group", "bridge/pipeline.py"),
    (PIPELINE, "on_read_done", "bridge/pipeline.py"),
    (PIPELINE, "add", "bridge/pending.py"),
    (PIPELINE, "join", "bridge/pending.py"),
    (PIPELINE, "note_high_water", "bridge/pending.py"),
    (PIPELINE, "__init__", "bridge/pending.py"),
    (DELIVERY, "_tick", "bridge/pipeline.py"),
    (DELIVERY, "delivered", "bridge/pending.py"),
    (DRAIN, "_drain", "bridge/pipeline.py"),
    (DRAIN, "pop_done", "bridge/pending.py"),
    (DRAIN, "_maybe_resume", "bridge/pipeline.py"),
    (PRODUCE, "_retry_backlog", "bridge/pipeline.py"),
    (MQTT_READ, None, "bridge/mqtt_client.py"),
    (MQTT_READ, None, "mqtt_codec/"),
    (PIPELINE, None, "bridge/stats.py"),
    (PIPELINE, None, "bridge/flush.py"),
    (MAPPING, None, "bridge/mapping.py"),
    (MAPPING, None, "bridge/routes.py"),
    (MAPPING, None, "bridge/topics.py"),
    (MAPPING, None, "bridge/quota.py"),
    (EVENT_LOOP, None, "asyncio/"),
    (EVENT_LOOP, None, "selectors.py"),
)
_NATIVE_PRODUCE = ("rd_kafka_produce", "rd_kafka_msg_new", "rd_kafka_msg_partitioner")
_NATIVE_POLL = ("rd_kafka_poll", "rd_kafka_q_serve", "rd_kafka_poll_cb")


@dataclass(frozen=True)
class Breakdown:
    samples: int
    by_stage: dict[str, int]

    def percent(self, stage: str) -> float:
        return 100.0 * self.by_stage.get(stage, 0) / self.samples if self.samples else 0.0


def _stage_of_frame(frame: str, produce_lines: frozenset[int]) -> str | None:
    for native in _NATIVE_PRODUCE:
        if frame.startswith(native):
            return PRODUCE
    for native in _NATIVE_POLL:
        if frame.startswith(native):
            return DELIVERY
    m = _FRAME.match(frame)
    if m is None:
        return None
    func, where = m.group("func"), m.group("where")
    if func == "on_publish" and "bridge/pipeline.py" in where:
        line = where.rsplit(":", 1)[-1]
        if line.isdigit() and int(line) in produce_lines:
            return PRODUCE
    for stage, name, part in _RULES:
        if part in where and (name is None or name == func):
            return stage
    return None


def classify(stack: str, produce_lines: frozenset[int] = frozenset()) -> str:
    """The stage of one collapsed stack (``root;...;leaf``): the deepest frame that names one.

    ``produce_lines``: the lines of ``bridge/pipeline.py``'s ``on_publish`` that call
    ``produce()`` (C code with no symbols below them still counts as the produce call).
    """
    stage = OTHER
    for frame in stack.split(";"):
        found = _stage_of_frame(frame.strip(), produce_lines)
        # the loop's own frames (a transport's write under send_acks...) never override the
        # bridge stage that called them
        if found is not None and (found != EVENT_LOOP or stage == OTHER):
            stage = found
    return stage


def parse_raw(lines: Iterable[str]) -> dict[str, int]:
    """py-spy ``--format raw`` lines (``stack count``) -> {stack: samples}."""
    out: dict[str, int] = {}
    for raw in lines:
        line = raw.rstrip("\n")
        stack, sep, count = line.rpartition(" ")
        if not sep or not count.isdigit():
            continue
        out[stack] = out.get(stack, 0) + int(count)
    return out


def breakdown(
    stacks: Mapping[str, int],
    produce_lines: frozenset[int] = frozenset(),
    thread: str | None = None,
) -> Breakdown:
    """Samples per stage. ``thread``: only stacks whose first frame names that thread
    (py-spy's ``--threads``), e.g. ``MainThread``; None: all."""
    by_stage = dict.fromkeys(STAGES, 0)
    total = 0
    for stack, n in stacks.items():
        if thread is not None and thread not in stack.split(";", 1)[0]:
            continue
        by_stage[classify(stack, produce_lines)] += n
        total += n
    return Breakdown(total, by_stage)


def produce_lines_of(source: str) -> frozenset[int]:
    """The lines of ``source`` (bridge/pipeline.py) spanned by its ``.produce(`` calls (a
    sample inside a multi-line call carries the line of the argument being evaluated)."""
    lines: set[int] = set()
    depth = 0
    for i, text in enumerate(source.splitlines(), start=1):
        code = text.split("#", 1)[0]
        if depth == 0 and "produce(" not in code:
            continue
        lines.add(i)
        start = code.index("produce(") if depth == 0 else 0
        depth += code[start:].count("(") - code[start:].count(")")
        depth = max(depth, 0)
    return frozenset(lines)


def thread_group(name: str) -> str:
    """A thread's name (``/proc/<pid>/task/*/comm``) -> its group: librdkafka's threads
    (``rdk:main``, ``rdk:broker1``...) apart from the Python ones."""
    if name.startswith("rdk:broker"):
        return "librdkafka broker threads"
    if name.startswith("rdk:"):
        return "librdkafka main/other threads"
    return "Python threads (event loop + helpers)"
