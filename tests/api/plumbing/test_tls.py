"""`--tls-port`: the same API over HTTPS, verified against the appliance CA (made on first use
when there is none) or served with the operator's certificate files."""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path

import pytest

from api.config import ApiConfig
from api.errors import ConfigError
from api.plumbing.tls import server_context
from registry.ca_store import CaStore
from stack.ports import free_port as _free_port
from tests.api.harness import running_api

pytestmark = pytest.mark.integration


def _get(port: int, path: str, context: ssl.SSLContext, host: str = "localhost") -> int:
    conn = http.client.HTTPSConnection(host, port, timeout=30, context=context)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def test_https_with_the_appliance_ca(tmp_path: Path) -> None:
    ca_dir, port = tmp_path / "ca", _free_port()
    dead = f"127.0.0.1:{_free_port()}"  # /healthz and /openapi.json need no Kafka
    with running_api(kafka_bootstrap=dead, insecure_anonymous=True, tls_port=port,
                     tls_ca_dir=str(ca_dir)) as svc:  # fmt: skip
        assert (ca_dir / "ca.crt").exists()  # no CA yet: made as `iot-devices ca init` does
        trusted = ssl.create_default_context(cafile=str(ca_dir / "ca.crt"))
        assert _get(port, "/healthz", trusted) == 200
        assert _get(port, "/openapi.json", trusted, host="127.0.0.1") == 200  # an IP SAN too
        with pytest.raises(ssl.SSLCertVerificationError):  # not a public CA's certificate
            _get(port, "/healthz", ssl.create_default_context())
        plain = http.client.HTTPConnection("127.0.0.1", svc.port, timeout=30)
        plain.request("GET", "/healthz")
        assert plain.getresponse().status == 200  # the HTTP port still serves
        plain.close()


def test_https_with_the_operators_files_and_an_existing_ca_kept(tmp_path: Path) -> None:
    ours = CaStore(tmp_path / "operator")
    ours.init(names=["api.example", "127.0.0.1"])
    before = ours.ca_cert.read_bytes()
    port = _free_port()
    with running_api(kafka_bootstrap=f"127.0.0.1:{_free_port()}", insecure_anonymous=True,
                     tls_port=port, tls_cert_file=str(ours.server_cert),
                     tls_key_file=str(ours.server_key)):  # fmt: skip
        trusted = ssl.create_default_context(cafile=str(ours.ca_cert))
        assert _get(port, "/healthz", trusted, host="127.0.0.1") == 200
        with pytest.raises(ssl.SSLCertVerificationError):  # a name it was not issued for
            _get(port, "/healthz", trusted, host="localhost")
    assert CaStore(tmp_path / "operator").ca_cert.read_bytes() == before
    server_context(ApiConfig.load([], environ={}, tls_ca_dir=str(ours.dir)))  # kept, not made
    assert ours.ca_cert.read_bytes() == before


def test_bad_tls_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="go together"):
        ApiConfig.load([], environ={}, tls_cert_file="x.pem")
    (tmp_path / "bad.pem").write_text("not a certificate")
    cfg = ApiConfig.load([], environ={}, tls_port=1, tls_cert_file=str(tmp_path / "bad.pem"),
                         tls_key_file=str(tmp_path / "bad.pem"))  # fmt: skip
    with pytest.raises(ConfigError, match="TLS certificate"):
        server_context(cfg)
