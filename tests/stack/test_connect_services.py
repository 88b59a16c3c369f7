"""The remote query endpoint as `up --analytics` starts it: services, settings, `connect-url`
(no process is started here; tests/stack/test_supervisor_integration.py runs it for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack import connect_conf, spark_connect
from stack.cli import _config, _parser, main
from stack.config import StackConfig
from stack.connect_services import PROXY, SERVER, ConnectService
from stack.errors import StackError
from stack.launcher import Stack
from stack.secret_files import connect_token_secret


def _stack(tmp_path: Path, **changes: object) -> Stack:
    return Stack(StackConfig(data_dir=tmp_path, **changes))  # type: ignore[arg-type]


def test_analytics_brings_the_endpoint_after_the_job_unless_turned_off(tmp_path: Path) -> None:
    names = [name for name, _ in _stack(tmp_path, with_analytics=True).services()]
    assert names[-3:] == ["analytics", SERVER, PROXY]
    off = _stack(tmp_path, with_analytics=True, with_connect=False)
    assert [name for name, _ in off.services()][-1] == "analytics"
    assert SERVER not in [name for name, _ in _stack(tmp_path).services()]  # no analytics
    stack = _stack(tmp_path, with_analytics=True, connect_port=17002)
    services = dict(stack.services())
    assert all(s.process.supervisor is stack.link for s in services.values())
    proxy = services[PROXY]
    assert isinstance(proxy, ConnectService)
    assert proxy.endpoint.startswith("sc://127.0.0.1:17002/;use_ssl=true ")
    assert "token=" not in proxy.endpoint  # status shows where, never the token
    # `down` and `status` know both whatever flags they get
    assert {SERVER, PROXY} <= {name for name, _ in _stack(tmp_path)._all_known()}


def test_flags_and_env_and_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _config(_parser().parse_args(["up", "--analytics"])).with_connect is True
    assert _config(_parser().parse_args(["up", "--no-connect"])).with_connect is False
    monkeypatch.setenv("IOT_STACK_CONNECT", "0")
    monkeypatch.setenv("IOT_STACK_CONNECT_PORT", "16002")
    cfg = _config(_parser().parse_args(["up", "--analytics"]))
    assert (cfg.with_connect, cfg.connect_port, cfg.connect_server_port) == (False, 16002, 15003)
    with pytest.raises(StackError, match="connect_port and connect_server_port"):
        StackConfig(connect_port=15003)
    with pytest.raises(StackError, match="connect_server_port"):
        StackConfig(connect_server_port=0)


def test_commands_and_files(tmp_path: Path) -> None:
    work = tmp_path / "connect"
    where = {"listen_host": "0.0.0.0", "listen_port": 15002, "server_port": 15003}
    plan = spark_connect.plan(work, url_host="appliance.example", **where)  # type: ignore[arg-type]
    argv = plan.server_argv
    assert Path(argv[0]).name == "java"
    assert argv[argv.index(connect_conf.SUBMIT_CLASS) :] == [
        connect_conf.SUBMIT_CLASS, "--master", "local[1]", "--conf", "spark.driver.memory=512m",
        "--properties-file", str(work / "spark-connect.properties"),
        "--class", connect_conf.SERVER_CLASS, "--name", "iot-connect", "spark-internal",
    ]  # fmt: skip
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert any(Path(j).name.startswith("delta-spark_2.13-") for j in classpath)
    assert plan.url == "sc://appliance.example:15002/;use_ssl=true"
    assert not plan.props.exists()  # nothing written until a start
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    spark_connect.write_files(plan, token="t0k", cert=cert, key=key, **where)  # type: ignore[arg-type]
    props = plan.props.read_text()
    assert plan.props.stat().st_mode & 0o777 == 0o600
    assert "spark.connect.authenticate.token t0k\n" in props
    assert (
        "spark.sql.catalog.spark_catalog org.apache.spark.sql.delta.catalog.DeltaCatalog" in props
    )
    assert "spark.sql.catalogImplementation in-memory\n" in props
    assert "retentionDurationCheck" not in props  # Delta's own VACUUM guard stays on
    assert "t0k" not in " ".join(argv)  # off the command line `ps` shows
    conf = plan.proxy_conf.read_text()
    assert "master_process off;" in conf  # a master rewrites its title: pid files compare argv
    assert "listen 0.0.0.0:15002 ssl http2;" in conf
    assert f"ssl_certificate {cert};" in conf


def test_connect_url_prints_the_token_on_stdout_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("IOT_STACK_SECRETS_DIR", "IOT_REGISTRY_CA_DIR", "IOT_STACK_CONNECT_PORT"):
        monkeypatch.delenv(name, raising=False)
    data = ["--data-dir", str(tmp_path)]
    assert main(["connect-url", *data]) == 1
    assert "no token" in capsys.readouterr().err
    token = spark_connect.ensure_token(tmp_path / "secrets")
    assert connect_token_secret(tmp_path / "secrets").exists()
    assert main(["connect-url", *data, "--host", "lake.example"]) == 0
    out, err = capsys.readouterr()
    assert out == f"sc://lake.example:15002/;use_ssl=true;token={token}\n"
    assert f"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={tmp_path / 'ca' / 'ca.crt'}" in err
    assert token not in err
    assert main(["connect-url", *data, "--no-token"]) == 0
    assert capsys.readouterr().out == "sc://127.0.0.1:15002/;use_ssl=true\n"
