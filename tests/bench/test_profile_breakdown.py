"""py-spy stacks -> the bridge's stages (pure)."""

from __future__ import annotations

from bench.profile_breakdown import (
    DELIVERY,
    EVENT_LOOP,
    MAPPING,
    MQTT_READ,
    OTHER,
    PIPELINE,
    PRODUCE,
    PUBACK,
    breakdown,
    classify,
    parse_raw,
    produce_lines_of,
    thread_group,
)

LOOP = "thread (1): MainThread;_run_once (asyncio/base_events.py:1922);_run (asyncio/events.py:80)"
READ = LOOP + ";_read_ready__data_received (asyncio/selector_events.py:995)"
PROCESS = READ + ";data_received (bridge/mqtt_client.py:80);_process (bridge/mqtt_client.py:132)"
ON_PUBLISH = PROCESS + ";on_publish (bridge/pipeline.py:{line})"
TICK = LOOP + ";_tick (bridge/pipeline.py:260)"


def test_the_deepest_stage_wins() -> None:
    assert classify(LOOP) == EVENT_LOOP
    assert classify(READ) == MQTT_READ
    assert classify(PROCESS) == MQTT_READ
    assert classify(ON_PUBLISH.format(line=140)) == PIPELINE
    mapped = ON_PUBLISH.format(line=130) + ";map_message (bridge/mapping.py:218)"
    assert classify(mapped) == MAPPING
    assert classify(mapped + ";0x7f00 (?)") == MAPPING  # C code below keeps its caller's stage
    shortcut = ON_PUBLISH.format(line=156) + ";accepts_payload (bridge/routes.py:80)"
    assert classify(shortcut) == MAPPING


def test_produce_by_line_or_by_native_frame() -> None:
    assert classify(ON_PUBLISH.format(line=156), frozenset({156, 157})) == PRODUCE
    assert classify(ON_PUBLISH.format(line=158), frozenset({156, 157})) == PIPELINE
    native = ON_PUBLISH.format(line=1) + ";0x5640 (?);rd_kafka_producev (librdkafka.so.1)"
    assert classify(native) == PRODUCE


def test_delivery_and_acks_under_the_tick() -> None:
    assert classify(TICK) == DELIVERY
    assert classify(TICK + ";rd_kafka_poll (librdkafka.so.1)") == DELIVERY
    acks = TICK + ";_drain (bridge/pipeline.py:300);send_acks (bridge/mqtt_client.py:230)"
    # the transport's write below send_acks is still the PUBACK, not the event loop
    assert classify(acks + ";write (asyncio/selector_events.py:1060)") == PUBACK


def test_unknown_stacks_are_other() -> None:
    assert classify("thread (9): asyncio_0;_worker (concurrent/futures/thread.py:81)") == OTHER


def test_parse_and_breakdown_of_one_thread() -> None:
    raw = [
        f"{LOOP} 3\n",
        f"{READ} 1\n",
        "thread (9): asyncio_0;get (queue.py:171) 6\n",
        "garbage without count\n",
    ]
    stacks = parse_raw(raw)
    assert sum(stacks.values()) == 10
    b = breakdown(stacks, thread="MainThread")
    assert b.samples == 4
    assert b.percent(EVENT_LOOP) == 75.0
    assert b.percent(MQTT_READ) == 25.0
    assert breakdown(stacks).by_stage[OTHER] == 6


def test_produce_lines_span_the_whole_call() -> None:
    src = "x = 1\nself._producer.produce(\n    a,\n    b=(c),\n)\ny = produce_other\n"
    assert produce_lines_of(src) == frozenset({2, 3, 4, 5})


def test_thread_groups() -> None:
    assert thread_group("rdk:broker1") == "librdkafka broker threads"
    assert thread_group("rdk:main") == "librdkafka main/other threads"
    assert thread_group("python") == "Python threads (event loop + helpers)"
