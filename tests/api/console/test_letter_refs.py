from __future__ import annotations

import pytest

from api.console.fleet import FleetState, dead_letter, letter_view
from api.console.letter_refs import LetterRef, may_see, owner, parse_ref, topics_to_search


def test_refs_name_the_tenants_dlq_and_old_refs_keep_meaning_iot_dlq() -> None:
    assert parse_ref("3-17") == LetterRef("default", 3, 17)  # before tenants: iot.dlq
    assert parse_ref("acme:0-5") == LetterRef("acme", 0, 5)
    for ref in ("3-17", "acme:0-5", "a-b-2:1-0"):
        place = parse_ref(ref)
        assert place is not None
        assert str(place) == ref
    assert parse_ref("3-17").topic("iot.dlq") == "iot.dlq"  # type: ignore[union-attr]
    assert parse_ref("acme:0-5").topic("iot.dlq") == "iot.acme.dlq"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "ref",
    ["", "3", "3-", "-3", "x-1", "3-1a", "default:1-2", "ACME:1-2", ":1-2", "a:b:1-2",
     "acme:1-2/../x", "1--2", "٣-1", "acme:-1-2", "acme/1-2", " 1-2"],
)  # fmt: skip
def test_anything_else_is_no_ref(ref: str) -> None:
    assert parse_ref(ref) is None


def test_whose_a_letter_is_and_who_sees_it() -> None:
    assert owner("acme", None) == "acme"
    assert owner("acme", "beta") == "acme"  # a tenant's topic is its own whatever the header
    assert owner("default", "acme") == "acme"  # tenant_not_ready in iot.dlq
    assert owner("default", "Not A Tenant") == "default"
    assert owner("default", None) == "default"
    assert may_see(None, "acme")
    assert may_see("acme", "acme")
    assert not may_see("acme", "beta")
    assert not may_see("acme", "default")


def test_which_topics_a_search_reads() -> None:
    known = {"iot.acme.dlq": "acme", "iot.beta.dlq": "beta"}
    every = [("iot.dlq", "default"), ("iot.acme.dlq", "acme"), ("iot.beta.dlq", "beta")]
    assert topics_to_search("iot.dlq", known, None, None) == every
    assert topics_to_search("iot.dlq", known, None, "beta") == [
        ("iot.beta.dlq", "beta"), ("iot.dlq", "default")
    ]  # fmt: skip
    # a tenant's account: its own topic (and iot.dlq for its tenant_not_ready letters) only,
    # whatever tenant it asks for
    assert topics_to_search("iot.dlq", known, "acme", "beta") == [
        ("iot.acme.dlq", "acme"), ("iot.dlq", "default")
    ]  # fmt: skip
    assert topics_to_search("iot.dlq", known, "default", None) == [("iot.dlq", "default")]


def test_letters_of_two_dlq_topics_stay_apart_in_memory() -> None:
    state = FleetState()
    same = {"partition": 0, "offset": 7, "key": b"d1", "value": b"x", "timestamp": 1}
    state.apply("dlq", headers=[("error", b"not_json")], **same)  # type: ignore[arg-type]
    state.apply("dlq", headers=[("error", b"not_json"), ("tenant", b"acme")], tenant="acme",
                **same)  # type: ignore[arg-type]  # fmt: skip
    assert list(state.dlq) == ["0-7", "acme:0-7"]
    assert [letter_view(x)["tenant"] for x in state.dlq.values()] == ["default", "acme"]
    # a disposition names one letter only
    state.apply("audit", partition=0, offset=0, key=None, timestamp=2, headers=[],
                value=b'{"action": "dlq.discard", "ref": "acme:0-7", "actor": "o"}')  # fmt: skip
    assert [x.status for x in state.dlq.values()] == ["new", "discarded"]
    again = dead_letter(0, 7, key=b"d1", value=b"x", headers=[], timestamp=1, tenant="acme")
    assert state.dispose(again).status == "discarded"
