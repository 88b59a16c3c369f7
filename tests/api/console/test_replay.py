from __future__ import annotations

from api.console.replay import Refused, plan_replay


def test_a_fixed_payload_goes_to_the_topic_the_bridge_would_choose() -> None:
    plan = plan_replay("devices/d1/telemetry", b'{"ts": 1, "seq": 2, "metrics": {"t": 1.0}}',
                       now_ms=99, ref="3-4", actor="svc/o")  # fmt: skip
    assert not isinstance(plan, Refused)
    assert (plan.topic, plan.key) == ("iot.telemetry", b"d1")
    headers = dict(plan.headers)
    assert headers["replayed_from"] == b"iot.dlq/3-4"
    assert headers["replayed_by"] == b"svc/o"
    assert headers["received_at"] == b"99"


def test_a_payload_still_broken_is_refused_with_the_bridge_code() -> None:
    plan = plan_replay("devices/d1/telemetry", b"<still broken", now_ms=1, ref="0-0", actor="a")
    assert plan == Refused("not_json", plan.detail)
    assert isinstance(plan, Refused)
    topic = plan_replay("nowhere", b"{}", now_ms=1, ref="0-0", actor="a")
    assert isinstance(topic, Refused)
    assert topic.code == "bad_topic"
