"""``iot-devices`` end to end on a real Kafka and a real dynsec Mosquitto, plus its parsing."""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from registry.cli import main
from registry.kafka_store import KafkaStore
from tests.registry.conftest import DynsecBroker
from tests.registry.mqtt_probe import Probe, connack_of


def test_help_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "device" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["device", "add"])  # no id
    assert bad.value.code == 2
    with pytest.raises(SystemExit):
        main(["account", "create", "x", "--role", "wizard"])


def test_a_missing_kafka_password_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "kafka" / "registry.secret"
    code = main([
        "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-username", "registry",
        "--kafka-sasl-password-file", str(missing), "tenant", "list",
    ])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("iot-devices: kafka_sasl_password_file: "), err
    assert str(missing) in err
    assert "Traceback" not in err


def test_mosquitto_init_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.json"
    secret = tmp_path / "s"
    assert main(["mosquitto-init", str(path), "--password-file", str(secret)]) == 0
    assert oct(secret.stat().st_mode & 0o777) == "0o600"
    first = path.read_text()
    assert main(["mosquitto-init", str(path), "--password-file", str(secret)]) == 1
    assert path.read_text() == first
    assert "not overwritten" in capsys.readouterr().err


@pytest.mark.integration
def test_cli_end_to_end(
    dynsec_broker: DynsecBroker,
    store_factory: Callable[[], KafkaStore],
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = store_factory()
    base = [
        f"--kafka-bootstrap={store.bootstrap}",
        f"--topic={store.topic}",
        f"--audit-topic={store.audit_topic}",
        "--mqtt-host=127.0.0.1",
        f"--mqtt-port={dynsec_broker.port}",
        f"--admin-password-file={dynsec_broker.password_file}",
    ]

    def run(*args: str) -> str:
        capsys.readouterr()
        code = main([*base, *args])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return captured.out

    def fails(*args: str) -> str:
        capsys.readouterr()
        assert main([*base, *args]) == 1
        return capsys.readouterr().err

    run("init")
    run("init")  # idempotent
    admin = json.loads(run("--json", "bootstrap-admin", "root"))
    assert len(admin["secret"]) == 43
    assert "already" in fails("bootstrap-admin", "root2")
    run("tenant", "create", "t1", "--max-devices", "3", "--max-msgs-per-s", "50")
    shown = json.loads(run("--json", "tenant", "show", "t1"))
    assert shown["quotas"] == {"devices": 3, "msgs_per_s": 50.0}

    added = json.loads(run("--json", "device", "add", "--tenant", "t1", "pump", "--group", "g1"))
    secret = added["secret"]
    assert added["credentials"] == {"kinds": ["secret"], "cert_fingerprint": None}
    assert "secret_hash" not in json.dumps(added)
    text = run("device", "add", "valve")  # default tenant, text output
    assert "secret: " in text
    many = json.loads(run("--json", "device", "add", "--tenant", "t1", "fan-1", "fan-2"))
    assert [d["id"] for d in many] == ["fan-1", "fan-2"]
    assert len({d["secret"] for d in many}) == 2
    assert "quota" in fails("device", "add", "--tenant", "t1", "fan-3")
    run("device", "delete", "--tenant", "t1", "fan-1")
    run("device", "delete", "--tenant", "t1", "fan-2")
    listed = json.loads(run("--json", "device", "list", "--search", "pu"))
    assert [(d["tenant"], d["id"]) for d in listed] == [("t1", "pump")]
    assert secret not in run("--json", "device", "show", "--tenant", "t1", "pump")

    live = Probe(dynsec_broker.port, "t1/pump", secret)
    assert live.connected
    run("device", "disable", "--tenant", "t1", "pump")
    assert live.wait_gone(5.0)
    assert connack_of(dynsec_broker.port, "t1/pump", secret).is_failure
    run("device", "enable", "--tenant", "t1", "pump")
    new = json.loads(run("--json", "device", "rotate", "--tenant", "t1", "pump"))["secret"]
    assert connack_of(dynsec_broker.port, "t1/pump", secret).is_failure
    assert not connack_of(dynsec_broker.port, "t1/pump", new).is_failure
    live.close()

    groups = json.loads(run("--json", "device", "groups", "--tenant", "t1", "pump", "--add", "g2"))
    assert groups["groups"] == ["g1", "g2"]
    bridge = json.loads(run("--json", "account", "create", "bridge", "--role", "bridge"))
    assert not connack_of(dynsec_broker.port, "svc/bridge", bridge["secret"]).is_failure
    assert "need a tenant" in fails("account", "create", "e1", "--role", "edge")
    # an edge site and a device behind it (docs/edge.md), then moved back to the centre
    run("account", "create", "plant-1", "--role", "edge", "--tenant", "default")
    behind = json.loads(run("--json", "device", "add", "--site", "plant-1", "meter"))
    assert behind["site"] == "plant-1"
    assert "no edge site" in fails("device", "site", "meter", "--site", "bridge")
    assert json.loads(run("--json", "device", "site", "meter"))["site"] is None
    run("account", "delete", "plant-1")
    assert "no device" in fails("device", "show", "ghost")
    assert "cascade" in fails("tenant", "delete", "t1")
    run("tenant", "delete", "t1", "--cascade")
    assert connack_of(dynsec_broker.port, "t1/pump", new).is_failure
    names = [a["name"] for a in json.loads(run("--json", "account", "list"))]
    assert names == ["bridge", "root"]
    trail = json.loads(run("--json", "audit", "--entity", "device/t1/pump"))
    assert [r["action"] for r in trail] == [
        "device.add",
        "device.disable",
        "device.enable",
        "device.rotate",
        "device.groups",
        "tenant.delete",
    ]
    assert {r["actor"] for r in trail} == {f"cli:{getpass.getuser()}"}
    assert secret not in json.dumps(trail)
    assert new not in json.dumps(trail)
