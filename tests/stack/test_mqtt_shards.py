"""`--mqtt-shards N`: the shards' ports, HAProxy's config (checked by `haproxy -c`), bad input."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stack import cli
from stack.config import StackConfig
from stack.errors import StackError
from stack.haproxy_config import ShardAddress, TlsFront, render
from stack.mqtt_shards import check_shards, shard_ports


def _haproxy_check(path: Path) -> subprocess.CompletedProcess[str]:
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return subprocess.run(
        [haproxy, "-c", "-f", str(path)], check=False, capture_output=True, text=True
    )


def test_shards_take_the_ports_after_the_listener() -> None:
    assert shard_ports(1883, 1) == []
    assert shard_ports(1883, 3) == [1884, 1885, 1886]


def test_the_rendered_config_routes_each_shard_by_the_crc32_of_the_client_id(
    tmp_path: Path,
) -> None:
    shards = [ShardAddress("127.0.0.1", 1884), ShardAddress("127.0.0.1", 1885)]
    text = render("0.0.0.0", 1883, shards)
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    checked = _haproxy_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "bind 0.0.0.0:1883" in text
    assert "mqtt_field_value(connect,client_identifier),crc32,mod(2)" in text
    assert "reject unless { req.payload(0,0),mqtt_is_valid }" in text
    routes = re.findall(r"use_backend (\S+) if \{ var\(sess\.shard\) -m int (\d+) \}", text)
    assert routes == [("shard-1", "0"), ("shard-2", "1")]
    servers = re.findall(r"backend (\S+)\n    server \S+ (\S+)", text)
    assert servers == [("shard-1", "127.0.0.1:1884"), ("shard-2", "127.0.0.1:1885")]


def test_haproxy_refuses_a_broken_config(tmp_path: Path) -> None:
    # the check above would pass vacuously if `haproxy -c` accepted anything
    path = tmp_path / "haproxy.cfg"
    path.write_text(render("127.0.0.1", 1883, [ShardAddress("127.0.0.1", 1884)]) + "bogus 1\n")
    assert _haproxy_check(path).returncode != 0


def test_check_config_says_why_and_the_socket_limit_is_haproxys(tmp_path: Path) -> None:
    from stack.haproxy_server import check_config
    from stack.mqtt_tls import MAX_SOCKET_PATH

    def front(sock: str) -> str:
        shard = ShardAddress("127.0.0.1", 1884)
        return render("127.0.0.1", 1883, [shard]) + f"backend b\n    server s unix@{sock}\n"

    path = tmp_path / "haproxy.cfg"
    longest = "/" + "s" * (MAX_SOCKET_PATH - 1)  # a unix socket path of the limit's length
    path.write_text(front(longest))
    check_config(path)  # HAProxy takes the longest path the stack lets through
    path.write_text(front(longest + "s"))
    with pytest.raises(StackError, match=r"haproxy refused .*too long \(max 97\)"):
        check_config(path)  # one byte more: refused, and the error says why


def test_render_needs_a_shard() -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        render("127.0.0.1", 1883, [])


@pytest.mark.parametrize(
    ("port", "shards", "others", "message"),
    [
        (1883, 0, {}, "mqtt_shards must be 1-64, got 0"),
        (65534, 3, {}, "needs ports 65535-65537 .* at most 1 shards above mqtt_port 65534"),
        (1883, 2, {"kafka_port": 1885}, "kafka_port 1885 is one of the MQTT shards' ports"),
    ],
)
def test_bad_shard_counts_are_refused_clearly(
    port: int, shards: int, others: dict[str, int], message: str
) -> None:
    with pytest.raises(StackError, match=message):
        check_shards(port, shards, others)


def test_stack_settings_refuse_bad_shards(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="mqtt_shards must be 1-64, got 0"):
        StackConfig(data_dir=tmp_path, mqtt_shards=0)
    # the TLS listener is HAProxy's with shards: on by default, as with one Mosquitto
    assert StackConfig(data_dir=tmp_path, mqtt_shards=2).mqtt_tls
    with pytest.raises(StackError, match="mqtt_tls_port 1884 is one of the MQTT shards' ports"):
        StackConfig(data_dir=tmp_path, mqtt_shards=2, mqtt_tls_port=1884)
    with pytest.raises(StackError, match="not both"):
        StackConfig(data_dir=tmp_path, mqtt_shards=2, bridges=2, mqtt_tls=False)
    cfg = StackConfig(data_dir=tmp_path, mqtt_shards=2, mqtt_tls=False)
    assert cfg.mqtt_shard_ports == [1884, 1885]
    assert cfg.bridge_instances == 2


def test_up_with_zero_shards_or_too_many_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["up", "--data-dir", str(tmp_path), "--no-mqtt-tls"]
    assert cli.main([*base, "--mqtt-shards", "0"]) == 1
    assert "mqtt_shards must be 1-64, got 0" in capsys.readouterr().err
    assert cli.main([*base, "--mqtt-port", "65530", "--mqtt-shards", "8"]) == 1
    assert "past 65535: at most 5 shards above mqtt_port 65530" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_two_shards_render_shards_haproxy_and_a_bridge_and_command_path_each(
    tmp_path: Path,
) -> None:
    from stack.launcher import Stack

    stack = Stack(StackConfig(data_dir=tmp_path, mqtt_port=21883, mqtt_tls=False, mqtt_shards=2))
    names = [name for name, _ in stack.services()]
    assert names == [
        "mosquitto", "mosquitto-2", "haproxy", "kafka",
        "bridge-1", "bridge-2", "commands-1", "commands-2", "api",
    ]  # fmt: skip
    assert [s.port for s in stack.mqtt_shards] == [21884, 21885]
    assert [s.home.name for s in stack.mqtt_shards] == ["mosquitto", "mosquitto-2"]
    conf = stack.mqtt_shards[1].render_config().read_text()
    assert "listener 21885 127.0.0.1" in conf
    haproxy_conf = stack.haproxy.render_config().read_text()  # `haproxy -c` passed
    assert "bind 127.0.0.1:21883" in haproxy_conf
    assert "server mosquitto-2 127.0.0.1:21885" in haproxy_conf
    for i, bridge in enumerate(stack.bridges(), start=1):
        assert bridge.env["IOT_MQTT_PORT"] == str(21883 + i)  # its shard, not HAProxy
        assert bridge.env["IOT_MQTT_CLIENT_ID"] == f"iot-bridge-{i}"
        assert "IOT_MQTT_SHARE_GROUP" not in bridge.env  # one subscription per shard
        assert bridge.env["IOT_COMMANDS_ENABLED"] == "0"
    for i, path in enumerate(stack.command_paths(), start=1):
        assert path.env["IOT_MQTT_PORT"] == str(21883 + i)
        assert path.env["IOT_COMMAND_SHARD"] == str(i - 1)
        assert path.env["IOT_COMMAND_SHARDS"] == "2"
        assert path.env["IOT_COMMAND_GROUP_ID"] == f"iot-bridge-commands-shard-{i}"
        assert path.env["IOT_COMMAND_HTTP_PORT"] == str(9101 + 10 * (i - 1))
        assert path.env["IOT_MQTT_USERNAME"] == "svc/commands"
    assert stack.endpoints()["mqtt_shards"] == "2"


def test_one_shard_is_the_one_mosquitto_of_before(tmp_path: Path) -> None:
    from stack.launcher import Stack

    stack = Stack(StackConfig(data_dir=tmp_path))
    assert [name for name, _ in stack.services()][:2] == ["mosquitto", "kafka"]
    assert stack.mqtt_shards == []
    assert stack.mosquitto.port == 1883
    assert "mqtt_shards" not in stack.endpoints()


TLS_SHARDS = [
    ShardAddress("127.0.0.1", 1884, "/run/iot/mqtt-front/shard-1.sock"),
    ShardAddress("127.0.0.1", 1885, "/run/iot/mqtt-front/shard-2.sock"),
]


def _tls_front(tmp_path: Path) -> TlsFront:
    """A real CA's files (haproxy -c loads them): the server certificate and key in one PEM."""
    from registry.ca_store import CaStore

    store = CaStore(tmp_path / "ca")
    store.init()
    pem = tmp_path / "front.pem"
    pem.write_bytes(store.server_cert.read_bytes() + store.server_key.read_bytes())
    return TlsFront(8883, str(pem), str(store.ca_cert), str(store.crl), str(tmp_path / "a.sock"))


def test_the_tls_front_requires_a_certificate_whose_cn_is_the_client_id(tmp_path: Path) -> None:
    tls = _tls_front(tmp_path)
    text = render("0.0.0.0", 1883, TLS_SHARDS, tls=tls)
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    checked = _haproxy_check(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the runtime API `iot-stack reload-crl` hands the new CRL to, for the stack's user only
    assert f"global\n    stats socket {tls.admin_socket} mode 600 level admin\n" in text
    front = text.split("frontend mqtt-tls\n", 1)[1]
    assert front.startswith(
        f"    bind 0.0.0.0:8883 ssl crt {tls.pem} ca-file {tls.ca_file} verify required "
        f"crl-file {tls.crl_file} ssl-min-ver TLSv1.2\n"
    )
    rules = [ln.strip() for ln in front.splitlines() if ln.startswith("    tcp-request content")]
    connect = "req.payload(0,0),mqtt_field_value(connect"
    assert rules == [
        "tcp-request content reject unless { req.payload(0,0),mqtt_is_valid }",
        "tcp-request content set-var(sess.cn) ssl_c_s_dn(CN)",
        f"tcp-request content set-var(sess.client_id) {connect},client_identifier)",
        "tcp-request content reject unless { var(sess.cn) -m len gt 0 }",
        "tcp-request content reject unless { var(sess.client_id),strcmp(sess.cn) eq 0 }",
        f"tcp-request content reject if {{ {connect},username) -m found }} "
        f"!{{ {connect},username),strcmp(sess.cn) eq 0 }}",
        "tcp-request content set-var(sess.shard) var(sess.client_id),crc32,mod(2)",
    ]
    routes = re.findall(r"use_backend (\S+) if \{ var\(sess\.shard\) -m int (\d+) \}", front)
    assert routes == [("shard-1-tls", "0"), ("shard-2-tls", "1")]
    servers = re.findall(r"backend (\S+)\n    server \S+ (\S+)", front)
    assert servers == [
        ("shard-1-tls", "unix@/run/iot/mqtt-front/shard-1.sock"),
        ("shard-2-tls", "unix@/run/iot/mqtt-front/shard-2.sock"),
    ]
    # the plain front is unchanged: TCP ports, password log-ins checked by the shard
    assert "server mosquitto-2 127.0.0.1:1885" in text
    assert "mqtt-tls" not in render("0.0.0.0", 1883, TLS_SHARDS)
    assert "stats socket" not in render("0.0.0.0", 1883, TLS_SHARDS)


def test_the_tls_front_needs_every_shards_socket(tmp_path: Path) -> None:
    shards = [TLS_SHARDS[0], ShardAddress("127.0.0.1", 1885)]
    with pytest.raises(ValueError, match="every shard's front socket"):
        render("0.0.0.0", 1883, shards, tls=_tls_front(tmp_path))


def test_two_shards_with_tls_put_the_front_socket_and_plugin_before_dynsec(
    tmp_path: Path,
) -> None:
    from stack import paths
    from stack.launcher import Stack

    if not paths.front_auth_plugin().exists():
        pytest.fail(f"{paths.front_auth_plugin()} not built: run .ci/setup")
    cfg = StackConfig(data_dir=tmp_path, mqtt_port=21883, mqtt_tls_port=28883, mqtt_shards=2)
    stack = Stack(cfg)
    conf = stack.mqtt_shards[1].render_config().read_text()
    sock = tmp_path.resolve() / "mqtt-front" / "shard-2.sock"
    assert f"listener 0 {sock}\n" in conf
    assert (tmp_path / "mqtt-front").stat().st_mode & 0o777 == 0o700
    front = conf.index(f"plugin {paths.front_auth_plugin()}\nplugin_opt_socket {sock}\n")
    assert front < conf.index("dynamic_security")
    assert "listener 28883" not in conf  # the TLS port is HAProxy's
    haproxy_conf = stack.haproxy.render_config().read_text()  # `haproxy -c` passed
    assert "bind 127.0.0.1:28883 ssl crt" in haproxy_conf
    assert f"server mosquitto-2-tls unix@{sock}" in haproxy_conf
    assert (stack.haproxy.home / "mqtt-tls.pem").stat().st_mode & 0o777 == 0o600


def test_shards_behind_the_tls_front_refuse_to_start_without_the_plugin_or_with_a_long_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stack import paths
    from stack.launcher import Stack

    cfg = StackConfig(data_dir=tmp_path, mqtt_port=21883, mqtt_tls_port=28883, mqtt_shards=2)
    monkeypatch.setattr(paths, "front_auth_plugin", lambda: tmp_path / "missing.so")
    with pytest.raises(StackError, match=r"missing.so not built .* \(or add --no-mqtt-tls\)"):
        Stack(cfg).mqtt_shards[0].render_config()
    monkeypatch.undo()
    deep = tmp_path / ("d" * 100)
    long_cfg = StackConfig(data_dir=deep, mqtt_port=21883, mqtt_tls_port=28883, mqtt_shards=2)
    with pytest.raises(StackError, match=r"longer than 97 bytes .* use a shorter data_dir"):
        Stack(long_cfg).haproxy.render_config()


def test_reload_crl_without_a_running_listener_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["reload-crl", "--data-dir", str(tmp_path)]) == 1
    assert "Mosquitto is not running: it reads the CRL when it starts" in capsys.readouterr().err
    (tmp_path / "stack.json").write_text('{"mqtt_shards": "2"}')  # what `up --mqtt-shards 2` left
    assert cli.main(["reload-crl", "--data-dir", str(tmp_path)]) == 1
    assert "HAProxy is not running: it reads the CRL when it starts" in capsys.readouterr().err
