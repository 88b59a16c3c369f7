"""Tenants in the analytics job: which Kafka topics hold a tenant's records (pure).

The bridge writes tenant ``t``'s records to its own copy of each topic, ``.{t}`` after the
first name segment (``iot.telemetry`` -> ``iot.t.telemetry``), with the header ``tenant: t``;
the default tenant keeps the base topic and no header (docs/security.md, "Tenants end to
end"). The job subscribes to the base topic and every tenant copy by one pattern, so a new
tenant's topic is picked up without a restart.
"""

from __future__ import annotations

import re
from typing import Final

DEFAULT_TENANT: Final = "default"
TENANT_HEADER: Final = "tenant"
TENANT_COLUMN: Final = "tenant"
# registry/ids.py's tenant id (kept equal by a test; spark_jobs imports no registry module)
TENANT_ID: Final = r"[a-z0-9][a-z0-9-]{0,31}"


def topic_pattern(base: str) -> str:
    """A Kafka ``subscribePattern`` (Java regex, whole name): ``base`` and every tenant's copy."""
    head, dot, tail = base.partition(".")
    if not dot:
        return f"{re.escape(base)}(\\.{TENANT_ID})?"
    return f"{re.escape(head)}\\.({TENANT_ID}\\.)?{re.escape(tail)}"
