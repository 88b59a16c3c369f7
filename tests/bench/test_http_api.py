"""The pure parts of `make bench-http` (bench/http_api.py)."""

from __future__ import annotations

import json
import math

from bench.http_api import BATCH, MESSAGE, batch_body, percentile, request_bytes


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))


def test_a_batch_is_a_hundred_1_kib_messages() -> None:
    assert BATCH == 100
    assert len(json.dumps(MESSAGE, separators=(",", ":"))) == 1024
    items = json.loads(batch_body(BATCH))
    assert len(items) == BATCH
    stamped = json.loads(batch_body(1, stamp=True))
    assert stamped[0]["at"] > 1.7e9  # the send time a long poll's receipt is measured against


def test_request_bytes_are_one_http_request_with_its_length() -> None:
    raw = request_bytes("POST", "/events/t", b'[{"a":1}]')
    head, body = raw.split(b"\r\n\r\n")
    assert head.startswith(b"POST /events/t HTTP/1.1\r\n")
    assert b"Content-Length: 9" in head
    assert body == b'[{"a":1}]'
