from __future__ import annotations

import pytest

from tests.plugins.worker_load import (
    GROUP_PROPERTY,
    NO_GROUP,
    Phase,
    group_of,
    group_of_report,
    summary,
)


def test_group_of_reads_the_loadgroup_suffix() -> None:
    assert group_of("tests/a.py::test_x@spark") == "spark"
    assert group_of("tests/a.py::test_x[user@host]") == NO_GROUP  # an @ in a parameter
    assert group_of("tests/a.py::test_x") == NO_GROUP
    assert group_of("tests/a.py::test_x[a@b]@module:tests/a.py") == "module:tests/a.py"
    assert group_of("tests/a.py::T::test_x[1]@class:tests/a.py::T") == "class:tests/a.py::T"


def test_summary_adds_phases_per_worker_and_ranks_groups() -> None:
    phases = [
        Phase("gw0", "t.py::a@spark", 10.0),
        Phase("gw0", "t.py::a@spark", 5.0),  # its teardown: same test, counted once
        Phase("gw1", "t.py::b", 3.0),
        Phase("gw0", "t.py::c@spark", 20.0),
        Phase("gw1", "u.py::d@netns", 1.0),
    ]
    lines = summary(phases, shown=2)
    assert lines[1] == "  gw0:      35 s, 2 tests"
    assert lines[2] == "  gw1:       4 s, 2 tests"
    assert lines[4:] == ["       35 s     2 tests  spark", "        3 s     1 tests  (any worker)"]
    assert summary([]) == []


def test_a_report_names_its_group_in_its_user_properties() -> None:
    report = pytest.TestReport(
        "t.py::a", ("t.py", 1, "a"), {}, "passed", None, "call",
        user_properties=[("other", 1), (GROUP_PROPERTY, "spark")],
    )  # fmt: skip
    assert group_of_report(report) == "spark"
    report.user_properties = []
    assert group_of_report(report) == NO_GROUP
    phases = [Phase("gw0", "t.py::a", 2.0, "spark"), Phase("gw0", "t.py::b", 1.0, None)]
    assert summary(phases)[3:] == ["        2 s     1 tests  spark",
                                   "        1 s     1 tests  (any worker)"]  # fmt: skip
