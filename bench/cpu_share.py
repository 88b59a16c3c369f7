"""Who holds the CPU in the QoS 1 throughput rounds (pure: from the recorded runs).

The Mosquitto one-to-one ceiling is one single-threaded Mosquitto at (nearly) a whole core
while the machine has room to spare; behind our bridge the same Mosquitto shares the cores
with the bridge, Kafka and the load. This table puts each round's figures side by side, in
cores (CPU seconds over the run's seconds), so a report shows which process held the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.results import LIMIT, OURS, RunResult, fmt_number, md_table, ratio
from bench.results_tables import throughput_runs


def cores(cpu_s: float | None, run: RunResult) -> float | None:
    """Average cores a process used over the run's seconds (its CPU is counted to the end of
    the drain, so this can pass a whole core by a little); None when unknown."""
    return ratio(cpu_s, run.duration_s)


def _c(value: float | None) -> str:
    return fmt_number(value, 2)


def cpu_share_table(results: Sequence[RunResult], payloads: Sequence[int], n_cores: int) -> str:
    """Markdown: per payload and round, the ceiling's and our bridge's rates with what
    Mosquitto, the machine, our bridge, Kafka and the publishers used, in cores."""
    head = [
        "payload B",
        "round",
        "ceiling msgs/s",
        "ceiling: Mosquitto / machine cores",
        "ours msgs/s (vs ceiling)",
        "ours: Mosquitto / machine cores",
        f"ours: bridge / Kafka / publishers cores (of {n_cores})",
    ]
    rows: list[list[str]] = []
    for p in payloads:
        limits = throughput_runs(results, LIMIT, p)
        ours = throughput_runs(results, OURS, p)
        for i, (lim, our) in enumerate(zip(limits, ours, strict=False), start=1):
            rows.append(
                [
                    str(p),
                    str(i),
                    fmt_number(lim.msgs_per_s),
                    f"{_c(cores(lim.broker_cpu_s, lim))} / {_c(cores(lim.machine_cpu_s, lim))}",
                    f"{fmt_number(our.msgs_per_s)} "
                    f"({fmt_number(ratio(our.msgs_per_s, lim.msgs_per_s), 2)})",
                    f"{_c(cores(our.broker_cpu_s, our))} / {_c(cores(our.machine_cpu_s, our))}",
                    f"{_c(cores(our.cpu_s, our))} / {_c(cores(our.kafka_cpu_s, our))} / "
                    f"{_c(cores(our.load_cpu_s, our))}",
                ]
            )
    return "\n".join(md_table(head, rows))
