"""A record as the console's pages get it: JSON pretty-printed, other UTF-8 as text, anything
else as base64, so that no value a device or a service wrote breaks a page."""

from __future__ import annotations

import base64

from api.console.kafka_records import Raw, as_json, pretty


def test_a_json_value_is_pretty_printed_and_said_to_be_json() -> None:
    text, is_json = pretty(b'{"b":1,"a":[2]}')
    assert is_json
    assert text == '{\n  "b": 1,\n  "a": [\n    2\n  ]\n}'


def test_text_that_is_not_json_stays_text() -> None:
    assert pretty("température 21,5".encode()) == ("température 21,5", False)
    assert pretty(None) == ("", False)


def test_bytes_that_are_not_utf8_are_base64() -> None:
    value = b"\xff\xfe\x00binary"
    assert pretty(value) == ("base64:" + base64.b64encode(value).decode(), False)


def test_a_record_as_json_keeps_its_place_key_and_headers() -> None:
    raw = Raw(3, 42, b"dev-\xff", b"[1]", [("received_at", b"17"), ("empty", None)], 1_700)
    assert as_json(raw) == {
        "partition": 3,
        "offset": 42,
        "timestamp": 1_700,
        "key": "dev-\ufffd",
        "headers": {"received_at": "17", "empty": ""},
        "value": "[\n  1\n]",
        "json": True,
    }
    assert as_json(Raw(0, 0, None, None, None, 0))["key"] is None
