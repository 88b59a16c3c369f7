"""The restart policy and the supervisor's records, as plain data."""

from __future__ import annotations

import pytest

from stack.supervision import RestartPolicy, ServiceRecord, ServiceSpec, SupervisorState


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(initial_s=1.0, factor=2.0, max_s=10.0)
    assert [policy.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_a_stable_run_starts_the_streak_over() -> None:
    policy = RestartPolicy(stable_s=60.0)
    assert policy.streak_after_exit(4, uptime_s=5.0) == 5  # crash loop: longer waits
    assert policy.streak_after_exit(4, uptime_s=61.0) == 1  # it ran fine: first wait again


@pytest.mark.parametrize(
    "changes", [{"initial_s": 0.0}, {"factor": 0.5}, {"initial_s": 5.0, "max_s": 1.0}]
)
def test_bad_policies_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="bad restart policy"):
        RestartPolicy(**changes)


def test_state_round_trips_through_json() -> None:
    rec = ServiceRecord("kafka", pid=None, restarts=3, last_exit="killed by SIGKILL")
    rec.next_start_at = 123.0
    state = SupervisorState(pid=42, updated_at=1.5, services={"kafka": rec})
    raw = state.to_json()
    assert raw["services"]["kafka"]["state"] == "backoff"
    again = SupervisorState.from_json(raw)
    assert again.services["kafka"] == rec
    assert again.pid == 42


def test_spec_round_trips_through_json() -> None:
    spec = ServiceSpec("bridge", ["python", "-m", "bridge.cli"], {"A": "1"}, None, "/l", 9.0)
    assert ServiceSpec.from_json(spec.to_json()) == spec
