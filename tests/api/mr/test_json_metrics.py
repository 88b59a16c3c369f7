"""MR's /metrics JSON shape and the rate meters, pure."""

from __future__ import annotations

import pytest

from api.errors import ApiError
from api.mr.json_metrics import CacheCounts, RateMeter, render, wants_json
from api.plumbing.limits import Gate

MR_NAMES = {
    "version", "startTime", "upTime", "recvTotalEvents", "recvEpsInstant", "recvEpsShort",
    "recvEpsLong", "sendTotalEvents", "sendEpsInstant", "sendEpsShort", "sendEpsLong",
    "kafkaConsumerCacheMiss", "kafkaConsumerCacheHit", "kafkaConsumerClaims",
    "kafkaConsumerTimeouts", "fanOut",
}  # fmt: skip


def test_rate_meter_windows() -> None:
    now = [1000.0]
    meter = RateMeter(lambda: now[0])
    meter.add(100)
    now[0] += 5
    meter.add(100)
    assert meter.total == 200
    assert meter.rate(10) == 20.0
    now[0] += 30
    assert meter.rate(10) == 0.0
    assert meter.rate(60) == 200 / 60
    now[0] += 700
    meter.add(1)  # old buckets go
    assert meter.rate(600) == 1 / 600
    assert meter.total == 201


def test_render_has_mr_names_and_shape() -> None:
    now = [50.0]
    recv, send = RateMeter(lambda: now[0]), RateMeter(lambda: now[0])
    recv.add(10)
    send.add(20)
    out = render(
        "1.2", started_epoch_s=1000.0, now_epoch_s=1100.5, recv=recv, send=send,
        cache=CacheCounts(hits=3, misses=2, claims=1, timeouts=0),
    )  # fmt: skip
    assert set(out) == MR_NAMES
    for entry in out.values():
        assert set(entry) == {"summary", "raw"}
        assert isinstance(entry["summary"], str)
    assert out["recvTotalEvents"]["raw"] == 10
    assert out["sendTotalEvents"]["raw"] == 20
    assert out["fanOut"]["raw"] == 2.0
    assert out["upTime"]["raw"] == 100
    assert out["startTime"]["raw"] == 1_000_000
    assert out["kafkaConsumerCacheHit"]["raw"] == 3
    assert out["recvEpsInstant"]["raw"] == 1.0


def test_json_only_when_asked() -> None:
    assert wants_json("application/json")
    assert wants_json("text/html, application/json;q=0.9")
    assert not wants_json(None)
    assert not wants_json("*/*")
    assert not wants_json("application/openmetrics-text;version=1.0.0,text/plain;q=0.5")


def test_gate() -> None:
    gate = Gate(2)
    gate.enter()
    gate.enter()
    with pytest.raises(ApiError) as refused:
        gate.enter()
    assert (refused.value.status, refused.value.mrstatus) == (429, 5012)
    gate.leave()
    gate.enter()
    assert gate.inside == 2
