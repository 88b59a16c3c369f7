"""What the console knows of the fleet from Kafka (pure): last values, presence, dead letters,
commands and their replies, the console's own audit trail.

The tailer feeds every record of the watched topics to :meth:`FleetState.apply`; pages read
from here, so a page never waits on Kafka. Bounded: per device a few recent points, and the
newest dead letters and commands only.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import orjson

from api.console.letter_refs import LetterRef, owner
from registry import ids
from registry.topics import device_username

RECENT_POINTS = 60  # the sparkline's points per device (not the rate's: see Seen.rate)
RATE_WINDOW_MS = 60_000
MAX_DLQ = 5000
MAX_COMMANDS = 5000
MAX_EVENTS = 20


@dataclass
class Seen:
    last_seen: int = 0  # epoch ms of the newest telemetry or event
    values: dict[str, Any] = field(default_factory=dict)
    points: deque[tuple[int, dict[str, Any]]] = field(
        default_factory=lambda: deque(maxlen=RECENT_POINTS)
    )
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))
    count: int = 0
    online: bool | None = None
    presence_at: int = 0
    # telemetry records per second of their time stamp, the last RATE_WINDOW_MS and a little
    # more only: the rate, counted apart from `points` (issue 32: the rate was counted from
    # the sparkline's 60 points, so no device could show more than 60 a minute, 1.00 msgs/s)
    per_second: dict[int, int] = field(default_factory=dict)

    def counted(self, at_ms: int) -> None:
        """One telemetry record stamped ``at_ms``, for :meth:`rate`."""
        second = at_ms // 1000
        self.per_second[second] = self.per_second.get(second, 0) + 1
        if len(self.per_second) > RATE_WINDOW_MS // 1000 + 2:
            oldest = max(self.per_second) - RATE_WINDOW_MS // 1000 - 1
            self.per_second = {s: n for s, n in self.per_second.items() if s >= oldest}

    def rate(self, now_ms: int, window_ms: int = RATE_WINDOW_MS) -> float:
        """Telemetry messages/s over the last ``window_ms`` (at most RATE_WINDOW_MS): the
        seconds wholly inside it, and the oldest second in part (as much of it as the
        window covers)."""
        start = now_ms - window_ms
        first = start // 1000
        part = 1 - (start - first * 1000) / 1000
        recent = 0.0
        for second, n in self.per_second.items():
            if first < second <= now_ms // 1000:
                recent += n
            elif second == first:
                recent += n * part
        return round(recent / (window_ms / 1000), 3)


@dataclass
class DeadLetter:
    partition: int
    offset: int
    key: str | None
    payload: bytes
    headers: dict[str, str]
    timestamp: int
    status: str = "new"  # new, replayed, discarded
    by: str = ""
    topic_tenant: str = ids.DEFAULT_TENANT  # whose DLQ topic holds it (iot.dlq: default)
    tenant: str = ids.DEFAULT_TENANT  # whose it is (letter_refs.owner)

    @property
    def code(self) -> str:
        return self.headers.get("error", "")

    @property
    def ref(self) -> str:
        return str(LetterRef(self.topic_tenant, self.partition, self.offset))


def _headers(raw: Any) -> dict[str, str]:
    pairs = raw.items() if isinstance(raw, dict) else raw or []
    out = {}
    for k, v in pairs:
        out[str(k)] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v or "")
    return out


def _json(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def _tenant(headers: Any) -> str:
    """The bridge's ``tenant`` header of a record (the default tenant's records have none)."""
    for k, v in headers or ():
        if k == "tenant" and v:
            text = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            return text if ids.TENANT_RE.fullmatch(text) else ids.DEFAULT_TENANT
    return ids.DEFAULT_TENANT


def _at(doc: dict[str, Any], fallback: int) -> int:
    ts = doc.get("ts")
    return int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else fallback


class FleetState:
    def __init__(self) -> None:
        self.devices: dict[str, Seen] = {}
        self.dlq: OrderedDict[str, DeadLetter] = OrderedDict()
        self.commands: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.final_counts: dict[str, int] = {}
        self.audit: deque[dict[str, Any]] = deque(maxlen=500)
        self._dispositions: dict[str, tuple[str, str]] = {}  # dlq ref -> (status, by)
        # kind -> True while memory holds every record of its topic (read from its start,
        # nothing evicted): then a search needs no Kafka scan
        self.complete: dict[str, bool] = {}

    def seen(self, key: str) -> Seen:
        found = self.devices.get(key)
        if found is None:
            found = self.devices[key] = Seen()
        return found

    def apply(
        self,
        kind: str,
        *,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        timestamp: int,
        tenant: str | None = None,
    ) -> None:
        """One Kafka record of the topic playing ``kind`` (telemetry, events, presence, dlq,
        status, replies, audit); a device's ``tenant`` is the caller's (known from the
        topic), else the record's ``tenant`` header."""
        name = key.decode("utf-8", "replace") if key is not None else None
        if kind == "dlq":
            self._dead_letter(
                dead_letter(
                    partition, offset, key=key, value=value, headers=headers, timestamp=timestamp,
                    tenant=tenant or ids.DEFAULT_TENANT,
                )
            )  # fmt: skip
            return
        doc = _json(value)
        if kind == "audit":
            if isinstance(doc, dict):
                self._audit(doc)
            return
        if kind in ("status", "replies"):
            if isinstance(doc, dict):
                self._command(kind, doc, name, timestamp)
            return
        if name is None or not isinstance(doc, dict):
            return
        # a tenant's records come from its own topics with the bridge's `tenant` header; the
        # pages look devices up by their user name (`acme/pump-1`, `pump-1` for the default)
        seen = self.seen(device_username(tenant or _tenant(headers), name))
        if kind == "telemetry":
            at = _at(doc, timestamp)
            metrics = doc.get("metrics")
            if isinstance(metrics, dict):
                seen.values = {**seen.values, **metrics}
                seen.points.append((at, metrics))
            seen.last_seen = max(seen.last_seen, at)
            seen.count += 1
            seen.counted(at)
        elif kind == "events":
            seen.events.appendleft({"at": _at(doc, timestamp), **doc})
            seen.last_seen = max(seen.last_seen, _at(doc, timestamp))
        elif kind == "presence":
            seen.online = bool(doc.get("online"))
            seen.presence_at = int(doc.get("at") or timestamp)

    def dispose(self, letter: DeadLetter) -> DeadLetter:
        """``letter`` with its status (replayed/discarded, by whom) from the audit trail."""
        letter.status, letter.by = self._dispositions.get(letter.ref, ("new", ""))
        return letter

    def _dead_letter(self, letter: DeadLetter) -> None:
        self.dlq[self.dispose(letter).ref] = letter
        while len(self.dlq) > MAX_DLQ:
            self.dlq.popitem(last=False)
            self.complete["dlq"] = False

    def _audit(self, doc: dict[str, Any]) -> None:
        self.audit.appendleft(doc)
        action, ref = doc.get("action"), doc.get("ref")
        if action in ("dlq.replay", "dlq.discard") and isinstance(ref, str):
            status = "replayed" if action == "dlq.replay" else "discarded"
            self._dispositions[ref] = (status, str(doc.get("actor", "")))
            letter = self.dlq.get(ref)
            if letter is not None:
                letter.status, letter.by = status, str(doc.get("actor", ""))

    def _command(self, kind: str, doc: dict[str, Any], key: str | None, timestamp: int) -> None:
        cid = doc.get("command_id")
        if not isinstance(cid, str):
            return
        entry = self.commands.get(cid)
        if entry is None:
            entry = {"command_id": cid, "states": [], "replies": []}
            self.commands[cid] = entry
            while len(self.commands) > MAX_COMMANDS:
                self.commands.popitem(last=False)
                self.complete["status"] = False
        if kind == "replies":
            entry["replies"].append({k: v for k, v in doc.items() if k != "command_id"})
            entry.setdefault("device_id", key)
            return
        state = str(doc.get("state", ""))
        at = int(doc.get("at") or timestamp)
        if entry["states"] and entry["states"][-1]["state"] == state:
            return  # a status rewritten with the same state (a restart adopting it)
        entry["states"].append({"state": state, "at": at, "detail": doc.get("detail")})
        entry["state"], entry["at"] = state, at
        entry["device_id"] = doc.get("device_id") or entry.get("device_id")
        command = doc.get("command")
        if isinstance(command, dict):
            entry["name"] = command.get("name")
            entry["args"] = command.get("args")
        if state in ("succeeded", "failed", "expired", "rejected"):
            self.final_counts[state] = self.final_counts.get(state, 0) + 1

    def device_row(self, key: str, now_ms: int) -> dict[str, Any]:
        seen = self.devices.get(key)
        if seen is None:
            return {"online": None, "last_seen": None, "values": {}, "rate": 0.0}
        return {
            "online": seen.online,
            "last_seen": seen.last_seen or None,
            "values": seen.values,
            "rate": seen.rate(now_ms),
            "spark": [
                [at, v] for at, m in seen.points for v in [_first_number(m)] if v is not None
            ],
        }


def device_json(device: Any) -> dict[str, Any]:
    """A registry device as the console and the operator API show it."""
    return {
        "tenant": device.tenant,
        "id": device.id,
        "groups": list(device.groups),
        "disabled": device.disabled,
        "credentials": list(device.credentials.kinds),
        "created_at": device.created_at,
        "updated_at": device.updated_at,
    }


def dead_letter(
    partition: int,
    offset: int,
    *,
    key: bytes | None,
    value: bytes | None,
    headers: Any,
    timestamp: int,
    tenant: str = ids.DEFAULT_TENANT,
) -> DeadLetter:
    """A record of ``tenant``'s DLQ topic as a dead letter."""
    name = key.decode("utf-8", "replace") if key is not None else None
    found = _headers(headers)
    return DeadLetter(partition, offset, name, value or b"", found, timestamp,
                      topic_tenant=tenant, tenant=owner(tenant, found.get("tenant")))  # fmt: skip


def _first_number(metrics: dict[str, Any]) -> float | None:
    for value in metrics.values():
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def letter_view(letter: DeadLetter) -> dict[str, Any]:
    text = letter.payload.decode("utf-8", "replace")
    doc = _json(letter.payload)
    pretty = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() if doc is not None else text
    return {
        "ref": letter.ref,
        "tenant": letter.tenant,
        "partition": letter.partition,
        "offset": letter.offset,
        "device": letter.key,
        "code": letter.code,
        "detail": letter.headers.get("error_detail", ""),
        "mqtt_topic": letter.headers.get("mqtt_topic", ""),
        "received_at": _int(letter.headers.get("received_at")) or letter.timestamp,
        "headers": letter.headers,
        "payload": pretty,
        "status": letter.status,
        "by": letter.by,
    }


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None
