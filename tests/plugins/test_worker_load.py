from __future__ import annotations

import pytest

from tests.plugins.worker_load import GROUP_PROPERTY, NO_GROUP, Phase, group_of_report, summary


def test_a_report_names_its_group_in_its_user_properties() -> None:
    report = pytest.TestReport(
        "t.py::a", ("t.py", 1, "a"), {}, "passed", None, "call",
        user_properties=[("other", 1), (GROUP_PROPERTY, "spark")],
    )  # fmt: skip
    assert group_of_report(report) == "spark"
    report.user_properties = []
    assert group_of_report(report) == NO_GROUP


def test_summary_adds_phases_per_worker_and_ranks_groups() -> None:
    phases = [
        Phase("gw0", "t.py::a", 10.0, "spark"),
        Phase("gw0", "t.py::a", 5.0, "spark"),  # its teardown: same test, counted once
        Phase("gw1", "t.py::b", 3.0, NO_GROUP),
        Phase("gw0", "t.py::c", 20.0, "spark"),
        Phase("gw1", "u.py::d", 1.0, "netns"),
    ]
    lines = summary(phases, shown=2)
    assert lines[1] == "  gw0:      35 s, 2 tests"
    assert lines[2] == "  gw1:       4 s, 2 tests"
    assert lines[4:] == ["       35 s     2 tests  spark", "        3 s     1 tests  (any worker)"]
    assert summary([]) == []
