"""The suite-time check (tests/plugins/suite_time.py): budgets, subsets, a planted violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.suite_time import TIERS, Budget, parse_budget, subset_reason, verdict

ROOT = Path(__file__).resolve().parents[2]
BUDGET = Budget({"unit": 60.0, "integration": 500.0, "spark": 100.0}, 0.2)


def test_the_budget_in_the_docs_parses_and_names_every_tier() -> None:
    budget = parse_budget((ROOT / "docs" / "development.md").read_text())
    assert set(budget.seconds) == set(TIERS)
    assert all(s > 0 for s in budget.seconds.values())
    assert 0 < budget.margin < 1


@pytest.mark.xfail(
    strict=True,
    reason="issue 31's targets are not met yet: the suite takes 29-38 min on 3 workers and the "
    "budgets are set from it (docs/development.md, 'Test time'); strict: meeting them shows here",
)
def test_the_budget_in_the_docs_is_within_the_issue_31_targets() -> None:
    budget = parse_budget((ROOT / "docs" / "development.md").read_text())
    # make test must stay within 15 minutes, make unit within 90 s, margins included
    assert budget.limit(TIERS) <= 15 * 60
    assert budget.limit(["unit"]) <= 90


def test_a_table_without_a_tier_or_the_margin_is_refused() -> None:
    with pytest.raises(ValueError, match="spark"):
        parse_budget("| unit | 1 s |\n| integration | 2 s |\nMargin: 5 %\n")
    with pytest.raises(ValueError, match="margin"):
        parse_budget("| unit | 1 s |\n| integration | 2 s |\n| spark | 3 s |\n")
    assert parse_budget("| unit | 1.5 s |\n| integration | 2 s |\n| spark | 3 s |\nMargin: 5 %")\
        == Budget({"unit": 1.5, "integration": 2.0, "spark": 3.0}, 0.05)  # fmt: skip


def test_the_limit_is_the_sum_of_the_tiers_that_ran_plus_the_margin() -> None:
    assert BUDGET.limit(["unit"]) == pytest.approx(72.0)
    assert BUDGET.limit(TIERS) == pytest.approx(660 * 1.2)
    assert verdict(72.0, ["unit"], BUDGET) is None  # at the limit: passes
    assert verdict(500.0, [], BUDGET) is None  # nothing ran
    message = verdict(80.0, ["unit"], BUDGET)
    assert message is not None
    assert "suite time 80 s" in message
    assert "unit 60 s" in message
    assert "72 s" in message
    assert "by 8 s" in message
    # integration and spark only: the unit budget is not spent
    assert verdict(700.0, ["spark", "integration"], BUDGET) is None
    assert verdict(721.0, ["spark", "integration"], BUDGET) is not None


def _reason(**changes: object) -> str | None:
    given: dict[str, object] = {
        "args_given": False, "args": ["tests"], "testpaths": ["tests"], "keyword": "",
        "markexpr": "", "deselect": [], "last_failed": False,
    }  # fmt: skip
    return subset_reason(**(given | changes))  # type: ignore[arg-type]


def test_only_runs_of_whole_tiers_are_judged() -> None:
    assert _reason() is None
    assert _reason(markexpr="not integration and not spark") is None  # make unit
    assert _reason(markexpr="integration or spark") is None
    assert _reason(args_given=True, args=["tests"]) is None
    assert _reason(args_given=True, args=["tests/"]) is None
    assert _reason(markexpr="not slow") == "-m 'not slow'"
    assert _reason(markexpr="integration and not edge_case") is not None
    assert _reason(keyword="kafka") == "-k 'kafka'"
    assert _reason(args_given=True, args=["tests/bridge"]) == "paths tests/bridge"
    assert _reason(args_given=True, args=["tests::x"]) is not None
    assert _reason(deselect=["tests/test_layers.py"]) == "--deselect"
    assert _reason(last_failed=True) == "--lf"


PLANTED = """
import time

import pytest


def test_unit_that_takes_its_time() -> None:
    time.sleep(1.0)


@pytest.mark.integration
def test_integration() -> None:
    pass
"""


def _planted_suite(pytester: pytest.Pytester, unit_s: float) -> None:
    pytester.makeini(
        """
        [pytest]
        testpaths = tests
        markers =
            integration: x
            spark: x
            slow: x
        """
    )
    pytester.makeconftest('pytest_plugins = ["tests.plugins.suite_time"]')
    (pytester.path / "docs").mkdir()
    (pytester.path / "docs" / "development.md").write_text(
        f"| unit | {unit_s} s |\n| integration | 100 s |\n| spark | 100 s |\n\nMargin: 20 %\n"
    )
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_planted.py").write_text(PLANTED)


def test_a_planted_run_over_budget_fails_with_the_reason(pytester: pytest.Pytester) -> None:
    _planted_suite(pytester, unit_s=0.1)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-n", "0", "-m", "not integration"
    )
    result.assert_outcomes(passed=1, deselected=1)  # every test passed ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ... and the run failed
    result.stdout.fnmatch_lines(
        ["*suite time over budget*", "*over the budget of the tiers that ran (unit 0.1 s*"]
    )


def test_a_planted_run_within_budget_or_a_subset_passes(pytester: pytest.Pytester) -> None:
    _planted_suite(pytester, unit_s=0.1)
    for subset in (["-k", "takes"], ["tests/test_planted.py"], ["--no-suite-time-check"]):
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0", *subset)
        assert result.ret == pytest.ExitCode.OK, (subset, result.stdout.str())
        assert "suite time over budget" not in result.stdout.str()
    (pytester.path / "docs" / "development.md").write_text(
        "| unit | 30 s |\n| integration | 30 s |\n| spark | 30 s |\n\nMargin: 20 %\n"
    )
    assert pytester.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0").ret == 0
