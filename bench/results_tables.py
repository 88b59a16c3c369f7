"""The benchmark's Markdown tables: throughput by contender and payload (best run and the spread
over repeats, ratios to Mosquitto's limit and to our bridge), scaling by processes, every run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bench.results import (
    CHECK_COLUMNS,
    LIMIT,
    LOW_LOAD,
    OURS,
    RunResult,
    find,
    fmt_number,
    md_table,
    ratio,
)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _check_cells(r: RunResult) -> list[str]:
    return [fmt_number(r.lost), fmt_number(r.duplicates), fmt_number(r.reordered)]


def _throughput_contenders(results: Iterable[RunResult]) -> list[str]:
    """The contenders with a throughput run, in the order they first ran."""
    return list(dict.fromkeys(r.contender for r in results if r.scenario.startswith("throughput")))


def _summed_checks(runs: Iterable[RunResult]) -> list[str]:
    """Lost, duplicated and reordered messages summed over the runs whose topic was read back
    ("-" each when none was)."""
    read = [r for r in runs if r.lost is not None]
    if not read:
        return ["-", "-", "-"]
    return [
        fmt_number(sum(r.lost or 0 for r in read)),
        fmt_number(sum(r.duplicates or 0 for r in read)),
        fmt_number(sum(r.reordered or 0 for r in read)),
    ]


def throughput_runs(
    results: Iterable[RunResult], contender: str, payload_bytes: int
) -> list[RunResult]:
    """Every throughput run (the best and its repeats) of a contender, in run order, without
    failed ones: round i of one contender pairs with round i of another."""
    return [
        r
        for r in results
        if r.contender == contender
        and r.payload_bytes == payload_bytes
        and r.processes == 1
        and r.scenario in ("throughput", "throughput-repeat")
        and r.error is None
        and r.msgs_per_s is not None
    ]


def value_range(values: Iterable[float | None]) -> tuple[float, float, int] | None:
    """(min, max, count) of the known values; None if there are none."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return min(known), max(known), len(known)


def paired_ratios(runs: Sequence[RunResult], refs: Sequence[RunResult]) -> list[float]:
    """msgs/s of run i over reference run i (same round), for every pair both have."""
    out = []
    for r, ref in zip(runs, refs, strict=False):
        v = ratio(r.msgs_per_s, ref.msgs_per_s)
        if v is not None:
            out.append(v)
    return out


def fmt_range(rng: tuple[float, float, int] | None, digits: int = 0) -> str:
    """``min-max`` (a single value when they agree or there was one run); ``-`` if unknown."""
    if rng is None:
        return "-"
    lo, hi, _n = rng
    if fmt_number(lo, digits) == fmt_number(hi, digits):
        return fmt_number(lo, digits)
    return f"{fmt_number(lo, digits)}-{fmt_number(hi, digits)}"


def spread_table(results: Sequence[RunResult], payloads: Sequence[int]) -> str:
    """Markdown: per contender and payload, min-max over its repeated throughput runs of
    msgs/s, the ratio to the same round's limit and to ours, CPU per million and peak RSS."""
    contenders = _throughput_contenders(results)
    head = [
        "contender",
        "payload B",
        "runs",
        "msgs/s min-max",
        "vs limit min-max (same round)",
        "vs ours min-max (same round)",
        "CPU s / M msgs min-max",
        "peak RSS MB min-max",
    ]
    rows: list[list[str]] = []
    for name in contenders:
        for p in payloads:
            runs = throughput_runs(results, name, p)
            if not runs:
                continue
            limit_name = LIMIT + "-qos0" if runs[0].qos == 0 else LIMIT
            limits = throughput_runs(results, limit_name, p) or throughput_runs(results, LIMIT, p)
            ours = throughput_runs(results, OURS, p)
            rows.append(
                [
                    name,
                    str(p),
                    str(len(runs)),
                    fmt_range(value_range(r.msgs_per_s for r in runs)),
                    fmt_range(value_range(paired_ratios(runs, limits)), 2),
                    fmt_range(value_range(paired_ratios(runs, ours)), 2),
                    fmt_range(value_range(r.cpu_s_per_million for r in runs), 1),
                    fmt_range(value_range(r.peak_rss_mb for r in runs)),
                ]
            )
    return "\n".join(md_table(head, rows))


def throughput_table(results: Sequence[RunResult], payloads: Sequence[int]) -> str:
    """Markdown: one row per contender, msgs/s per payload with ratios, costs and checks."""
    contenders = _throughput_contenders(results)
    head = ["contender"]
    for p in payloads:
        head += [f"msgs/s {p} B", f"vs limit {p} B", f"vs ours {p} B"]
    head += [
        "p50 ms (half load)",
        "p99 ms (half load)",
        "p50 / p99 ms (1 % load)",
        "CPU s / M msgs",
        "peak RSS MB",
        *CHECK_COLUMNS,
    ]
    rows: list[list[str]] = []
    for name in contenders:
        row = [name]
        cpu_values: list[float] = []
        rss_values: list[float] = []
        checked: list[RunResult] = []  # runs whose topic was read back
        for p in payloads:
            r = find(results, name, "throughput", p)
            limit = find(results, LIMIT, "throughput", p)
            if r is not None and r.qos == 0:
                limit = find(results, LIMIT + "-qos0", "throughput", p) or limit
            ours = find(results, OURS, "throughput", p)
            rate = r.msgs_per_s if r else None
            row += [
                fmt_number(rate) if r is None or r.error is None else "failed",
                _fmt_ratio(ratio(rate, limit.msgs_per_s if limit else None)),
                _fmt_ratio(ratio(rate, ours.msgs_per_s if ours else None)),
            ]
            if r is not None:
                if r.cpu_s_per_million is not None:
                    cpu_values.append(r.cpu_s_per_million)
                if r.peak_rss_mb is not None:
                    rss_values.append(r.peak_rss_mb)
                checked.append(r)
        lat = find(results, name, "latency")
        low = find(results, name, LOW_LOAD)
        row += [
            fmt_number(lat.latency_p50_ms, 1) if lat else "-",
            fmt_number(lat.latency_p99_ms, 1) if lat else "-",
            f"{fmt_number(low.latency_p50_ms, 1)} / {fmt_number(low.latency_p99_ms, 1)}"
            if low
            else "-",
            fmt_number(max(cpu_values), 1) if cpu_values else "-",
            fmt_number(max(rss_values), 0) if rss_values else "-",
        ]
        checked += [extra for extra in (lat, low) if extra is not None]
        row += _summed_checks(checked)
        rows.append(row)
    return "\n".join(md_table(head, rows))


def scaling_table(results: Sequence[RunResult]) -> str:
    """Markdown: our bridge's throughput by processes and devices, ratio to the 1-process run."""
    runs = [r for r in results if r.contender == OURS and r.scenario in ("throughput", "scaling")]
    runs.sort(key=lambda r: (r.payload_bytes, r.devices, r.processes))
    head = [
        "payload B",
        "devices",
        "bridge processes",
        "msgs/s",
        "vs 1 process, 1,000 devices",
        "CPU s / M msgs",
        *CHECK_COLUMNS,
    ]
    rows: list[list[str]] = []
    for r in runs:
        base = find(results, OURS, "throughput", r.payload_bytes)
        rows.append(
            [
                str(r.payload_bytes),
                f"{r.devices:,}",
                str(r.processes),
                fmt_number(r.msgs_per_s) if r.error is None else "failed",
                _fmt_ratio(ratio(r.msgs_per_s, base.msgs_per_s if base else None)),
                fmt_number(r.cpu_s_per_million, 1),
                *_check_cells(r),
            ]
        )
    return "\n".join(md_table(head, rows))


def runs_table(results: Sequence[RunResult]) -> str:
    """Markdown: every run with its raw figures (the audit trail under the summary)."""
    head = [
        "scenario",
        "contender",
        "payload B",
        "devices",
        "QoS",
        "procs",
        "offered/s",
        "published",
        "delivered",
        "msgs/s",
        "p50 ms",
        "p99 ms",
        "CPU s",
        "Mosquitto CPU s",
        "publishers CPU s",
        "Kafka CPU s",
        "machine busy CPU s",
        "RSS MB",
        "lost",
        "dup",
        "reord",
        "notes",
    ]
    rows: list[list[str]] = []
    for r in results:
        notes = list(r.notes)
        if r.error:
            notes.insert(0, f"error: {r.error}")
        rows.append(
            [
                r.scenario,
                r.contender,
                str(r.payload_bytes),
                f"{r.devices:,}",
                str(r.qos),
                str(r.processes),
                fmt_number(r.offered_rate),
                fmt_number(r.published),
                fmt_number(r.delivered),
                fmt_number(r.msgs_per_s),
                fmt_number(r.latency_p50_ms, 1),
                fmt_number(r.latency_p99_ms, 1),
                fmt_number(r.cpu_s, 1),
                fmt_number(r.broker_cpu_s, 1),
                fmt_number(r.load_cpu_s, 1),
                fmt_number(r.kafka_cpu_s, 1),
                fmt_number(r.machine_cpu_s, 1),
                fmt_number(r.peak_rss_mb, 0),
                *_check_cells(r),
                "; ".join(notes).replace("|", "/"),
            ]
        )
    return "\n".join(md_table(head, rows))
