"""The chaos matrix as Markdown (pure): service x fault -> lost, duplicates, seconds to
recover, worst client error; the cells not run named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bench.chaos.names import applies


class CellLike(Protocol):
    service: str
    fault: str
    lost: int | None
    duplicates: int | None
    recover_s: float | None
    worst: str
    detail: str
    load_avg: str


def _cell_text(cell: CellLike) -> str:
    if cell.lost is None:
        return "not run"
    back = "not back" if cell.recover_s is None else f"{cell.recover_s:.0f} s"
    return f"{cell.lost} / {cell.duplicates} / {back}"


def table(cells: Sequence[CellLike], services: Sequence[str], faults: Sequence[str]) -> str:
    """The compact matrix: one row per service, a column per fault, each cell
    `lost / duplicates / seconds to recover` ("-" where the fault does not apply, "not run"
    where it does and no result came)."""
    by = {(c.service, c.fault): c for c in cells}
    lines = ["| service | " + " | ".join(faults) + " |", "|---" * (len(faults) + 1) + "|"]
    for service in services:
        row = [
            _cell_text(by[(service, f)])
            if (service, f) in by
            else ("not run" if applies(service, f) else "-")
            for f in faults
        ]
        lines.append(f"| {service} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def details(cells: Sequence[CellLike]) -> str:
    lines = ["| service | fault | lost | duplicates | recovered in | worst client error | "
             "load average | notes |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in cells:
        back = "-" if c.recover_s is None else f"{c.recover_s:.1f} s"
        lost = "-" if c.lost is None else str(c.lost)
        dups = "-" if c.duplicates is None else str(c.duplicates)
        worst = c.worst.replace("|", "/")
        notes = " ".join(c.detail.replace("|", "/").split())
        lines.append(f"| {c.service} | {c.fault} | {lost} | {dups} | {back} | {worst} | "
                     f"{c.load_avg} | {notes} |")  # fmt: skip
    return "\n".join(lines)
