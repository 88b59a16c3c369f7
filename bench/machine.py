"""The machine a benchmark ran on (CPU, memory, kernel, server and client versions, load)."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def read_text(path: str) -> str:
    """The file's text, or "" when it cannot be read (not Linux, no such file)."""
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def loadavg() -> list[str]:
    """The 1, 5 and 15 minute load averages as /proc/loadavg writes them."""
    return read_text("/proc/loadavg").split()[:3]


def _pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    cpu_model = next(
        (
            line.split(":", 1)[1].strip()
            for line in read_text("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown",
    )
    mem_kb = next(
        (
            int(line.split()[1])
            for line in read_text("/proc/meminfo").splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    mosquitto = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["/usr/sbin/mosquitto", "-h"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
        mosquitto = out.splitlines()[0] if out else "unknown"
    libs = ROOT / "kafka" / "broker" / "libs"
    kafka_jar = sorted(p.name for p in libs.glob("kafka_2.13-*.jar")) if libs.exists() else []
    import confluent_kafka

    return {
        "cpu": cpu_model,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "mosquitto": mosquitto,
        "kafka": kafka_jar[0].removesuffix(".jar") if kafka_jar else "unknown",
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "paho_mqtt": _pkg_version("paho-mqtt"),
        "mq_bridge": _pkg_version("mq-bridge"),
        "telegraf": telegraf_version(),
        "loadavg_before": loadavg(),
    }


def telegraf_version() -> str:
    """The Telegraf release the bench builds (and whether its binary is there yet)."""
    from bench import telegraf

    return telegraf.VERSION + ("" if telegraf.binary_path().is_file() else " (not built yet)")
