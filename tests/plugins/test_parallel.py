"""tests/plugins/parallel.py: tier markers from fixtures, and which tests share an xdist worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.parallel import tier, xdist_group

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import pytest

pytest_plugins = ["tests.plugins.parallel"]


@pytest.fixture(scope="session")
def stack():
    return "servers"


@pytest.fixture(scope="session")
def spark():
    return "session"


@pytest.fixture(scope="session")
def nat_site():
    return "namespaces"
"""

TESTS = """
import pytest


@pytest.fixture(scope="module")
def shared():
    return 1


def test_unit():
    pass


def test_forgot_its_marker(stack):
    pass


def test_spark(spark):
    pass


def test_module_fixture(shared, stack):
    pass


def test_netns(nat_site, shared):
    pass


@pytest.mark.spark
def test_own_spark():
    pass
"""


def test_tier_of_marker_names() -> None:
    assert tier(["spark", "integration", "slow"]) == "spark"
    assert tier(["integration"]) == "integration"
    assert tier(["slow", "parametrize"]) == "unit"


def test_server_and_spark_fixtures_imply_their_tier(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    integration: x\n    spark: x\n    slow: x\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted=TESTS)
    unit = pytester.runpytest_inprocess("-n", "0", "-m", "not integration and not spark", "-v")
    unit.assert_outcomes(passed=2, deselected=4)  # no server, no Spark: test_unit, test_netns
    assert "test_forgot_its_marker" not in unit.stdout.str()
    spark = pytester.runpytest_inprocess("-n", "0", "-m", "spark", "-v")
    spark.assert_outcomes(passed=2, deselected=4)
    spark.stdout.fnmatch_lines(["*test_spark PASSED*", "*test_own_spark PASSED*"])


def test_groups(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_planted=TESTS)
    found, _ = pytester.inline_genitems("-n", "0")
    items = {i.name: i for i in found}
    assert xdist_group(items["test_unit"]) is None
    assert xdist_group(items["test_forgot_its_marker"]) is None  # any worker, its own stack
    assert xdist_group(items["test_spark"]) == "spark"
    assert xdist_group(items["test_own_spark"]) is None  # its own Spark JVM: any worker
    module = items["test_module_fixture"].nodeid.split("::")[0]
    assert xdist_group(items["test_module_fixture"]) == f"module:{module}"
    assert xdist_group(items["test_netns"]) == "netns"  # before its module's fixture


SHARED_ONCE = """
import os

import pytest


@pytest.fixture(scope="module")
def shared():
    with open(os.environ["SETUPS_LOG"], "a") as log:
        log.write("setup\\n")
    return 1


@pytest.mark.parametrize("n", range(4))
def test_shares(shared, n):
    with open(os.environ["SETUPS_LOG"], "a") as log:
        log.write(f"ran on {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


def test_a_module_fixture_is_set_up_once_on_one_worker_under_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The groups take effect in a real `-n 3 --dist loadgroup` run (pytest 9.2 with xdist 3.8
    ignored them: the shared fixture was set up on all three workers)."""
    log = pytester.path / "setups.log"
    monkeypatch.setenv("SETUPS_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the conftest's plugin: tests.plugins.parallel
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_shared=SHARED_ONCE)
    pytester.makepyfile(test_others="\n".join(f"def test_{i}():\n    pass\n" for i in range(12)))
    result = pytester.runpytest_subprocess(
        "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=16)
    lines = log.read_text().splitlines()
    assert lines.count("setup") == 1, lines
    assert len({line for line in lines if line.startswith("ran on")}) == 1, lines
