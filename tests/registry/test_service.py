"""The registry service's rules on an in-memory store (the Kafka store has its own tests)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import pytest

from registry import hashing
from registry.audit import AuditRecord
from registry.dynsec import DynsecClient, DynsecError
from registry.dynsec_plan import Command
from registry.errors import (
    ConflictError,
    ForbiddenError,
    MosquittoOutOfStepError,
    NotFoundError,
)
from registry.kafka_store import KafkaStore
from registry.model import Quotas, Role
from registry.permissions import Actor, local_admin
from registry.service import Registry


class MemoryStore:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.audits: list[AuditRecord] = []

    def open_writer(self) -> None:
        pass

    def read_since(
        self, position: dict[int, int] | None
    ) -> tuple[list[tuple[bytes, bytes | None]], dict[int, int]]:
        start = (position or {}).get(0, 0)
        return self.records[start:], {0: len(self.records)}

    def commit(
        self, records: Sequence[tuple[bytes, bytes | None]], audits: Iterable[AuditRecord]
    ) -> None:
        self.records += records
        self.audits += audits


class RecordingMosquitto:
    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def call(self, commands: Sequence[Command]) -> list[dict[str, Any]]:
        self.calls.append([c.body for c in commands])
        return []


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def mosq() -> RecordingMosquitto:
    return RecordingMosquitto()


def _registry(
    store: MemoryStore, mosq: RecordingMosquitto | None = None, actor: Actor | None = None
) -> Registry:
    return Registry.open(
        cast(KafkaStore, store),
        actor or local_admin("ops"),
        cast(DynsecClient, mosq),
        write=True,
    )


def _commands(mosq: RecordingMosquitto) -> list[str]:
    return [c["command"] for call in mosq.calls for c in call]


def test_device_lifecycle_survives_a_rebuild(store: MemoryStore, mosq: RecordingMosquitto) -> None:
    reg = _registry(store, mosq)
    reg.create_tenant("default")
    issued = reg.add_device("default", "d1", ["g1"])
    assert issued.secret is not None
    device = reg.device("default", "d1")
    assert device.credentials.secret_hash != issued.secret
    assert reg.verify_device("default", "d1", issued.secret)
    assert not reg.verify_device("default", "d1", "wrong")
    created = mosq.calls[-1]
    client = next(c for c in created if c["command"] == "createClient")
    assert client["username"] == client["clientid"] == "d1"
    assert client["password"] == issued.secret
    assert client["groups"] == [{"groupname": "default/g1"}]

    rotated = reg.rotate_device("default", "d1")
    assert rotated.secret not in (None, issued.secret)
    assert not reg.verify_device("default", "d1", issued.secret)
    assert "setClientPassword" in _commands(mosq)
    reg.set_device_disabled("default", "d1", True)
    assert mosq.calls[-1] == [{"command": "disableClient", "username": "d1"}]
    assert rotated.secret is not None
    assert not reg.verify_device("default", "d1", rotated.secret)

    again = _registry(store)
    assert again.device("default", "d1") == reg.device("default", "d1")
    assert again.device("default", "d1").version == 3
    actions = [a.action for a in store.audits]
    assert actions == ["tenant.create", "device.add", "device.rotate", "device.disable"]
    assert all(a.actor == "cli:ops" for a in store.audits)
    assert all(rotated.secret not in str(a) and "scrypt" not in str(a) for a in store.audits)


def test_conflicts_and_missing(store: MemoryStore) -> None:
    reg = _registry(store)
    with pytest.raises(NotFoundError):
        reg.add_device("nope", "d1")
    reg.create_tenant("t1", Quotas(devices=1))
    with pytest.raises(ConflictError):
        reg.create_tenant("t1")
    reg.add_device("t1", "d1")
    with pytest.raises(ConflictError, match="exists"):
        reg.add_device("t1", "d1")
    with pytest.raises(ConflictError, match="quota"):
        reg.add_device("t1", "d2")
    with pytest.raises(ConflictError, match="quota"):
        reg.add_devices("t1", ["d2", "d3"])
    with pytest.raises(ConflictError, match="repeated"):
        reg.add_devices("t1", ["x", "x"])
    with pytest.raises(ConflictError, match="d1"):
        reg.add_devices("t1", ["d1"])
    with pytest.raises(ConflictError, match="cascade"):
        reg.delete_tenant("t1")
    reg.set_device_groups("t1", "d1", add=["g"])
    mosq = RecordingMosquitto()
    reg.mosquitto = cast(DynsecClient, mosq)
    reg.delete_tenant("t1", cascade=True)
    assert _commands(mosq) == ["deleteClient", "deleteRole", "deleteGroup", "deleteRole"]
    assert _registry(store).state.devices == {}


def test_bulk_add_is_one_transaction_and_one_mosquitto_batch(
    store: MemoryStore, mosq: RecordingMosquitto
) -> None:
    reg = _registry(store, mosq)
    reg.create_tenant("default")
    before = (len(store.records), len(mosq.calls))
    issued = reg.add_devices("default", [f"dev-{i}" for i in range(5)], ["fleet"])
    assert len(store.records) - before[0] == 5
    assert len(mosq.calls) - before[1] == 1
    assert len({i.secret for i in issued}) == 5
    assert all(
        reg.verify_device("default", f"dev-{n}", i.secret or "") for n, i in enumerate(issued)
    )
    assert [a.action for a in store.audits[-5:]] == ["device.add"] * 5
    assert reg.add_devices("default", []) == []


def test_same_device_id_in_two_tenants(store: MemoryStore, mosq: RecordingMosquitto) -> None:
    reg = _registry(store, mosq)
    reg.create_tenant("t1")
    reg.create_tenant("t2")
    a, b = reg.add_device("t1", "pump"), reg.add_device("t2", "pump")
    assert a.secret != b.secret
    users = [c["username"] for call in mosq.calls for c in call if c["command"] == "createClient"]
    assert users == ["t1/pump", "t2/pump"]
    assert [d.tenant for d in reg.devices(search="PU")] == ["t1", "t2"]


def test_tenant_disable_disables_its_devices(store: MemoryStore, mosq: RecordingMosquitto) -> None:
    reg = _registry(store, mosq)
    reg.create_tenant("t1")
    issued = reg.add_device("t1", "d1")
    reg.add_device("t1", "d2")
    reg.set_device_disabled("t1", "d2", True)
    reg.set_tenant_disabled("t1", True)
    assert mosq.calls[-1] == [
        {"command": "disableClient", "username": "t1/d1"},
        {"command": "disableClient", "username": "t1/d2"},
    ]
    assert issued.secret is not None
    assert not reg.verify_device("t1", "d1", issued.secret)
    edge = reg.create_account("site", [Role.EDGE], tenant="t1")
    assert edge.secret is not None
    assert mosq.calls[-1][-1] == {"command": "disableClient", "username": "svc/site"}
    assert reg.authenticate_account("site", edge.secret) is None
    reg.set_tenant_disabled("t1", False)
    assert mosq.calls[-1][-1] == {"command": "enableClient", "username": "svc/site"}
    assert reg.authenticate_account("site", edge.secret) is not None
    assert mosq.calls[-1][0] == {"command": "enableClient", "username": "t1/d1"}
    assert mosq.calls[-1][1] == {"command": "disableClient", "username": "t1/d2"}


def test_groups_change(store: MemoryStore, mosq: RecordingMosquitto) -> None:
    reg = _registry(store, mosq)
    reg.create_tenant("default")
    reg.add_device("default", "d1", ["a"])
    device = reg.set_device_groups("default", "d1", add=["b"], remove=["a"])
    assert device.groups == ("b",)
    assert "removeGroupClient" in _commands(mosq)
    assert "addGroupClient" in _commands(mosq)
    assert [d.id for d in reg.devices(group="b")] == ["d1"]


def test_accounts_and_bootstrap(store: MemoryStore, mosq: RecordingMosquitto) -> None:
    reg = _registry(store, mosq)
    admin = reg.bootstrap_admin("root")
    assert admin.secret is not None
    with pytest.raises(ConflictError, match="bootstrap"):
        reg.bootstrap_admin("root2")
    assert mosq.calls == []  # an operator account has no MQTT client
    actor = reg.authenticate_account("root", admin.secret)
    assert actor == Actor("svc/root", (Role.ADMIN,), None)
    assert reg.authenticate_account("root", "wrong") is None
    bridge = reg.create_account("bridge", [Role.BRIDGE])
    client = next(c for c in mosq.calls[-1] if c["command"] == "createClient")
    assert client["username"] == "svc/bridge"
    assert client["roles"] == [{"rolename": "svc:bridge"}]
    assert bridge.secret is not None
    reg.set_account_disabled("bridge", True)
    assert reg.authenticate_account("bridge", bridge.secret) is None
    assert store.audits[0].action == "account.bootstrap"


def test_actors_are_limited_by_their_roles(store: MemoryStore) -> None:
    reg = _registry(store)
    reg.create_tenant("t1")
    reg.create_tenant("t2")
    reg.add_device("t1", "d1")
    reg.add_device("t2", "d1")
    tadmin = _registry(store, actor=Actor("svc/ta", (Role.TENANT_ADMIN,), "t1"))
    assert [d.tenant for d in tadmin.devices()] == ["t1"]
    assert [t.id for t in tadmin.tenants()] == ["t1"]
    tadmin.add_device("t1", "d2")
    with pytest.raises(ForbiddenError):
        tadmin.add_device("t2", "d2")
    with pytest.raises(ForbiddenError):
        tadmin.device("t2", "d1")
    with pytest.raises(ForbiddenError):
        tadmin.create_tenant("t3")
    viewer = _registry(store, actor=Actor("svc/v", (Role.VIEWER,)))
    with pytest.raises(ForbiddenError):
        viewer.rotate_device("t1", "d1")
    denied = [(a.actor, a.action, a.entity) for a in store.audits if a.outcome == "denied"]
    assert denied == [
        ("svc/ta", "device.write", "device/t2"),
        ("svc/ta", "tenant.write", "tenant/system"),
        ("svc/v", "device.write", "device/t1"),
    ]


def test_certificate_only_device(store: MemoryStore) -> None:
    reg = _registry(store)
    reg.create_tenant("default")
    fp = ":".join(["0A"] * 32)
    issued = reg.add_device("default", "c1", cert_fingerprint=fp, with_secret=False)
    assert issued.secret is None
    device = reg.device("default", "c1")
    assert device.credentials.cert_fingerprint == hashing.normalise_fingerprint(fp)
    assert not reg.verify_device("default", "c1", "")


class FailingMosquitto:
    def call(self, commands: Sequence[Command]) -> list[dict[str, Any]]:
        raise DynsecError("Mosquitto did not answer")


def test_kafka_keeps_the_change_when_mosquitto_fails(store: MemoryStore) -> None:
    reg = _registry(store)
    reg.create_tenant("default")
    reg.mosquitto = cast(DynsecClient, FailingMosquitto())
    with pytest.raises(MosquittoOutOfStepError, match="mosquitto sync"):
        reg.add_device("default", "d1")
    assert ("default", "d1") in _registry(store).state.devices  # the source of truth has it
