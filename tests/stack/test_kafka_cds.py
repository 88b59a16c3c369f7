"""The Kafka JVMs' class-data sharing archive (stack/kafka_cds.py): made by the set-up, mapped
by every broker the stack starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack import kafka_cds, paths
from stack.config import StackConfig
from stack.kafka_server import KafkaServer
from tests.conftest import Endpoints


def test_options_map_the_archive_only_when_there_is_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "kafka.jsa"
    monkeypatch.setattr(kafka_cds, "archive_path", lambda: archive)
    assert kafka_cds.use_options() == []
    archive.write_bytes(b"x")
    assert kafka_cds.use_options("-XX:TieredStopAtLevel=1") == [f"-XX:SharedArchiveFile={archive}"]
    # the JVM that dumps a new archive must not map the old one
    assert kafka_cds.use_options(f"{kafka_cds.DUMP_OPTION}/tmp/new.jsa") == []
    # the broker's argv: the archive before the operator's own options (theirs win)
    cfg = StackConfig.servers_on_free_ports(tmp_path / "stack", kafka_jvm_options="-Xshare:off")
    argv = KafkaServer(cfg).command()
    assert argv.index(f"-XX:SharedArchiveFile={archive}") < argv.index("-Xshare:off")


@pytest.mark.integration
def test_the_set_up_made_the_archive_and_the_brokers_map_it(stack: Endpoints) -> None:
    assert kafka_cds.fresh(), "run the set-up (.ci/setup: python -m stack.kafka_cds)"
    archive = str(kafka_cds.archive_path())
    ours = f"{paths.broker_libs_dir()}/*".encode()  # not a broker of another checkout's jars
    brokers = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
            if b"kafka.Kafka" in argv and ours in argv:
                brokers.append(cmdline.with_name("maps").read_text())
        except OSError:  # gone meanwhile
            continue
    assert brokers, "the session stack's broker runs"
    assert all(archive in maps for maps in brokers), "a broker runs without the archive mapped"
