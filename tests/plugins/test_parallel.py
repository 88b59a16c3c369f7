"""tests/plugins/parallel.py: tier markers from fixtures, and which tests share an xdist worker."""

from __future__ import annotations

import pytest

from tests.plugins.parallel import tier, xdist_group

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
