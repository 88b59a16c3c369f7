"""docker-compose.yml run for real (issue 33): the image built from the Dockerfile, the stack
brought up by docker-compose on a real engine, used as a device, an MR client and an operator
would, and taken down again without a trace. tests/test_compose.py checks the same files
statically; this module is what caught the three bugs those checks could not see.

Runs with `pytest --containers` (`make test-containers`, after `.ci/containers`): see
tests/plugins/containers.py. The published ports are remapped to free loopback ports in a
derived copy of the compose file (Debian's compose v1 concatenates `ports` of override files).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml

from stack.ports import free_ports
from tests.commands.harness import Device, wait_for
from tests.compose_hostloss import DeviceLoad, Probe, lost_and_duplicates, wait_until
from tests.plugins.containers import IMAGE, ROOT, engine_env, record_count, record_time
from tests.plugins.jvm_options import jvm_settings
from tests.plugins.mqtt_logins import MqttLogin, register

pytestmark = [
    pytest.mark.containers,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
]

UP_TIMEOUT_S = 600.0  # cold JVMs at load 10+: Kafka, then Spark, ~1-2 min on a quiet box
DEVICE = "dev-00001"  # one of auth-init's 200 devices, with its own secret


def _poll(predicate: Callable[[], bool], timeout: float, what: str, every: float) -> None:
    """`wait_for` for checks that cost a docker exec or an engine query: every ``every`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def derive(compose: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, int], int]]:
    """``compose`` with every published port on a free loopback port of this host instead:
    (the copy, {(service, container port): host port}). The appliance's services get the
    tests' JVM options (tests/plugins/jvm_options.py), as the local tier's servers do: they
    change what the containers' Kafka nodes and Spark driver cost, not what they do (the
    file's own value of one, if it ever sets one, wins)."""
    out = json.loads(json.dumps(compose))  # a deep copy, the YAML merges already applied
    # All the file's ports at once, distinct and from the run's pool (stack/ports.py): one
    # free port at a time, each socket closed before the next bind, once gave two services
    # the same port (CI 2026-12-08: "Bind for 127.0.0.1:36939 failed: port is already
    # allocated", the kafka3 stack's `up` refused).
    wanted = sum(len(s.get("ports") or []) for s in out["services"].values())
    free = iter(free_ports(wanted))
    published: dict[tuple[str, int], int] = {}
    for name, service in out["services"].items():
        service.pop("build", None)  # the image is built by the `app_image` fixture
        if "image" in service:
            service["image"] = IMAGE  # its tag (IOT_CONTAINER_IMAGE)
            # `config` gives every service's environment as a map, whatever the file wrote
            service["environment"] = jvm_settings() | (service.get("environment") or {})
        mapped = []
        for spec in service.get("ports") or []:  # "H:C" as written, {target: C} from `config`
            inner = int(spec["target"] if isinstance(spec, dict) else str(spec).split(":")[-1])
            published[name, inner] = port = next(free)
            mapped.append(f"127.0.0.1:{port}:{inner}")
        if mapped:
            service["ports"] = mapped
    return out, published


@dataclass
class Compose:
    """One docker-compose project of the derived file."""

    project: str
    file: Path
    ports: dict[tuple[str, int], int]
    variant: str
    down_done: bool = False
    logs: list[str] = field(default_factory=list)

    def run(self, *args: str, timeout: float = 300.0, check: bool = True) -> str:
        cmd = [_compose_bin(), "-p", self.project, "-f", str(self.file), *args]
        done = subprocess.run(
            cmd, env=engine_env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}"
                f"\n{done.stderr[-3000:]}\n{self.tail_logs()}"
            )
        return done.stdout

    def exec(self, service: str, *cmd: str, timeout: float = 120.0) -> str:
        return self.run("exec", "-T", service, *cmd, timeout=timeout)

    def url(self, service: str, port: int, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[service, port]}{path}"

    def tail_logs(self, *services: str, lines: int = 30) -> str:
        done = subprocess.run(
            [_compose_bin(), "-p", self.project, "-f", str(self.file), "logs", "--tail",
             str(lines), *services],
            env=engine_env(), capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout[-6000:]

    def down(self) -> None:
        if not self.down_done:
            self.run("down", "-v", "--remove-orphans", "--timeout", "20")
            self.down_done = True


def _compose_bin() -> str:
    found = shutil.which("docker-compose")
    if found is None:
        pytest.fail("no docker-compose: run `make containers` (.ci/containers)")
    return found


def _http(
    url: str,
    *,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)
    except (urllib.error.URLError, http.client.HTTPException, OSError):
        return 0, b"", {}  # not listening yet (docker-proxy accepts, then closes)


def _basic(user: str, secret: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _wait_for_marker(url: str, admin: tuple[str, str], marker: str, what: str) -> None:
    """Reads the MR consumer at ``url`` (as ``admin``) until a message with ``marker`` came."""
    seen: list[str] = []

    def arrived() -> bool:
        status, body, _ = _http(url, headers=_basic(*admin))
        assert status == 200, body
        seen.extend(json.loads(body))
        return any(marker in m for m in seen)

    wait_for(arrived, 120, what)


def _healthy(engine: Any, compose: Compose) -> bool:
    """Every long-running service healthy (the analytics job, which has no health check in the
    compose file, ready on /readyz) and both one-shots exited 0."""
    label = f"com.docker.compose.project={compose.project}"
    states: dict[str, str] = {}
    for c in engine.containers.list(all=True, filters={"label": label}):
        state = c.attrs["State"]
        service = c.labels["com.docker.compose.service"]
        if "Health" in state:
            states[service] = state["Health"]["Status"]
        elif state["Status"] == "exited":
            states[service] = f"exited {state['ExitCode']}"
        else:
            states[service] = state["Status"]
    for one_shot in ("topic-init", "auth-init"):
        if states.get(one_shot, "").startswith("exited") and states[one_shot] != "exited 0":
            raise AssertionError(f"{one_shot} failed: {states}\n{compose.tail_logs()}")
    want = {"mosquitto", "kafka", "bridge", "commands", "api", "amqp", "analytics", "topic-init"}
    if compose.variant == "kafka3":
        want |= {"kafka-2", "kafka-3"}
    if not want <= states.keys():
        return False
    waiting = [s for s, v in states.items() if v not in ("healthy", "exited 0", "running")]
    if waiting:
        return False
    status, _, _ = _http(compose.url("analytics", 9102, "/readyz"))
    return status == 200


# the single broker, and the 3-node overlay merged over it (`docker-compose config` merges)
FILES = {
    "single": ("docker-compose.yml",),
    "kafka3": ("docker-compose.yml", "docker-compose.kafka3.yml"),
}


def _merged(files: tuple[str, ...]) -> dict[str, Any]:
    args = [a for f in files for a in ("-f", str(ROOT / f))]
    done = subprocess.run(
        [_compose_bin(), *args, "config"], env=engine_env(), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    merged = yaml.safe_load(done.stdout)
    assert isinstance(merged, dict)
    return merged


@pytest.fixture(scope="module", params=list(FILES))
def compose_stack(
    request: pytest.FixtureRequest,
    container_engine: Any,
    app_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Compose]:
    variant = str(request.param)
    derived, ports = derive(_merged(FILES[variant]))
    folder = tmp_path_factory.mktemp("compose")
    file = folder / "docker-compose.yml"
    file.write_text(yaml.safe_dump(derived, sort_keys=False))
    compose = Compose(f"iottest{uuid.uuid4().hex[:8]}", file, ports, variant)
    started = time.monotonic()
    try:
        compose.run("up", "-d", "--no-build", timeout=UP_TIMEOUT_S)
        record_time(f"{variant}: compose up -d", time.monotonic() - started)
        _poll(lambda: _healthy(container_engine, compose), UP_TIMEOUT_S, "a healthy stack", 1.0)
        record_time(f"{variant}: compose up to healthy", time.monotonic() - started)
        yield compose
    finally:
        compose.down()


def test_every_service_comes_up_healthy(compose_stack: Compose) -> None:
    for service, port in (("bridge", 9100), ("commands", 9101), ("api", 3904), ("amqp", 9106)):
        status, _, _ = _http(compose_stack.url(service, port, "/readyz"))
        assert status == 200, service
    if compose_stack.variant == "kafka3":  # three brokers, the telemetry topic on all three
        probe = (  # as iot-api's own principal: Kafka answers SASL_SSL only (issue 33)
            "import os; from confluent_kafka.admin import AdminClient; "
            "from appconfig.kafka_security import client_security; e = os.environ; "
            "sec = client_security(e['IOT_KAFKA_SECURITY_PROTOCOL'], 'SCRAM-SHA-512', "
            "e['IOT_KAFKA_SASL_USERNAME'], e['IOT_KAFKA_SASL_PASSWORD_FILE'], "
            "e['IOT_KAFKA_SSL_CA_FILE']); "
            "md = AdminClient({'bootstrap.servers': 'kafka:9092', **sec}).list_topics(timeout=30); "
            "print(sorted(md.brokers), "
            "sorted(len(p.isrs) for p in md.topics['iot.telemetry'].partitions.values())[0])"
        )
        assert compose_stack.exec("api", "python", "-c", probe).strip() == "[1, 2, 3] 3"


@pytest.fixture(scope="module")
def device_login(compose_stack: Compose) -> MqttLogin:
    """auth-init's secret for ``DEVICE`` (the `secrets` volume, as `iot-sim run` reads it)."""
    secrets = json.loads(compose_stack.exec("bridge", "cat", "/secrets/devices.json"))
    return MqttLogin(DEVICE, secrets[DEVICE])


@pytest.fixture(scope="module")
def admin(compose_stack: Compose) -> tuple[str, str]:
    """An `admin` account made as an operator makes one (`iot-devices account create`, with
    the registry admin's secret from the `secrets` volume): (name, secret) for MR's Basic auth
    and the console."""
    name = f"ops{uuid.uuid4().hex[:6]}"
    out = compose_stack.exec(
        "api", "iot-devices", "--admin-password-file", "/secrets/registry-admin.secret",
        "account", "create", name, "--role", "admin",
    )  # fmt: skip
    secret = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("secret:"))
    return name, secret.strip()


def test_a_device_with_its_own_login_sends_telemetry_and_answers_a_command(
    compose_stack: Compose, device_login: MqttLogin, admin: tuple[str, str]
) -> None:
    mqtt_port = compose_stack.ports["mosquitto", 1883]
    register(mqtt_port, device_login)  # the harness' Device logs in with it
    group = f"g{uuid.uuid4().hex[:8]}"
    telemetry = compose_stack.url("api", 3904, f"/events/iot.telemetry/{group}/c1?timeout=2000")
    status, body, _ = _http(telemetry, headers=_basic(*admin))  # the group starts at the end
    assert status == 200, body
    device = Device(DEVICE, "127.0.0.1", mqtt_port).connect(timeout=30)
    try:
        marker = uuid.uuid4().hex
        assert device._client is not None
        info = device._client.publish(
            f"devices/{DEVICE}/telemetry",
            json.dumps({"ts": int(time.time() * 1000), "seq": 1, "metrics": {"t": 21.5},
                        "marker": marker}),
            qos=1,
        )  # fmt: skip
        info.wait_for_publish(30)
        assert info.is_published()
        # the bridge put it on Kafka: read it back through iot-api's MR consumer (as admin)
        _wait_for_marker(telemetry, admin, marker, "the device's telemetry on iot.telemetry")
        # a command, sent from inside the stack as an operator does, answered by the device
        out = compose_stack.exec(
            "commands", "iot-cmd", "send", DEVICE, "reboot", "--args", '{"a": 2, "b": 3}',
            "--timeout", "30", "--wait", timeout=120,
        )  # fmt: skip
        assert [c.args.get("a") for c in device.commands()] == [2]
        assert "succeeded" in out.lower(), out
    finally:
        device.disconnect()


def _issue_certificate(
    compose_stack: Compose, container_engine: Any, device_id: str, into: Path
) -> None:
    """A device certificate issued as an operator issues one (`iot-devices cert` in the
    mosquitto container, which holds the CA): ``into``/ca.crt, dev.crt and dev.key."""
    mosquitto = Probe(container_engine, compose_stack.project, "").container("mosquitto")
    # docker exec through the engine's API: stdout apart from stderr (the key's notice)
    code, (out, err) = mosquitto.exec_run([
        "iot-devices", "--kafka-bootstrap", "kafka:9092",
        "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-username", "api",
        "--kafka-sasl-password-file", "/secrets/kafka/api.secret",
        "--kafka-ssl-ca-file", "/ca/ca.crt", "--admin-password-file",
        "/secrets/registry-admin.secret", "--ca-dir", "/ca", "--json", "cert", device_id,
    ], demux=True)  # fmt: skip
    assert code == 0, (out or b"").decode() + (err or b"").decode()
    issued = json.loads(out)
    (into / "ca.crt").write_bytes(mosquitto.exec_run(["cat", "/ca/ca.crt"])[1])
    (into / "dev.key").write_text(issued["key_pem"])
    (into / "dev.crt").write_text(issued["cert_pem"])


def test_a_device_with_a_certificate_sends_telemetry_over_tls(
    compose_stack: Compose, container_engine: Any, admin: tuple[str, str], tmp_path: Path
) -> None:
    """Mosquitto's published TLS port (8883, mutual TLS, the appliance CA in the `ca` volume,
    as `iot-stack up` opens it): a certificate issued as an operator issues one (`iot-devices
    cert` in the mosquitto container, which holds the CA), a device that logs in with it alone
    (no secret), checking the server's certificate against the CA, its telemetry on Kafka."""
    device_id = f"tls-{uuid.uuid4().hex[:8]}"
    _issue_certificate(compose_stack, container_engine, device_id, tmp_path)
    group = f"g{uuid.uuid4().hex[:8]}"
    telemetry = compose_stack.url("api", 3904, f"/events/iot.telemetry/{group}/c1?timeout=2000")
    assert _http(telemetry, headers=_basic(*admin))[0] == 200  # the group starts at the end
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=device_id, protocol=mqtt.MQTTv5
    )
    client.tls_set(str(tmp_path / "ca.crt"), str(tmp_path / "dev.crt"), str(tmp_path / "dev.key"))
    client.connect("127.0.0.1", compose_stack.ports["mosquitto", 8883])  # in the server's SAN
    client.loop_start()
    try:
        wait_for(client.is_connected, 30, "the TLS connection")
        marker = uuid.uuid4().hex
        doc = {"ts": int(time.time() * 1000), "seq": 1, "metrics": {"t": 1.0}, "marker": marker}
        info = client.publish(f"devices/{device_id}/telemetry", json.dumps(doc), qos=1)
        info.wait_for_publish(30)
        assert info.is_published()
        _wait_for_marker(telemetry, admin, marker, "the TLS device's telemetry on iot.telemetry")
    finally:
        client.disconnect()
        client.loop_stop()


def test_a_device_with_its_own_login_sends_telemetry_over_amqp(
    compose_stack: Compose, device_login: MqttLogin, admin: tuple[str, str]
) -> None:
    """iot-amqp's published 5672 (issue 34): auth-init's device logs in with its own secret
    (SASL PLAIN against the registry, python-qpid-proton's client as tests/amqp use), sends
    a reading unsettled to `telemetry`; accepted means Kafka acknowledged it, and it is on
    iot.telemetry, read back through iot-api's MR consumer. A wrong secret is refused."""
    from proton import ConnectionException, Delivery, Message
    from proton.utils import BlockingConnection

    url = f"amqp://127.0.0.1:{compose_stack.ports['amqp', 5672]}"
    group = f"g{uuid.uuid4().hex[:8]}"
    telemetry = compose_stack.url("api", 3904, f"/events/iot.telemetry/{group}/c1?timeout=2000")
    assert _http(telemetry, headers=_basic(*admin))[0] == 200  # the group starts at the end
    with pytest.raises(ConnectionException, match="Authentication failed"):
        BlockingConnection(url, timeout=30, user=DEVICE, password="wrong", allowed_mechs="PLAIN")
    conn = BlockingConnection(
        url, timeout=30, user=device_login.username, password=device_login.password,
        allowed_mechs="PLAIN",
    )  # fmt: skip
    try:
        marker = uuid.uuid4().hex
        doc = {"ts": int(time.time() * 1000), "seq": 1, "metrics": {"t": 3.0}, "marker": marker}
        sender = conn.create_sender("telemetry")  # unsettled: the blocking send waits for it
        dlv = sender.send(Message(body=json.dumps(doc).encode(), inferred=True), timeout=60)
        assert dlv.remote_state == Delivery.ACCEPTED  # Kafka acknowledged it
    finally:
        conn.close()
    _wait_for_marker(telemetry, admin, marker, "the AMQP device's telemetry on iot.telemetry")


def test_a_device_with_a_certificate_sends_telemetry_over_amqps(
    compose_stack: Compose, container_engine: Any, admin: tuple[str, str], tmp_path: Path
) -> None:
    """iot-amqp's published 5671 (TLS, the server certificate of the `ca` volume, which names
    127.0.0.1): a device logs in with its certificate alone (SASL EXTERNAL, the fingerprint
    the registry holds), checking the server against the CA; its reading is accepted and on
    iot.telemetry. Without a certificate EXTERNAL is refused."""
    from proton import ConnectionException, Delivery, Message, SSLDomain
    from proton.utils import BlockingConnection

    device_id = f"amqps-{uuid.uuid4().hex[:8]}"
    _issue_certificate(compose_stack, container_engine, device_id, tmp_path)
    url = f"amqps://127.0.0.1:{compose_stack.ports['amqp', 5671]}"

    def domain(with_cert: bool) -> SSLDomain:
        tls = SSLDomain(SSLDomain.MODE_CLIENT)
        tls.set_trusted_ca_db(str(tmp_path / "ca.crt"))
        tls.set_peer_authentication(SSLDomain.VERIFY_PEER)  # the IP SAN: no name check
        if with_cert:
            tls.set_credentials(str(tmp_path / "dev.crt"), str(tmp_path / "dev.key"), None)
        return tls

    with pytest.raises(ConnectionException):
        BlockingConnection(url, timeout=30, ssl_domain=domain(False), allowed_mechs="EXTERNAL")
    group = f"g{uuid.uuid4().hex[:8]}"
    telemetry = compose_stack.url("api", 3904, f"/events/iot.telemetry/{group}/c1?timeout=2000")
    assert _http(telemetry, headers=_basic(*admin))[0] == 200  # the group starts at the end
    marker = uuid.uuid4().hex
    doc = {"ts": int(time.time() * 1000), "seq": 1, "metrics": {"t": 4.0}, "marker": marker}
    accepted: list[Any] = []

    def send() -> bool:  # iot-amqp learns the new device's fingerprint from the registry topic
        try:
            conn = BlockingConnection(
                url, timeout=30, ssl_domain=domain(True), allowed_mechs="EXTERNAL"
            )
        except ConnectionException:
            return False
        try:
            sender = conn.create_sender("telemetry")
            dlv = sender.send(Message(body=json.dumps(doc).encode(), inferred=True), timeout=60)
            accepted.append(dlv.remote_state)
            return True
        except ConnectionException:  # TLS 1.3: a refused login shows at the first read
            return False
        finally:
            with contextlib.suppress(ConnectionException):
                conn.close()

    wait_for(send, 60, "an amqps log-in with the device's certificate")
    assert accepted == [Delivery.ACCEPTED]  # Kafka acknowledged it
    _wait_for_marker(telemetry, admin, marker, "the amqps device's telemetry on iot.telemetry")


def test_the_api_answers_over_tls(
    compose_stack: Compose, container_engine: Any, admin: tuple[str, str]
) -> None:
    """iot-api's published HTTPS port (3905): the server certificate checks against the
    appliance CA (for 127.0.0.1, as a client on the host dials it), an account logs in over
    it; plain HTTP on that port gets no answer."""
    mosquitto = Probe(container_engine, compose_stack.project, "").container("mosquitto")
    context = ssl.create_default_context(
        cadata=mosquitto.exec_run(["cat", "/ca/ca.crt"])[1].decode()
    )
    port = compose_stack.ports["api", 3905]
    request = urllib.request.Request(f"https://127.0.0.1:{port}/topics", headers=_basic(*admin))
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        assert answer.status == 200
        assert "iot.telemetry" in json.loads(answer.read())["topics"]
    assert _http(f"http://127.0.0.1:{port}/readyz")[0] != 200


def test_mr_publish_and_consume(compose_stack: Compose, admin: tuple[str, str]) -> None:
    auth = {**_basic(*admin), "Content-Type": "application/json"}
    topic = f"iot.default.compose{uuid.uuid4().hex[:6]}"
    status, body, _ = _http(
        compose_stack.url("api", 3904, "/topics/create"),
        data=json.dumps({"topicName": topic, "partitionCount": "1"}).encode(),
        headers=auth,
    )
    assert status == 200, body
    group = f"g{uuid.uuid4().hex[:8]}"
    consume = compose_stack.url("api", 3904, f"/events/{topic}/{group}/c1?timeout=2000")
    assert _http(consume, headers=auth)[0] == 200  # the group starts at the end: publish after
    status, body, _ = _http(
        compose_stack.url("api", 3904, f"/events/{topic}"),
        data=json.dumps([{"n": 1}, {"n": 2}]).encode(),
        headers=auth,
    )
    assert status == 200, body
    got: list[Any] = []

    def both() -> bool:
        status, body, _ = _http(consume, headers=auth)
        assert status == 200, body
        got.extend(json.loads(m) for m in json.loads(body))
        return len(got) >= 2

    wait_for(both, 60, "the two published messages")
    assert got == [{"n": 1}, {"n": 2}]


def test_console_login(compose_stack: Compose, admin: tuple[str, str]) -> None:
    origin = f"http://127.0.0.1:{compose_stack.ports['api', 3904]}"
    login = compose_stack.url("api", 3904, "/console/api/login")
    headers = {"Content-Type": "application/json", "Origin": origin}
    wrong = json.dumps({"name": admin[0], "secret": "wrong"}).encode()
    assert _http(login, data=wrong, headers=headers)[0] == 401
    body = json.dumps({"name": admin[0], "secret": admin[1]}).encode()
    status, answer, got = _http(login, data=body, headers=headers)
    assert status == 200, answer
    cookie = got["Set-Cookie"].split(";")[0]
    status, me, _ = _http(compose_stack.url("api", 3904, "/console/api/me"),
                          headers={"Cookie": cookie})  # fmt: skip
    assert status == 200, me
    assert json.loads(me)["name"] == admin[0]


def test_the_spark_job_writes_the_device_to_its_tables(compose_stack: Compose) -> None:
    """Depends on the telemetry test's message: ``DEVICE`` in the device_status table the
    streaming job writes to the warehouse volume, read as the console reads it."""
    read = (
        "import json, pathlib; from api.console.analytics import read_table; "
        "print(json.dumps(read_table(pathlib.Path('/warehouse/tables'), 'device_status', 500),"
        " default=str))"
    )
    rows: list[dict[str, Any]] = []

    def written() -> bool:
        table = json.loads(compose_stack.exec("api", "python", "-c", read))
        rows[:] = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
        return any(r.get("device_id") == DEVICE for r in rows)

    _poll(written, 300, f"{DEVICE} in the device_status table", 3.0)


# Host loss under load (issue 33 item 3). The network cut lasts IOT_HOSTLOSS_CUT_S seconds
# (60 by default, as the issue asks; shorter for a quicker run of the tier).
CUT_S = float(os.environ.get("IOT_HOSTLOSS_CUT_S", "60"))
LOAD = [f"dev-{n:05d}" for n in range(101, 107)]  # 6 of auth-init's devices, their own logins
LOAD_RATE = 5.0  # msg/s per device: 30 msg/s in all, QoS 1
GOES_ON = 50  # messages that must get through while a container is down or cut off
API_READY_S = 30.0  # issue 32's bound for every client path; a stalled event loop fails it


# Not `parametrize("compose_stack", ["kafka3"], indirect=True)`: pytest keys that override as a
# fixture instance of its own, so it brought a third stack up between the single file's tests
# and its `down` test, and a fourth (kafka3 again) after (~6 min of `make test-containers`).
# Here it runs on the kafka3 stack after that stack's other tests (definition order), which
# it heals again before `test_down_leaves_nothing_behind` takes it down.
def test_host_loss_under_load(compose_stack: Compose, container_engine: Any) -> None:
    """Under a light load from devices with their own logins: `docker kill` of a Kafka node
    (kafka-2) and then of the bridge, both started again as an operator does
    (`docker-compose start`: Docker counts a kill as a manual stop, so `restart:
    unless-stopped` does not bring them back); then a Kafka node (kafka-3) cut off its
    network for CUT_S seconds (`docker network disconnect`) and connected again. Each time
    the rest goes on (the bridge keeps writing to Kafka, Mosquitto keeps acknowledging the
    devices, iot-api answers ready within API_READY_S) and the lost one rejoins (back in
    every ISR of iot.telemetry, or ready); at the end every message Mosquitto acknowledged is
    in Kafka."""
    if compose_stack.variant != "kafka3":
        pytest.skip("host loss needs the kafka3 overlay's three Kafka hosts")
    secrets = json.loads(compose_stack.exec("api", "cat", "/secrets/devices.json"))
    probe = Probe(container_engine, compose_stack.project,
                  compose_stack.url("bridge", 9100, "/metrics"))  # fmt: skip
    mqtt_port = compose_stack.ports["mosquitto", 1883]
    figures: dict[str, float] = {}  # seconds

    def bridge_goes_on(what: str) -> float:
        start = probe.bridge_acked() or 0
        return wait_until(lambda: (probe.bridge_acked() or 0) >= start + GOES_ON, 180, what, 0.5)

    test_started = time.monotonic()
    load = DeviceLoad(mqtt_port, {d: secrets[d] for d in LOAD}, LOAD_RATE).start()
    cut: Any = None
    restarted = -1
    try:
        bridge_goes_on("the load through the bridge")
        probe.container("kafka-2").kill()
        figures["kafka-2 killed: bridge writes again after"] = bridge_goes_on(
            "the bridge writing with kafka-2 dead"
        )
        probe.container("bridge").kill()
        acked = load.acked_count()
        figures["bridge killed: devices acknowledged again after"] = wait_until(
            lambda: load.acked_count() >= acked + GOES_ON, 60, "Mosquitto acking with no bridge"
        )
        figures["bridge killed: api ready after"] = _api_ready(compose_stack, "no bridge")
        restarted = sum(  # Docker's policy, for a container killed with `docker kill`
            probe.container(s).attrs["State"]["Running"] for s in ("kafka-2", "bridge")
        )
        started = time.monotonic()
        compose_stack.run("start", "kafka-2", "bridge")
        ready = compose_stack.url("bridge", 9100, "/readyz")
        figures["bridge ready after start"] = (
            time.monotonic()
            - started
            + wait_until(lambda: _http(ready)[0] == 200, 300, "the bridge ready again", 0.5)
        )
        figures["kafka-2 in every ISR after start"] = (
            time.monotonic()
            - started
            + wait_until(lambda: probe.in_every_isr(2), 400, "kafka-2 back in every ISR", 2.0)
        )
        cut = probe.container("kafka-3")
        network = probe.network()
        network.disconnect(cut)
        cut_at = time.monotonic()
        acked = load.acked_count()
        wait_until(lambda: load.acked_count() >= acked + GOES_ON, 60, "Mosquitto acking")
        # the cut lasts CUT_S, or until the bridge wrote through the other two nodes if later
        figures["kafka-3 cut: bridge writes again after"] = bridge_goes_on(
            "the bridge writing with kafka-3 cut off"
        )
        figures["kafka-3 cut: api ready after"] = _api_ready(compose_stack, "kafka-3 cut off")
        wait_until(lambda: time.monotonic() - cut_at >= CUT_S, CUT_S + 1, "the cut's end", 0.5)
        network.connect(cut, aliases=["kafka-3"])
        cut = None
        figures["kafka-3 in every ISR after reconnect"] = wait_until(
            lambda: probe.in_every_isr(3), 400, "kafka-3 back in every ISR", 2.0
        )
    finally:
        if cut is not None:  # a failure during the cut: leave the stack whole for `down`
            probe.network().connect(cut, aliases=["kafka-3"])
        acked_seqs = load.stop()
    stopped = time.monotonic()
    records: dict[str, list[int]] = {}

    def all_in_kafka() -> bool:
        records.update(probe.records(list(acked_seqs)))
        return lost_and_duplicates(acked_seqs, records)[0] == 0

    try:
        figures["every acknowledged message in Kafka after the load stopped"] = wait_until(
            all_in_kafka, 300, "every acknowledged message in iot.telemetry", 3.0
        )
    finally:
        lost, dups = lost_and_duplicates(acked_seqs, records)
        counts = {
            "acknowledged": sum(map(len, acked_seqs.values())),
            "lost": lost,
            "duplicates": dups,
            "restarted by the policy": restarted,
            "api restarts": probe.container("api").attrs["RestartCount"],  # a crash, if not 0
            "cut s": int(CUT_S),
        }
        figures["the whole test"] = time.monotonic() - test_started
        for what, value in figures.items():
            record_time(f"host loss: {what}", value)
        for what, count in counts.items():
            record_count(f"host loss: {what}", count)
        print(f"host loss: {figures} {counts}; the last failed probe: {probe.last_failure!r}")
    assert lost == 0, (
        f"{lost} acknowledged messages not in Kafka ({time.monotonic() - stopped:.0f} s)"
    )


def _api_ready(compose: Compose, what: str, within_s: float = API_READY_S) -> float:
    """iot-api answers /readyz 200 within ``within_s`` (each try bounded to 5 s): the seconds
    it took, or a failure with its log (where a stalled event loop shows its stack)."""
    url = compose.url("api", 3904, "/readyz")
    try:
        return wait_until(lambda: _http(url, timeout=5)[0] == 200, within_s, f"api ready, {what}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{compose.tail_logs('api', lines=80)}") from None


def test_down_leaves_nothing_behind(compose_stack: Compose, container_engine: Any) -> None:
    compose_stack.down()
    label = {"label": f"com.docker.compose.project={compose_stack.project}"}
    assert container_engine.containers.list(all=True, filters=label) == []
    assert container_engine.volumes.list(filters=label) == []
    assert container_engine.networks.list(filters=label) == []
    named = [v.name for v in container_engine.volumes.list()]
    assert not [n for n in named if n.startswith(compose_stack.project)]


# -- docker-compose.shards.yml: two Mosquitto shards behind HAProxy (issue 36 item 1) ---------
SHARD_FILES = ("docker-compose.yml", "docker-compose.shards.yml")
# what the shard test needs (their dependencies come along: the shards, Kafka, the one-shots);
# not iot-amqp or the Spark job, to keep the start short
SHARD_SERVICES = ("mosquitto", "bridge", "bridge-2", "commands", "commands-2", "api")
SHARD_LOAD_PER_SHARD = 3  # devices with their own logins on each shard
SHARD_LOAD_RATE = 5.0  # msg/s per device, QoS 1
SHARD_LOAD_S = 8.0


def _by_shard(devices: list[str], shards: int = 2) -> list[list[str]]:
    """auth-init's device ids grouped by the shard HAProxy sends them to (the launcher's hash)."""
    from bridge.shards import shard_of

    groups: list[list[str]] = [[] for _ in range(shards)]
    for device in devices:
        groups[shard_of(device, shards)].append(device)
    return groups


@pytest.fixture(scope="module")
def shard_stack(
    container_engine: Any, app_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Compose]:
    derived, ports = derive(_merged(SHARD_FILES))
    file = tmp_path_factory.mktemp("compose-shards") / "docker-compose.yml"
    file.write_text(yaml.safe_dump(derived, sort_keys=False))
    compose = Compose(f"iotshards{uuid.uuid4().hex[:8]}", file, ports, "shards")
    label = f"com.docker.compose.project={compose.project}"

    def healthy() -> bool:
        states = {}
        for c in container_engine.containers.list(all=True, filters={"label": label}):
            state = c.attrs["State"]
            states[c.labels["com.docker.compose.service"]] = (
                state["Health"]["Status"] if "Health" in state else
                f"exited {state['ExitCode']}" if state["Status"] == "exited" else state["Status"]
            )  # fmt: skip
        failed = {s: v for s, v in states.items() if v.startswith("exited") and v != "exited 0"}
        assert not failed, f"{failed}\n{compose.tail_logs()}"
        want = {*SHARD_SERVICES, "mqtt-shard-1", "mqtt-shard-2", "kafka", "auth-init"}
        return want <= states.keys() and all(v in ("healthy", "exited 0") for v in states.values())

    started = time.monotonic()
    try:
        compose.run("up", "-d", "--no-build", *SHARD_SERVICES, timeout=UP_TIMEOUT_S)
        record_time("shards: compose up -d", time.monotonic() - started)
        _poll(healthy, UP_TIMEOUT_S, "a healthy sharded stack", 1.0)
        record_time("shards: compose up to healthy", time.monotonic() - started)
        print(f"shards: healthy after {time.monotonic() - started:.1f} s, load {os.getloadavg()}")
        yield compose
    finally:
        compose.down()


def test_shards_devices_through_the_front_reach_kafka_in_order_and_take_commands(
    shard_stack: Compose, container_engine: Any
) -> None:
    """Devices with their own logins (auth-init's secrets, given to every shard), hashed
    across both shards, publish through HAProxy's 1883: each shard's bridge carries exactly
    its own devices' messages, and every acknowledged message is in iot.telemetry once, in
    order per device. Then a command reaches a device on each shard (the command path of
    that device's shard sends it), and a device with a certificate publishes through the TLS
    front (8883), which hands it to its shard's unix socket."""
    secrets = json.loads(shard_stack.exec("api", "cat", "/secrets/devices.json"))
    groups = _by_shard(sorted(secrets))
    load_ids = [d for g in groups for d in g[:SHARD_LOAD_PER_SHARD]]
    command_ids = [g[SHARD_LOAD_PER_SHARD] for g in groups]  # one more on each shard
    mqtt_port = shard_stack.ports["mosquitto", 1883]
    bridges = [Probe(container_engine, shard_stack.project, shard_stack.url(*b, "/metrics"))
               for b in (("bridge", 9100), ("bridge-2", 9100))]  # fmt: skip
    before = [b.bridge_acked() or 0 for b in bridges]
    load = DeviceLoad(mqtt_port, {d: secrets[d] for d in load_ids}, SHARD_LOAD_RATE).start()
    try:
        time.sleep(SHARD_LOAD_S)
    finally:
        acked = load.stop()
    assert all(acked[d] for d in load_ids), acked
    records: dict[str, list[int]] = {}

    def all_in_kafka() -> bool:
        records.update(bridges[0].records(load_ids))
        return lost_and_duplicates(acked, records)[0] == 0

    took = wait_until(all_in_kafka, 120, "every acknowledged message in iot.telemetry", 2.0)
    record_time("shards: load in Kafka after it stopped", took)
    record_count("shards: messages acknowledged", sum(map(len, acked.values())))
    for device in load_ids:  # once each, in the order sent
        assert records[device] == sorted(acked[device]), device
    for index, (probe, group) in enumerate(zip(bridges, groups, strict=True)):
        mine = sum(len(acked[d]) for d in group[:SHARD_LOAD_PER_SHARD])
        assert (probe.bridge_acked() or 0) - before[index] == mine, f"shard {index + 1}"
    _a_command_reaches_each_shard(shard_stack, mqtt_port, secrets, command_ids)
    _a_certificate_device_publishes_through_the_tls_front(shard_stack, container_engine, bridges[0])


def _a_command_reaches_each_shard(
    compose: Compose, mqtt_port: int, secrets: dict[str, str], devices: list[str]
) -> None:
    for n, device_id in enumerate(devices):
        register(mqtt_port, MqttLogin(device_id, secrets[device_id]))
        device = Device(device_id, "127.0.0.1", mqtt_port).connect(timeout=30)
        try:
            out = compose.exec(
                "commands", "iot-cmd", "send", device_id, "reboot", "--args",
                json.dumps({"a": n, "b": 1}), "--timeout", "30", "--wait", timeout=120,
            )  # fmt: skip
            assert "succeeded" in out.lower(), out
            assert [c.args.get("a") for c in device.commands()] == [n], device_id
        finally:
            device.disconnect()


def _a_certificate_device_publishes_through_the_tls_front(
    compose: Compose, container_engine: Any, probe: Probe
) -> None:
    """Then revoked (`iot-devices cert revoke`) and `iot-stack reload-crl` run in the front's
    container: HAProxy refuses the certificate from then on, without a restart."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"{compose.project}-tls"
    folder.mkdir(exist_ok=True)
    device_id = f"tls-{uuid.uuid4().hex[:8]}"
    port = compose.ports["mosquitto", 8883]
    try:
        # `iot-devices cert` in the front's container: the registry and every shard's dynsec
        _issue_certificate(compose, container_engine, device_id, folder)
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=device_id, protocol=mqtt.MQTTv5
        )
        client.tls_set(str(folder / "ca.crt"), str(folder / "dev.crt"), str(folder / "dev.key"))
        client.connect("127.0.0.1", port)
        client.loop_start()
        try:
            wait_for(client.is_connected, 30, "the TLS connection through HAProxy")
            for seq in range(3):
                doc = {"ts": int(time.time() * 1000), "seq": seq, "metrics": {"t": 1.0}}
                info = client.publish(f"devices/{device_id}/telemetry", json.dumps(doc), qos=1)
                info.wait_for_publish(30)
                assert info.is_published()
        finally:
            client.disconnect()
            client.loop_stop()
        seen: dict[str, list[int]] = {}
        wait_until(
            lambda: seen.update(probe.records([device_id])) or seen.get(device_id) == [0, 1, 2],
            120, "the TLS device's telemetry in iot.telemetry", 2.0,
        )  # fmt: skip
        front_id = probe.container("mosquitto").id
        assert _tls_logs_in(folder, device_id, port)  # the check below can tell
        compose.exec("mosquitto", "iot-devices", "--ca-dir", "/ca", "cert", "revoke", device_id)
        compose.exec("mosquitto", "iot-stack", "reload-crl")  # exits 0, or the run fails
        assert not _tls_logs_in(folder, device_id, port), "a revoked certificate logged in"
        assert probe.container("mosquitto").attrs["RestartCount"] == 0
        assert probe.container("mosquitto").id == front_id
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _tls_logs_in(folder: Path, device_id: str, port: int) -> bool:
    """Whether the certificate in ``folder`` gets a successful CONNACK through the TLS front
    (False: the handshake or the connection refused)."""
    answers: list[bool] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=device_id,
                         protocol=mqtt.MQTTv5)  # fmt: skip
    client.tls_set(str(folder / "ca.crt"), str(folder / "dev.crt"), str(folder / "dev.key"))
    client.on_connect = lambda _c, _u, _f, reason, _p: answers.append(not reason.is_failure)
    client.on_disconnect = lambda *_args: answers.append(False)
    try:
        client.connect("127.0.0.1", port)
    except (OSError, ssl.SSLError):
        return False
    client.loop_start()
    try:
        wait_for(lambda: bool(answers), 30, "the TLS front's answer")
    finally:
        client.disconnect()
        client.loop_stop()
    return answers[0]
