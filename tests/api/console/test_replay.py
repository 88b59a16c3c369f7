from __future__ import annotations

from api.console.replay import OTHER_TENANT, Refused, plan_replay

GOOD = b'{"ts": 1, "seq": 2, "metrics": {"t": 1.0}}'


def test_a_fixed_payload_goes_to_the_topic_the_bridge_would_choose() -> None:
    plan = plan_replay("devices/d1/telemetry", GOOD, now_ms=99, source="iot.dlq/3-4",
                       actor="svc/o", tenant="default")  # fmt: skip
    assert not isinstance(plan, Refused)
    assert (plan.topic, plan.key) == ("iot.telemetry", b"d1")
    headers = dict(plan.headers)
    assert headers["replayed_from"] == b"iot.dlq/3-4"
    assert headers["replayed_by"] == b"svc/o"
    assert headers["received_at"] == b"99"


def test_a_tenants_letter_goes_back_to_its_tenants_topic_only() -> None:
    plan = plan_replay("tenants/acme/devices/d1/telemetry", GOOD, now_ms=1,
                       source="iot.acme.dlq/0-4", actor="a", tenant="acme")  # fmt: skip
    assert not isinstance(plan, Refused)
    assert plan.topic == "iot.acme.telemetry"
    assert dict(plan.headers)["tenant"] == b"acme"
    for topic, tenant in [("tenants/beta/devices/d1/telemetry", "acme"),
                          ("devices/d1/telemetry", "acme"),
                          ("tenants/acme/devices/d1/telemetry", "default")]:  # fmt: skip
        refused = plan_replay(topic, GOOD, now_ms=1, source="s", actor="a", tenant=tenant)
        assert isinstance(refused, Refused), topic
        assert refused.code == OTHER_TENANT, topic


def test_a_payload_still_broken_is_refused_with_the_bridge_code() -> None:
    plan = plan_replay("devices/d1/telemetry", b"<still broken", now_ms=1, source="s",
                       actor="a", tenant="default")  # fmt: skip
    assert plan == Refused("not_json", plan.detail)
    assert isinstance(plan, Refused)
    topic = plan_replay("nowhere", b"{}", now_ms=1, source="s", actor="a", tenant="default")
    assert isinstance(topic, Refused)
    assert topic.code == "bad_topic"
