from __future__ import annotations

import pytest

from bridge import topics as bridge_topics
from registry import ids


@pytest.mark.parametrize("good", ["default", "t1", "acme-corp", "a" * 32])
def test_good_tenant_ids(good: str) -> None:
    assert ids.tenant_id(good) == good


@pytest.mark.parametrize("bad", ["", "A", "-x", "a/b", "a b", "a" * 33, "t_1"])
def test_bad_tenant_ids(bad: str) -> None:
    with pytest.raises(ids.InvalidIdError):
        ids.tenant_id(bad)


def test_device_ids_follow_the_topic_contract() -> None:
    assert ids.device_id("pump-1.a:b_C") == "pump-1.a:b_C"
    for bad in ("", "a/b", "a+b", "#", "x" * 129):
        with pytest.raises(ids.InvalidIdError):
            ids.device_id(bad)


def test_device_id_pattern_is_the_bridge_contract() -> None:
    assert ids.DEVICE_ID_RE.pattern == bridge_topics.DEVICE_ID_RE.pattern


def test_group_and_account_names() -> None:
    assert ids.group_name("floor-1") == "floor-1"
    assert ids.account_name("edge.site-1") == "edge.site-1"
    for bad in ("a/b", "+", ""):
        with pytest.raises(ids.InvalidIdError):
            ids.group_name(bad)
    with pytest.raises(ids.InvalidIdError):
        ids.account_name("Upper")


def test_device_key_round_trips() -> None:
    assert ids.split_device_key(ids.device_key("t1", "d:1")) == ("t1", "d:1")
    with pytest.raises(ids.InvalidIdError):
        ids.split_device_key("nokey")
