"""Audit records: who changed what, when (pure). Written to ``iot.registry.audit``.

Key: the entity key (so one entity's history stays in one partition, in order). Value: JSON
``{at, actor, action, entity, outcome, detail}``. ``detail`` never holds a secret or a hash.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class AuditRecord:
    at: int  # epoch ms, registry clock
    actor: str  # who: "cli:<os user>", "svc/<account>", ...
    action: str  # what: "device.add", "tenant.disable", ...
    entity: str  # which: an entity key (state.entity_key)
    outcome: str = "ok"  # "ok" or "denied"
    detail: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> tuple[bytes, bytes]:
        """(Kafka key, value)."""
        return self.entity.encode(), json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> AuditRecord:
        return cls(**json.loads(value))
