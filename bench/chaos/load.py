"""The mixed load of a chaos cell, through every door at once (threads, one per client, each
with its own login): MR publisher and long-poll consumer, a queue sender and a consumer acking
per message, an SSE stream, an HTTP device waiting for commands (and answering them), a command
sender, a logged-in console session polling its pages; the MQTT devices are `iot-sim run`
(device_sim, each device with its own login), started and verified by :mod:`bench.chaos.run`.
Every client keeps what was acknowledged to it and its failures, with their times."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.chaos.clients import Http, basic, describe
from bench.chaos.probes import CONSOLE_PAGES
from bench.chaos.stack import ChaosStack

MR_TOPIC = "chaos.mr"
QUEUE = "chaos-load-q"


@dataclass
class ClientPath:
    """One client's record: successes, failures (time, text), what it was acknowledged."""

    name: str
    ok: int = 0
    failures: list[tuple[float, str]] = field(default_factory=list)
    ok_times: list[float] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)  # seqs the service acknowledged
    received: Counter[int] = field(default_factory=Counter)  # seqs delivered to it
    next_seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def success(self) -> None:
        with self.lock:
            self.ok += 1
            self.ok_times.append(time.time())

    def fail(self, text: str) -> None:
        with self.lock:
            self.failures.append((time.time(), text))

    def worst_outage(self) -> tuple[float, str]:
        """The longest stretch from a failure to the next success (s) and its commonest error."""
        worst, text = 0.0, ""
        for at, _error in self.failures:
            after = [t for t in self.ok_times if t > at]
            end = min(after) if after else time.time()
            if end - at > worst:
                span = [e for t, e in self.failures if at <= t <= end]
                worst, text = end - at, Counter(span).most_common(1)[0][0]
        return worst, text


class Load:
    """The clients of one cell (``tag`` marks its records), run until :meth:`stop`."""

    def __init__(self, stack: ChaosStack, tag: str) -> None:
        self.stack = stack
        self.tag = tag
        self.paths = {n: ClientPath(n) for n in (
            "mr-publish", "mr-consume", "queue-send", "queue-consume", "sse", "http-device",
            "command", "console")}  # fmt: skip
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.api = Http(stack.api_url, basic(*stack.api_account))
        self.ops = Http(stack.api_url, basic(*stack.operator))
        self.device_id, secret = list(stack.devices.items())[-1]
        self.device = Http(stack.api_url, basic(self.device_id, secret))
        # when a receive or an ack of the queue last failed (monotonic; 0: never): what it held
        # comes back only after the visibility timeout (check.tally waits for it)
        self.queue_unsure_at = 0.0
        self.queue_unsure: set[int] = set()  # seqs delivered whose ack failed: not lost

    def start(self) -> None:
        self.api.call("PUT", f"/queues/{QUEUE}?partitions=3", timeout=30)
        for fn in (self._mr_publish, self._mr_consume, self._queue_send, self._queue_consume,
                   self._sse, self._http_device, self._commands, self._console):  # fmt: skip
            thread = threading.Thread(target=self._loop, args=(fn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def _loop(self, step: object) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            step()  # type: ignore[operator]
            self._stop.wait(max(0.0, 0.2 - (time.monotonic() - started)))

    def _record(self, name: str, answer: tuple[int, bytes], *ok: int) -> bool:
        if answer[0] in ok:
            self.paths[name].success()
            return True
        self.paths[name].fail(describe(answer))
        return False

    # -- the clients ---------------------------------------------------------------------------
    def _mr_publish(self) -> None:
        path = self.paths["mr-publish"]
        seqs = self._next(path, 10)
        body = [{"cell": self.tag, "seq": s} for s in seqs]
        if self._record(path.name, self.api.call("POST", f"/events/{MR_TOPIC}", body,
                                                 timeout=30), 200):  # fmt: skip
            path.acked.update(seqs)

    def _next(self, path: ClientPath, n: int) -> list[int]:
        with path.lock:
            first, path.next_seq = path.next_seq, path.next_seq + n
        return list(range(first, first + n))

    def _mr_consume(self) -> None:
        path = f"/events/{MR_TOPIC}/chaos-{self.tag}/c1?timeout=5000&limit=500"
        answer = self.api.call("GET", path, timeout=30)
        if self._record("mr-consume", answer, 200):
            for raw in json.loads(answer[1]):
                item = json.loads(raw) if isinstance(raw, str) else raw
                if isinstance(item, dict) and item.get("cell") == self.tag:
                    self.paths["mr-consume"].received[int(item["seq"])] += 1

    def _queue_send(self) -> None:
        path = self.paths["queue-send"]
        seqs = self._next(path, 5)
        body = [{"cell": self.tag, "seq": s} for s in seqs]
        answer = self.api.call("POST", f"/queues/{QUEUE}/messages", body, timeout=30)
        if self._record(path.name, answer, 200):
            path.acked.update(seqs)

    def receive_queue(self, timeout_ms: int = 2000) -> int:
        """One receive and an ack per message; the messages of this cell received."""
        path = self.paths["queue-consume"]
        answer = self.api.call("POST", f"/queues/{QUEUE}/receive?max=20&timeout={timeout_ms}",
                               timeout=30)  # fmt: skip
        if not self._record(path.name, answer, 200):
            self.queue_unsure_at = time.monotonic()
            return 0
        got = 0
        for message in json.loads(answer[1]).get("messages", []):
            item = message.get("message")
            item = json.loads(item) if isinstance(item, str) else item
            handles = {"receiptHandles": [message["receiptHandle"]]}
            ack = self.api.call("POST", f"/queues/{QUEUE}/ack", handles, timeout=30)
            ours = isinstance(item, dict) and item.get("cell") == self.tag
            if not self._record(path.name, ack, 200):
                self.queue_unsure_at = time.monotonic()
                if ours:  # maybe recorded all the same (a timeout): then it never comes back
                    self.queue_unsure.add(int(item["seq"]))
                continue
            status = json.loads(ack[1])["results"][0]["status"]
            if status != "acked":  # "expired": written too late, or not at all
                self.queue_unsure_at = time.monotonic()
                if ours:
                    self.queue_unsure.add(int(item["seq"]))
            if ours and status == "acked":
                path.received[int(item["seq"])] += 1
                got += 1
        return got

    def _queue_consume(self) -> None:
        self.receive_queue()

    def _sse(self) -> None:
        url = f"/ops/devices/default/{self.device_id}/telemetry"
        answer = self.ops.stream_opens(url, timeout=10)
        if self._record("sse", answer, 200):
            self._stop.wait(2.0)  # a viewer keeps it open a while, then opens it again

    def _http_device(self) -> None:
        path = self.paths["http-device"]
        [seq] = self._next(path, 1)
        body = {"ts": int(time.time() * 1000), "seq": seq, "metrics": {"t": 1},
                "cell": self.tag}  # fmt: skip
        answer = self.device.call("POST", "/telemetry", body, headers={"hono-ttd": "2"},
                                  timeout=30)  # fmt: skip
        if self._record(path.name, answer, 200, 202):
            path.acked.add(seq)
        if answer[0] == 200:  # a command came with the answer: reply to it
            req = answer[1] and self._last_req(answer)
            if req:
                self.device.call("POST", f"/command/res/{req}", {"status": "ok"}, timeout=30)

    def _last_req(self, answer: tuple[int, bytes]) -> str:
        try:
            return str(json.loads(answer[1]).get("command_id", ""))
        except ValueError:
            return ""

    def _commands(self) -> None:
        body = {"device": self.device_id, "name": "chaos", "args": {"cell": self.tag}}
        self._record("command", self.ops.call("POST", "/ops/commands", body, timeout=30),
                     200, 201, 202)  # fmt: skip
        self._stop.wait(1.0)

    def _console(self) -> None:
        session = Http(self.stack.api_url)
        name, secret = self.stack.operator
        login = session.call("POST", "/console/api/login", {"name": name, "secret": secret},
                             headers={"Origin": self.stack.api_url}, timeout=30)  # fmt: skip
        if not self._record("console", login, 200):
            return
        for page in CONSOLE_PAGES:
            if not self._record("console", session.call("GET", f"/console/api/{page}",
                                                        timeout=30), 200):  # fmt: skip
                return
        self._stop.wait(1.0)
