"""HTTP devices end to end: `iot-api` (registry auth) on the test Kafka, a real dynsec Mosquitto,
the registry with tenants default, acme (2 msgs/s) and beta, each with a device `pump-1`, and
the command path (`CommandService`) logged in as `svc/commands`; real HTTP over sockets."""

from __future__ import annotations

import concurrent.futures
import http.client
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import orjson
import paho.mqtt.client as paho
import pytest
from confluent_kafka import KafkaException, Producer

from bridge.topics import tenant_kafka_topic
from commands.client import CommandClient
from commands.config import CommandConfig
from commands.model import State
from commands.service import CommandService
from registry.model import Role
from tests.api.harness import Client, Reply, basic, running_api
from tests.bridge.helpers import Record, consume
from tests.bridge.test_tenants_integration import Fleet, fleet  # noqa: F401 - fixture
from tests.commands.harness import Records, forget_session, unique
from tests.conftest import Endpoints
from tests.registry.conftest import (  # noqa: F401 - fixtures used by `fleet`
    DynsecBroker,
    dynsec_broker,
    store_factory,
)
from tests.registry.mqtt_probe import Probe, wait_for

pytestmark = pytest.mark.integration


def reading(seq: int) -> bytes:
    return orjson.dumps({"ts": 1_700_000_000_000 + seq, "seq": seq, "metrics": {"t": 20.0 + seq}})


@dataclass
class Setup:
    fleet: Fleet
    api: Client  # no credentials: each call gives its own
    port: int
    bootstrap: str
    topics: dict[str, str]
    commands: tuple[CommandConfig, CommandClient, Records]

    def device(self, user: str, secret: str | None = None) -> Client:
        return Client(
            self.port, basic(user, secret or self.fleet.secrets[user.split("@", maxsplit=1)[0]])
        )

    def metric(self, name: str) -> float:
        text = self.api.request("GET", "/metrics").body.decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0


@pytest.fixture(scope="module")
def transactions_ready(stack: Endpoints) -> None:
    """The registry writes in transactions: on a Kafka just started (this module first in the
    session) the transaction coordinator takes a while to load on a busy machine, longer than
    a registry writer waits. Wait for it once here (a real init_transactions, bounded)."""
    deadline = time.monotonic() + 180
    while True:
        producer = Producer(
            {"bootstrap.servers": stack.kafka_bootstrap, "transactional.id": unique("warm")}
        )
        try:
            producer.init_transactions(30)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.fixture
def setup(
    transactions_ready: None,
    fleet: Fleet,  # noqa: F811
    dynsec_broker: DynsecBroker,  # noqa: F811
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
) -> Iterator[Setup]:
    reg = fleet.registry
    commands_secret = reg.create_account("commands", [Role.COMMANDS]).secret
    api_secret = reg.create_account("api-devices", [Role.API]).secret
    assert commands_secret is not None
    assert api_secret is not None
    bootstrap = fleet.store.bootstrap
    cfg = CommandConfig(
        mqtt_port=dynsec_broker.port,
        mqtt_host="127.0.0.1",
        mqtt_username="svc/commands",
        mqtt_password=commands_secret,
        kafka_bootstrap=bootstrap,
        topic_commands=topic_factory("cmd", partitions=2),
        topic_command_status=topic_factory("cmdstatus", partitions=2, compacted=True),
        topic_command_replies=topic_factory("cmdreplies", partitions=2),
        topic_commands_dlq=topic_factory("cmddlq", partitions=1),
        command_group_id=group_factory(),
        command_mqtt_client_id=unique("cmd-path"),
        command_timeout_ms=30000,
        command_max_attempts=2,
        http_port=0,
    )
    service = CommandService(cfg)
    service.start()
    client = CommandClient(
        bootstrap,
        topic_commands=cfg.topic_commands,
        topic_status=cfg.topic_command_status,
        topic_replies=cfg.topic_command_replies,
    )
    records = Records(bootstrap, [cfg.topic_command_status, cfg.topic_command_replies])
    topics = {
        "topic_telemetry": topic_factory("httptel", partitions=3),
        "topic_events": topic_factory("httpev", partitions=3),
        "topic_dlq": topic_factory("httpdlq", partitions=1),
    }
    try:
        with running_api(
            kafka_bootstrap=bootstrap,
            registry_auth=True,
            registry_topic=fleet.store.topic,
            mqtt_host="127.0.0.1",
            mqtt_port=dynsec_broker.port,
            mqtt_username="svc/api-devices",
            mqtt_password=api_secret,
            device_ttd_max_s=20,
            **topics,
        ) as api:
            yield Setup(fleet, Client(api.port), api.port, bootstrap, topics,
                        (cfg, client, records))  # fmt: skip
    finally:
        records.close()
        client.close()
        service.stop(10.0)
        assert service.failure is None, repr(service.failure)
        forget_session("127.0.0.1", dynsec_broker.port, cfg.command_mqtt_client_id)
        for user in ("pump-1", "acme/pump-1", "beta/pump-1"):
            forget_session("127.0.0.1", dynsec_broker.port, f"iot-api/{user}")


def _read(setup: Setup, topic: str, count: int) -> list[Record]:
    found = consume(setup.bootstrap, [topic], until=lambda rs: len(rs) >= count, timeout=60)
    return sorted(found, key=lambda r: (r.partition, r.offset))


def test_telemetry_lands_keyed_by_device_in_order_with_the_bridges_headers(setup: Setup) -> None:
    dev = setup.device("pump-1")
    for seq in range(20):
        reply = dev.request("POST", "/telemetry", reading(seq), "application/json")
        assert reply.status == 202, reply.body
    tel = setup.topics["topic_telemetry"]
    records = _read(setup, tel, 20)
    assert len(records) == 20
    assert {r.key for r in records} == {b"pump-1"}
    assert len({r.partition for r in records}) == 1  # one key, one partition: in order
    assert [r.json()["seq"] for r in records] == list(range(20))
    assert [r.value for r in records] == [reading(s) for s in range(20)]  # bytes as sent
    headers = records[0].headers
    assert headers["mqtt_topic"] == b"devices/pump-1/telemetry"
    assert headers["qos"] == b"1"
    assert headers["orig_adapter"] == b"http"
    assert "tenant" not in headers  # the default tenant's records carry none, as the bridge's
    assert abs(int(headers["received_at"]) - time.time() * 1000) < 120_000

    # Hono's user@tenant spelling, an event: beta's own events topic, with the tenant header
    beta = setup.device("pump-1@beta", setup.fleet.secrets["beta/pump-1"])
    event = orjson.dumps({"ts": 1, "seq": 0, "type": "door-open"})
    assert beta.request("POST", "/event", event, "application/json").status == 202
    (rec,) = _read(setup, tenant_kafka_topic(setup.topics["topic_events"], "beta"), 1)
    assert (rec.key, rec.value) == (b"pump-1", event)
    assert rec.headers["tenant"] == b"beta"
    assert rec.headers["mqtt_topic"] == b"tenants/beta/devices/pump-1/events"


def test_bad_payloads_are_coded_and_dead_lettered_as_the_bridge_does(setup: Setup) -> None:
    dev = setup.device("pump-1")
    cases = [
        (b"{not json", "not_json"),
        (b'{"ts": 1, "seq": 0}', "missing_field"),
        (b'{"ts": 1, "seq": 0, "metrics": {"t": "hot"}}', "wrong_type"),
        (b'{"ts": 1, "seq": 0, "metrics": {}, "device_id": "other"}', "device_mismatch"),
        (b"[1, 2]", "not_object"),
    ]
    for body, code in cases:
        reply = dev.request("POST", "/telemetry", body, "application/json")
        assert reply.status == 400, (body, reply.status)
        assert reply.json()["error"] == code
    big = orjson.dumps({"ts": 1, "seq": 0, "metrics": {"x": 1}, "pad": "x" * 70_000})
    reply = dev.request("POST", "/telemetry", big, "application/json")
    assert (reply.status, reply.json()["error"]) == (413, "oversized")
    dlq = _read(setup, setup.topics["topic_dlq"], len(cases) + 1)
    assert [r.headers["error"].decode() for r in dlq] == [c for _, c in cases] + ["oversized"]
    assert [r.value for r in dlq] == [b for b, _ in cases] + [big]  # original bytes
    for r in dlq:
        assert r.key == b"pump-1"
        assert r.headers["mqtt_topic"] == b"devices/pump-1/telemetry"
        assert r.headers["orig_adapter"] == b"http"
        assert r.headers["error_detail"]
    assert consume(setup.bootstrap, [setup.topics["topic_telemetry"]], until=lambda _: False,
                   timeout=2) == []  # fmt: skip


def test_credentials_and_whose_device(setup: Setup) -> None:
    secrets = setup.fleet.secrets
    body = reading(0)

    def post(client: Client, path: str = "/telemetry", method: str = "POST") -> Reply:
        return client.request(method, path, body, "application/json")

    assert post(setup.api).status == 401  # no credentials
    assert post(setup.device("pump-1", "wrong-secret")).status == 401
    assert post(setup.device("acme/pump-1", secrets["beta/pump-1"])).status == 401
    assert post(setup.device("nobody", secrets["pump-1"])).status == 401
    assert post(setup.device("svc/commands", secrets["pump-1"])).status == 401
    refused = post(setup.device("pump-1", "wrong"))
    assert refused.json()["error"] == "unauthorized"
    assert "WWW-Authenticate" in refused.headers

    beta = setup.device("beta/pump-1")
    assert post(beta, "/telemetry/beta/pump-1", "PUT").status == 202  # itself
    other_tenant = post(beta, "/telemetry/acme/pump-1", "PUT")  # same id, another tenant
    assert (other_tenant.status, other_tenant.json()["error"]) == (403, "forbidden")
    assert post(beta, "/telemetry/default/pump-1", "PUT").status == 403
    assert post(beta, "/event/beta/pump-2", "PUT").status == 403  # another device
    assert post(beta, "/command/res/beta/pump-2/c-1", "PUT").status == 403
    # only beta's one accepted record is in its topic; nothing reached acme's or default's
    tel = setup.topics["topic_telemetry"]
    assert len(_read(setup, tenant_kafka_topic(tel, "beta"), 1)) == 1
    assert consume(setup.bootstrap, [tel], until=lambda _: False, timeout=2) == []


def test_quota_applies_as_on_mqtt(setup: Setup) -> None:
    acme = setup.device("acme/pump-1")  # 2 msgs/s: a burst of 8 goes over it
    answers = [acme.request("POST", "/telemetry", reading(s), "application/json") for s in range(8)]
    statuses = [a.status for a in answers]
    over = [a for a in answers if a.status == 429]
    assert over, statuses
    assert statuses.count(202) >= 2, statuses
    assert {a.json()["error"] for a in over} == {"quota_exceeded"}
    dlq = _read(setup, tenant_kafka_topic(setup.topics["topic_dlq"], "acme"), len(over))
    assert len(dlq) == len(over)
    assert {r.headers["error"] for r in dlq} == {b"quota_exceeded"}
    assert {r.headers["tenant"] for r in dlq} == {b"acme"}


def _wait_until_waiting(setup: Setup, count: int) -> None:
    wait_for(lambda: setup.metric("iot_api_device_waiting") == count, 30)


def test_a_command_is_delivered_in_a_waiting_request_and_its_reply_closes_it(
    setup: Setup,
) -> None:
    cfg, commands, records = setup.commands
    beta = setup.device("beta/pump-1")

    def final(cid: str) -> State | None:
        finals = [s for s in records.statuses(cfg.topic_command_status, cid) if s.final]
        return finals[-1].state if finals else None

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # an empty notification: no record, only the wait (Hono's way to poll for commands)
        waiting = pool.submit(beta.request, "POST", "/telemetry", b"", None, {"hono-ttd": "20"})
        _wait_until_waiting(setup, 1)
        cid = commands.send("pump-1", "reboot", {"delay": 3}, tenant="beta")
        answer = waiting.result(60)
    assert answer.status == 200, answer.body
    assert answer.headers["hono-command"] == "reboot"
    assert answer.headers["hono-cmd-req-id"] == cid
    assert answer.headers["iot-cmd-topic"] == "tenants/beta/devices/pump-1/commands/reboot"
    assert answer.json() == {"delay": 3, "command_id": cid}

    reply = beta.request("POST", f"/command/res/{cid}", b'{"status": "ok", "result": "done"}',
                         "application/json")  # fmt: skip
    assert reply.status == 202, reply.body
    records.wait(lambda: final(cid) is State.SUCCEEDED, 30, "the command succeeded")

    def answers() -> list[dict[str, object]]:
        return [r for r in records.values(cfg.topic_command_replies) if r["command_id"] == cid]

    records.wait(lambda: len(answers()) == 1, 30, "the reply recorded")
    assert [(a["tenant"], a["match"], a["result"]) for a in answers()] == [
        ("beta", "matched", "done")
    ]

    # a command sent while no request waits is kept (the device's MQTT session holds it) and
    # handed to the next request that waits; Hono's status header makes the reply an error
    later = commands.send("pump-1", "calibrate", tenant="beta")
    records.wait(
        lambda: any(s.state is State.DELIVERED for s in records.statuses(
            cfg.topic_command_status, later)), 30, "the second command delivered to the session",
    )  # fmt: skip
    answer = beta.request("POST", "/telemetry", reading(1), "application/json",
                          {"hono-ttd": "10"})  # fmt: skip
    assert (answer.status, answer.headers["hono-cmd-req-id"]) == (200, later)
    reply = beta.request("PUT", f"/command/res/beta/pump-1/{later}", b'"no sensor"',
                         "application/json", {"hono-cmd-status": "500"})  # fmt: skip
    assert reply.status == 202
    records.wait(lambda: final(later) is State.FAILED, 30, "the second command failed")
    # nothing more waits: a poll with a short ttd answers 202 without a command
    empty = beta.request("POST", "/telemetry", b"", None, {"hono-ttd": "1"})
    assert (empty.status, empty.body) == (202, b"")
    assert setup.metric('iot_api_device_commands_total{outcome="delivered"}') == 2


def _slow_upload(port: int, user: str, secret: str, body: bytes) -> Callable[[], Reply]:
    """A telemetry POST whose headers and first half of the body are sent now; the returned
    call sends the rest and reads the answer (an upload in flight meanwhile)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        "POST /telemetry HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: {basic(user, secret)}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    half = len(body) // 2
    sock.sendall(head.encode() + body[:half])

    def finish() -> Reply:
        try:
            sock.sendall(body[half:])
            response = http.client.HTTPResponse(sock)
            response.begin()
            return Reply(response.status, dict(response.getheaders()), response.read())
        finally:
            sock.close()

    return finish


def test_a_disabled_device_is_refused_from_the_moment_the_command_returns(
    setup: Setup,
    dynsec_broker: DynsecBroker,  # noqa: F811
) -> None:
    """Issue 37: a device with an open MQTT session, an upload in flight and a request waiting
    for a command; `device disable` returns; from then on all three are refused: the session
    is gone and what it sends reaches nobody, the upload answers 401 and writes no record, the
    waiting request gets 401 and not the command sent to it (kept in its session)."""
    _cfg, commands, _records = setup.commands
    reg = setup.fleet.registry
    secret = reg.add_device("default", "gone-1").secret
    marker_secret = reg.add_device("default", "marker-1").secret
    assert secret is not None
    assert marker_secret is not None
    reader = Probe(dynsec_broker.port, "svc/bridge", setup.fleet.bridge_secret)
    mqtt_dev = Probe(dynsec_broker.port, "gone-1", secret)
    marker = Probe(dynsec_broker.port, "marker-1", marker_secret)
    try:
        assert reader.subscribe("devices/+/telemetry").value == 1  # granted QoS 1
        assert mqtt_dev.publish("devices/gone-1/telemetry", reading(0)).value == 0  # allowed
        dev = setup.device("gone-1", secret)
        assert dev.request("POST", "/telemetry", reading(1), "application/json").status == 202
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(dev.request, "POST", "/telemetry", b"", None, {"hono-ttd": "20"})
            _wait_until_waiting(setup, 1)
            upload = _slow_upload(setup.port, "gone-1", secret, reading(2))

            reg.set_device_disabled("default", "gone-1", True)  # the command returns here

            late = mqtt_dev.client.publish("devices/gone-1/telemetry", reading(3), qos=1)
            assert upload().status == 401
            cid = commands.send("gone-1", "reboot")
            answer = waiting.result(60)
        assert answer.status == 401, (answer.status, answer.headers)
        assert "hono-cmd-req-id" not in answer.headers
        assert dev.request("POST", "/telemetry", reading(4), "application/json").status == 401
        assert mqtt_dev.wait_gone(10), "the device's MQTT session was not dropped"
        # not even sent (paho saw the DISCONNECT first), or sent and never acknowledged
        acked = late.rc == paho.MQTT_ERR_SUCCESS and late.is_published()
        assert not acked, "Mosquitto acknowledged a publish of a disabled device"
        # what each door let through, up to a marker sent after everything above
        assert marker.publish("devices/marker-1/telemetry", reading(9)).value == 0
        assert wait_for(lambda: "devices/marker-1/telemetry" in [t for t, _ in reader.messages])
        topic_seen = [t for t, _ in reader.messages]
        assert topic_seen.count("devices/gone-1/telemetry") == 1, topic_seen  # reading(0) only
        mark = setup.device("marker-1", marker_secret)
        assert mark.request("POST", "/telemetry", reading(9), "application/json").status == 202
        found = consume(
            setup.bootstrap, [setup.topics["topic_telemetry"]],
            until=lambda rs: any(r.key == b"marker-1" for r in rs), timeout=60,
        )  # fmt: skip
        assert [r.value for r in found if r.key == b"gone-1"] == [reading(1)]
        assert cid  # sent: the device's session keeps it, no request of a disabled device gets it
    finally:
        for probe in (reader, mqtt_dev, marker):
            probe.close()
        forget_session("127.0.0.1", dynsec_broker.port, "iot-api/gone-1")
