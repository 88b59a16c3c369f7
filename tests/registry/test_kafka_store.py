"""The Kafka store against a real Kafka: rebuild after restart, audit records, single writer."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from registry.audit import AuditRecord
from registry.kafka_store import KafkaStore, WriterFencedError
from registry.model import Quotas, Role
from registry.permissions import local_admin
from registry.service import Registry

pytestmark = pytest.mark.integration


def test_state_is_rebuilt_from_the_topic_after_a_restart(
    store_factory: Callable[[], KafkaStore],
) -> None:
    first = Registry.open(store_factory(), local_admin("ops"), write=True)
    first.create_tenant("default")
    first.create_tenant("t1", Quotas(devices=5, msgs_per_s=100.0))
    issued = first.add_device("t1", "pump", ["floor-1"])
    first.add_device("default", "pump")
    first.set_device_disabled("default", "pump", True)
    first.create_account("bridge", [Role.BRIDGE])
    first.add_device("t1", "gone")
    first.delete_device("t1", "gone")
    first.store.close()

    # a new process: nothing but the topic
    again = Registry.open(store_factory(), local_admin("ops"))
    assert again.state == first.state
    assert again.tenant("t1").quotas == Quotas(5, 100.0)
    assert again.device("default", "pump").disabled
    assert again.device("t1", "pump").groups == ("floor-1",)
    assert ("t1", "gone") not in again.state.devices
    assert issued.secret is not None
    assert again.verify_device("t1", "pump", issued.secret)

    audits = [AuditRecord.decode(v) for _, v in again.store.read_all(again.store.audit_topic) if v]
    assert [(a.action, a.entity) for a in audits] == [
        ("tenant.create", "tenant/default"),
        ("tenant.create", "tenant/t1"),
        ("device.add", "device/t1/pump"),
        ("device.add", "device/default/pump"),
        ("device.disable", "device/default/pump"),
        ("account.create", "account/bridge"),
        ("device.add", "device/t1/gone"),
        ("device.delete", "device/t1/gone"),
    ]
    assert {a.actor for a in audits} == {"cli:ops"}
    assert all(a.at > 1_600_000_000_000 for a in audits)
    assert issued.secret not in json.dumps([vars(a) for a in audits])
    # the delete is a tombstone on the compacted topic
    records = again.store.read_all()
    assert (b"device/t1/gone", None) in records
    assert not any(issued.secret.encode() in (value or b"") for _, value in records)


def test_a_long_running_reader_refreshes(store_factory: Callable[[], KafkaStore]) -> None:
    reader = Registry.open(store_factory(), local_admin("api"))
    writer = Registry.open(store_factory(), local_admin("ops"), write=True)
    assert reader.refresh() == 0
    writer.create_tenant("t1")
    writer.add_device("t1", "d1")
    writer.delete_device("t1", "d1")
    assert reader.refresh() == 3
    assert list(reader.state.tenants) == ["t1"]
    assert reader.state.devices == {}
    assert reader.refresh() == 0  # the position is past the transaction markers


def test_a_second_writer_fences_the_first(store_factory: Callable[[], KafkaStore]) -> None:
    old = Registry.open(store_factory(), local_admin("a"), write=True)
    old.create_tenant("t1")
    new = Registry.open(store_factory(), local_admin("b"), write=True)
    with pytest.raises(WriterFencedError):
        old.create_tenant("t2")
    new.create_tenant("t3")
    reader = Registry.open(store_factory(), local_admin("c"))
    assert sorted(reader.state.tenants) == ["t1", "t3"]  # the fenced write left nothing
