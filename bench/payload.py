"""The benchmark's telemetry payload: the design's JSON shape padded to an exact size.

``{"ts":<ms>,"seq":<n>,"metrics":{...},"tags":{"dev":"<id>","pad":"xxx..."}}`` -- valid for the
bridge (int ts, int seq >= 0, finite metrics, string tags), with the device id in a tag so any
contender's records can be checked (mq-bridge does not key records by device), and a pad that
makes every payload exactly ``size`` bytes whatever the digits of ts and seq.
"""

from __future__ import annotations

_PAD = b"x" * 70_000
_TAIL = b'"}}'


class PayloadError(ValueError):
    """The requested payload size cannot hold the fields."""


def device_id(index: int) -> str:
    """The benchmark's device ids: d00000, d00001, ... (valid MQTT topic level and Kafka key)."""
    return f"d{index:05d}"


def telemetry_topic(device: str) -> str:
    return f"devices/{device}/telemetry"


class PayloadMaker:
    """Builds one device's payloads of exactly ``size`` bytes."""

    __slots__ = ("_head", "size")

    def __init__(self, device: str, size: int) -> None:
        self.size = size
        self._head = (
            b'{"ts":%d,"seq":%d,"metrics":{"temperature":21.5,"humidity":40.25},"tags":{"dev":"'
            + device.encode()
            + b'","pad":"'
        )
        # the longest head (13-digit ts, 10-digit seq) must still fit
        if len(self._head % (10**13, 10**10)) + len(_TAIL) > size:
            raise PayloadError(f"payload size {size} too small for device {device!r}")

    def make(self, ts_ms: int, seq: int) -> bytes:
        head = self._head % (ts_ms, seq)
        return head + _PAD[: self.size - len(head) - 3] + _TAIL
