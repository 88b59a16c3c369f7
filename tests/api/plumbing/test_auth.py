"""Basic auth against the registry's service accounts."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable

import pytest

from api.console.operators import Operators
from api.plumbing.auth import ReadBarrier, basic_credentials
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from tests.api.harness import Client, basic, running_api
from tests.conftest import Endpoints
from tests.registry.conftest import store_factory  # noqa: F401 - the fixture


def test_basic_credentials_parsing() -> None:
    assert basic_credentials(basic("svc", "s:e:c")) == ("svc", "s:e:c")
    assert basic_credentials("basic " + base64.b64encode(b"a:").decode()) == ("a", "")
    for bad in (
        None,
        "",
        "Bearer x",
        "Basic !!!",
        "Basic " + base64.b64encode(b"nocolon").decode(),
    ):
        assert basic_credentials(bad) is None


def test_the_read_barrier_answers_a_waiter_only_with_a_run_begun_after_it_arrived() -> None:
    """Waiters that arrive while a catch-up runs are not answered by it (a change committed
    just before they arrived may be past the end it asked for): they share the next run."""

    async def scenario() -> list[int]:
        runs: list[int] = []
        release, running = asyncio.Event(), asyncio.Event()

        async def catch_up() -> None:
            runs.append(len(runs))
            running.set()
            if len(runs) == 1:
                await release.wait()

        barrier = ReadBarrier(catch_up)
        first = asyncio.create_task(barrier.wait())
        await running.wait()
        late = [asyncio.create_task(barrier.wait()) for _ in range(5)]
        for _ in range(3):
            await asyncio.sleep(0)
        assert not any(t.done() for t in [first, *late])
        release.set()
        await asyncio.gather(first, *late)
        return runs

    assert asyncio.run(scenario()) == [0, 1]  # six waiters, two runs


def test_a_failed_catch_up_fails_its_waiters_and_the_next_run_is_tried_again() -> None:
    async def scenario() -> tuple[str, int]:
        calls: list[int] = []

        async def catch_up() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("kafka down")

        barrier = ReadBarrier(catch_up)
        try:
            await barrier.wait()
            failed = ""
        except RuntimeError as exc:
            failed = str(exc)
        await barrier.wait()
        return failed, len(calls)

    assert asyncio.run(scenario()) == ("kafka down", 2)


@pytest.mark.integration
def test_registry_accounts_with_an_api_role_get_in(
    stack: Endpoints,
    store_factory: Callable[[], KafkaStore],  # noqa: F811
    topic_factory: Callable[..., str],
) -> None:
    store = store_factory()
    registry = Registry.open(store, local_admin("test"), write=True)
    api_secret = registry.create_account("feeder", [Role.API]).secret
    bridge_secret = registry.create_account("bridgey", [Role.BRIDGE]).secret
    assert api_secret
    assert bridge_secret
    topic = topic_factory("api", partitions=1)
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap, registry_auth=True, registry_topic=store.topic
    ) as svc:
        anonymous = Client(svc.port)
        reply = anonymous.publish(topic, "x", "text/plain")
        assert reply.status == 401
        assert reply.headers["WWW-Authenticate"].startswith("Basic")
        assert reply.json()["mrstatus"] == 4002
        assert anonymous.request("GET", "/topics").status == 401
        assert anonymous.request("GET", "/healthz").status == 200  # probes need no credentials
        wrong = Client(svc.port, basic("feeder", api_secret + "x"))
        assert wrong.publish(topic, "x", "text/plain").status == 401
        assert wrong.request("GET", "/topics").status == 403  # as MR: bad credentials on /topics
        not_api = Client(svc.port, basic("bridgey", bridge_secret))
        assert not_api.publish(topic, "x", "text/plain").status == 401
        feeder = Client(svc.port, basic("feeder", api_secret))
        assert feeder.publish(topic, "x", "text/plain").json()["count"] == 1
        assert feeder.request("GET", "/topics").status == 200
        # a disabled account is refused from the moment the change returns (issue 37)
        registry.set_account_disabled("feeder", True)
        other = Client(svc.port, basic("feeder", api_secret))
        assert other.request("GET", "/topics").status == 403
        assert other.publish(topic, "x", "text/plain").status == 401


@pytest.mark.integration
def test_an_account_works_in_the_next_instruction_twenty_times_in_a_row(
    stack: Endpoints,
    store_factory: Callable[[], KafkaStore],  # noqa: F811
    topic_factory: Callable[..., str],
) -> None:
    """Issue 37: an account created (as `iot-devices account create` does) is accepted by
    the very next request, by iot-api and by the console's log-in, 20 times in a row; a
    rotated secret and a disabled or deleted account are refused by the very next one."""
    store = store_factory()
    registry = Registry.open(store, local_admin("test"), write=True)
    registry.create_tenant("default")
    topic = topic_factory("api", partitions=1)
    console = Operators(stack.kafka_bootstrap, store.topic, "127.0.0.1", 1, "")
    console.start()
    try:
        with running_api(
            kafka_bootstrap=stack.kafka_bootstrap, registry_auth=True, registry_topic=store.topic
        ) as svc:
            statuses, logins, secrets = [], [], {}
            for i in range(20):
                secret = registry.create_account(f"pub{i}", [Role.API]).secret
                assert secret is not None
                secrets[f"pub{i}"] = secret
                statuses.append(
                    Client(svc.port, basic(f"pub{i}", secret))
                    .publish(topic, "x", "text/plain")
                    .status
                )
                op_secret = registry.create_account(f"op{i}", [Role.OPERATOR]).secret or ""
                logins.append(console.login(f"op{i}", op_secret) is not None)
            assert statuses == [200] * 20
            assert logins == [True] * 20

            old = secrets["pub19"]
            new = registry.rotate_account("pub19").secret
            assert new is not None
            assert (
                Client(svc.port, basic("pub19", old)).publish(topic, "x", "text/plain").status
                == 401
            )
            assert (
                Client(svc.port, basic("pub19", new)).publish(topic, "x", "text/plain").status
                == 200
            )
            registry.set_account_disabled("pub19", True)
            assert (
                Client(svc.port, basic("pub19", new)).publish(topic, "x", "text/plain").status
                == 401
            )
            registry.delete_account("pub18")
            gone = Client(svc.port, basic("pub18", secrets["pub18"]))
            assert gone.publish(topic, "x", "text/plain").status == 401
            actor = console.login("op19", op_secret)
            assert actor is not None
            registry.set_account_disabled("op19", True)
            assert not console.still_valid(actor)  # a logged-in operator is out at once
            assert console.login("op19", op_secret) is None
    finally:
        console.close()
