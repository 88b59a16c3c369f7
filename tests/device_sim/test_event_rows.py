"""Reading the run's events back from Kafka records (the rows the events' accountant takes)."""

from __future__ import annotations

from typing import Any

import orjson

from device_sim.event_rows import EventRows, event_fields
from device_sim.events import EventSource

RUN = "20260101T000000-abcdef"


class Msg:
    def __init__(
        self, value: bytes | None, key: bytes | None = b"dev-1", headers: Any = None
    ) -> None:
        self._value, self._key, self._headers = value, key, headers

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> Any:
        return self._headers

    def partition(self) -> int:
        return 4

    def timestamp(self) -> tuple[int, int]:
        return (1, 2000)


def _event(seq: int, run: str = RUN, ts: Any = 1500) -> bytes:
    return orjson.dumps({"ts": ts, "seq": seq, "type": "door_open", "data": {"run": run}})


def test_event_fields_of_the_run_only() -> None:
    import random

    source = EventSource("dev-1", RUN, 0.5, random.Random(1))
    seq, payload = source.build("alarm", 1234, {"metric": "humidity"})
    assert event_fields(payload, RUN) == (seq, 1234)
    assert event_fields(_event(3, run="other"), RUN) is None
    assert event_fields(b"not json", RUN) is None
    assert event_fields(b"[1, 2]", RUN) is None
    assert event_fields(orjson.dumps({"seq": "1", "data": {"run": RUN}}), RUN) is None
    assert event_fields(orjson.dumps({"seq": 1, "data": "x"}), RUN) is None
    assert event_fields(_event(2, ts=1.5), RUN) == (2, None)


def test_rows_of_a_batch() -> None:
    batch = [
        Msg(_event(1), headers=[("mqtt_topic", b"x"), ("received_at", b"1900")]),
        Msg(_event(2), headers=[("received_at", b"soon")]),
        Msg(_event(3, run="other")),
        Msg(None),
        Msg(_event(4), key=None),  # an event has a device key; without one it is not ours
        Msg(_event(5), key=b"dev-2"),
    ]
    rows = EventRows(RUN)(batch)  # type: ignore[arg-type]
    assert rows == [
        ("dev-1", 1, 4, 2000, 1500, 1900),
        ("dev-1", 2, 4, 2000, 1500, None),
        ("dev-2", 5, 4, 2000, 1500, None),
    ]
