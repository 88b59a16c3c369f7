"""A live progress display on stderr (rich), off when stderr is not a terminal."""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table


class ProgressView:
    """Shows devices connected, messages sent, msgs/s, acks pending, errors and commands."""

    def __init__(self, total_devices: int, enabled: bool = True) -> None:
        self._console = Console(stderr=True)
        self.enabled = enabled and self._console.is_terminal
        self._total = total_devices
        self._live: Live | None = None
        self._last_sent = 0
        self._last_t = time.monotonic()
        self._rate = 0.0

    def __enter__(self) -> ProgressView:
        if self.enabled:
            self._live = Live(console=self._console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def update(self, snap: Mapping[str, Any]) -> None:
        now = time.monotonic()
        sent = int(snap.get("published", 0))
        dt = now - self._last_t
        if dt >= 0.5:
            self._rate = (sent - self._last_sent) / dt
            self._last_sent, self._last_t = sent, now
        if self._live is None:
            return
        table = Table(title="iot-sim", show_header=False, box=None)
        table.add_column(justify="right", style="bold")
        table.add_column()
        table.add_row("devices connected", f"{snap.get('connected', 0)} / {self._total}")
        table.add_row("published", f"{sent:,}")
        table.add_row("msgs/s", f"{self._rate:,.0f}")
        table.add_row("QoS 1 awaiting ack", f"{snap.get('awaiting_ack', 0):,}")
        table.add_row("malformed sent", f"{snap.get('malformed', 0):,}")
        if snap.get("events"):
            table.add_row("events sent", f"{snap.get('events', 0):,}")
        table.add_row(
            "commands in / replied",
            f"{snap.get('commands', 0):,} / {snap.get('replies', 0):,}",
        )
        table.add_row("errors", f"{snap.get('errors', 0):,}")
        table.add_row("devices finished", f"{snap.get('finished', 0)} / {self._total}")
        self._live.update(table)
