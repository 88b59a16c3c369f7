"""The chaos matrix's names (pure): its services, its faults, which fault applies to which
service, and the `--services`/`--faults` selections with a clear error naming the valid ones."""

from __future__ import annotations

from collections.abc import Sequence

# the processes of `iot-stack up --console --analytics --devices N`, in the order of the matrix;
# the registry writer is no process of its own (it runs in iot-api and the `iot-devices` CLI):
# its faults are api's; `edge` is an edge site in its own network namespace behind a NAT router
# (docs/edge.md), attached to the stack's Mosquitto
SERVICES: tuple[str, ...] = (
    "mosquitto", "kafka", "bridge", "commands", "api", "analytics", "devices", "supervisor",
    "edge",
)  # fmt: skip
FAULTS: tuple[str, ...] = ("kill9", "stop30", "restart", "disk-full", "cut60")
FAULT_HELP = {
    "kill9": "kill -9; the supervisor restarts it",
    "stop30": "SIGSTOP for 30 s (a hung process), then SIGCONT",
    "restart": "a clean restart: SIGTERM, the supervisor starts it again",
    "disk-full": "its data dir (a small tmpfs) filled for 30 s, then space returned",
    "cut60": "the edge site's link cut for 60 s (--cut-s), then healed; edge only",
}
# the edge site has one fault, and that fault one service: a pair of the two
EDGE_SERVICE, EDGE_FAULT = "edge", "cut60"
DISK_SERVICES = frozenset({"kafka", "mosquitto"})  # the services with a data dir of their own
# `--kafka-nodes 3` (the replicated cluster): instead of `kafka`, a node chosen at fault time,
# one that is not the active KRaft controller, or the active controller itself
KAFKA_NODES: tuple[int, ...] = (1, 3)
CLUSTER_SERVICES: tuple[str, ...] = ("kafka-broker", "kafka-controller")
CLUSTER_FAULTS = frozenset({"kill9", "stop30", "restart"})


class ChaosUsageError(ValueError):
    """A bad `--services`/`--faults`/`--kafka-nodes` value (the CLI exits 2 with it)."""


def select(text: str | None, valid: Sequence[str], what: str) -> list[str]:
    """The names of a comma-separated ``text`` (None, "" or "all": every valid one), in the
    order of ``valid``; ChaosUsageError naming the unknown ones and every valid one."""
    if text is None or text.strip() in ("", "all"):
        return list(valid)
    asked = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in asked if t not in valid]
    if unknown:
        raise ChaosUsageError(
            f"unknown {what} {', '.join(repr(u) for u in unknown)}: "
            f"valid {what}s are {', '.join(valid)} (or all)"
        )
    return [v for v in valid if v in asked]


def services_for(kafka_nodes: int) -> tuple[str, ...]:
    """The matrix's services with ``kafka_nodes`` Kafka nodes (1 or 3, else ChaosUsageError):
    with 3, `kafka` is replaced by the two node roles of the cluster."""
    if kafka_nodes not in KAFKA_NODES:
        raise ChaosUsageError(
            f"--kafka-nodes {kafka_nodes}: the matrix runs with 1 or 3 Kafka nodes"
        )
    if kafka_nodes == 1:
        return SERVICES
    at = SERVICES.index("kafka")
    return SERVICES[:at] + CLUSTER_SERVICES + SERVICES[at + 1 :]


def select_services(text: str | None, kafka_nodes: int) -> list[str]:
    """:func:`select` of ``--services`` for ``kafka_nodes`` nodes; a name of the other mode
    (`kafka-broker` on one node, `kafka` on three) is refused saying which mode it needs."""
    valid = services_for(kafka_nodes)
    asked = [t.strip() for t in (text or "").split(",") if t.strip()]
    cluster_only = [t for t in asked if t in CLUSTER_SERVICES and kafka_nodes != 3]
    if cluster_only:
        raise ChaosUsageError(
            f"service {', '.join(repr(t) for t in cluster_only)} needs --kafka-nodes 3 "
            f"(a node of the replicated cluster); with one node hurt `kafka`"
        )
    if "kafka" in asked and kafka_nodes == 3:
        raise ChaosUsageError(
            "service 'kafka' is the single node: with --kafka-nodes 3 hurt one node of the "
            "cluster, kafka-broker or kafka-controller"
        )
    return select(text, valid, "service")


def applies(service: str, fault: str) -> bool:
    """Whether ``fault`` is a cell of the matrix for ``service``."""
    if service == EDGE_SERVICE or fault == EDGE_FAULT:
        return (service, fault) == (EDGE_SERVICE, EDGE_FAULT)
    if service in CLUSTER_SERVICES:
        return fault in CLUSTER_FAULTS
    if fault == "disk-full":
        return service in DISK_SERVICES
    if service == "supervisor":
        return fault in ("kill9", "stop30")  # `restart` of the supervisor is `up` again
    return True


def check_edge_pair(services_text: str | None, faults_text: str | None) -> None:
    """ChaosUsageError when `edge` is asked by name with faults none of which is `cut60`, or
    `cut60` by name with services none of which is `edge` (the pair has no other cell)."""
    services = _asked(services_text)
    faults = _asked(faults_text)
    if services and faults and EDGE_SERVICE in services and EDGE_FAULT not in faults:
        raise ChaosUsageError(
            f"service '{EDGE_SERVICE}' takes only the fault '{EDGE_FAULT}' (its link cut), "
            f"not {', '.join(repr(f) for f in faults)}"
        )
    if services and faults and EDGE_FAULT in faults and EDGE_SERVICE not in services:
        raise ChaosUsageError(
            f"fault '{EDGE_FAULT}' (a cut link) applies only to service '{EDGE_SERVICE}', "
            f"not {', '.join(repr(s) for s in services)}"
        )


def _asked(text: str | None) -> list[str] | None:
    """The names of a selection, None for every one."""
    if text is None or text.strip() in ("", "all"):
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def cells(services: Sequence[str], faults: Sequence[str]) -> list[tuple[str, str]]:
    """The (service, fault) cells to run, service by service."""
    return [(s, f) for s in services for f in faults if applies(s, f)]
