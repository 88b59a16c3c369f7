"""Every malformed kind is rejected by the bridge's own mapping with the code we expect."""

from __future__ import annotations

import pytest

from bridge.mapping import Topics, map_message
from device_sim import malformed
from device_sim.errors import SimConfigError

RUN = "20260101T000000-abcdef"
LIMIT = 65536


@pytest.mark.parametrize("kind", malformed.MALFORMED_KINDS)
def test_bridge_rejects_each_kind_with_the_expected_code(kind: str) -> None:
    topic, payload = malformed.build(kind, "dev-00007", RUN, 1_800_000_000_000, LIMIT + 1024)
    rec = map_message(topic, payload, 1, 0, topics=Topics(), max_payload_bytes=LIMIT)
    assert rec.error is not None
    assert rec.topic == "iot.dlq"
    assert rec.error.value == malformed.EXPECTED_ERROR[kind]
    # the DLQ keeps the payload untouched: the run id must be findable in it
    assert RUN.encode() in rec.value


def test_codes_cover_distinct_bridge_errors() -> None:
    assert len(set(malformed.EXPECTED_ERROR.values())) >= 9


def test_parse_kinds() -> None:
    assert malformed.parse_kinds("all") == malformed.MALFORMED_KINDS
    assert malformed.parse_kinds("oversized, bad_topic") == ("oversized", "bad_topic")
    with pytest.raises(SimConfigError):
        malformed.parse_kinds("oversized,bogus")
