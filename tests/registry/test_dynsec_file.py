"""Dynsec commands applied to the file's document, as Mosquitto would apply them (pure)."""

from __future__ import annotations

import pytest

from registry import dynsec_plan as plan
from registry.dynsec_config import check_pbkdf2, initial_config
from registry.dynsec_file import CLIENT_ITERATIONS, DynsecDocument, OfflineDynsecError
from registry.model import Credentials, Device

CREDS = Credentials("h", None)


def _device(name: str) -> Device:
    return Device("default", name, credentials=CREDS)


def test_added_devices_get_their_role_and_a_hashed_password_only() -> None:
    doc = DynsecDocument(initial_config("admin-pw", iterations=1000))
    doc.apply(plan.add_device(_device("d1"), "s3cret") + plan.add_device(_device("d2"), "other"))
    out = doc.document()
    clients = {c["username"]: c for c in out["clients"]}
    assert set(clients) == {"svc/registry", "d1", "d2"}
    d1 = clients["d1"]
    assert d1["clientid"] == "d1"
    assert d1["roles"] == [{"rolename": "device:default/d1"}]
    assert "s3cret" not in str(out)  # only the PBKDF2 hash, as Mosquitto keeps it
    assert d1["iterations"] == CLIENT_ITERATIONS
    assert check_pbkdf2("s3cret", d1)
    assert not check_pbkdf2("other", d1)
    roles = {r["rolename"]: r for r in out["roles"]}
    topics = {(a["acltype"], a["topic"]) for a in roles["device:default/d1"]["acls"]}
    assert ("publishClientSend", "devices/d1/telemetry") in topics
    assert ("subscribePattern", "devices/d1/commands/#") in topics
    assert all(a["allow"] for a in roles["device:default/d1"]["acls"])


def test_a_stale_client_and_role_are_replaced_not_duplicated() -> None:
    doc = DynsecDocument(initial_config("admin-pw", iterations=1000))
    doc.apply(plan.add_device(_device("d1"), "first"))
    doc.apply(plan.add_device(_device("d1"), "second"))
    out = doc.document()
    [d1] = [c for c in out["clients"] if c["username"] == "d1"]
    assert check_pbkdf2("second", d1)
    assert [r["rolename"] for r in out["roles"]].count("device:default/d1") == 1


def test_errors_mirror_mosquitto_and_unknown_commands_are_refused() -> None:
    doc = DynsecDocument(initial_config("admin-pw", iterations=1000))
    create = plan.Command({"command": "createClient", "username": "x", "roles": []})
    doc.apply([create])
    with pytest.raises(OfflineDynsecError, match="Client already exists"):
        doc.apply([create])
    missing_role = {"command": "createClient", "username": "y", "roles": [{"rolename": "nope"}]}
    with pytest.raises(OfflineDynsecError, match="Role not found"):
        doc.apply([plan.Command(missing_role)])
    # a disabled device needs disableClient: not handled offline, the caller goes live
    off = Device("default", "d9", disabled=True, credentials=CREDS)
    with pytest.raises(OfflineDynsecError, match="not applied offline"):
        doc.apply(plan.add_device(off, None))


def test_deleting_a_role_takes_it_from_its_holders() -> None:
    doc = DynsecDocument(initial_config("admin-pw", iterations=1000))
    doc.apply(plan.add_device(_device("d1"), "pw"))
    doc.apply([plan.Command({"command": "deleteRole", "rolename": "device:default/d1"})])
    out = doc.document()
    [d1] = [c for c in out["clients"] if c["username"] == "d1"]
    assert d1["roles"] == []
    assert "device:default/d1" not in {r["rolename"] for r in out["roles"]}
