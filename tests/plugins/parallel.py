"""How the suite spreads over pytest-xdist workers (issue 31: `make test` in 15 minutes).

`pytest` runs on several workers (pyproject's addopts: `-n N --dist loadgroup`). Each worker is a
pytest process of its own with its own session fixtures: its own `stack` (Mosquitto + Kafka on
free ports, in its own basetemp `popen-gwN`, with its own reaper), its own logins, and unique
topic and group names as always. Tests run one by one wherever a worker is free, except the
tests this plugin puts in an xdist group, which run on one worker, one after the other:

- `netns`: the edge tests (fixture `nat_site`): their network namespaces and veth names are
  machine-wide (bench/chaos/netns.py), two workers would make the same ones;
- a module-, class- or package-scoped fixture (e.g. `api`, `console_stack`, `central`): the
  tests that share it run on one worker, so the fixture is set up once, as without xdist;
- `spark`: the tests of the session's Spark session (fixture `spark`): one Spark session (and
  its JVM) serves them all. A `spark`-marked test without that fixture (its Spark is a job's or
  a stack's own JVM, started as a subprocess) runs on any worker, beside the group: a few
  Spark drivers at once fit the 24 GiB machine many times over (peak resident, measured
  2026-11-29: the session's 1g heap 1.2-1.3 GB, a job's 512m 0.6-0.75 GB), and a group already
  runs beside another worker's session (the console's analytics page test, with `spark`).

It also applies the tier markers the fixtures imply (docs/development.md, "Rules": unmarked =
unit, needs no server): a test that asks for a server fixture is `integration`, a test that asks
for `spark` is `spark`, whatever its module says, so `make unit` never starts a server. And under
xdist, it runs `slow` tests first (their modules kept together), so that the longest ones do
not start last and keep one worker busy after the rest are done.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

# Fixtures that start or need real servers (tests/conftest.py, tests/plugins/bridge_process.py,
# tests/api/console/conftest.py): a test asking for one of them is an integration test.
SERVER_FIXTURES = frozenset(
    {"stack", "local_stack_factory", "local_cluster_factory", "bridge_factory", "console_stack"}
)
SPARK_FIXTURE = "spark"
NETNS_FIXTURE = "nat_site"
_SCOPE_RANK = {"class": 1, "module": 2, "package": 3}


def tier(markers: Iterable[str]) -> str:
    """A test's tier from its marker names: `spark`, `integration` or `unit`."""
    names = set(markers)
    if "spark" in names:
        return "spark"
    if "integration" in names:
        return "integration"
    return "unit"


def _shared_scope_key(item: pytest.Item) -> str | None:
    """The widest module/class/package-scoped fixture ``item`` uses, as a group name: the
    package (its conftest's dir) or the module (and class) that fixture is set up once for."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    best: tuple[int, str] | None = None
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        scope = defs[-1].scope
        rank = _SCOPE_RANK.get(scope)
        if rank is None:
            continue
        path = item.nodeid.split("::")
        if scope == "package":
            key = f"package:{defs[-1].baseid or '.'}"
        elif scope == "module":
            key = f"module:{path[0]}"
        else:
            key = "class:" + "::".join(path[:2])
        if best is None or rank > best[0]:
            best = (rank, key)
    return None if best is None else best[1]


def xdist_group(item: pytest.Item) -> str | None:
    """The group of tests ``item`` must share a worker with, or None (any worker)."""
    names = set(item.fixturenames)  # type: ignore[attr-defined]
    if NETNS_FIXTURE in names:
        return "netns"
    shared = _shared_scope_key(item)
    if shared is not None:
        return shared
    if SPARK_FIXTURE in names:
        return "spark"
    return None  # a `spark` marker alone: the test's Spark JVMs are its own


def _under_xdist(config: pytest.Config) -> bool:
    """A worker of an xdist run (the controller collects nothing)."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker and xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if SPARK_FIXTURE in names and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if names & SERVER_FIXTURES and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)
        group = xdist_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    if _under_xdist(config):
        # modules with a slow test first (stable: the order inside and among them is kept)
        slow_modules = {i.nodeid.split("::")[0] for i in items if i.get_closest_marker("slow")}
        items.sort(key=lambda i: i.nodeid.split("::")[0] not in slow_modules)
