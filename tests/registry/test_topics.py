from __future__ import annotations

import pytest

from registry import ids, topics


def test_default_tenant_keeps_the_design_topics() -> None:
    assert topics.device_root("default", "d1") == "devices/d1"
    assert topics.group_root("default", "g") == "groups/g"
    assert topics.device_username("default", "d1") == "d1"


def test_other_tenants_live_under_their_own_root() -> None:
    assert topics.device_root("t1", "d1") == "tenants/t1/devices/d1"
    assert topics.group_root("t1", "g") == "tenants/t1/groups/g"
    assert topics.device_username("t1", "d1") == "t1/d1"
    # same device id in two tenants: topics and user names never meet
    assert topics.device_root("t1", "d1") != topics.device_root("t2", "d1")


def test_usernames_parse_back_to_their_principal() -> None:
    assert topics.parse_username("d1") == topics.Principal("device", "d1", "default")
    assert topics.parse_username("t1/d:1") == topics.Principal("device", "d:1", "t1")
    assert topics.parse_username(topics.account_username("bridge")) == topics.Principal(
        "account", "bridge"
    )
    for bad in ("T1/d", "t1/", "a/b/c", "svc/Bad"):
        with pytest.raises(ids.InvalidIdError):
            topics.parse_username(bad)
