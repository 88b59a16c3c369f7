"""The remote query endpoint: Spark Connect behind nginx (TLS, appliance CA), token-checked.

The real thing end to end: the Connect server (spark-submit, the class in the pyspark wheel)
and Debian's nginx started from ``stack.spark_connect.plan``; pyspark's own Connect client,
in a fresh interpreter that trusts only the appliance CA, asks SQL over TLS with the token,
with a wrong one, and with none.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.ca_store import CaStore
from stack import connect_conf, spark_connect
from stack.ports import free_ports
from stack.secret_files import connect_token_secret

CLIENT = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.remote(sys.argv[1]).create()
    print("ANSWER", spark.sql("SELECT 40 + 2 AS answer").collect()[0]["answer"])
except Exception as exc:  # the client's error, as the analyst sees it
    print("REFUSED", " ".join(str(exc).split()))
"""


def test_files_and_urls(tmp_path: Path) -> None:
    assert connect_conf.remote_url("h", 15002, "t0k") == "sc://h:15002/;use_ssl=true;token=t0k"
    assert connect_conf.remote_url("h", 15002, None) == "sc://h:15002/;use_ssl=true"
    props = connect_conf.server_properties("t0k", 4000)
    assert "spark.connect.authenticate.token t0k\n" in props
    assert "spark.connect.grpc.binding.address 127.0.0.1\n" in props
    conf = connect_conf.proxy_conf(
        listen_host="0.0.0.0",
        listen_port=15002,
        upstream_port=4000,
        cert=Path("/ca/server.crt"),
        key=Path("/ca/server.key"),
        prefix=tmp_path,
    )
    assert "listen 0.0.0.0:15002 ssl http2;" in conf
    assert "grpc_pass grpc://127.0.0.1:4000;" in conf
    assert "ssl_certificate /ca/server.crt;" in conf
    # the token is made once and kept, 0600, under var/secrets
    secrets_dir = tmp_path / "secrets"
    token = spark_connect.ensure_token(secrets_dir)
    assert len(token) >= 32
    assert spark_connect.ensure_token(secrets_dir) == token
    assert connect_token_secret(secrets_dir).stat().st_mode & 0o777 == 0o600


def _wait_port(port: int, procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), "a process of the endpoint exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"port {port} not open after {timeout}s")


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[int, str, Path]]:
    ca = CaStore(tmp_path / "ca")
    ca.init(["localhost", "127.0.0.1"])
    token = spark_connect.ensure_token(tmp_path / "secrets")
    listen, server = free_ports(2)
    p = spark_connect.plan(
        tmp_path / "connect",
        token=token,
        listen_host="127.0.0.1",
        listen_port=listen,
        server_port=server,
        cert=ca.server_cert,
        key=ca.server_key,
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [
        subprocess.Popen(
            argv,
            env=env,
            cwd=tmp_path,
            stdout=(logs / f"{name}.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for name, argv, env in (
            ("server", p.server_argv, p.server_env),
            ("nginx", p.proxy_argv, dict(os.environ)),
        )
    ]
    try:
        _wait_port(listen, procs, 60)
        _wait_port(server, procs, 600)  # the JVM; minutes on a loaded 2-core box
        yield listen, token, ca.ca_cert
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _ask(port: int, token: str | None, ca_cert: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "GRPC_"))}
    env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(ca_cert)  # trust the appliance CA only
    url = connect_conf.remote_url("127.0.0.1", port, token)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("ANSWER", "REFUSED"))]
    assert lines, done.stdout + done.stderr
    return lines[-1]


@pytest.mark.spark  # a Spark JVM of its own: one at a time with the other Spark tests
@pytest.mark.timeout(1500)
def test_remote_session_needs_the_token_over_tls(endpoint: tuple[int, str, Path]) -> None:
    port, token, ca_cert = endpoint
    assert _ask(port, token, ca_cert) == "ANSWER 42"
    wrong = _ask(port, token[::-1] + "x", ca_cert)
    assert wrong.startswith("REFUSED")
    assert "Invalid authentication token" in wrong
    missing = _ask(port, None, ca_cert)
    assert missing.startswith("REFUSED")
    assert "No authentication token provided" in missing
