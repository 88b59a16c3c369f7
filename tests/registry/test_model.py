from __future__ import annotations

import pytest

from registry import model
from registry.ids import InvalidIdError
from registry.model import Credentials, Device, ModelError, Quotas, Role, ServiceAccount, Tenant

CREDS = Credentials(secret_hash="scrypt$ln=14,r=8,p=1$YQ$YQ")


def test_entities_round_trip_through_json() -> None:
    entities: list[model.Entity] = [
        Tenant("t1", Quotas(10, 50.0), disabled=True, version=3, created_at=1, updated_at=2),
        Device("t1", "d1", ("g1", "g2"), True, CREDS, 2, 5, 6),
        Device("t1", "d2", credentials=Credentials(cert_fingerprint="sha256:" + "0" * 64)),
        ServiceAccount("edge-1", (Role.EDGE,), "t1", credentials=CREDS),
        ServiceAccount("root", (Role.ADMIN, Role.VIEWER), credentials=CREDS),
    ]
    for entity in entities:
        assert model.from_json(model.to_json(entity)) == entity


def test_validation() -> None:
    with pytest.raises(InvalidIdError):
        Device("t1", "a/b", credentials=CREDS)
    with pytest.raises(ModelError, match="secret or a certificate"):
        Device("t1", "d1")
    with pytest.raises(ModelError, match="duplicate"):
        Device("t1", "d1", ("g", "g"), credentials=CREDS)
    with pytest.raises(ModelError, match="reserved"):
        Tenant("svc")
    with pytest.raises(ModelError, match="reserved"):
        ServiceAccount("registry", (Role.ADMIN,), credentials=CREDS)
    with pytest.raises(ModelError, match="need a tenant"):
        ServiceAccount("e", (Role.EDGE,), credentials=CREDS)
    with pytest.raises(ModelError, match="system-wide"):
        ServiceAccount("b", (Role.BRIDGE,), "t1", credentials=CREDS)
    with pytest.raises(ModelError, match="at least one role"):
        ServiceAccount("b", (), credentials=CREDS)
    with pytest.raises(ModelError):
        Quotas(devices=-1)
    with pytest.raises(ModelError):
        Quotas(msgs_per_s=0)


def test_malformed_records_are_refused() -> None:
    with pytest.raises(ModelError, match="unknown entity kind"):
        model.from_json({"kind": "robot"})
    with pytest.raises(ModelError, match="malformed"):
        model.from_json({"kind": "tenant", "id": "t1", "colour": "red"})
    with pytest.raises(ValueError, match="wizard"):
        model.from_json({"kind": "account", "name": "a", "roles": ["wizard"]})


def test_bump_increments_version() -> None:
    tenant = Tenant("t1", version=4)
    changed = model.bump(tenant, 99, disabled=True)
    assert (changed.version, changed.updated_at, changed.disabled) == (5, 99, True)


def test_public_view_hides_hashes() -> None:
    view = model.public_view(Device("t1", "d1", credentials=CREDS))
    assert "scrypt" not in str(view)
    assert view["credentials"] == {"kinds": ["secret"], "cert_fingerprint": None}


def test_api_keys_and_topic_acls_round_trip_and_hide_secrets() -> None:
    key = model.ApiKey("AbCdEfGh12345678", "acme", Role.API, "salt", "scrypt$x", "a@b.c", "d")
    acl = model.TopicAcl("iot.acme.t", "acme", "AbCdEfGh12345678", "desc", ("W1",), ("R1", "R2"))
    for entity in (key, acl):
        assert model.from_json(model.to_json(entity)) == entity
    view = model.public_view(key)
    assert "secret_hash" not in view
    assert "salt" not in view
    assert view["role"] == "api"
    with pytest.raises(ModelError):
        model.ApiKey("short", "acme", Role.API, "s", "h")
    with pytest.raises(ModelError):
        model.ApiKey("AbCdEfGh12345678", "acme", Role.ADMIN, "s", "h")  # not a key role
    with pytest.raises(ModelError):
        model.ApiKey("AbCdEfGh12345678", "acme", Role.API, "", "h")
    with pytest.raises(ModelError):
        model.TopicAcl("bad topic", "acme")
