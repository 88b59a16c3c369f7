"""Tenants' dead letters on the Dead letters page: a tenant device's rejected message reaches
its tenant's DLQ topic through the real bridge and shows on the page; an appliance-wide
account sees every tenant's (tenant column, filter), a tenant's account only its own and cannot
act on another's by crafting a ref; a replay lands on the tenant's own topic; an old letter
of a tenant's DLQ beyond the console's memory is found through Kafka by its ref."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Producer
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from api.console.tailer import BACKLOG
from stack.ports import free_ports
from tests.api.console.conftest import Browser, ConsoleStack, start_api, stop_api
from tests.api.console.test_flows import POST_JS, _last_records
from tests.api.console.test_history import GET_JS
from tests.api.console.test_pages import login

pytestmark = pytest.mark.integration


def _cli(stack: ConsoleStack, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "registry", *stack.registry_args, *args], capture_output=True,
        text=True, env=stack.env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return dict(json.loads(done.stdout or "{}"))


def _hostile(stack: ConsoleStack, tenant: str, device: str, secret: str, marker: str) -> None:
    """``device`` of ``tenant`` logs in and publishes a payload the bridge dead-letters."""
    user = f"{tenant}/{device}"
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv5)
    client.username_pw_set(user, secret)
    client.connect("127.0.0.1", stack.mqtt_port)
    client.loop_start()
    try:
        deadline = time.monotonic() + 10
        while not client.is_connected() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.is_connected(), f"{user} could not log in"
        info = client.publish(f"tenants/{tenant}/devices/{device}/telemetry",
                              f"<broken {marker}", qos=1)  # fmt: skip
        info.wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def _get(browser: Browser, path: str) -> dict[str, Any]:
    found = browser.driver.execute_async_script(GET_JS, path)
    assert isinstance(found, dict), found
    return found


def _shown(driver: Any, css: str, data: str = "") -> list[str]:
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(e => arguments[1] ? e.dataset[arguments[1]] : e.textContent);", css, data,
    ))  # fmt: skip


def _find(browser: Browser, marker: str, query: str = "", timeout: float = 60) -> dict[str, Any]:
    """The row of the letter whose payload holds ``marker`` (waits for the tailer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _get(browser, f"/dead-letters?limit=1000{query}")["rows"]
        hit = [r for r in rows if marker in r["payload"]]
        if hit:
            return dict(hit[0])
        time.sleep(0.5)
    raise AssertionError(f"no dead letter with {marker}")


def test_tenant_dead_letters_scoped_and_replayed_to_the_tenants_topic(
    console_stack: ConsoleStack, browser: Browser
) -> None:
    stack = console_stack
    _cli(stack, "tenant", "create", "beta")
    acme_dev, beta_dev = f"bad-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"
    acme_secret = _cli(stack, "device", "add", "--tenant", "acme", acme_dev)["secret"]
    beta_secret = _cli(stack, "device", "add", "--tenant", "beta", beta_dev)["secret"]
    acme_mark, beta_mark = f"a{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:10]}"
    _hostile(stack, "acme", acme_dev, acme_secret, acme_mark)
    # beta's topics come from the bridge's registry watch (every 5 s): until then its message
    # is tenant_not_ready in iot.dlq, still beta's; either way it is a beta letter
    _hostile(stack, "beta", beta_dev, beta_secret, beta_mark)

    # an appliance-wide operator: both, with their tenants; the tenant filter keeps one
    login(browser, "oper1", stack.accounts["oper1"], "/console/dead-letters")
    acme_row = _find(browser, acme_mark)
    beta_row = _find(browser, beta_mark)
    assert (acme_row["tenant"], acme_row["code"], acme_row["device"]) == (
        "acme", "not_json", acme_dev
    )  # fmt: skip
    assert acme_row["ref"].startswith("acme:"), acme_row
    assert beta_row["tenant"] == "beta"
    only_beta = _get(browser, "/dead-letters?tenant=beta&limit=1000")["rows"]
    assert {r["tenant"] for r in only_beta} == {"beta"}
    wait = WebDriverWait(browser.driver, 30, poll_frequency=0.3)
    browser.open("/console/dead-letters")
    wait.until(ec.element_to_be_clickable((By.ID, "dlq-tenant"))).send_keys("acme")
    browser.driver.find_element(By.ID, "dlq-filter").click()
    # the filtered list replaces the whole one: only acme's rows, its letter among them
    wait.until(lambda d: set(_shown(d, "#dlq-list td.tenant")) == {"acme"})
    assert acme_row["ref"] in _shown(browser.driver, "#dlq-list tr[data-ref]", "ref")
    browser.shot("dead-letters-tenant-filter")
    browser.driver.delete_all_cookies()

    # acme's tenant admin: its own letters only, whatever it asks for
    login(browser, "acme-admin", stack.accounts["acme-admin"], "/console/dead-letters")
    mine = _find(browser, acme_mark)
    assert mine["ref"] == acme_row["ref"]
    for query in ("", "&tenant=beta"):
        rows = _get(browser, f"/dead-letters?limit=1000{query}")["rows"]
        assert {r["tenant"] for r in rows} <= {"acme"}, query
        assert not any(beta_mark in r["payload"] for r in rows), query
    assert not browser.driver.find_elements(By.ID, "dlq-tenant")  # no tenant filter for it
    # crafting beta's ref (and the same place in other DLQs) finds nothing to act on
    beta_ref = beta_row["ref"]
    place = acme_row["ref"].split(":", 1)[1]
    for ref in (beta_ref, f"beta:{place}"):
        for action in ("discard", "replay"):
            status = browser.driver.execute_async_script(
                POST_JS, f"/dead-letters/{ref}/{action}", {"payload": "{}"}
            )
            assert status == 404, (ref, action, status)
    # nor move its own letter into another tenant's topics
    good = {"ts": int(time.time() * 1000), "seq": 1, "metrics": {acme_mark: 2.5}}
    crafted = {"payload": orjson.dumps(good).decode(),
               "mqtt_topic": f"tenants/beta/devices/{beta_dev}/telemetry"}  # fmt: skip
    status = browser.driver.execute_async_script(
        POST_JS, f"/dead-letters/{mine['ref']}/replay", crafted
    )
    assert status == 403
    browser.console_errors(), browser.failed_requests()  # drained: those answered 404/403

    # replay it fixed on the page: it lands on acme's own telemetry topic
    browser.open("/console/dead-letters")
    row = wait.until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f"tr[data-ref='{mine['ref']}']"))
    )
    row.find_element(By.TAG_NAME, "button").click()
    box = wait.until(ec.presence_of_element_located((By.ID, "dlq-payload")))
    box.clear()
    box.send_keys(orjson.dumps(good).decode())
    browser.driver.find_element(By.ID, "dlq-replay").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "dlq-result"), "Replayed to"))
    assert "iot.acme.telemetry" in browser.driver.find_element(By.ID, "dlq-result").text
    replayed = [
        m for m in _last_records(stack.kafka_bootstrap, "iot.acme.telemetry", 2000)
        if acme_mark.encode() in (m.value() or b"")
    ]  # fmt: skip
    assert len(replayed) == 1
    headers = dict(replayed[0].headers() or [])
    assert replayed[0].key() == acme_dev.encode()
    assert headers["tenant"] == b"acme"
    assert headers["replayed_from"] == f"iot.acme.dlq/{place}".encode()
    assert headers["replayed_by"] == b"svc/acme-admin"
    # its disposition, from the audit trail, names this letter only
    wait.until(lambda d: _find(browser, acme_mark)["status"] == "replayed")
    assert _find(browser, acme_mark)["by"] == "svc/acme-admin"
    assert browser.console_errors() == []
    assert browser.failed_requests() == []
    browser.shot("dead-letters-tenant-admin")


def test_an_old_tenant_dead_letter_is_found_through_kafka(
    console_stack: ConsoleStack, tmp_path: Path
) -> None:
    stack = console_stack
    device, marker = f"old-{uuid.uuid4().hex[:6]}", f"o{uuid.uuid4().hex[:10]}"
    other = f"t{uuid.uuid4().hex[:8]}"
    _cli(stack, "tenant", "create", other)
    other_secret = _cli(stack, "account", "create", f"{other}-admin", "--role", "tenant-admin",
                        "--tenant", other)["secret"]  # fmt: skip
    deadline = time.monotonic() + 60
    while "iot.acme.dlq" not in (topics := _topics(stack.kafka_bootstrap)):
        assert time.monotonic() < deadline, topics  # the bridge makes it for tenant acme
        time.sleep(1)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    now = int(time.time() * 1000)
    headers: list[tuple[str, str | bytes | None]] = [
        ("mqtt_topic", f"tenants/acme/devices/{device}/telemetry".encode()),
        ("error", b"not_json"), ("received_at", str(now).encode()), ("tenant", b"acme"),
    ]  # fmt: skip
    producer.produce("iot.acme.dlq", key=device.encode(), value=f"<{marker}".encode(),
                     headers=headers, partition=0, timestamp=now)  # fmt: skip
    filler: list[tuple[str, str | bytes | None]] = [("error", b"oversized"), ("tenant", b"acme")]
    for i in range(int(BACKLOG["dlq"] or 0) + 200):
        producer.produce("iot.acme.dlq", key=b"filler", value=b"x", headers=filler, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    [port] = free_ports(1)
    api = start_api(stack, port, tmp_path / "api.log")  # starts after the records
    browser = Browser(f"http://127.0.0.1:{port}", tmp_path / "screenshots")
    try:
        login(browser, "acme-admin", stack.accounts["acme-admin"], "/console/dead-letters")
        time.sleep(3)  # the tailer's start-up read
        found = _get(browser, f"/dead-letters?device={device}")
        assert found["source"] == "kafka:iot.acme.dlq,iot.dlq", found
        assert found["scanned"] > int(BACKLOG["dlq"] or 0), found
        [row] = found["rows"]
        assert (row["tenant"], row["device"]) == ("acme", device)
        assert row["ref"].startswith("acme:0-"), row
        # by its ref, read back from Kafka: discarded, and the status says so afterwards
        status = browser.driver.execute_async_script(
            POST_JS, f"/dead-letters/{row['ref']}/discard", {}
        )
        assert status == 200
        WebDriverWait(browser.driver, 30, poll_frequency=0.5).until(
            lambda d: (
                _get(browser, f"/dead-letters?device={device}")["rows"][0]["status"] == "discarded"
            )
        )
        browser.driver.delete_all_cookies()
        # another tenant's account does not find it through Kafka, nor act on it by its ref
        login(browser, f"{other}-admin", other_secret, "/console/dead-letters")
        found = _get(browser, f"/dead-letters?device={device}&tenant=acme")
        assert found["rows"] == [], found
        assert found["source"] == f"kafka:iot.{other}.dlq,iot.dlq", found
        status = browser.driver.execute_async_script(
            POST_JS, f"/dead-letters/{row['ref']}/replay", {}
        )
        assert status == 404
    finally:
        browser.close()
        stop_api(api)


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics)
