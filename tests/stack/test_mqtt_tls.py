"""The appliance's TLS listener as rendered into mosquitto.conf (no server needed; the TLS
behaviour itself: tests/registry/test_tls.py, through `iot-stack up`:
tests/stack/test_stack_tls_integration.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509

from registry import pki
from stack import mqtt_tls
from stack.config import StackConfig
from stack.errors import StackError
from stack.launcher import Stack
from stack.mosquitto_server import MosquittoServer


def _config(tmp_path: Path, **changes: object) -> StackConfig:
    return StackConfig(data_dir=tmp_path, mqtt_port=11883, **changes)  # type: ignore[arg-type]


def _tls_block(conf: str) -> list[str]:
    lines = conf.splitlines()
    return lines[lines.index("listener 18883 127.0.0.1") :]


def test_listener_and_ca_made_on_first_render(tmp_path: Path) -> None:
    cfg = _config(tmp_path, mqtt_tls_port=18883, tls_server_names="iot.example, 10.0.0.7")
    conf = MosquittoServer(cfg).render_config().read_text()
    block = _tls_block(conf)
    ca = tmp_path / "ca"
    for line in (
        f"cafile {ca / 'ca.crt'}",
        f"certfile {ca / 'server.crt'}",
        f"keyfile {ca / 'server.key'}",
        f"crlfile {ca / 'crl.pem'}",
        "require_certificate true",
        "use_identity_as_username true",
        "use_username_as_clientid true",
    ):
        assert line in block, line
    assert (ca / "server.key").stat().st_mode & 0o777 == 0o600
    server = pki.load_cert((ca / "server.crt").read_bytes())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "iot.example"} <= set(san.get_values_for_type(x509.DNSName))
    assert {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} == {
        "127.0.0.1",
        "10.0.0.7",
    }
    # the plain listener's lines stay before it, untouched
    assert conf.index("listener 11883 127.0.0.1") < conf.index("listener 18883")
    # a second render keeps the CA (every device certificate hangs on it)
    before = (ca / "ca.crt").read_bytes()
    MosquittoServer(cfg).render_config()
    assert (ca / "ca.crt").read_bytes() == before
    endpoints = Stack(cfg).endpoints()
    assert endpoints["mqtt_tls"] == f"mqtts://127.0.0.1:18883 (mutual TLS, CA {ca / 'ca.crt'})"


def test_a_name_added_later_gets_the_server_certificate_issued_again_under_the_same_ca(
    tmp_path: Path,
) -> None:
    """An upgrade: a CA made before compose's services gained `api` and `amqp` (or before new
    IOT_STACK_TLS_SERVER_NAMES) must not leave a listener whose certificate lacks them."""
    ca = tmp_path / "ca"
    mqtt_tls.ensure_ca(_config(tmp_path, tls_server_names="mosquitto"))
    ca_before, server_before = (ca / "ca.crt").read_bytes(), (ca / "server.crt").read_bytes()
    store, made = mqtt_tls.ensure_ca(_config(tmp_path, tls_server_names="mosquitto"))
    assert not made
    assert (ca / "server.crt").read_bytes() == server_before  # nothing new: untouched
    mqtt_tls.ensure_ca(_config(tmp_path, tls_server_names="api,amqp"))
    assert (ca / "ca.crt").read_bytes() == ca_before  # the devices' certificates still hold
    names = pki.server_names(pki.load_cert((ca / "server.crt").read_bytes()))
    assert {"localhost", "127.0.0.1", "mosquitto", "api", "amqp"} <= set(names)
    assert (ca / "server.key").stat().st_mode & 0o777 == 0o600
    assert store.authority().cert == pki.load_cert(ca_before)


@pytest.mark.parametrize(
    "changes", [{"mqtt_tls": False}, {"insecure_anonymous": True}], ids=["off", "anonymous"]
)
def test_no_listener_when_off_or_anonymous(tmp_path: Path, changes: dict[str, object]) -> None:
    cfg = _config(tmp_path, mqtt_tls_port=18883, **changes)
    conf = MosquittoServer(cfg).render_config().read_text()
    assert "listener 18883" not in conf
    assert "\ncafile " not in conf
    assert not (tmp_path / "ca").exists()
    assert Stack(cfg).endpoints()["mqtt_tls"] == "off"


def test_operator_ca_used_on_first_start_and_a_different_one_refused_later(
    tmp_path: Path,
) -> None:
    now = dt.datetime.now(dt.UTC)
    pems = {}
    for name in ("mine", "other"):
        key = pki.new_key()
        (tmp_path / f"{name}.crt").write_bytes(pki.cert_pem(pki.build_ca(key, name, now, 30)))
        (tmp_path / f"{name}.key").write_bytes(pki.key_pem(key))
        pems[name] = (str(tmp_path / f"{name}.crt"), str(tmp_path / f"{name}.key"))
    data = tmp_path / "var"
    mine = _config(data, tls_ca_cert=pems["mine"][0], tls_ca_key=pems["mine"][1])
    MosquittoServer(mine).render_config()
    assert (data / "ca" / "ca.crt").read_bytes() == (tmp_path / "mine.crt").read_bytes()
    MosquittoServer(mine).render_config()  # the same CA again: fine
    other = _config(data, tls_ca_cert=pems["other"][0], tls_ca_key=pems["other"][1])
    with pytest.raises(StackError, match="already holds another CA"):
        MosquittoServer(other).render_config()
    half = _config(tmp_path / "var2", tls_ca_cert=pems["mine"][0])
    with pytest.raises(StackError, match="both"):
        MosquittoServer(half).render_config()
    # a key that is not the certificate's
    wrong = _config(tmp_path / "var3", tls_ca_cert=pems["mine"][0], tls_ca_key=pems["other"][1])
    with pytest.raises(StackError, match="CA"):
        MosquittoServer(wrong).render_config()


def test_ca_dir_setting_and_port_checks(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "var", tls_ca_dir=str(tmp_path / "pki"))
    assert mqtt_tls.ca_dir(cfg) == tmp_path / "pki"
    with pytest.raises(StackError, match="mqtt_tls_port"):
        _config(tmp_path, mqtt_tls_port=11883)
    with pytest.raises(StackError, match="mqtt_tls_port"):
        _config(tmp_path, mqtt_tls_port=70000)
    _config(tmp_path, mqtt_tls_port=11883, mqtt_tls=False)  # off: not checked
    free = StackConfig.servers_on_free_ports(tmp_path)
    assert free.mqtt_tls_port not in (free.mqtt_port, free.kafka_port, free.controller_port)
