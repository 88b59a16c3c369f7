"""One simulated device's behaviour as a pure, seeded script (no clock, no I/O).

The runner asks the script when to send next (:meth:`DeviceScript.next_delay`) and what to send
(:meth:`DeviceScript.next_messages`, given the device clock's "now"). Every random decision is
drawn from its own stream seeded by ``(seed, device index, purpose)``, so turning one injection on
or off does not change the others, and the same spec gives the same payloads (apart from ``ts``,
which is the wall clock, and the run id tag).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from device_sim import malformed
from device_sim.events import EventSource
from device_sim.model import SensorModel
from device_sim.spec import FleetSpec

After = Literal["none", "churn", "offline"]

_FIRMWARES = ("1.4.2", "1.5.0", "2.0.1")
_PAD_OVERHEAD = len(b',"pad":""')


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One MQTT publish the device makes, and what the manifest must know about it."""

    topic: str
    payload: bytes
    qos: int
    seq: int | None = None  # the telemetry seq; None for malformed input and events
    event_seq: int | None = None  # the event seq (devices/{id}/events); None otherwise
    event_type: str | None = None
    malformed_kind: str | None = None
    after: After = "none"  # what the device does right after publishing this
    down_s: float = 0.0  # for churn: how long the connection stays down
    injections: tuple[tuple[str, dict[str, Any]], ...] = field(default=())


def rng_for(seed: int, index: int, purpose: str) -> random.Random:
    """The random stream of one device for one purpose (string seeding is stable across runs)."""
    return random.Random(f"{seed}:{index}:{purpose}")


class DeviceScript:
    """What device ``index`` of ``spec`` sends, message after message."""

    def __init__(self, spec: FleetSpec, index: int, run_id: str) -> None:
        self.spec = spec
        self.index = index
        self.run_id = run_id
        self.device_id = spec.device_id(index)
        self.groups = spec.device_groups(index)
        self.telemetry_topic = f"devices/{self.device_id}/telemetry"
        self._sched = rng_for(spec.seed, index, "schedule")
        self._sensors = SensorModel(rng_for(spec.seed, index, "sensors"), spec.day_seconds)
        self._anomaly = rng_for(spec.seed, index, "anomaly")
        self._malformed = rng_for(spec.seed, index, "malformed")
        self._late = rng_for(spec.seed, index, "late")
        self._churn = rng_for(spec.seed, index, "churn")
        self._shape = spec.rate_shape()
        self.events = EventSource(
            self.device_id, run_id, spec.event_rate, rng_for(spec.seed, index, "events")
        )
        self._restart: dict[str, Any] | None = None  # the restart event owed after a churn
        fixed = rng_for(spec.seed, index, "fixed")
        # per-device constants, drawn in a fixed order
        skewed = fixed.random() < spec.skew_fraction
        skew = fixed.randint(1, spec.skew_max_ms) * (1 if fixed.random() < 0.5 else -1)
        self.skew_ms = skew if skewed else 0
        goes_offline = fixed.random() < spec.offline_fraction
        at = max(1, int(fixed.uniform(0.2, 0.8) * spec.expected_count()))
        self.offline_after_seq: int | None = at if goes_offline else None
        self.silent = fixed.random() < spec.silent_fraction
        self.site = f"site-{fixed.randrange(20)}"
        self.firmware = _FIRMWARES[fixed.randrange(len(_FIRMWARES))]
        self.seq = 0  # last telemetry seq produced
        self.elapsed_s = 0.0  # nominal elapsed time (sum of the delays handed out)
        self._first = True
        self.finished = False

    # --- schedule ------------------------------------------------------------------------------

    def next_delay(self) -> float:
        """Seconds to wait before the next message (the first one is spread over one interval)."""
        spec = self.spec
        # the rate shape at the nominal time of the last send (the shape is the same for every
        # device, and nominal time keeps the schedule deterministic)
        rate = spec.rate if self._shape.flat else spec.rate * self._shape.factor(self.elapsed_s)
        if self._first:
            self._first = False
            delay = self._sched.uniform(0.0, 1.0 / rate)
        elif spec.poisson:
            delay = self._sched.expovariate(rate)
        else:
            delay = 1.0 / rate
        self.elapsed_s += delay
        return delay

    def done(self) -> bool:
        """True once the planned traffic is over (count reached, duration passed, or offline)."""
        spec = self.spec
        if self.finished:
            return True
        if spec.count is not None:
            return self.seq >= spec.count
        assert spec.duration_s is not None
        return self.elapsed_s > spec.duration_s

    # --- messages ------------------------------------------------------------------------------

    def next_messages(self, now_ms: int) -> list[Outgoing]:
        """The messages for this slot: maybe one malformed, one telemetry message, then the
        slot's events (a restart owed after a churn, an alarm for an anomaly, a spontaneous
        one). The telemetry message carries what the device does next (``after``)."""
        spec = self.spec
        out: list[Outgoing] = []
        device_now = now_ms + self.skew_ms
        # one draw per stream per slot, whatever is enabled, keeps the streams aligned
        malformed_draw = self._malformed.random()
        kind_draw = self._malformed.random()
        if spec.malformed_rate > 0 and malformed_draw < spec.malformed_rate:
            kind = spec.malformed_kinds[int(kind_draw * len(spec.malformed_kinds))]
            topic, payload = malformed.build(
                kind, self.device_id, self.run_id, device_now, spec.oversize_bytes
            )
            out.append(
                Outgoing(
                    topic,
                    payload,
                    qos=1 if spec.qos == 1 else 0,
                    malformed_kind=kind,
                    injections=(
                        (
                            "malformed",
                            {
                                "device": self.device_id,
                                "kind": kind,
                                "expected_error": malformed.EXPECTED_ERROR[kind],
                                "before_seq": self.seq + 1,
                            },
                        ),
                    ),
                )
            )
        telemetry = self._telemetry(device_now)
        out.append(telemetry)
        if self.events.enabled:
            out.extend(self._events(device_now, telemetry))
        return out

    def _events(self, device_now: int, telemetry: Outgoing) -> list[Outgoing]:
        found: list[tuple[str, dict[str, Any]]] = []
        if self._restart is not None:
            found.append(("restart", self._restart))
            self._restart = None
        for kind, item in telemetry.injections:
            if kind == "anomalies":
                data = {"metric": item["metric"], "value": item["value"], "reading": item["seq"]}
                found.append(("alarm", data))
        spontaneous = self.events.spontaneous()
        if spontaneous is not None:
            found.append((spontaneous, {}))
        if telemetry.after == "churn":
            self._restart = {"reason": "reconnect", "down_s": telemetry.down_s}
        out: list[Outgoing] = []
        for kind, data in found:
            seq, payload = self.events.build(kind, device_now, data)
            out.append(Outgoing(self.events.topic, payload, qos=1, event_seq=seq, event_type=kind))
        return out

    def _telemetry(self, device_now: int) -> Outgoing:
        spec = self.spec
        self.seq += 1
        seq = self.seq
        injections: list[tuple[str, dict[str, Any]]] = []
        metrics = self._sensors.read(self.elapsed_s)

        a_draw, a_metric, a_size, a_sign = (self._anomaly.random() for _ in range(4))
        if spec.anomaly_rate > 0 and a_draw < spec.anomaly_rate:
            name, value = self._anomalous(metrics, a_metric, a_size, a_sign)
            injections.append(
                (
                    "anomalies",
                    {
                        "device": self.device_id,
                        "seq": seq,
                        "metric": name,
                        "value": value,
                        "normal": metrics[name],
                    },
                )
            )
            metrics[name] = value

        ts = device_now
        l_draw, l_size, o_draw, o_size = (self._late.random() for _ in range(4))
        if spec.late_rate > 0 and l_draw < spec.late_rate:
            shift = int((spec.late_min_s + l_size * (spec.late_max_s - spec.late_min_s)) * 1000)
            ts -= shift
            injections.append(("late", {"device": self.device_id, "seq": seq, "shift_ms": shift}))
        elif spec.out_of_order_rate > 0 and o_draw < spec.out_of_order_rate:
            interval_ms = 1000.0 / spec.rate
            shift = int(max(2.0 * interval_ms, 500.0) * (1.0 + o_size))
            ts -= shift
            injections.append(
                ("out_of_order", {"device": self.device_id, "seq": seq, "shift_ms": shift})
            )

        after: After = "none"
        down_s = 0.0
        c_draw, c_size = self._churn.random(), self._churn.random()
        if self.offline_after_seq is not None and seq >= self.offline_after_seq:
            after = "offline"
            self.finished = True
            injections.append(("offline", {"device": self.device_id, "after_seq": seq}))
        elif spec.churn_rate > 0 and c_draw < spec.churn_rate:
            after = "churn"
            down_s = spec.churn_down_min_s + c_size * (
                spec.churn_down_max_s - spec.churn_down_min_s
            )
            down_s = round(down_s, 3)
            injections.append(
                ("churn", {"device": self.device_id, "after_seq": seq, "down_s": down_s})
            )

        payload = self.encode(ts, seq, metrics)
        return Outgoing(
            self.telemetry_topic,
            payload,
            qos=spec.qos,
            seq=seq,
            after=after,
            down_s=down_s,
            injections=tuple(injections),
        )

    def _anomalous(
        self, metrics: dict[str, float], which: float, size: float, sign: float
    ) -> tuple[str, float]:
        if which < 0.5:
            jump = 12.0 + 13.0 * size
            return "temperature", round(metrics["temperature"] + (jump if sign < 0.7 else -jump), 3)
        if which < 0.75:
            return "vibration", round(metrics["vibration"] * (20.0 + 30.0 * size) + 2.0, 4)
        return "humidity", round(97.0 + 3.0 * size if sign < 0.5 else 2.0 * size, 2)

    def encode(self, ts: int, seq: int, metrics: dict[str, float]) -> bytes:
        """The telemetry JSON: ``ts``, ``seq``, ``metrics``, ``tags`` (run id, site, firmware)."""
        tags: dict[str, str] = {"run": self.run_id, "site": self.site, "fw": self.firmware}
        doc: dict[str, Any] = {"ts": ts, "seq": seq, "metrics": metrics, "tags": tags}
        body = orjson.dumps(doc)
        want = self.spec.payload_bytes
        if want and len(body) + _PAD_OVERHEAD < want:
            tags["pad"] = "x" * (want - len(body) - _PAD_OVERHEAD)
            body = orjson.dumps(doc)
        return body
