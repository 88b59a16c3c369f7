"""Basic auth against the registry's service accounts."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

import pytest

from api.plumbing.auth import basic_credentials
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
        # a disabled account is refused once the service has read the change
        registry.set_account_disabled("feeder", True)
        deadline = time.monotonic() + 20
        other = Client(svc.port, basic("feeder", api_secret))
        while other.request("GET", "/topics").status != 403:
            assert time.monotonic() < deadline, "the disabled account still gets in"
            time.sleep(1)
