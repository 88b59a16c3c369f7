from __future__ import annotations

from bench.amqp_breakdown import (
    EVENT_LOOP,
    KAFKA,
    MAPPING,
    OTHER,
    OURS,
    PROTON,
    breakdown,
    classify,
    leaf_python,
    table,
)

ROOT = "thread (1): MainThread;<module> (amqp/__main__.py:7);main (amqp/cli.py:42)"
LOOP = ROOT + ";BaseEventLoop._run_once (asyncio/base_events.py:1922)"
EVENTS = LOOP + ";ClientConnection._events (amqp/connection.py:193)"


def test_the_deepest_named_frame_wins() -> None:
    assert classify(EVENTS + ";Delivery.link (proton/_delivery.py:10)") == PROTON
    assert classify(EVENTS + ";Uploads.on_delivery (amqp/uploads.py:90)") == OURS
    mapping = EVENTS + ";map_amqp (amqp/model.py:1);parse_json (bridge/mapping.py:5)"
    assert classify(mapping) == MAPPING
    produce = EVENTS + ";UploadProducer.send (amqp/kafka.py:44);rd_kafka_producev (librdkafka.so)"
    assert classify(produce) == KAFKA
    native = EVENTS + ";Message.decode (proton/_message.py:3);pn_message_decode (libqpid.so)"
    assert classify(native) == PROTON


def test_the_loop_counts_only_below_our_code_or_alone() -> None:
    assert classify(LOOP + ";EpollSelector.select (selectors.py:468)") == EVENT_LOOP
    write = EVENTS + ";_SelectorSocketTransport.write (asyncio/selector_events.py:1)"
    assert classify(write) == EVENT_LOOP
    # proton called from a loop callback stays proton's; the root frames name nothing
    assert classify(LOOP + ";Delivery.update (proton/_delivery.py:2)") == PROTON
    assert classify(ROOT) == OTHER


def test_breakdown_filters_by_thread_and_ranks_leaves() -> None:
    stacks = {
        EVENTS + ";Delivery.link (proton/_delivery.py:10)": 6,
        EVENTS + ";Delivery.link (proton/_delivery.py:12);pn_delivery_link (x.so)": 2,
        EVENTS + ";Uploads.on_delivery (amqp/uploads.py:90)": 2,
        "thread (2): amqp-producer;poll (cimpl.c:1);rd_kafka_poll (librdkafka.so)": 10,
    }
    main = breakdown(stacks, thread="MainThread")
    assert main.samples == 10
    assert main.by_layer[PROTON] == 8
    assert main.percent(OURS) == 20.0
    assert main.top[0] == ("Delivery.link (proton/_delivery.py)", 8)
    every = breakdown(stacks)
    assert every.samples == 20
    assert every.by_layer[KAFKA] == 10
    rows = table(main, 200.0, every.samples)
    assert "| proton binding/FFI | 80.0 % | 80 |" in rows


def test_leaf_without_python_frames_is_the_leaf() -> None:
    assert (
        leaf_python("thread (2): x;rd_kafka_poll (librdkafka.so)")
        == "rd_kafka_poll (librdkafka.so)"
    )
