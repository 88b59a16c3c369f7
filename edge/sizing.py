"""Queue and persistence sizes of a site broker from what the operator wants to survive (pure).

Mosquitto keeps what the bridge could not yet forward in the bridge's local queue, capped by
``max_queued_messages`` (default 1000) and ``max_queued_bytes`` (payload bytes). Beyond the cap
it drops the newest messages *after* having acknowledged them to the device (field notes B.5,
run o7: 8,980 of 10,000 lost with the default). So the caps are sized for the longest outage:
messages = rate x outage x headroom.

``autosave_on_changes`` with ``autosave_interval N`` writes the store after N changes: a
``kill -9`` or power cut loses fewer than N acknowledged messages (run o8: 483 < 500), where the
default (a save every 1800 s) loses everything since the last save (o6: 10,000 of 10,000).
Each save rewrites the whole store, so a small N costs publish throughput when the queue is
long (measured in docs/edge.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge.errors import ConfigError

# Per queued message beyond its payload: topic, properties, store and queue entries. An
# estimate for the memory figure shown to the operator, not a Mosquitto limit.
OVERHEAD_BYTES = 200
INFLIGHT = 20  # Mosquitto's max_inflight_messages default: in flight on top of the queue


@dataclass(frozen=True)
class QueuePlan:
    max_queued_messages: int
    max_queued_bytes: int
    autosave_changes: int  # a kill -9 loses fewer than this many acknowledged messages
    memory_bytes: int  # estimated broker memory for a full queue

    @property
    def loss_bound(self) -> int:
        return self.autosave_changes


def plan_queues(
    outage_s: float,
    rate_msgs_per_s: float,
    message_bytes: int,
    autosave_changes: int,
    headroom: float = 1.25,
) -> QueuePlan:
    """Caps that hold ``outage_s`` of ``rate_msgs_per_s`` messages of ``message_bytes`` each
    (payload), with ``headroom`` for bursts; the loss bound is ``autosave_changes``."""
    if outage_s <= 0 or rate_msgs_per_s <= 0:
        raise ConfigError("outage and rate must be > 0")
    if message_bytes <= 0:
        raise ConfigError("message size must be > 0 bytes")
    if autosave_changes < 1:
        raise ConfigError("autosave changes must be >= 1")
    if headroom < 1:
        raise ConfigError("headroom must be >= 1")
    messages = math.ceil(outage_s * rate_msgs_per_s * headroom) + INFLIGHT
    payload = messages * message_bytes
    return QueuePlan(
        max_queued_messages=messages,
        max_queued_bytes=payload,
        autosave_changes=autosave_changes,
        memory_bytes=payload + messages * OVERHEAD_BYTES,
    )
