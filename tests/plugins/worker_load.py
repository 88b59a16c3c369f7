"""Where a parallel run's wall time goes (issue 31): each xdist worker's busy time and the xdist
groups by their total time, printed after pytest's slowest durations.

A group (tests/plugins/parallel.py: a shared module/package fixture, `spark`, `netns`) runs on
one worker, one test after another, so a group longer than the run's wall time divided by the
workers is the run's long pole: no worker count makes the run shorter than its longest group.
Tests in no group are listed as `(any worker)`. Read on the xdist controller, from the reports
the workers send: each worker puts a test's group in its reports' user properties (the node id
a report carries has no `@group` suffix; only xdist's scheduler sees that one).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

NO_GROUP = "(any worker)"
GROUP_PROPERTY = "xdist_group"
SHOWN_GROUPS = 12


@dataclass(frozen=True)
class Phase:
    worker: str
    nodeid: str
    seconds: float
    group: str


def group_of_report(report: pytest.TestReport) -> str:
    """The group a worker wrote into ``report``'s user properties, or :data:`NO_GROUP`."""
    for name, value in report.user_properties:
        if name == GROUP_PROPERTY:
            return str(value)
    return NO_GROUP


def summary(phases: Iterable[Phase], shown: int = SHOWN_GROUPS) -> list[str]:
    """Lines: each worker's busy seconds and test count, then the longest groups."""
    busy: dict[str, float] = defaultdict(float)
    tests: dict[str, set[str]] = defaultdict(set)
    groups: dict[str, float] = defaultdict(float)
    members: dict[str, set[str]] = defaultdict(set)
    for phase in phases:
        busy[phase.worker] += phase.seconds
        tests[phase.worker].add(phase.nodeid)
        groups[phase.group] += phase.seconds
        members[phase.group].add(phase.nodeid)
    if not busy:
        return []
    lines = ["busy time per worker (setup + call + teardown):"]
    lines += [
        f"  {worker}: {busy[worker]:7.0f} s, {len(tests[worker])} tests" for worker in sorted(busy)
    ]
    lines.append(f"longest xdist groups (each runs on one worker; top {shown}):")
    ranked = sorted(groups, key=lambda g: -groups[g])[:shown]
    lines += [f"  {groups[g]:7.0f} s  {len(members[g]):4d} tests  {g}" for g in ranked]
    return lines


class WorkerLoad:
    def __init__(self) -> None:
        self.phases: list[Phase] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker's controller: set under xdist only
        gateway = getattr(node, "gateway", None)
        if gateway is not None:
            phase = Phase(str(gateway.id), report.nodeid, report.duration, group_of_report(report))
            self.phases.append(phase)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = summary(self.phases)
        if lines:
            terminalreporter.write_sep("=", "worker load")
            for line in lines:
                terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(WorkerLoad(), "worker_load")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """On the worker: the test's group travels to the controller in its reports."""
    marker = item.get_closest_marker("xdist_group")
    if marker is not None and marker.args:
        item.user_properties.append((GROUP_PROPERTY, str(marker.args[0])))
