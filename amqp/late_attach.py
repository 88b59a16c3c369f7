"""An attach decided after a lookup in Kafka (service): the queue and topic links look their
queue or topic up before they open, so the decision is awaited, and Kafka not answering
refuses the link (``amqp:internal-error``) rather than leaving the client's attach hanging."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from proton import Endpoint, Link

from amqp.model import RCV_SETTLE_FIRST, Cond, Refusal
from api.errors import ApiError
from api.plumbing.kafka_admin import KafkaUnavailableError

if TYPE_CHECKING:
    from amqp.connection import ClientConnection

log = logging.getLogger(__name__)
_KAFKA_DOWN = (KafkaUnavailableError, ApiError, TimeoutError)  # the admin's lookups


async def accepted(
    conn: ClientConnection,
    link: Link,
    decision: Refusal | Awaitable[Refusal | None],
) -> bool:
    """True once the link may open (its terminus and settle modes taken from the client's);
    False if it was refused (the refusal sent) or the client gave up on it meanwhile."""
    try:
        refusal = decision if isinstance(decision, Refusal) else await decision
    except _KAFKA_DOWN as exc:  # the lookup: refused, not left hanging
        log.warning("%s: attach not decided: %s", link.name, exc)
        refusal = Refusal(Cond.INTERNAL, f"Kafka does not answer, try again: {exc}"[:300])
    if conn.closed or link.state & Endpoint.REMOTE_CLOSED:
        return False  # the client gave up on the attach meanwhile
    if refusal is not None:
        conn.refuse(link, refusal)
        conn.flush_soon()
        return False
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = RCV_SETTLE_FIRST
    return True
