"""Sending commands at a rate and following their statuses, against an in-memory command path."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, cast

import pytest

from bench.commands.errors import BenchError
from bench.commands.sender import CommandSender
from commands.client import CommandClient, Tail
from commands.model import State


class _Msg:
    def __init__(self, command_id: str, state: State, device: str) -> None:
        self._key = command_id.encode()
        doc = {
            "command_id": command_id,
            "state": state.value,
            "attempt": 1,
            "device_id": device,
            "at": time.time_ns() // 1_000_000,
        }
        self._value = json.dumps(doc).encode()

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value


class _Path:
    """Answers every command at once (accepted, sent, succeeded), except to ``silent`` devices."""

    def __init__(self, silent: frozenset[str] = frozenset()) -> None:
        self.silent = silent
        self.queued: list[_Msg] = []
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def send(self, key: str, name: str, args: dict[str, Any], **kw: Any) -> str:
        cid = kw.get("command_id") or uuid.uuid4().hex
        self.sent.append((key, name, args))
        if key not in self.silent:
            for state in (State.ACCEPTED, State.SENT, State.SUCCEEDED):
                self.queued.append(_Msg(cid, state, key))
        return str(cid)

    def flush(self) -> None:
        pass

    def poll(self, timeout: float) -> list[_Msg]:
        out, self.queued = self.queued, []
        if not out and timeout:
            time.sleep(min(timeout, 0.01))
        return out


def _sender(path: _Path, devices: list[str], alive: Any = lambda: None) -> CommandSender:
    return CommandSender(cast(CommandClient, path), cast(Tail, path), devices, alive)


def test_warm_up_pings_every_device_until_it_answers() -> None:
    path = _Path()
    _sender(path, ["d1", "d2", "d3"]).warm_up(5.0)
    assert sorted(key for key, name, _ in path.sent if name == "ping") == ["d1", "d2", "d3"]


def test_warm_up_names_the_devices_that_never_answer() -> None:
    path = _Path(silent=frozenset({"d2"}))
    with pytest.raises(BenchError, match=r"1 devices did not answer.*d2: no status"):
        _sender(path, ["d1", "d2"]).warm_up(0.3)


def test_drive_sends_at_the_rate_over_the_devices_and_times_each_command() -> None:
    path = _Path()
    sender = _sender(path, ["d1", "d2"])
    sender.drive(100.0, 0.5, record=False)  # not measured
    assert sender.sent_at == {}
    unmeasured = len(path.sent)
    sender.drive(200.0, 0.5, record=True)
    sender.drain(1.0)
    measured = len(path.sent) - unmeasured
    assert 25 <= unmeasured <= 55  # a loaded machine may lose ticks, never add them
    assert 50 <= measured <= 105
    assert len(sender.sent_at) == measured
    assert {key for key, _, _ in path.sent} == {"d1", "d2"}
    assert [args["i"] for _, _, args in path.sent] == list(range(len(path.sent)))
    assert set(sender.finals) == set(sender.sent_at)
    assert all(state is State.SUCCEEDED for state, _ in sender.finals.values())
    assert all(seen >= sender.sent_at[cid] for cid, (_, seen) in sender.finals.items())
    assert all(set(m) == {"accepted", "sent", "succeeded"} for m in sender.marks.values())


def test_drive_stops_when_a_process_died() -> None:
    def dead() -> None:
        raise BenchError("iot-bridge exited with 1")

    with pytest.raises(BenchError, match="iot-bridge exited"):
        _sender(_Path(), ["d1"], dead).drive(10.0, 5.0, record=True)
