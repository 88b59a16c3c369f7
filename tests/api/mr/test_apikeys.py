"""/apiKeys, Cambria HMAC / bearer / Basic keys, tenant scoping and topic ACLs: a real iot-api
over sockets on the real Kafka, keys kept in a real registry topic."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from api.plumbing.cambria import sign
from registry.kafka_store import KafkaStore, StoreError
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from tests.api.harness import Client, Reply, basic, running_api
from tests.conftest import Endpoints
from tests.registry.conftest import store_factory  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


@dataclass
class Key:
    key: str
    secret: str

    def hmac(self, when: datetime | None = None, nonce: str | None = None) -> dict[str, str]:
        date = format_datetime(when or datetime.now(UTC), usegmt=True)  # RFC 1123
        signed = f"{date}:{nonce}" if nonce else date
        headers = {
            "X-CambriaAuth": f"{self.key}:{sign(self.secret, signed)}",
            "X-CambriaDate": date,
        }
        if nonce:
            headers["X-Nonce"] = nonce
        return headers


class Caller:
    """A client that sends fixed headers (the credentials) with every request."""

    def __init__(self, port: int, headers: Callable[[], dict[str, str]]) -> None:
        self.client = Client(port)
        self.headers = headers

    def __call__(
        self, method: str, path: str, body: Any = None, content_type: str | None = None
    ) -> Reply:
        if isinstance(body, dict):
            body, content_type = json.dumps(body), "application/json"
        return self.client.request(method, path, body, content_type, headers=self.headers())


@dataclass
class World:
    registry: Registry
    store: KafkaStore
    root_secret: str
    feeder_secret: str
    master: Path


@pytest.fixture
def world(
    store_factory: Callable[[], KafkaStore],  # noqa: F811
    tmp_path: Path,
) -> World:
    store = store_factory()
    deadline = time.monotonic() + 120
    while True:  # a fresh test Kafka's transaction coordinator may take a while to load
        try:
            registry = Registry.open(store, local_admin("test"), write=True)
            break
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    for tenant in ("acme", "globex"):
        registry.create_tenant(tenant)
    registry.create_tenant("default")
    root = registry.create_account("root", [Role.ADMIN]).secret
    feeder = registry.create_account("feeder", [Role.API]).secret
    assert root
    assert feeder
    store.close()  # the service becomes the writer when it needs to
    return World(registry, store, root, feeder, tmp_path / "secrets" / "api-key-master")


@contextmanager
def api_for(stack: Endpoints, world: World, **extra: Any) -> Iterator[int]:
    with running_api(
        kafka_bootstrap=stack.kafka_bootstrap,
        registry_auth=True,
        registry_topic=world.store.topic,
        registry_audit_topic=world.store.audit_topic,
        registry_transactional_id=world.store.transactional_id,
        api_key_master_file=str(world.master),
        **extra,
    ) as svc:
        yield svc.port


def issue(root: Caller, tenant: str, role: str = "api", **aux: str) -> Key:
    reply = root("POST", "/apiKeys/create", {"tenant": tenant, "role": role, **aux})
    assert reply.status == 200, reply.body
    body = reply.json()
    assert len(body["key"]) == 16
    assert len(body["secret"]) == 24
    assert body["tenant"] == tenant
    assert body["role"] == role
    return Key(body["key"], body["secret"])


def topic(tenant: str) -> str:
    suffix = uuid.uuid4().hex[:10]
    return f"iot.{tenant}.t{suffix}" if tenant != "default" else f"api.t{suffix}"


def test_keys_are_issued_stored_hashed_audited_and_signed_with_hmac(
    stack: Endpoints, world: World
) -> None:
    with api_for(stack, world) as port:
        root = Caller(port, lambda: {"Authorization": basic("root", world.root_secret)})
        anonymous = Caller(port, dict)
        assert anonymous("POST", "/apiKeys/create", {"tenant": "acme"}).status == 401
        feeder = Caller(port, lambda: {"Authorization": basic("feeder", world.feeder_secret)})
        assert feeder("POST", "/apiKeys/create", {"tenant": "acme"}).status == 403
        assert root("POST", "/apiKeys/create", {"tenant": "acme", "role": "admin"}).status == 400
        assert root("POST", "/apiKeys/create", {"tenant": "nosuch"}).status == 404
        key = issue(root, "acme", email="ops@acme.example", description="feeder")
        assert key.key in root("GET", "/apiKeys").json()["apiKeys"]
        shown = root("GET", f"/apiKeys/{key.key}").json()
        assert shown["aux"] == {"email": "ops@acme.example", "description": "feeder"}
        assert "secret" not in shown

        name = topic("acme")
        signed = Caller(port, key.hmac)
        assert signed("POST", f"/events/{name}", "m1", "text/plain").json()["count"] == 1
        with_nonce = Caller(port, lambda: key.hmac(nonce="n-1"))
        assert with_nonce("POST", f"/events/{name}", "m2", "text/plain").status == 200
        bearer = Caller(port, lambda: {"Authorization": f"Bearer {key.key}:{key.secret}"})
        assert bearer("POST", f"/events/{name}", "m3", "text/plain").status == 200
        as_basic = Caller(port, lambda: {"Authorization": basic(key.key, key.secret)})
        assert as_basic("POST", f"/events/{name}", "m4", "text/plain").status == 200

        # failures: a wrong secret, a date outside the 10-minute window, a wrong signed text
        wrong = Key(key.key, key.secret[:-1] + ("x" if key.secret[-1] != "x" else "y"))
        late = datetime.now(UTC) - timedelta(minutes=11)
        early = datetime.now(UTC) + timedelta(minutes=11)
        just_inside = datetime.now(UTC) - timedelta(minutes=9)
        for headers in (
            wrong.hmac(),
            key.hmac(late),
            key.hmac(early),
            {**key.hmac(), "X-Nonce": "not-signed"},
            {"Authorization": f"Bearer {wrong.key}:{wrong.secret}"},
        ):
            fixed = Caller(port, functools.partial(dict, headers))
            reply = fixed("POST", f"/events/{name}", "x", "text/plain")
            assert reply.status == 401, headers
            assert reply.json()["mrstatus"] == 4002
        assert Caller(port, lambda: key.hmac(just_inside))("GET", "/topics").status == 200

    # durable and hashed: the registry topic has the key's hash and salt, never its secret
    raw = b"".join(v or b"" for _, v in world.store.read_all())
    assert key.key.encode() in raw
    assert key.secret.encode() not in raw
    record = world.registry
    record.refresh()
    stored = record.state.api_keys[key.key]
    assert stored.secret_hash.startswith("scrypt$")
    assert stored.tenant == "acme"
    audits = [json.loads(v or b"{}") for _, v in world.store.read_all(world.store.audit_topic)]
    created = [a for a in audits if a["action"] == "apikey.create"]
    assert [a["actor"] for a in created] == ["svc/root"]
    assert created[0]["entity"] == f"apikey/{key.key}"
    assert key.secret not in json.dumps(audits)


def test_a_tenants_key_reaches_only_that_tenants_topics(stack: Endpoints, world: World) -> None:
    with api_for(stack, world) as port:
        root = Caller(port, lambda: {"Authorization": basic("root", world.root_secret)})
        acme, globex = issue(root, "acme"), issue(root, "globex")
        default = issue(root, "default")
        mine, theirs, shared = topic("acme"), topic("globex"), topic("default")
        a, g, d = Caller(port, acme.hmac), Caller(port, globex.hmac), Caller(port, default.hmac)
        assert a("POST", f"/events/{mine}", "a", "text/plain").status == 200
        assert g("POST", f"/events/{theirs}", "g", "text/plain").status == 200
        assert d("POST", f"/events/{shared}", "d", "text/plain").status == 200
        for target in (theirs, shared, "iot.registry", world.store.topic):
            reply = a("POST", f"/events/{target}", "x", "text/plain")
            assert reply.status == 403, target
            assert reply.json()["mrstatus"] == 4002
            assert a("GET", f"/events/{target}/g/c?timeout=0").status == 403
            assert a("GET", f"/topics/{target}").status == 403
        assert d("POST", f"/events/{mine}", "x", "text/plain").status == 403
        assert a("POST", "/topics/create", {"topicName": theirs}).status == 403
        assert a("DELETE", f"/topics/{theirs}").status == 403
        listed = a("GET", "/topics").json()["topics"]
        assert mine in listed
        assert theirs not in listed
        assert shared not in listed
        assert all(t.startswith("iot.acme.") for t in listed)
        # another tenant's key is not even said to exist
        assert a("GET", f"/apiKeys/{globex.key}").status == 404
        assert a("DELETE", f"/apiKeys/{globex.key}").status == 404
        assert a("GET", "/apiKeys").json()["apiKeys"] == [acme.key]
        # a system-wide account reaches every tenant's topics
        feeder = Caller(port, lambda: {"Authorization": basic("feeder", world.feeder_secret)})
        assert feeder("POST", f"/events/{theirs}", "f", "text/plain").status == 200
        assert feeder("POST", f"/events/{mine}", "f", "text/plain").status == 200


def test_keys_change_and_delete_themselves_only(stack: Endpoints, world: World) -> None:
    with api_for(stack, world) as port:
        root = Caller(port, lambda: {"Authorization": basic("root", world.root_secret)})
        one, two = issue(root, "acme"), issue(root, "acme")
        first, second = Caller(port, one.hmac), Caller(port, two.hmac)
        changed = first("PUT", f"/apiKeys/{one.key}", {"description": "renamed"})
        assert changed.status == 200, changed.body
        assert changed.json()["aux"]["description"] == "renamed"
        assert first("PATCH", f"/apiKeys/{one.key}", {"email": "x@y.z"}).json()["aux"] == {
            "email": "x@y.z",
            "description": "renamed",
        }
        assert second("PUT", f"/apiKeys/{one.key}", {"description": "no"}).status == 404
        admin_key = issue(root, "acme", role="tenant-admin")
        tenant_admin = Caller(port, admin_key.hmac)
        assert tenant_admin("GET", f"/apiKeys/{two.key}").status == 200
        reply = first("DELETE", f"/apiKeys/{one.key}")
        assert reply.status == 200
        assert reply.body.decode() == f"Api key [{one.key}] deleted successfully."
        assert first("GET", "/topics").status == 403  # gone: its credentials fail
        assert tenant_admin("DELETE", f"/apiKeys/{two.key}").status == 200
        assert second("GET", "/topics").status == 403
        assert root("GET", f"/apiKeys/{two.key}").status == 404


def test_topic_owner_and_acls_are_mr_shaped_enforced_and_durable(
    stack: Endpoints, world: World
) -> None:
    name = topic("acme")
    with api_for(stack, world) as port:
        root = Caller(port, lambda: {"Authorization": basic("root", world.root_secret)})
        owner_key, other_key = issue(root, "acme"), issue(root, "acme")
        owner, other = Caller(port, owner_key.hmac), Caller(port, other_key.hmac)
        created = owner("POST", "/topics/create", {"topicName": name, "topicDescription": "d"})
        assert created.status == 200, created.body
        assert created.json()["owner"] == owner_key.key
        details = other("GET", f"/topics/{name}").json()
        assert details["owner"] == owner_key.key
        assert details["description"] == "d"
        assert details["writerAcl"] == {"enabled": True, "users": []}
        assert other("POST", f"/events/{name}", "open", "text/plain").status == 200
        assert other("PUT", f"/topics/{name}/producers/{other_key.key}").status == 403
        granted = owner("PUT", f"/topics/{name}/producers/{owner_key.key}")
        assert granted.status == 200
        assert granted.body.decode() == "Write access has been granted to publisher."
        assert other("GET", f"/topics/{name}/producers").json() == {
            "enabled": True,
            "users": [owner_key.key],
        }
        assert other("POST", f"/events/{name}", "closed", "text/plain").status == 403
        assert owner("POST", f"/events/{name}", "mine", "text/plain").status == 200
        reply = owner("PUT", f"/topics/{name}/consumers/{owner_key.key}")
        assert reply.body.decode() == (
            f"Read access has been granted for consumer [{owner_key.key}] for topic [{name}]."
        )
        assert other("GET", f"/events/{name}/g/c?timeout=0").status == 403
        assert owner("GET", f"/events/{name}/g/c?timeout=0").status == 200
        listed = {
            t["topicName"]: t["owner"] for t in owner("GET", "/topics/listAll").json()["topics"]
        }
        assert listed[name] == owner_key.key
        assert name not in other("GET", "/topics").json()["topics"]  # cannot read it: not listed
        assert name in owner("GET", "/topics").json()["topics"]
        assert owner("GET", f"/topics/{name}/consumers").status == 200
        assert owner("GET", "/topics/iot.acme.never-made/producers").status == 404
    # another instance reads the same registry: owner and lists hold
    with api_for(stack, world) as port:
        other = Caller(port, other_key.hmac)
        owner = Caller(port, owner_key.hmac)
        assert other("POST", f"/events/{name}", "closed", "text/plain").status == 403
        revoked = owner("DELETE", f"/topics/{name}/producers/{owner_key.key}")
        assert revoked.body.decode() == "Write access has been revoked for publisher."
        assert other("POST", f"/events/{name}", "open again", "text/plain").status == 200
        assert other("DELETE", f"/topics/{name}").status == 403
        assert owner("DELETE", f"/topics/{name}").status == 200
    world.registry.refresh()
    assert name not in world.registry.state.topic_acls
    actions = [
        json.loads(v or b"{}")["action"] for _, v in world.store.read_all(world.store.audit_topic)
    ]
    assert actions.count("topic.acl") >= 4
    assert "topic.delete" in actions


def test_sawmill_and_queue_routes_keep_a_tenant_to_its_topics(
    stack: Endpoints, world: World
) -> None:
    with api_for(stack, world) as port:
        root = Caller(port, lambda: {"Authorization": basic("root", world.root_secret)})
        acme, globex = issue(root, "acme"), issue(root, "globex")
        mine, theirs = topic("acme"), topic("globex")
        g = Caller(port, globex.hmac)
        assert g("POST", f"/events/{theirs}", "secret of globex", "text/plain").status == 200
        token = Caller(port, lambda: {"token": f"{acme.key}:{acme.secret}"})
        assert token("POST", f"/push/{mine}", {"v": 1}).status == 200
        for method, path in (
            ("POST", f"/push/{theirs}"),
            ("GET", f"/consume/{theirs}?offset=0"),
            ("GET", f"/latest/{theirs}?offset=5"),
            ("GET", f"/latest_time/{theirs}?offset=0"),
            ("GET", f"/realtime/{theirs}"),
            ("GET", f"/delete/{theirs}"),  # sawmill deletes with a GET
        ):
            reply = token(method, path)
            assert reply.status == 403, (path, reply.body)
            assert b"secret of globex" not in reply.body
        listed = token("GET", "/topics/").json()
        assert mine in listed
        assert theirs not in listed
        a = Caller(port, acme.hmac)
        their_queue = topic("globex")
        assert g("PUT", f"/queues/{their_queue}").status == 200
        assert g("POST", f"/queues/{their_queue}/messages", "q", "text/plain").status == 200
        for method, path in (
            ("GET", f"/queues/{their_queue}"),
            ("POST", f"/queues/{their_queue}/messages"),
            ("POST", f"/queues/{their_queue}/receive?timeout=0"),
            ("POST", f"/queues/{their_queue}/ack"),
        ):
            reply = a(method, path, {"receiptHandles": []} if path.endswith("ack") else None)
            assert reply.status == 403, (path, reply.body)
        my_queue = topic("acme")
        assert a("PUT", f"/queues/{my_queue}").status == 200
        assert a("POST", f"/queues/{my_queue}/messages", "mine", "text/plain").status == 200
