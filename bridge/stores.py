"""The data dirs the bridge watches for a full disk (pure): the ``store_dirs`` setting's
``name=path,...`` parsed, and when a store counts as full.

A full disk stops Kafka (it takes its one log dir offline and exits) and Mosquitto's saves
(docs/operations.md, "A full disk"). Neither says so where an operator looks: Kafka is just
gone, Mosquitto logs a failed save. `iot-stack up` therefore names their data dirs to the first
bridge, which exports their free space on /metrics (``bridge.store_watch``); the console's
Overview shows a full one.
"""

from __future__ import annotations

FULL_BELOW_BYTES = 16 * 1024 * 1024  # less free than this (or than 2 % of a small disk): full
FULL_FRACTION = 0.02


def parse_store_dirs(text: str) -> dict[str, str]:
    """``kafka=/var/kafka/data,mosquitto=/var/mosquitto`` -> ``{"kafka": "/var/...", ...}``
    (ValueError if malformed or a name repeats)."""
    out: dict[str, str] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ValueError(f"expected name=path, got {item!r}")
        if name in out:
            raise ValueError(f"store {name!r} named twice")
        out[name] = path
    return out


def is_full(free_bytes: int, size_bytes: int) -> bool:
    """Whether a file system with ``free_bytes`` of ``size_bytes`` left counts as full: less
    than 16 MiB free, or than 2 % of a disk smaller than 800 MiB (a test's small tmpfs)."""
    return free_bytes < min(FULL_BELOW_BYTES, size_bytes * FULL_FRACTION)


def describe(name: str, path: str, free_bytes: int) -> str:
    """The error an operator reads: ``kafka: disk full (/var/kafka/data: 0 bytes free)``."""
    return f"{name}: disk full ({path}: {free_bytes:,} bytes free)"
