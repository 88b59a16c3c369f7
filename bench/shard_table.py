"""One MQTT shard against two, side by side (pure: from the recorded suite runs).

`python -m bench.shards` runs the ingest suite's ceiling and our bridge on one Mosquitto and on
`--mqtt-shards 2`, alternating; each run's rates and where the cores went (Mosquitto's shards,
HAProxy in front of them, our bridge, Kafka, the whole machine) are a row here, so the report
shows whether a second shard adds rate on this machine and, if not, what took the cores.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.cpu_share import cores
from bench.results import LIMIT, OURS, RunResult, fmt_number, md_table, ratio
from bench.results_tables import throughput_runs

ShardRun = tuple[int, int, Sequence[RunResult]]  # (run number, shards, the suite's results)


def _c(value: float | None) -> str:
    return fmt_number(value, 2)


def _rate(run: RunResult | None) -> float | None:
    return run.msgs_per_s if run is not None else None


def _first(runs: list[RunResult]) -> RunResult | None:
    return runs[0] if runs else None


def shard_rows(runs: Sequence[ShardRun], payloads: Sequence[int]) -> list[list[str]]:
    """Per payload, run and shard count: the ceiling's rate and Mosquitto cores, ours with its
    ratio to that run's ceiling and the cores of Mosquitto / HAProxy / bridge / Kafka / machine."""
    rows: list[list[str]] = []
    for p in payloads:
        for number, shards, results in runs:
            lim = _first(throughput_runs(results, LIMIT, p))
            our = _first(throughput_runs(results, OURS, p))
            row = [str(p), str(number), str(shards), fmt_number(_rate(lim))]
            row.append(_c(cores(lim.broker_cpu_s, lim)) if lim else "-")
            if our is None:
                rows.append([*row, "-", "-"])
                continue
            share = ratio(_rate(our), _rate(lim))
            row.append(f"{fmt_number(_rate(our))} ({fmt_number(share, 2)})")
            row.append(
                " / ".join(
                    _c(cores(v, our))
                    for v in (
                        our.broker_cpu_s,
                        our.front_cpu_s,
                        our.cpu_s,
                        our.kafka_cpu_s,
                        our.machine_cpu_s,
                    )
                )
            )
            rows.append(row)
    return rows


def shard_table(runs: Sequence[ShardRun], payloads: Sequence[int], n_cores: int) -> str:
    head = [
        "payload B",
        "run",
        "shards",
        "ceiling msgs/s",
        "ceiling: Mosquitto cores",
        "ours msgs/s (vs ceiling)",
        f"ours: Mosquitto / HAProxy / bridge / Kafka / machine cores (of {n_cores})",
    ]
    return "\n".join(md_table(head, shard_rows(runs, payloads)))


def shard_ranges(runs: Sequence[ShardRun], payloads: Sequence[int]) -> list[str]:
    """One line per payload and shard count: the ceiling's and our rate's min-max over runs."""
    lines = []
    for p in payloads:
        for shards in sorted({s for _, s, _ in runs}):
            lims, ours = [], []
            for _, s, results in runs:
                if s != shards:
                    continue
                lims += [r.msgs_per_s for r in throughput_runs(results, LIMIT, p) if r.msgs_per_s]
                ours += [r.msgs_per_s for r in throughput_runs(results, OURS, p) if r.msgs_per_s]
            lines.append(
                f"- {p} B, {shards} shard{'s' if shards > 1 else ''}: ceiling {_span(lims)}, "
                f"ours {_span(ours)} msgs/s ({len(ours)} runs)"
            )
    return lines


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return fmt_number(low) if low == high else f"{fmt_number(low)}-{fmt_number(high)}"
