"""The remote query endpoint's files and URLs (pure parts and the token's secret).

The real thing end to end (the Connect server and nginx as `iot-stack up --analytics` starts
them, a remote client over TLS with the token, a wrong one and none) runs in
tests/stack/test_supervisor_integration.py::test_analytics_and_devices_are_restarted, on the
stack that test starts anyway (a Spark JVM fewer in the suite).
"""

from __future__ import annotations

from pathlib import Path

from stack import connect_conf, spark_connect
from stack.secret_files import connect_token_secret


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


def test_the_server_jvm_takes_the_spark_driver_options_and_never_the_token(tmp_path: Path) -> None:
    argv = connect_conf.server_command(
        "java", ["/cp"], tmp_path / "p.properties", master="local[1]", memory="512m",
        jvm_options=["-XX:TieredStopAtLevel=1"],
    )  # fmt: skip
    assert argv.index("-XX:TieredStopAtLevel=1") < argv.index(connect_conf.SUBMIT_CLASS)
    plan = spark_connect.plan(
        tmp_path, listen_host="127.0.0.1", listen_port=15002, server_port=15003,
        jvm_options="-XX:TieredStopAtLevel=1 -Xss2m",
    )  # fmt: skip
    assert [a for a in plan.server_argv if a in ("-XX:TieredStopAtLevel=1", "-Xss2m")] == [
        "-XX:TieredStopAtLevel=1",
        "-Xss2m",
    ]
