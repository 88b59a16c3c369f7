"""Session-wide real servers for the integration tests, and per-test name factories.

Order of preference for the servers (issue 2):
1. `IOT_TEST_MQTT_URL` + `IOT_TEST_KAFKA_BOOTSTRAP`: servers someone already runs;
2. a Docker engine that answers: testcontainers' Kafka (KRaft) module, and Mosquitto as in 3;
3. otherwise the same launcher `iot-stack` uses, as local processes on free ports.
A server that cannot be had is an error, never a skip.

Mosquitto runs with authentication on, as `iot-stack up` runs it (issue 13): the fixtures
provision the service accounts and a test account through the registry
(tests/plugins/mqtt_logins.py); `Endpoints.login` is the test account's login and
`Endpoints.device_logins(ids)` registers devices of their own. With servers someone already
runs (1), the login is `IOT_TEST_MQTT_USERNAME` + `IOT_TEST_MQTT_PASSWORD`, or is provisioned
when `IOT_TEST_SECRETS_DIR` names that stack's secrets dir (`<data dir>/secrets` of `iot-stack
up`: the registry admin's secret), which per-device logins need too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from hypothesis import settings

from stack.config import StackConfig
from stack.launcher import Stack
from stack.topics import DESIGN_TOPICS, TopicSpec, ensure_topics
from tests.plugins.jvm_options import kafka_jvm_options  # sets IOT_KAFKA_JVM_OPTS for the run
from tests.plugins.mqtt_logins import (
    MqttLogin,
    provision_devices,
    provision_test_login,
    register,
)
from tests.plugins.server_reaper import reaper

pytest_plugins = [
    "tests.plugins.bridge_process",  # the `bridge_factory` fixture
    "tests.plugins.containers",  # `pytest --containers`: the image and docker-compose (issue 33)
    "tests.plugins.parallel",  # tier markers from fixtures, xdist groups (issue 31)
    "tests.plugins.port_pool",  # free ports from one locked pool shared by the run's processes
    "tests.plugins.spark_session",  # the `spark` fixture: one local Spark session per process
    "tests.plugins.suite_time",  # a run of whole tiers over its time budget fails
    "tests.plugins.worker_load",  # each worker's busy time, the longest xdist groups
    "pytester",  # tests/plugins/test_suite_time.py runs pytest on planted suites
]

# Property tests check answers, not speed: hypothesis' 200 ms per-example deadline fails them at
# random while Kafka, Spark and Mosquitto share the two cores (speed lives in bench/).
settings.register_profile("appliance", deadline=None)
settings.load_profile("appliance")


@dataclass(frozen=True)
class Endpoints:
    mqtt_host: str
    mqtt_port: int
    kafka_bootstrap: str
    login: MqttLogin | None = None  # the test account (None: an anonymous broker)
    secrets_dir: Path | None = None  # the stack's secrets (registry admin): device logins

    @property
    def mqtt_url(self) -> str:
        return f"mqtt://{self.mqtt_host}:{self.mqtt_port}"

    def device_logins(self, device_ids: Sequence[str]) -> dict[str, str]:
        """``{device_id: secret}``: default-tenant devices registered through the registry
        (user name = client id = device id), for tests that connect as those devices."""
        if self.secrets_dir is None:
            raise RuntimeError("device logins need the stack's secrets dir (IOT_TEST_SECRETS_DIR)")
        return provision_devices(
            self.kafka_bootstrap, self.mqtt_host, self.mqtt_port, self.secrets_dir, device_ids
        )


def local_stack_config(
    data_dir: Path, partitions: int = 12, *, insecure_anonymous: bool = False
) -> StackConfig:
    """A stack config on free ports, nothing but the two servers."""
    return StackConfig.servers_on_free_ports(
        data_dir,
        partitions,
        kafka_heap="512m",
        insecure_anonymous=insecure_anonymous,
        kafka_jvm_options=kafka_jvm_options(),
    )


def _logged_in(local: Stack) -> Endpoints:
    """The endpoints of a started local stack, with its test login (none if anonymous)."""
    cfg = local.config
    login = None
    if not cfg.insecure_anonymous:
        login = provision_test_login(
            local.kafka_bootstrap, local.mqtt_host, local.mqtt_port, cfg.secrets_dir
        )
    return Endpoints(
        local.mqtt_host, local.mqtt_port, local.kafka_bootstrap, login, cfg.secrets_dir
    )


def _env_endpoints(mqtt_url: str, kafka_bootstrap: str) -> Endpoints:
    """Servers someone already runs: the login from the environment (see the module doc)."""
    parsed = urlparse(mqtt_url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 1883
    secrets = os.environ.get("IOT_TEST_SECRETS_DIR")
    secrets_dir = Path(secrets) if secrets else None
    # mqtt://user:password@host:port works too (quoted: svc%2Fci for svc/ci)
    username = os.environ.get("IOT_TEST_MQTT_USERNAME") or unquote(parsed.username or "")
    login = None
    if username:
        password = os.environ.get("IOT_TEST_MQTT_PASSWORD") or unquote(parsed.password or "")
        login = MqttLogin(username, password)
        register(port, login)
    elif secrets_dir is not None:
        login = provision_test_login(kafka_bootstrap, host, port, secrets_dir)
    return Endpoints(host, port, kafka_bootstrap, login, secrets_dir)


def _docker_engine_answers() -> bool:
    try:
        import docker  # testcontainers depends on it

        client = docker.from_env(timeout=3)
        client.ping()
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False
    return True


@contextlib.contextmanager
def _containers(data_dir: Path) -> Iterator[Endpoints]:
    """Kafka in a container; Mosquitto local, logging clients in as `iot-stack up`'s does
    (testcontainers' Mosquitto module is anonymous). Kafka is the appliance's own image
    (`iot-stack serve kafka`, as docker-compose.yml runs it) when the engine has it, which a
    machine without an image registry needs (`make test-containers` builds it); else
    testcontainers' Kafka module (KRaft), pulled from its registry."""
    from tests.plugins.containers import IMAGE, engine_has_image

    if not engine_has_image(IMAGE):
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as kafka:
            config = local_stack_config(data_dir).with_changes(
                external_kafka=kafka.get_bootstrap_server()
            )
            with _running(Stack(config)) as endpoints:
                yield endpoints
        return
    from testcontainers.core.container import DockerContainer

    from stack.ports import free_port
    from tests.plugins.containers import wait_for_kafka

    port = free_port("127.0.0.1")  # the same inside and out: Kafka advertises it
    container = (
        DockerContainer(IMAGE)
        .with_command(["iot-stack", "serve", "kafka", "--kafka-port", str(port)])
        .with_env("IOT_KAFKA_ADVERTISED_HOST", "127.0.0.1")
        .with_env("IOT_KAFKA_HEAP", "512m")
    )
    # published on loopback only: docker-py takes (address, port), which with_bind_ports refuses
    container.ports[f"{port}/tcp"] = ("127.0.0.1", port)  # type: ignore[assignment]
    with container:
        bootstrap = f"127.0.0.1:{port}"
        wait_for_kafka(bootstrap, container.get_logs)
        config = local_stack_config(data_dir).with_changes(external_kafka=bootstrap)
        with _running(Stack(config)) as endpoints:
            yield endpoints


@contextlib.contextmanager
def _running(local: Stack) -> Iterator[Endpoints]:
    """``local`` up (its servers reaped if the run dies), the test login provisioned."""
    with reaper(local.config.run_dir):
        try:
            local.up()
            yield _logged_in(local)
        finally:
            local.down()


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
        ensure_topics(kafka_bootstrap, DESIGN_TOPICS)
        yield _env_endpoints(mqtt_url, kafka_bootstrap)
        return
    if _docker_engine_answers():
        with _containers(tmp_path_factory.mktemp("stack")) as endpoints:
            yield endpoints
        return
    with _running(Stack(local_stack_config(tmp_path_factory.mktemp("stack")))) as endpoints:
        yield endpoints


@pytest.fixture
def local_stack_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Stack]]:
    """Private Mosquitto + Kafka for tests that stop, kill or restart a server; logins as the
    session stack's (`login_for(stack.mqtt_port)`, tests/plugins/mqtt_logins.py)."""
    made: list[Stack] = []

    def make(partitions: int = 12, *, insecure_anonymous: bool = False) -> Stack:
        config = local_stack_config(
            tmp_path_factory.mktemp("local-stack"),
            partitions,
            insecure_anonymous=insecure_anonymous,
        )
        local = Stack(config)
        made.append(local)
        reapers.enter_context(reaper(local.config.run_dir))
        local.up()
        _logged_in(local)
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
    StackConfig fields (e.g. kafka_session_timeout_ms); logins as local_stack_factory's."""
    made: list[Stack] = []

    def make(nodes: int = 3, partitions: int = 6, **changes: Any) -> Stack:
        config = StackConfig.servers_on_free_ports(
            tmp_path_factory.mktemp("local-cluster"),
            partitions,
            "384m",
            kafka_nodes=nodes,
            kafka_jvm_options=kafka_jvm_options(),
        )
        # a node's restart took 65 s under a load average of 50 (other tests' JVMs)
        local = Stack(config.with_changes(**({"start_timeout": 180.0} | changes)))
        made.append(local)
        reapers.enter_context(reaper(local.config.run_dir))
        local.up()
        _logged_in(local)
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
