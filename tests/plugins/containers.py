"""The container tier (issue 33): tests marked `containers` build the appliance's image and run
docker-compose on a real engine. They cost minutes and an engine most runs do not have, so
they run only when asked: `pytest --containers` (what `make test-containers` runs, after
`.ci/containers` installed and started the engine). Without the flag they are deselected,
never skipped; with it, a missing engine fails them.

The engine is the one `.ci/containers` starts, on its own socket (`DOCKER_HOST`, default
``unix:///run/iot-containers/docker.sock``), never the default one: tests/conftest.py moves
every test session to containers when the default socket answers.

Every run appends its measurements (image build, compose up to healthy, the tests' total) to
``var/containers/timings.jsonl`` and prints them at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_SOCKET = "unix:///run/iot-containers/docker.sock"  # .ci/containers' socket
# docker-compose.yml's image; IOT_CONTAINER_IMAGE: another tag, so that runs of several
# checkouts on one engine do not build over each other's (the derived files name it)
IMAGE = os.environ.get("IOT_CONTAINER_IMAGE") or "iot-appliance:latest"
TIMINGS = ROOT / "var" / "containers" / "timings.jsonl"


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or ENGINE_SOCKET


def engine_env() -> dict[str, str]:
    """The environment for docker, docker-compose and testcontainers against the engine
    (testcontainers' three settings: no Ryuk image to pull, and this machine's /.dockerenv
    must not make it look for a gateway: ../shared/docs/container-notes.md)."""
    return {
        **os.environ,
        "DOCKER_HOST": docker_host(),
        "TESTCONTAINERS_RYUK_DISABLED": "true",
        "TESTCONTAINERS_CONNECTION_MODE": "docker_host",
        "TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
        "COMPOSE_INTERACTIVE_NO_CLI": "1",
    }


@dataclass
class Timings:
    started: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, seconds: float) -> None:
        self.seconds[what] = round(seconds, 1)


_TIMINGS = Timings()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--containers",
        action="store_true",
        help="also run the tests marked `containers` (a container engine, minutes; "
        "make test-containers)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("containers"):  # read when testcontainers is first imported
        for name, value in engine_env().items():
            if name.startswith("TESTCONTAINERS_") or name == "DOCKER_HOST":
                os.environ.setdefault(name, value)
    config.addinivalue_line(
        "markers", "containers: builds the image and runs docker-compose (pytest --containers)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("containers"):
        return
    dropped = [i for i in items if i.get_closest_marker("containers") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("containers") is None]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _TIMINGS.seconds:
        return
    _TIMINGS.add("containers tests total", time.monotonic() - _TIMINGS.started)
    line = ", ".join(f"{k} {v:g} s" for k, v in _TIMINGS.seconds.items())
    terminalreporter.write_sep("-", "container timings")
    terminalreporter.write_line(line)
    if _TIMINGS.counts:
        terminalreporter.write_line(", ".join(f"{k} {v}" for k, v in _TIMINGS.counts.items()))
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    with TIMINGS.open("a") as out:
        row = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **_TIMINGS.seconds,
               **_TIMINGS.counts}  # fmt: skip
        out.write(json.dumps(row) + "\n")


def record_time(what: str, seconds: float) -> None:
    _TIMINGS.add(what, seconds)


def record_count(what: str, count: int) -> None:
    """A count (messages lost, duplicated...) printed and kept with the timings."""
    _TIMINGS.counts[what] = count


def engine_has_image(image: str) -> bool:
    """Whether the engine tests/conftest.py found (`DOCKER_HOST`, else the default socket)
    holds ``image``."""
    import docker

    client = docker.from_env(timeout=10)
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()
    return True


def wait_for_kafka(bootstrap: str, logs: Callable[[], tuple[bytes, bytes]]) -> None:
    """Until Kafka at ``bootstrap`` answers a metadata request (a cold JVM in a container)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 180
    while True:
        try:
            admin.list_topics(timeout=3)
            return
        except Exception as exc:
            if time.monotonic() > deadline:
                out, err = logs()
                tail = (out + err).decode(errors="replace")[-3000:]
                raise AssertionError(f"Kafka at {bootstrap} did not answer: {exc}\n{tail}") from exc


def pinned_base() -> str:
    """The base image the build must use: its ID as `.ci/containers` recorded it
    (``$IOT_CONTAINERS_DIR/base-image``; the Dockerfile's FROM takes an ID), or
    ``IOT_CONTAINER_BASE``."""
    if os.environ.get("IOT_CONTAINER_BASE"):
        return os.environ["IOT_CONTAINER_BASE"]
    state = Path(os.environ.get("IOT_CONTAINERS_DIR", "/var/lib/iot-containers"))
    try:
        return (state / "base-image").read_text().strip()
    except OSError as exc:
        pytest.fail(f"no pinned base ({exc}): run `make containers` (.ci/containers) first")


@pytest.fixture(scope="session")
def container_engine() -> Iterator[Any]:
    """A docker-py client of the engine; fails (never skips) when it does not answer."""
    import docker

    _TIMINGS.started = min(_TIMINGS.started, time.monotonic())
    try:
        client = docker.DockerClient(base_url=docker_host(), timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure: no engine
        pytest.fail(
            f"no container engine answers at {docker_host()} ({exc}): run `make containers` "
            "(.ci/containers) first"
        )
    yield client
    client.close()


@pytest.fixture(scope="session")
def app_image(container_engine: Any) -> str:
    """The appliance's image built from this checkout's Dockerfile on the pinned base (its
    layer cache kept: a code change rebuilds only the wheel), tagged as docker-compose.yml
    names it."""
    started = time.monotonic()
    log: list[str] = []
    base = pinned_base()
    for chunk in container_engine.api.build(
        path=str(ROOT), tag=IMAGE, network_mode="host", rm=True, decode=True,
        buildargs={"BASE": base},
    ):  # fmt: skip
        if "stream" in chunk:
            log.append(chunk["stream"].rstrip())
        if "error" in chunk:
            tail = "\n".join(line for line in log[-40:] if line)
            pytest.fail(f"docker build failed: {chunk['error']}\n{tail}")
    record_time("app image build", time.monotonic() - started)
    return IMAGE
