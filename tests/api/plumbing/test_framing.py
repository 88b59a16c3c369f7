from __future__ import annotations

import gzip

import pytest

from api.errors import ApiError
from api.plumbing.framing import (
    Record,
    encode_cambria,
    gunzip,
    media_type,
    parse_body,
    parse_cambria,
    parse_json,
    split_lines,
)

LIMITS = {"max_message_bytes": 100, "max_request_bytes": 1000}


def test_golden_cambria_vector() -> None:
    assert parse_cambria(b"4.11.asdfhello world") == [Record(b"asdf", b"hello world")]


def test_cambria_writer_round_trip_with_whitespace_and_empty_key() -> None:
    body = encode_cambria([(b"k", b"v1"), (b"", b"no key"), (b"\xff", b"\x00\x01")])
    assert body == b"1.2.kv1\n0.6.no key\n1.2.\xff\x00\x01\n"
    assert parse_cambria(b" \n" + body + b"\n\n") == [
        Record(b"k", b"v1"),
        Record(None, b"no key"),
        Record(b"\xff", b"\x00\x01"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"4x11.asdfhello world", "Expected . after length."),
        (b"4.11asdfhello world", "Expected . after length."),
        (b".11.asdf", "Expected . after length."),
        (b"4", "Expected . after length."),
        (b"4096001.1.x", "Expected . after length."),
        (b"4.11.asdfhello", "End of stream while reading 15 bytes"),
        (b"4.11.asdfhello world0.1.", "End of stream while reading 1 bytes"),
    ],
)
def test_cambria_errors(body: bytes, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_cambria(body)
    assert caught.value.status == 400
    assert caught.value.message == message


def test_cambria_ignores_partition_key_and_zip_is_gzip_of_it() -> None:
    zipped = gzip.compress(b"4.11.asdfhello world")
    assert parse_body("application/cambria-zip", zipped, "pk", **LIMITS) == [
        Record(b"asdf", b"hello world")
    ]
    assert parse_body("application/cambria", b"0.1.x", "pk", **LIMITS) == [Record(None, b"x")]


def test_gunzip_refuses_garbage_truncation_and_bombs() -> None:
    with pytest.raises(ApiError, match="Couldn't read compressed format"):
        gunzip(b"plain", 1000)
    with pytest.raises(ApiError, match="Couldn't read compressed format"):
        gunzip(gzip.compress(b"x" * 100)[:-12], 1000)
    with pytest.raises(ApiError) as caught:
        gunzip(gzip.compress(b" " * 5000), 1000)
    assert (caught.value.status, caught.value.mrstatus) == (413, 5001)


def test_json_object_array_key_and_compaction() -> None:
    assert parse_json(b' {"a": 1, "b": "x"} \n', b"pk") == [Record(b"pk", b'{"a":1,"b":"x"}')]
    assert parse_json(b'[{"cambria.partition": "own", "v": 1}, {"v": 2}]', None) == [
        Record(b"own", b'{"cambria.partition":"own","v":1}'),
        Record(None, b'{"v":2}'),
    ]
    assert parse_json(b"[]", None) == []


@pytest.mark.parametrize(
    ("body", "start"),
    [
        (b"", "Expecting an array or an object."),
        (b"  42", "Expecting an array or an object."),
        (b"[1]", "Expected { to start an object."),
        (b'[{"a":1}, "s"]', "Expected { to start an object."),
        (b'[{"a":1} {"b":2}]', "Incorrect JSON object."),
        (b'{"a":', "Incorrect JSON object."),
    ],
)
def test_json_errors(body: bytes, start: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json(body, None)
    assert caught.value.status == 400
    assert caught.value.mrstatus == 5005
    assert caught.value.message.startswith(start)


def test_text_lines_as_java_readline() -> None:
    assert split_lines(b"") == []
    assert split_lines(b"a") == [b"a"]
    assert split_lines(b"a\n") == [b"a"]
    assert split_lines(b"a\r\nb\rc\n") == [b"a", b"b", b"c"]
    assert split_lines(b"a\n\nb\n") == [b"a", b"", b"b"]
    assert split_lines(b"\n") == [b""]


def test_media_type_and_raw_fallback() -> None:
    assert media_type("Application/JSON; charset=UTF-8") == "application/json"
    assert media_type(None) == "application/octet-stream"
    assert parse_body(None, b"\x00raw\n", "k", **LIMITS) == [Record(b"k", b"\x00raw\n")]
    assert parse_body("text/plain", b"a\nb", None, **LIMITS) == [
        Record(None, b"a"),
        Record(None, b"b"),
    ]


def test_message_limit_is_413_5004_and_the_limit_itself_passes() -> None:
    assert parse_body("text/plain", b"x" * 100, None, **LIMITS)
    with pytest.raises(ApiError) as caught:
        parse_body("text/plain", b"ok\n" + b"x" * 101, None, **LIMITS)
    assert (caught.value.status, caught.value.mrstatus) == (413, 5004)
    assert caught.value.message.startswith("Message size exceeds the default size.")
    assert "Message 1 has 101 bytes" in caught.value.message
