"""sawmill's facade, the pure part: token mapping, positions, values, SSE framing."""

from __future__ import annotations

import base64

import pytest

from api.sawmill import model as sawmill
from api.sawmill.model import Message, SawmillError, Start


def test_the_token_header_maps_onto_our_credentials() -> None:
    basic = sawmill.authorization_from("svc:s:e", None)
    assert basic == "Basic " + base64.b64encode(b"svc:s:e").decode()
    assert sawmill.authorization_from("abc123", None) == "Bearer abc123"
    assert sawmill.authorization_from(None, "Basic eDp5") == "Basic eDp5"
    assert sawmill.authorization_from("", None) is None
    assert sawmill.authorization_from(None, None) is None


def test_starts() -> None:
    assert sawmill.parse_start(None) == sawmill.BEGINNING
    assert sawmill.parse_start("7") == Start(every=7)
    assert sawmill.parse_start("end") == Start(end=True)
    assert sawmill.parse_start("1:5,0:3") == Start(at=((0, 3), (1, 5)))
    for bad in ("x", "-1", "1:", "1:2,", "a:b"):
        with pytest.raises(SawmillError) as caught:
            sawmill.parse_start(bad)
        assert caught.value.status == 400


def test_a_start_is_clamped_to_each_partition() -> None:
    assert sawmill.BEGINNING.offset_for(0, 4, 9) == 4
    assert Start(every=7).offset_for(0, 4, 9) == 7
    assert Start(every=70).offset_for(0, 4, 9) == 9
    assert Start(every=1).offset_for(0, 4, 9) == 4  # deleted by retention: the oldest kept
    assert Start(end=True).offset_for(0, 4, 9) == 9
    vector = Start(at=((1, 6),))
    assert vector.offset_for(1, 0, 9) == 6
    assert vector.offset_for(2, 3, 9) == 3  # a partition it does not name: the beginning


def test_vectors_round_trip_and_positions_advance() -> None:
    assert sawmill.format_vector({2: 7, 0: 15}) == "0:15,2:7"
    assert sawmill.parse_vector("0:15,2:7") == {0: 15, 2: 7}
    assert sawmill.parse_vector("0:15;2:7") is None
    returned = [Message(0, 15, 1, b""), Message(0, 16, 2, b""), Message(2, 9, 3, b"")]
    assert sawmill.next_positions({0: 15, 1: 4, 2: 7}, returned) == {0: 17, 1: 4, 2: 10}


def test_values_and_order() -> None:
    assert sawmill.decoded(b'{"a": 1}') == {"a": 1}
    assert sawmill.decoded(b"plain") == "plain"  # sawmill's decoder answered 500 here
    msgs = [Message(1, 0, 5, b""), Message(0, 3, 5, b""), Message(0, 1, 2, b"")]
    assert sawmill.in_time_order(msgs) == [msgs[2], msgs[1], msgs[0]]
    assert sawmill.push_value(b'{"a": 1,  "b": [1, 2]}') == b'{"a":1,"b":[1,2]}'
    with pytest.raises(SawmillError):
        sawmill.push_value(b"{nope")


def test_sse_framing_and_resume() -> None:
    assert sawmill.sse_event("0:3", b'{"a":1}') == b'id: 0:3\ndata: {"a":1}\n\n'
    assert sawmill.sse_event("0:4", b"two\nlines") == b'id: 0:4\ndata: "two\\nlines"\n\n'
    assert sawmill.resume_start("0:3,1:9", "5") == Start(at=((0, 3), (1, 9)))
    assert sawmill.resume_start(None, "5") == Start(every=5)
    with pytest.raises(SawmillError):
        sawmill.resume_start("garbage", None)
