"""A class-data sharing archive for the Kafka JVMs the stack starts (broker and storage tool).

Measured on the 2-core machine (load ~10, 2026-11-28): a C1 test broker took 2.3 CPU-s to
ready with the archive against 4.8-5.5 without, and 7-10 s of wall time against 18-21; the
storage tool 1.1 CPU-s against 1.7. The stack starts a broker on every `up` and every restart
after a crash, the tests about 60. The archive is the JVM's own format (JDK 13+ dynamic
archive): the set-up makes it once per JDK and jar set (``python -m stack.kafka_cds``, by
starting and stopping one broker), and a JVM that finds it stale says so in its log and runs
without it (``-Xshare:auto``), so a stale archive costs time, never a start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from confluent_kafka import KafkaException

from stack import paths
from stack.errors import StackError

DUMP_OPTION = "-XX:ArchiveClassesAtExit="


def archive_path() -> Path:
    """Beside the jars (refetched jars take it away with them)."""
    return paths.broker_libs_dir() / ".cds" / "kafka.jsa"


def use_options(jvm_options: str = "") -> list[str]:
    """The JVM options that map the archive in ([] while there is none, or while this very
    JVM is the one dumping it)."""
    archive = archive_path()
    if DUMP_OPTION in jvm_options or not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}"]


def stamp() -> str:
    """What the archive was made from: the JDK (its resolved binary and version) and the jars
    (names, sizes, mtimes: what the JVM itself checks)."""
    java = shutil.which("java") or "java"
    version = subprocess.run(
        [java, "-version"], capture_output=True, text=True, check=False, timeout=60
    ).stderr
    jars = sorted(paths.broker_libs_dir().glob("*.jar"))
    listing = [f"{j.name} {j.stat().st_size} {j.stat().st_mtime_ns}" for j in jars]
    text = "\n".join([os.path.realpath(java), version, *listing])
    return hashlib.sha256(text.encode()).hexdigest()


def _stamp_path() -> Path:
    return archive_path().with_suffix(".stamp")


def fresh() -> bool:
    try:
        return archive_path().is_file() and _stamp_path().read_text().strip() == stamp()
    except OSError:
        return False


def build() -> Path:
    """Start one broker with the dump option, touch its produce and fetch paths, stop it; the
    archive is written when its JVM exits, then moved into place (readers never see half)."""
    from stack.config import StackConfig
    from stack.kafka_server import KafkaServer

    archive = archive_path()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-cds-") as work:
        dump = Path(work) / "kafka.jsa"
        cfg = StackConfig.servers_on_free_ports(
            Path(work), 1, kafka_heap="512m", insecure_anonymous=True,
            kafka_jvm_options=f"-XX:TieredStopAtLevel=1 {DUMP_OPTION}{dump}",
        )  # fmt: skip
        broker = KafkaServer(cfg)
        broker.start()
        try:
            _warm_up(broker.bootstrap)
        finally:
            broker.stop()
        if not dump.is_file():
            raise RuntimeError(
                f"the broker's JVM wrote no archive (its log: {broker.process.log_path})"
            )
        os.replace(dump, archive)
    _stamp_path().write_text(stamp() + "\n")
    return archive


def _warm_up(bootstrap: str) -> None:
    """One record produced and fetched by a group: the broker loads those paths' classes.
    The clients are gone before the broker stops (a live one would log its reconnects)."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("cds-warm-up", b"x", key=b"k")
    producer.flush(60)
    del producer
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "cds", "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe(["cds-warm-up"])
    consumer.poll(30)
    consumer.close()


def main() -> int:
    if fresh():
        return 0
    sys.stdout.write("making the Kafka JVMs' class-data sharing archive (once per JDK and jars)\n")
    try:
        sys.stdout.write(f"wrote {build()}\n")
    except (StackError, KafkaException, OSError, RuntimeError) as exc:
        # the stack runs without it (a slower start, nothing worse); the tests check it exists
        sys.stderr.write(f"no class-data sharing archive: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
