"""MQTT shards on hosts of their own (docker-compose.shards.yml): `iot-stack serve mqtt-front`
renders HAProxy for them, `serve mosquitto --mqtt-shard I` is shard I on its own address,
`provision --mqtt-shard-hosts` reaches each (no server starts: the exec is caught)."""

from __future__ import annotations

import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stack import cli, paths

HOSTS = "mqtt-shard-1:1883,mqtt-shard-2:1883"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short directory: HAProxy takes unix socket paths of at most 97 bytes (`unix@...`),
    which pytest's tmp_path under an xdist worker passes."""
    path = Path(tempfile.mkdtemp(prefix="iotsh-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def execs(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv each `serve` would exec, in a container's environment under ``short_tmp``."""
    monkeypatch.setenv("IOT_DATA_DIR", str(short_tmp / "data"))
    monkeypatch.setenv("IOT_BIND_HOST", "0.0.0.0")
    monkeypatch.setenv("IOT_STACK_SECRETS_DIR", str(short_tmp / "secrets"))
    monkeypatch.setenv("IOT_REGISTRY_CA_DIR", str(short_tmp / "ca"))
    seen: list[list[str]] = []
    monkeypatch.setattr(cli.os, "execv", lambda _path, argv: seen.append(list(argv)))
    return seen


def test_the_front_routes_to_the_shard_hosts_and_looks_their_names_up_again(
    execs: list[list[str]], short_tmp: Path
) -> None:
    argv = ["serve", "mqtt-front", "--mqtt-port", "1883", "--mqtt-tls-port", "8883"]
    assert cli.main([*argv, "--mqtt-shard-hosts", HOSTS]) == 1  # the exec returned
    [haproxy] = execs
    assert haproxy[0].endswith("haproxy")
    assert haproxy[1] == "-db"
    text = Path(haproxy[-1]).read_text()  # `haproxy -c` passed it
    assert "bind 0.0.0.0:1883\n" in text
    assert "mqtt_field_value(connect,client_identifier),crc32,mod(2)" in text
    assert "resolvers dns\n    parse-resolv-conf\n" in text
    servers = re.findall(r"backend (\S+)\n    server \S+ (.+)", text)
    sockets = short_tmp.resolve() / "data" / "mqtt-front"
    assert servers == [
        ("shard-1", "mqtt-shard-1:1883 resolvers dns init-addr libc,none"),
        ("shard-2", "mqtt-shard-2:1883 resolvers dns init-addr libc,none"),
        ("shard-1-tls", f"unix@{sockets}/shard-1.sock"),
        ("shard-2-tls", f"unix@{sockets}/shard-2.sock"),
    ]
    assert "bind 0.0.0.0:8883 ssl crt" in text
    assert (short_tmp / "ca" / "ca.crt").exists()  # the front makes the CA, as Mosquitto did


def test_the_front_needs_the_shard_hosts(
    execs: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", "mqtt-front"]) == 1
    assert "needs --mqtt-shard-hosts" in capsys.readouterr().err
    for wrong in ("1884,1885", "mqtt-shard-1:x"):  # ports alone: no host to reach them on
        with pytest.raises(SystemExit) as exited:
            cli.main(["serve", "mqtt-front", "--mqtt-shard-hosts", wrong])
        assert exited.value.code == 2
    assert execs == []


def test_a_shard_listens_on_its_own_address_with_the_front_socket(
    execs: list[list[str]], short_tmp: Path
) -> None:
    if not paths.front_auth_plugin().exists():
        pytest.fail(f"{paths.front_auth_plugin()} not built: run .ci/setup")
    assert cli.main(["serve", "mosquitto", "--mqtt-port", "1883", "--mqtt-shard", "2"]) == 1
    [mosquitto] = execs
    conf = Path(mosquitto[-1])
    assert conf == short_tmp / "data" / "mosquitto-2" / "mosquitto.conf"
    text = conf.read_text()
    sock = short_tmp.resolve() / "data" / "mqtt-front" / "shard-2.sock"
    assert "listener 1883 0.0.0.0\n" in text  # not mqtt_port + 2: a host of its own
    assert f"listener 0 {sock}\n" in text
    assert text.index(f"plugin_opt_socket {sock}") < text.index("dynamic_security")
    assert "listener 8883" not in text  # the TLS port is the front's
    assert (short_tmp / "secrets").exists()  # the registry admin's secret, for auth-init
    # without --mqtt-shard: the one Mosquitto of docker-compose.yml, as before
    assert cli.main(["serve", "mosquitto", "--mqtt-port", "1883"]) == 1
    text = Path(execs[-1][-1]).read_text()
    assert "listener 0 " not in text
    assert "listener 8883" in text


def test_provision_reaches_every_shard_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOT_DATA_DIR", str(tmp_path))
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(cli, "provision", lambda *_a, **kw: calls.append(kw))
    assert cli.main(["provision", "--devices", "2", "--mqtt-shard-hosts", HOSTS]) == 0
    assert calls[0]["shard_ports"] == [("mqtt-shard-1", 1883), ("mqtt-shard-2", 1883)]
    assert cli.main(["provision", "--devices", "2"]) == 0  # no shards recorded: one Mosquitto
    assert calls[1]["shard_ports"] == []


def test_reload_crl_reaches_the_front_of_shards_on_hosts_of_their_own(
    short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In the front's container (`docker-compose exec mosquitto iot-stack reload-crl`) there
    is no pid file and no recorded shard count: HAProxy's admin socket is what is there."""
    admin = short_tmp / "haproxy" / "admin.sock"
    admin.parent.mkdir()
    said: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(admin))
        server.listen(2)

        def answer() -> None:  # HAProxy's runtime API: one command per connection
            for reply in (b"transaction created for CRL x!\n", b"Success!\n"):
                conn, _ = server.accept()
                with conn:
                    data = b""
                    while not data.endswith(b"\n\n" if not said else b"\n"):
                        data += conn.recv(65536)
                    said.append(data.decode())
                    conn.sendall(reply)

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        assert cli.main(["reload-crl", "--data-dir", str(short_tmp)]) == 0
        thread.join(10)
    assert "HAProxy's TLS front took the new CRL" in capsys.readouterr().err
    crl = (short_tmp / "ca" / "crl.pem").resolve()
    assert said[0].startswith(f"set ssl crl-file {crl} <<\n-----BEGIN X509 CRL-----")
    assert said[1] == f"commit ssl crl-file {crl}\n"
