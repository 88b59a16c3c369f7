"""The Topics and Dead letters pages' data (``/console/api/topics``,
``/console/api/dead-letters``): topics, consumer groups and records browsed, dead letters
searched across the tenants' DLQ topics an account may see, and replayed or discarded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from api.console import roles
from api.console.context import (
    CONSOLE_KEY,
    int_param,
    json_body,
    json_response,
    need,
    now_ms,
    problem,
    scan_note,
)
from api.console.fleet import DeadLetter, dead_letter, letter_view
from api.console.kafka_records import SCAN_BUDGET_S, SCAN_MAX_RECORDS, Raw, Scan
from api.console.letter_refs import may_see, parse_ref, topics_to_search
from api.console.replay import OTHER_TENANT, Refused, plan_replay
from api.console.tailer import tenant_copies
from bridge.mapping import ErrorCode
from bridge.topics import tenant_kafka_topic

DLQ_TOPIC = "iot.dlq"


# --- topics --------------------------------------------------------------------------------


async def topics(request: web.Request) -> web.Response:
    need(request, roles.VIEW_KAFKA)
    console = request.app[CONSOLE_KEY]
    found, groups = await asyncio.gather(
        asyncio.to_thread(console.kafka.topics), asyncio.to_thread(console.kafka.groups)
    )
    return json_response({"topics": found, "groups": groups})


async def records(request: web.Request) -> web.Response:
    need(request, roles.VIEW_KAFKA)
    console = request.app[CONSOLE_KEY]
    q = request.query
    partition = int(q["partition"]) if q.get("partition", "").isdigit() else None
    offset = int(q["offset"]) if q.get("offset", "").isdigit() else None
    at = int(q["at"]) if q.get("at", "").isdigit() else None
    if offset is not None and partition is None:
        return problem(400, "an offset needs a partition")
    limit = int_param(q.get("limit"), 50, 1, 500)
    try:
        found = await asyncio.to_thread(
            lambda: console.kafka.browse(
                request.match_info["topic"], partition=partition, offset=offset, at_ms=at,
                limit=limit,
            )
        )  # fmt: skip
    except KeyError:
        return problem(404, f"no topic {request.match_info['topic']!r}")
    return json_response({"records": found})


# --- dead letters --------------------------------------------------------------------------


def _dlq_topics(
    console: Any, actor_tenant: str | None, tenant: str | None
) -> list[tuple[str, str]]:
    """The DLQ topics (and their tenants) a search reads: every tenant's an account may see."""
    known = {
        name: t
        for name, (_, t) in tenant_copies({"dlq": DLQ_TOPIC}, console.kafka.topic_names()).items()
    }
    return topics_to_search(DLQ_TOPIC, known, actor_tenant, tenant)


def _scan_many(
    console: Any,
    topics: list[tuple[str, str]],
    match: Callable[[str, Raw], bool],
    *,
    limit: int,
    since_ms: int | None,
    until_ms: int | None,
) -> tuple[list[tuple[str, Raw]], Scan]:
    """Each topic read back (as scan_back) up to ``limit`` matches, within one request's
    record and time bounds; the matches (with their topic's tenant) newest first."""
    found: list[tuple[str, Raw]] = []
    scanned, complete, oldest = 0, True, None
    deadline = time.monotonic() + SCAN_BUDGET_S
    for topic, tenant in topics:
        left = deadline - time.monotonic()
        if left <= 0 or scanned >= SCAN_MAX_RECORDS:
            complete = False
            break
        scan = console.kafka.scan_back(
            topic, lambda r, t=tenant: match(t, r), lambda got: len(got) >= limit,
            since_ms=since_ms, until_ms=until_ms, max_records=SCAN_MAX_RECORDS - scanned,
            budget_s=left,
        )  # fmt: skip
        found += [(tenant, r) for r in scan.matched]
        scanned += scan.scanned
        complete = complete and scan.complete
        if scan.oldest_ms is not None:
            oldest = scan.oldest_ms if oldest is None else min(oldest, scan.oldest_ms)
    found.sort(key=lambda x: (x[1].timestamp, x[1].offset), reverse=True)
    return found, Scan([r for _, r in found], scanned, complete, oldest)


async def dead_letters(request: web.Request) -> web.Response:
    """Dead letters by tenant, code, device, time, status: from memory when it holds the
    answer, else read back through every DLQ topic the account may see (bounded; a time
    filter starts at its offsets). A tenant's account sees its own tenant's letters only."""
    session = need(request, roles.VIEW_DLQ)
    console = request.app[CONSOLE_KEY]
    mine = session.actor.tenant
    q = request.query
    code, dev, status = q.get("code") or None, q.get("device") or None, q.get("status") or None
    tenant = mine if mine is not None else (q.get("tenant") or None)
    since = int(q["since"]) if q.get("since", "").isdigit() else None
    until = int(q["until"]) if q.get("until", "").isdigit() else None
    limit = int_param(q.get("limit"), 100, 1, 1000)

    def keep(v: dict[str, Any]) -> bool:
        return (
            (tenant is None or v["tenant"] == tenant)
            and (code is None or v["code"] == code)
            and (dev is None or dev in str(v["device"] or ""))
            and (status is None or v["status"] == status)
            and (since is None or v["received_at"] >= since)
            and (until is None or v["received_at"] <= until)
        )

    fleet = console.fleet
    with console.tailer.lock:
        views = [letter_view(x) for x in reversed(fleet.dlq.values()) if may_see(mine, x.tenant)]
        whole = fleet.complete.get("dlq", False)
    counts = dict.fromkeys(sorted(e.value for e in ErrorCode), 0)
    for v in views:
        if tenant is None or v["tenant"] == tenant:
            counts[v["code"]] = counts.get(v["code"], 0) + 1
    rows = [v for v in views if keep(v)]
    scan, where = None, DLQ_TOPIC
    if not whole and len(rows) < limit:

        def letter(topic_tenant: str, r: Raw) -> DeadLetter:
            found = dead_letter(
                r.partition, r.offset, key=r.key, value=r.value, headers=r.headers,
                timestamp=r.timestamp, tenant=topic_tenant,
            )  # fmt: skip
            with console.tailer.lock:
                return fleet.dispose(found)

        def match(topic_tenant: str, r: Raw) -> bool:
            one = letter(topic_tenant, r)
            return may_see(mine, one.tenant) and keep(letter_view(one))

        topics = await asyncio.to_thread(_dlq_topics, console, mine, tenant)
        where = ",".join(t for t, _ in topics)
        # record times ~ received_at (the bridge writes at once): widen by a minute
        found, scan = await asyncio.to_thread(
            lambda: _scan_many(
                console, topics, match, limit=limit,
                since_ms=None if since is None else since - 60_000,
                until_ms=None if until is None else until + 60_000,
            )
        )  # fmt: skip
        rows = [letter_view(letter(t, r)) for t, r in found]
    return json_response(
        {"total": len(rows), "rows": rows[:limit], "codes": counts,
         "tenant_column": mine is None} | scan_note(scan, where)
    )  # fmt: skip


async def _letter(console: Any, ref: str, actor_tenant: str | None) -> DeadLetter | None:
    """A dead letter by ref (letter_refs: ``partition-offset`` in ``iot.dlq``,
    ``tenant:partition-offset`` in a tenant's): from memory, else read from Kafka. None too
    when the account may not see it (a crafted ref learns nothing)."""
    place = parse_ref(ref)
    if place is None:
        return None
    with console.tailer.lock:
        found: DeadLetter | None = console.fleet.dlq.get(str(place))
    if found is None:
        raw = await asyncio.to_thread(
            console.kafka.read_one, place.topic(DLQ_TOPIC), place.partition, place.offset
        )
        if raw is None:
            return None
        found = dead_letter(
            raw.partition, raw.offset, key=raw.key, value=raw.value, headers=raw.headers,
            timestamp=raw.timestamp, tenant=place.tenant,
        )  # fmt: skip
        with console.tailer.lock:
            found = console.fleet.dispose(found)
    return found if may_see(actor_tenant, found.tenant) else None


async def dead_letter_action(request: web.Request) -> web.Response:
    session = need(request, roles.REPLAY_DLQ)
    console = request.app[CONSOLE_KEY]
    ref, action = request.match_info["ref"], request.match_info["action"]
    if action not in ("replay", "discard"):
        raise web.HTTPNotFound()
    letter = await _letter(console, ref, session.actor.tenant)
    if letter is None:
        return problem(404, f"no dead letter {ref}")
    ref = letter.ref  # its one spelling (the audit trail's key)
    if action == "discard":
        await console.audit(session, "dlq.discard", ref, code=letter.code, tenant=letter.tenant)
        return json_response({"ref": ref, "status": "discarded"})
    body = await json_body(request)
    payload = str(body.get("payload", letter.payload.decode("utf-8", "replace"))).encode()
    topic = str(body.get("mqtt_topic") or letter.headers.get("mqtt_topic", ""))
    source = (
        f"{tenant_kafka_topic(DLQ_TOPIC, letter.topic_tenant)}/{letter.partition}-{letter.offset}"
    )
    plan = plan_replay(topic, payload, now_ms=now_ms(), source=source,
                       actor=session.actor.name, tenant=letter.tenant)  # fmt: skip
    if isinstance(plan, Refused):
        status = 403 if plan.code == OTHER_TENANT else 422
        return problem(status, f"still refused by the bridge's rules: {plan.code}: {plan.detail}"
                       if status == 422 else f"refused: {plan.detail}")  # fmt: skip
    partition, offset = await asyncio.to_thread(
        console.kafka.produce, plan.topic, plan.key, plan.value, plan.headers
    )
    await console.audit(
        session, "dlq.replay", ref, code=letter.code, tenant=letter.tenant,
        to=f"{plan.topic}/{partition}/{offset}",
    )  # fmt: skip
    return json_response(
        {"ref": ref, "status": "replayed", "topic": plan.topic, "partition": partition,
         "offset": offset}
    )  # fmt: skip
