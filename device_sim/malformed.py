"""Malformed device input: one builder per kind of payload the bridge must reject.

Each builder returns the MQTT topic and the raw payload bytes. Every payload carries the run id
somewhere in its bytes (even the unparsable ones), so the verifier can attribute the record it
finds in the DLQ (whose value is the original payload, untouched) to its run.

``EXPECTED_ERROR`` maps each kind to the machine error code the bridge writes in the DLQ
``error`` header (the bridge's own :class:`bridge.mapping.ErrorCode`, imported, not copied; that
module is pure); it is the contract the verifier checks the DLQ against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import orjson

from bridge.mapping import ErrorCode
from device_sim.errors import SimConfigError

MalformedBuilder = Callable[[str, str, int, int], tuple[str, bytes]]
"""(device_id, run_id, ts_ms, size_hint) -> (mqtt topic, payload bytes)."""


def _telemetry_topic(device_id: str) -> str:
    return f"devices/{device_id}/telemetry"


def _invalid_json(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    # a truncated object: valid prefix, no closing braces
    body = b'{"ts": %d, "seq": 1, "tags": {"run": "%s"}, "metrics": {"temperature": 2' % (
        ts_ms,
        run_id.encode(),
    )
    return _telemetry_topic(device_id), body


def _not_utf8(device_id: str, run_id: str, _ts: int, _size: int) -> tuple[str, bytes]:
    return _telemetry_topic(device_id), b"\xff\xfe\xfa run=" + run_id.encode() + b" \xc3\x28"


def _not_object(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    return _telemetry_topic(device_id), orjson.dumps([ts_ms, 1, {"run": run_id}])


def _missing_field(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    # no "seq"
    doc = {"ts": ts_ms, "metrics": {"temperature": 21.5}, "tags": {"run": run_id}}
    return _telemetry_topic(device_id), orjson.dumps(doc)


def _wrong_type(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    # "seq" must be an integer, a metric value must be a number
    doc = {
        "ts": ts_ms,
        "seq": "seven",
        "metrics": {"temperature": "hot"},
        "tags": {"run": run_id},
    }
    return _telemetry_topic(device_id), orjson.dumps(doc)


def _non_finite(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    # NaN is not JSON (RFC 8259) though many parsers accept it
    body = b'{"ts": %d, "seq": 1, "metrics": {"temperature": NaN}, "tags": {"run": "%s"}}' % (
        ts_ms,
        run_id.encode(),
    )
    return _telemetry_topic(device_id), body


def _bad_status(device_id: str, run_id: str, _ts: int, _size: int) -> tuple[str, bytes]:
    # the status channel only takes "online" / "offline" (sent without retain)
    return f"devices/{device_id}/status", f"sleepy {run_id}".encode()


def _oversized(device_id: str, run_id: str, ts_ms: int, size: int) -> tuple[str, bytes]:
    doc = {
        "ts": ts_ms,
        "seq": 1,
        "metrics": {"temperature": 21.5},
        "tags": {"run": run_id, "pad": "x" * max(0, size)},
    }
    return _telemetry_topic(device_id), orjson.dumps(doc)


def _device_mismatch(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    doc = {
        "device_id": f"not-{device_id}",
        "ts": ts_ms,
        "seq": 1,
        "metrics": {"temperature": 21.5},
        "tags": {"run": run_id},
    }
    return _telemetry_topic(device_id), orjson.dumps(doc)


def _bad_topic(device_id: str, run_id: str, ts_ms: int, _size: int) -> tuple[str, bytes]:
    # a device id outside [A-Za-z0-9_.:-]{1,128}: a space and a '!' (both legal in MQTT topics)
    doc = {"ts": ts_ms, "seq": 1, "metrics": {"temperature": 21.5}, "tags": {"run": run_id}}
    return f"devices/bad id!{device_id}/telemetry", orjson.dumps(doc)


BUILDERS: Mapping[str, MalformedBuilder] = {
    "invalid_json": _invalid_json,
    "not_utf8": _not_utf8,
    "non_finite": _non_finite,
    "not_object": _not_object,
    "missing_field": _missing_field,
    "wrong_type": _wrong_type,
    "oversized": _oversized,
    "device_mismatch": _device_mismatch,
    "bad_topic": _bad_topic,
    "bad_status": _bad_status,
}

MALFORMED_KINDS: tuple[str, ...] = tuple(BUILDERS)

EXPECTED_ERROR: Mapping[str, str] = {
    "invalid_json": ErrorCode.NOT_JSON.value,
    "not_utf8": ErrorCode.NOT_JSON.value,
    "non_finite": ErrorCode.NON_FINITE.value,
    "not_object": ErrorCode.NOT_OBJECT.value,
    "missing_field": ErrorCode.MISSING_FIELD.value,
    "wrong_type": ErrorCode.WRONG_TYPE.value,
    "oversized": ErrorCode.OVERSIZED.value,
    "device_mismatch": ErrorCode.DEVICE_MISMATCH.value,
    "bad_topic": ErrorCode.BAD_TOPIC.value,
    "bad_status": ErrorCode.BAD_STATUS.value,
}


def parse_kinds(text: str) -> tuple[str, ...]:
    """``"all"`` or a comma-separated list of kinds -> the kinds, validated."""
    if text.strip() in ("", "all"):
        return MALFORMED_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in BUILDERS]
    if unknown:
        raise SimConfigError(f"unknown malformed kinds {unknown}; known: {list(MALFORMED_KINDS)}")
    return kinds


def build(kind: str, device_id: str, run_id: str, ts_ms: int, size: int) -> tuple[str, bytes]:
    """Build one malformed message of ``kind`` (``size`` is the oversized payload's size)."""
    return BUILDERS[kind](device_id, run_id, ts_ms, size)
