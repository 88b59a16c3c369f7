from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from registry.audit import AuditRecord
from registry.model import Credentials, Device, Tenant
from registry.state import RegistryState, encode, entity_key, rebuild

CREDS = Credentials(secret_hash="h")


def test_state_is_rebuilt_from_records_in_order_with_tombstones() -> None:
    t1, t2 = Tenant("t1"), Tenant("t2")
    d1 = Device("t1", "d1", credentials=CREDS)
    d1_v2 = Device("t1", "d1", ("g",), True, CREDS, version=2)
    same_id_other_tenant = Device("t2", "d1", credentials=CREDS)
    records: list[tuple[bytes, bytes | None]] = [
        encode(t1),
        encode(t2),
        encode(d1),
        encode(same_id_other_tenant),
        encode(d1_v2),
        (entity_key(t2).encode(), None),
    ]
    state = rebuild(records)
    assert state.tenants == {"t1": t1}
    assert state.devices[("t1", "d1")] == d1_v2
    assert state.devices[("t2", "d1")] == same_id_other_tenant
    assert state.group_members("t1", "g") == [d1_v2]
    records.append((entity_key(d1).encode(), None))
    assert ("t1", "d1") not in rebuild(records).devices


def test_bad_records_are_skipped_not_fatal() -> None:
    good = encode(Tenant("t1"))
    wrong_key = (b"tenant/t2", good[1])
    state = rebuild([(b"tenant/x", b"not json"), wrong_key, good, (b"tenant/y", b"{}")])
    assert list(state.tenants) == ["t1"]
    assert state.skipped == 3


def test_audit_record_shape() -> None:
    record = AuditRecord(1700, "cli:ops", "device.add", "device/t1/d1", detail={"groups": []})
    key, value = record.encode()
    assert key == b"device/t1/d1"
    assert json.loads(value) == {
        "at": 1700,
        "actor": "cli:ops",
        "action": "device.add",
        "entity": "device/t1/d1",
        "outcome": "ok",
        "detail": {"groups": []},
    }
    assert AuditRecord.decode(value) == record


_TENANTS = st.sampled_from(["t1", "t2", "default"])
_DEVICES = st.builds(
    Device,
    tenant=_TENANTS,
    id=st.sampled_from(["d1", "d2", "pump:1"]),
    groups=st.lists(st.sampled_from(["a", "b"]), unique=True).map(tuple),
    disabled=st.booleans(),
    credentials=st.just(CREDS),
    version=st.integers(1, 50),
)
_ENTITIES = st.one_of(
    st.builds(Tenant, id=_TENANTS, disabled=st.booleans(), version=st.integers(1, 50)),
    _DEVICES,
)


@given(st.lists(st.tuples(_ENTITIES, st.booleans()), max_size=40))
def test_rebuild_equals_applying_the_changes_in_order(
    changes: list[tuple[Tenant | Device, bool]],
) -> None:
    """Replaying the topic gives the state the writer had: last write per key wins, a
    tombstone removes, whatever the interleaving of tenants and devices."""
    live = RegistryState()
    records: list[tuple[bytes, bytes | None]] = []
    for entity, delete in changes:
        if delete:
            live.remove(entity)
            records.append((entity_key(entity).encode(), None))
        else:
            live.put(entity)
            records.append(encode(entity))
    assert rebuild(records) == live
    # compaction keeps only each key's last record: the state must not change
    last = dict(records)
    assert rebuild([(k, v) for k, v in last.items() if v is not None]) == live


def test_api_keys_and_acls_live_under_their_keys() -> None:
    from registry.model import ApiKey, Role, TopicAcl

    key = ApiKey("AbCdEfGh12345678", "acme", Role.API, "salt", "scrypt$x")
    acl = TopicAcl("iot.acme.t", "acme", owner=key.key)
    assert entity_key(key) == "apikey/AbCdEfGh12345678"
    assert entity_key(acl) == "topicacl/iot.acme.t"
    state = rebuild([encode(key), encode(acl)])
    assert state.api_keys == {key.key: key}
    assert state.topic_acls == {acl.topic: acl}
    state.apply(b"apikey/AbCdEfGh12345678", None)
    state.apply(b"topicacl/iot.acme.t", None)
    assert not state.api_keys
    assert not state.topic_acls


def test_the_tenants_version_changes_with_a_tenant_only_and_is_unique_across_states() -> None:
    state, other = RegistryState(), RegistryState()
    assert state.tenants_version != other.tenants_version
    first = state.tenants_version
    state.put(Tenant("acme"))
    put = state.tenants_version
    assert put != first
    state.apply(*encode(Device("acme", "d1", credentials=CREDS)))
    assert state.tenants_version == put  # a device is no tenant change
    state.apply(b"tenant/acme", None)
    assert state.tenants_version not in (first, put)
    assert "acme" not in state.tenants
