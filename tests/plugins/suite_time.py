"""The suite-time check: a run of whole tiers that passes but takes too long fails (issue 31).

The budgets live in ONE place, docs/development.md's "Test time" section: a table with one row
per tier (`| unit | 75 s |`) and a line `Margin: 20 %`. At the end of a run (on the xdist
controller, or in a run without xdist) the wall time since pytest started is compared with the
sum of the budgets of the tiers that ran (a test's tier: `spark` if marked so, else
`integration` if marked so, else `unit`); over budget x (1 + margin), a passing run becomes a
failing one (exit code 1) with a message saying by how much.

Only whole tiers are judged: the check is skipped when the run was a subset of the suite (a path
argument, `-k`, `--deselect`, `--lf`, or a `-m` naming anything but `integration` and `spark`),
when it already failed, when it only collected, and with `--no-suite-time-check` (debugging).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.parallel import tier

TIERS = ("unit", "integration", "spark")
BUDGET_DOC = "docs/development.md"
_ROW = re.compile(r"^\|\s*(unit|integration|spark)\s*\|\s*([0-9]+(?:\.[0-9]+)?)\s*s\s*\|", re.M)
_MARGIN = re.compile(r"^Margin:\s*([0-9]+(?:\.[0-9]+)?)\s*%", re.M)
_TIER_EXPR_WORDS = frozenset({"integration", "spark", "and", "or", "not"})


@dataclass(frozen=True)
class Budget:
    seconds: Mapping[str, float]  # tier -> wall seconds it may add to a run
    margin: float  # 0.2 = 20 %

    def limit(self, tiers: Iterable[str]) -> float:
        """The wall time a run of ``tiers`` may take before it fails."""
        return sum(self.seconds[t] for t in set(tiers)) * (1 + self.margin)


def parse_budget(text: str) -> Budget:
    """The budget table and margin of docs/development.md's "Test time" section."""
    seconds = {name: float(value) for name, value in _ROW.findall(text)}
    missing = [t for t in TIERS if t not in seconds]
    margin = _MARGIN.search(text)
    if missing or margin is None:
        raise ValueError(
            f"{BUDGET_DOC}: the suite-time budget needs a row `| tier | N s |` for each of "
            f"{', '.join(TIERS)} and a line `Margin: N %` (missing: "
            f"{', '.join(missing) or 'the margin'})"
        )
    return Budget(seconds, float(margin.group(1)) / 100)


def subset_reason(
    *,
    args_given: bool,
    args: Iterable[str],
    testpaths: Iterable[str],
    keyword: str,
    markexpr: str,
    deselect: Iterable[str],
    last_failed: bool,
) -> str | None:
    """Why this run is not a run of whole tiers (None: it is)."""
    if keyword:
        return f"-k {keyword!r}"
    if list(deselect):
        return "--deselect"
    if last_failed:
        return "--lf"
    if args_given:
        whole = {Path(p).resolve() for p in testpaths}
        named = {Path(a.split("::")[0]).resolve() for a in args}
        if named != whole or any("::" in a for a in args):
            return f"paths {' '.join(args)}"
    words = set(re.findall(r"[A-Za-z_][\w.-]*", markexpr))
    if words - _TIER_EXPR_WORDS:
        return f"-m {markexpr!r}"
    return None


def verdict(wall_s: float, tiers: Iterable[str], budget: Budget) -> str | None:
    """The failure message if ``wall_s`` is over the budget of ``tiers`` plus the margin."""
    ran = sorted(set(tiers), key=TIERS.index)
    if not ran:
        return None
    limit = budget.limit(ran)
    if wall_s <= limit:
        return None
    plain = sum(budget.seconds[t] for t in ran)
    return (
        f"suite time {wall_s:.0f} s is over the budget of the tiers that ran "
        f"({' + '.join(f'{t} {budget.seconds[t]:g} s' for t in ran)} = {plain:g} s, "
        f"+ {budget.margin:.0%} margin = {limit:.0f} s) by {wall_s - limit:.0f} s: find the "
        f"slow tests with --durations=30 (budgets: {BUDGET_DOC}, 'Test time')"
    )


class SuiteTimeCheck:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.tiers: set[str] = set()
        self.message: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.tiers.add(tier(report.keywords))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        if exitstatus != pytest.ExitCode.OK or config.option.collectonly:
            return
        reason = subset_reason(
            args_given=config.args_source == pytest.Config.ArgsSource.ARGS,
            args=config.args,
            testpaths=[str(config.rootpath / p) for p in config.getini("testpaths")],
            keyword=config.option.keyword,
            markexpr=config.option.markexpr,
            deselect=config.getoption("deselect", None) or (),
            last_failed=bool(config.getoption("lf", False)),
        )
        if reason is not None:
            return
        doc = config.rootpath / config.getini("suite_time_budget_doc")
        budget = parse_budget(doc.read_text())
        self.message = verdict(time.monotonic() - self.started, self.tiers, budget)
        if self.message is not None:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.message is not None:
            terminalreporter.write_sep("=", "suite time over budget", red=True, bold=True)
            terminalreporter.write_line(self.message, red=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-suite-time-check",
        action="store_true",
        help="do not fail a run of whole tiers that is over its time budget (debugging)",
    )
    parser.addini(
        "suite_time_budget_doc",
        "the file with the suite-time budget table (tests/plugins/suite_time.py)",
        default=BUDGET_DOC,
    )


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.getoption("no_suite_time_check"):
        return  # an xdist worker: its controller judges the whole run
    config.pluginmanager.register(SuiteTimeCheck(config), "suite_time_check")
