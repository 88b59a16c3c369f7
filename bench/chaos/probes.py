"""Every client path of the appliance, asked once (an adapter per door): each probe answers
None when its path works end to end, else a short error. The chaos run asks them after each
fault until all answer; the fault tests of `make test` assert the same."""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from bench.chaos.clients import Http, basic, describe
from bench.chaos.stack import ChaosStack

log = logging.getLogger(__name__)
Probe = Callable[[ChaosStack], "str | None"]
MR_TOPIC = "chaos.probe"
QUEUE = "chaos-probe-q"
CONSOLE_PAGES = ("overview", "devices", "commands", "topics", "dead-letters")  # an operator's


def _api(stack: ChaosStack) -> Http:
    return Http(stack.api_url, basic(*stack.api_account))


def _ok(answer: tuple[int, bytes], *statuses: int) -> str | None:
    return None if answer[0] in statuses else describe(answer)


def mqtt_device(stack: ChaosStack) -> str | None:
    """A device with its own login publishes QoS 1 and the record is in iot.telemetry (the
    last but one device: the first ones may be `iot-sim run`'s, the last is the HTTP one)."""
    device, secret = list(stack.devices.items())[-2]
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        meta = consumer.list_topics("iot.telemetry", timeout=10).topics["iot.telemetry"]
        consumer.assign([TopicPartition("iot.telemetry", p, OFFSET_END) for p in meta.partitions])
        for _ in range(3):  # assignments resolve lazily: a record published before is missed
            consumer.poll(0.2)
        mark = uuid.uuid4().hex
        body = json.dumps({"ts": int(time.time() * 1000), "seq": 0, "metrics": {"t": 1},
                           "probe": mark})  # fmt: skip
        pub = subprocess.run(
            ["mosquitto_pub", "-p", str(stack.mqtt_port), "-q", "1", "-i", device, "-u", device,
             "-P", secret, "-t", f"devices/{device}/telemetry", "-m", body],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
        if pub.returncode != 0:
            return f"mosquitto_pub exit {pub.returncode}: {pub.stderr.strip()[:80]}"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and mark.encode() in (msg.value() or b""):
                return None
        return "published, not in iot.telemetry within 10 s"
    except Exception as exc:  # noqa: BLE001 - any failure of the path is its answer
        return f"{type(exc).__name__}: {exc}"[:100]
    finally:
        consumer.close()


def mr_publish(stack: ChaosStack) -> str | None:
    return _ok(_api(stack).call("POST", f"/events/{MR_TOPIC}", [{"probe": 1}], timeout=15), 200)


def mr_consume(stack: ChaosStack) -> str | None:
    path = f"/events/{MR_TOPIC}/chaos-probe/c1?timeout=1000&limit=10"
    return _ok(_api(stack).call("GET", path, timeout=15), 200)


def queue(stack: ChaosStack) -> str | None:
    api = _api(stack)
    made = api.call("PUT", f"/queues/{QUEUE}?partitions=1", timeout=15)
    if made[0] not in (200, 201, 409):
        return "create " + describe(made)
    sent = api.call("POST", f"/queues/{QUEUE}/messages", [{"probe": 1}], timeout=15)
    if sent[0] != 200:
        return "send " + describe(sent)
    got = api.call("POST", f"/queues/{QUEUE}/receive?max=10&timeout=3000", timeout=15)
    if got[0] != 200:
        return "receive " + describe(got)
    handles = [m["receiptHandle"] for m in json.loads(got[1]).get("messages", [])]
    if not handles:
        return "receive: nothing within 3 s"
    acked = api.call("POST", f"/queues/{QUEUE}/ack", {"receiptHandles": handles}, timeout=15)
    return _ok(acked, 200)


def _operator(stack: ChaosStack) -> Http:
    return Http(stack.api_url, basic(*stack.operator))


def sse(stack: ChaosStack) -> str | None:
    device = next(iter(stack.devices))
    return _ok(_operator(stack).stream_opens(f"/ops/devices/default/{device}/telemetry"), 200)


def http_device(stack: ChaosStack) -> str | None:
    device, secret = list(stack.devices.items())[-1]
    body = {"ts": int(time.time() * 1000), "seq": 0, "metrics": {"t": 1}}
    answer = Http(stack.api_url, basic(device, secret)).call("POST", "/telemetry", body,
                                                             timeout=15)  # fmt: skip
    return _ok(answer, 200, 202)


def command(stack: ChaosStack) -> str | None:
    """A command to an MQTT device: accepted (in iot.commands) by the operator API."""
    device = next(iter(stack.devices))
    body = {"device": device, "name": "chaos-probe", "args": {}}
    return _ok(_operator(stack).call("POST", "/ops/commands", body, timeout=15), 200, 201, 202)


def console(stack: ChaosStack) -> str | None:
    session = Http(stack.api_url)
    name, secret = stack.operator
    login = session.call("POST", "/console/api/login", {"name": name, "secret": secret},
                         headers={"Origin": stack.api_url}, timeout=15)  # fmt: skip
    if login[0] != 200:
        return "login " + describe(login)
    for page in CONSOLE_PAGES:
        answer = session.call("GET", f"/console/api/{page}", timeout=15)
        if answer[0] != 200:
            return f"{page} " + describe(answer)
    return None


PROBES: dict[str, Probe] = {
    "mqtt-device": mqtt_device, "mr-publish": mr_publish, "mr-consume": mr_consume,
    "queue": queue, "sse": sse, "http-device": http_device, "command": command,
    "console": console,
}  # fmt: skip


def failing(stack: ChaosStack, names: list[str] | None = None) -> dict[str, str]:
    """Each probe asked once: the failing ones and their errors (empty: every path answers)."""
    out = {}
    for name in names or list(PROBES):
        error = PROBES[name](stack)
        if error is not None:
            out[name] = error
    return out


def wait_all(stack: ChaosStack, timeout: float) -> tuple[float, dict[str, str]]:
    """Seconds until every path answered (each is asked until it does; one that answered is
    not asked again), and what still failed at ``timeout`` (empty when all answered)."""
    started = time.monotonic()
    left = list(PROBES)
    last: dict[str, str] = {}
    said = started
    while left:
        last = failing(stack, left)
        left = list(last)
        if not left or time.monotonic() - started > timeout:
            break
        if time.monotonic() - said > 10:
            log.info("still failing after %.0f s: %s", time.monotonic() - started, last)
            said = time.monotonic()
        time.sleep(0.5)
    return time.monotonic() - started, last
