"""Naming dead letters across tenants' DLQ topics, and who may see which (pure).

A dead letter lives at a partition and offset of its tenant's DLQ topic (``iot.dlq`` for the
default tenant, ``iot.{t}.dlq`` for tenant ``t``, bridge/topics.py). Its ref names that place:
``{partition}-{offset}`` in ``iot.dlq`` (the refs written to the audit trail before tenants
had their own DLQ keep their meaning) and ``{t}:{partition}-{offset}`` in ``iot.{t}.dlq``.

Whose a letter is: its topic's tenant; in ``iot.dlq`` the bridge's ``tenant`` header, when it
wrote one (a tenant's message seen before its topics existed: ``tenant_not_ready``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.topics import tenant_kafka_topic
from registry import ids


@dataclass(frozen=True, slots=True)
class LetterRef:
    """Where a dead letter is: the tenant whose DLQ topic holds it, partition, offset."""

    tenant: str
    partition: int
    offset: int

    def __str__(self) -> str:
        place = f"{self.partition}-{self.offset}"
        return place if self.tenant == ids.DEFAULT_TENANT else f"{self.tenant}:{place}"

    def topic(self, base: str) -> str:
        """The DLQ topic holding it, ``base`` being the default tenant's (``iot.dlq``)."""
        return tenant_kafka_topic(base, self.tenant)


def parse_ref(text: str) -> LetterRef | None:
    """``3-17`` (in the default tenant's DLQ) or ``acme:3-17``; None if neither (a tenant id
    that is not one, ``default:`` spelt out, signs, spaces)."""
    tenant, colon, place = text.rpartition(":")
    if colon and (tenant == ids.DEFAULT_TENANT or not ids.TENANT_RE.fullmatch(tenant)):
        return None
    partition, dash, offset = place.partition("-")
    if not (dash and partition.isascii() and partition.isdigit()):
        return None
    if not (offset.isascii() and offset.isdigit()):
        return None
    return LetterRef(tenant or ids.DEFAULT_TENANT, int(partition), int(offset))


def owner(topic_tenant: str, header_tenant: str | None) -> str:
    """Whose a letter is: its topic's tenant, or in the default DLQ the ``tenant`` header."""
    if topic_tenant != ids.DEFAULT_TENANT:
        return topic_tenant
    if header_tenant and ids.TENANT_RE.fullmatch(header_tenant):
        return header_tenant
    return ids.DEFAULT_TENANT


def may_see(actor_tenant: str | None, letter_tenant: str) -> bool:
    """An appliance-wide account (tenant None) sees every letter, a tenant's only its own."""
    return actor_tenant is None or actor_tenant == letter_tenant


def topics_to_search(
    base: str, known: dict[str, str], actor_tenant: str | None, tenant: str | None
) -> list[tuple[str, str]]:
    """The DLQ topics (with their tenant) a search by ``actor_tenant`` for ``tenant`` (None:
    every tenant it may see) reads: of ``known`` (topic -> tenant, the tenants' DLQ topics
    Kafka has) and ``base``; a tenant's letters may also be in ``base`` (tenant_not_ready)."""
    want = actor_tenant if actor_tenant is not None else tenant
    out = [(base, ids.DEFAULT_TENANT)]
    if want is None:
        return out + sorted(((t, n) for t, n in known.items() if t != base), key=lambda x: x[1])
    mine = tenant_kafka_topic(base, want)
    return out if mine == base else [(mine, want), *out]
