"""Session-wide real servers for the integration tests, and per-test name factories.

Order of preference for the servers (issue 2):
1. `IOT_TEST_MQTT_URL` + `IOT_TEST_KAFKA_BOOTSTRAP`: servers someone already runs;
2. a Docker engine that answers: testcontainers' Mosquitto and Kafka (KRaft) modules;
3. otherwise the same launcher `iot-stack` uses, as local processes on free ports.
A server that cannot be had is an error, never a skip.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from hypothesis import settings

from stack.config import StackConfig
from stack.launcher import Stack
from stack.topics import DESIGN_TOPICS, TopicSpec, ensure_topics
from tests.plugins.server_reaper import reaper

pytest_plugins = ["tests.plugins.bridge_process"]  # the `bridge_factory` fixture

# Property tests check answers, not speed: hypothesis' 200 ms per-example deadline fails them at
# random while Kafka, Spark and Mosquitto share the two cores (speed lives in bench/).
settings.register_profile("appliance", deadline=None)
settings.load_profile("appliance")


@dataclass(frozen=True)
class Endpoints:
    mqtt_host: str
    mqtt_port: int
    kafka_bootstrap: str

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://{self.mqtt_host}:{self.mqtt_port}"


def local_stack_config(data_dir: Path, partitions: int = 12) -> StackConfig:
    """A stack config on free ports, nothing but the two servers."""
    return StackConfig.servers_on_free_ports(data_dir, partitions, kafka_heap="512m")


def _docker_engine_answers() -> bool:
    try:
        import docker  # testcontainers depends on it

        client = docker.from_env(timeout=3)
        client.ping()
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False
    return True


@contextlib.contextmanager
def _containers() -> Iterator[Endpoints]:
    from testcontainers.kafka import KafkaContainer
    from testcontainers.mqtt import MosquittoContainer

    with KafkaContainer().with_kraft() as kafka, MosquittoContainer() as mqtt:
        yield Endpoints(
            mqtt.get_container_host_ip(),
            int(mqtt.get_exposed_port(mqtt.MQTT_PORT)),
            kafka.get_bootstrap_server(),
        )


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """CLIs run in-process install handlers on the (captured) stderr of one test; later tests
    would log into that closed stream. Put the root logger back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    mqtt_url = os.environ.get("IOT_TEST_MQTT_URL")
    kafka_bootstrap = os.environ.get("IOT_TEST_KAFKA_BOOTSTRAP")
    if mqtt_url and kafka_bootstrap:
        parsed = urlparse(mqtt_url)
        ensure_topics(kafka_bootstrap, DESIGN_TOPICS)
        yield Endpoints(parsed.hostname or "127.0.0.1", parsed.port or 1883, kafka_bootstrap)
        return
    if _docker_engine_answers():
        with _containers() as endpoints:
            ensure_topics(endpoints.kafka_bootstrap, DESIGN_TOPICS)
            yield endpoints
        return
    local = Stack(local_stack_config(tmp_path_factory.mktemp("stack")))
    with reaper(local.config.run_dir):
        try:
            local.up()
            yield Endpoints(local.mqtt_host, local.mqtt_port, local.kafka_bootstrap)
        finally:
            local.down()


@pytest.fixture
def local_stack_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Stack]]:
    """Private Mosquitto + Kafka for tests that stop, kill or restart a server."""
    made: list[Stack] = []

    def make(partitions: int = 12) -> Stack:
        local = Stack(local_stack_config(tmp_path_factory.mktemp("local-stack"), partitions))
        made.append(local)
        reapers.enter_context(reaper(local.config.run_dir))
        local.up()
        return local

    with contextlib.ExitStack() as reapers:
        yield make
        for local in made:
            local.down()


@pytest.fixture
def local_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Stack]]:
    """Private Mosquitto + a KRaft cluster of `nodes` Kafka nodes (384m heap each) on free
    ports, for tests that kill nodes (`stack.kafka_nodes[i].kill()/start()`); `changes` are
    StackConfig fields (e.g. kafka_session_timeout_ms)."""
    made: list[Stack] = []

    def make(nodes: int = 3, partitions: int = 6, **changes: Any) -> Stack:
        config = StackConfig.servers_on_free_ports(
            tmp_path_factory.mktemp("local-cluster"), partitions, "384m", kafka_nodes=nodes
        )
        # a node's restart took 65 s under a load average of 50 (other tests' JVMs)
        local = Stack(config.with_changes(**({"start_timeout": 180.0} | changes)))
        made.append(local)
        reapers.enter_context(reaper(local.config.run_dir))
        local.up()
        return local

    with contextlib.ExitStack() as reapers:
        yield make
        for local in made:
            local.down()


@pytest.fixture
def topic_factory(stack: Endpoints) -> Callable[..., str]:
    """`topic_factory(prefix="t", partitions=12, compacted=False, bootstrap=None) -> name`."""

    def make(
        prefix: str = "t",
        partitions: int = 12,
        compacted: bool = False,
        bootstrap: str | None = None,
    ) -> str:
        name = f"{prefix}.{uuid.uuid4().hex[:12]}"
        ensure_topics(
            bootstrap or stack.kafka_bootstrap, [TopicSpec(name, compacted=compacted)], partitions
        )
        return name

    return make


@pytest.fixture
def group_factory() -> Callable[[], str]:
    return lambda: f"g-{uuid.uuid4().hex[:12]}"
