"""The `edge` x `cut60` cell of the chaos run (adapter): beside the run's usual load, devices
behind the edge site publish QoS 1 through it (each with its own login) and one listens for
its commands; the site's link is cut (the NAT router's WAN link down, a cable pull) for the cut
length, commands for the listening device are sent through the operator API meanwhile, then the
link is healed. Measured from the heal: the site's link up again, its backlog drained, the
commands at the device; afterwards every message the site acknowledged is looked for in Kafka
(lost, duplicates) and every command accepted at the device (lost, delivered twice)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos import edge_site
from bench.chaos.check import Tally, kafka_seqs
from bench.chaos.clients import Http, basic, describe
from bench.chaos.stack import ChaosStack

EDGE_RATE = 10.0  # msgs/s of each publishing device
COMMANDS = 10  # sent to the listening device during the cut
# drained: the site's held_messages at most this (it counts a few store entries too many after
# a restart with a queue, docs/edge.md)
HELD_DRAINED = 8
COMMAND_TIMEOUT_MS = 600_000  # one attempt, waiting out the cut: no redelivery by the path
IN_KAFKA_TIMEOUT_S = 120.0


class EdgeError(RuntimeError):
    """The edge cell's devices could not be started (the cell is not run)."""


def command_counts(sent: list[str], got: list[str]) -> tuple[int, int]:
    """Lost (accepted, never at the device) and duplicated commands, by command topic."""
    seen = Counter(got)
    lost = sum(1 for topic in sent if topic not in seen)
    return lost, sum(n - 1 for topic, n in seen.items() if topic in sent and n > 1)


def seconds(at: float | None, since: float) -> str:
    return "never" if at is None else f"{at - since:.1f} s"


@dataclass
class EdgeCut:
    """One cell's site devices, its cut and what it measured (times are monotonic)."""

    site: edge_site.EdgeSite
    stack: ChaosStack
    tag: str
    cut_s: float
    commands_out: Path
    publishers: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    listener: subprocess.Popen[str] | None = None
    sent: list[str] = field(default_factory=list)  # the accepted commands' topics
    refused: list[str] = field(default_factory=list)
    acked: dict[str, set[int]] = field(default_factory=dict)
    healed: float = 0.0
    down_seen: bool = False  # the site reported its link down during the cut
    held_max: int = 0  # the site's held messages at most during the cut
    link_at: float | None = None
    drained_at: float | None = None
    commands_at: float | None = None

    def start(self) -> None:
        """The listening device connected (its persistent session subscribed), then the
        publishing devices started."""
        self.listener = self.site.device("listen", edge_site.COMMAND_TARGET, out=self.commands_out)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._readline()), daemon=True)
        reader.start()
        reader.join(30)
        if not line or line[0].strip() != "connected":
            raise EdgeError(f"edge command listener not connected: {line}")
        for device in edge_site.PUBLISHERS:
            self.publishers[device] = self.site.device(
                "stream", device, rate=EDGE_RATE, cell=self.tag, timeout=30
            )

    def _readline(self) -> str:
        assert self.listener is not None
        assert self.listener.stdout is not None
        return self.listener.stdout.readline()

    def fault(self) -> None:
        """The cut: link down, the commands sent, the cut length waited out, link up."""
        self.site.ns.cut()
        cut_at = time.monotonic()
        ops = Http(self.stack.api_url, basic(*self.stack.operator))
        for i in range(COMMANDS):
            name = f"edge-{i}"
            body = {"device": edge_site.COMMAND_TARGET, "name": name, "args": {"cell": self.tag},
                    "max_attempts": 1, "timeout_ms": COMMAND_TIMEOUT_MS}  # fmt: skip
            answer = ops.call("POST", "/ops/commands", body, timeout=30)
            topic = f"devices/{edge_site.COMMAND_TARGET}/commands/{name}"
            if answer[0] in (200, 201, 202):
                self.sent.append(topic)
            else:
                self.refused.append(f"{name}: {describe(answer)}")
        try:
            while time.monotonic() - cut_at < self.cut_s:
                status = self.site.status()
                self.down_seen = self.down_seen or status.get("link") == "down"
                self.held_max = max(self.held_max, status.get("held_messages") or 0)
                time.sleep(min(0.5, max(0.0, self.cut_s - (time.monotonic() - cut_at))))
        finally:
            self.site.ns.heal()
            self.healed = time.monotonic()

    def wait_back(self, timeout: float) -> bool:
        """Until the site's link is up, its backlog drained and every command at the device
        (each time from the heal is kept); False if not all within ``timeout``."""
        while time.monotonic() - self.healed <= timeout:
            now, status = time.monotonic(), self.site.status()
            if self.link_at is None and status.get("link") == "up":
                self.link_at = now
            if (self.link_at is not None and self.drained_at is None
                    and (status.get("held_messages") or 0) <= HELD_DRAINED):  # fmt: skip
                self.drained_at = now
            if self.commands_at is None and command_counts(self.sent, self._got())[0] == 0:
                self.commands_at = now
            if None not in (self.link_at, self.drained_at, self.commands_at):
                return True
            time.sleep(0.2)
        return False

    def _got(self) -> list[str]:
        try:
            return self.commands_out.read_text().split()
        except OSError:
            return []

    def stop(self) -> list[str]:
        """The devices stopped (the publishers report what the site acknowledged); notes."""
        notes = []
        for device, proc in self.publishers.items():
            proc.send_signal(signal.SIGINT)
            try:
                out, _ = proc.communicate(timeout=90)
                self.acked[device] = set(json.loads(out.strip().splitlines()[-1])["acked"])
            except (subprocess.TimeoutExpired, ValueError, IndexError, KeyError) as exc:
                proc.kill()
                proc.wait()
                notes.append(f"edge device {device} gave no count: {type(exc).__name__}")
        if self.listener is not None:
            self.listener.kill()
            self.listener.wait()
        return notes

    def tally(self, out: Tally) -> None:
        """What the site acknowledged, read back from iot.telemetry (waiting up to
        IN_KAFKA_TIMEOUT_S for what is still on its way), and the commands, into ``out``."""
        deadline = time.monotonic() + IN_KAFKA_TIMEOUT_S
        for device, acked in self.acked.items():
            while True:
                seen = kafka_seqs(self.stack.bootstrap, "iot.telemetry", self.tag,
                                  device.encode())  # fmt: skip
                if not acked - set(seen) or time.monotonic() > deadline:
                    break
                time.sleep(2)
            out.add(f"edge {device}", acked, seen)
        lost, dups = command_counts(self.sent, self._got())
        out.lost["edge commands"] = lost
        out.duplicates["edge commands"] = dups

    def _delivered(self) -> int:
        return len(set(self._got()) & set(self.sent))

    def notes(self) -> list[str]:
        """The cell's edge figures: the cut, what the site held, the times after the heal."""
        acked = sum(len(a) for a in self.acked.values())
        return [
            f"cut {self.cut_s:.0f} s; site acked {acked} QoS 1 messages of "
            f"{len(self.publishers)} devices (held at most {self.held_max} during the cut"
            + ("" if self.down_seen else "; the site never reported its link down")
            + ")",
            f"after heal: link up {seconds(self.link_at, self.healed)}, backlog drained "
            f"{seconds(self.drained_at, self.healed)}, {self._delivered()}/{len(self.sent)} "
            f"commands (of {COMMANDS} sent) at the device {seconds(self.commands_at, self.healed)}",
            *([f"commands refused: {'; '.join(self.refused)}"] if self.refused else []),
        ]
