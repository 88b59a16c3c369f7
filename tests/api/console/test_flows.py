"""The console's flows in headless Chromium against the real stack: roles, live overview,
last values, a command to a simulated device, a dead letter replayed, a device provisioned."""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Consumer, TopicPartition
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.api.console.conftest import Browser, ConsoleStack
from tests.api.console.test_pages import login
from tests.registry.mqtt_probe import connack_of

pytestmark = pytest.mark.integration

POST_JS = """
const [path, body, done] = arguments;
fetch('/console/api/me').then(r => r.json()).then(me => fetch('/console/api' + path, {
  method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf},
  body: JSON.stringify(body)})).then(r => done(r.status), e => done(String(e)));
"""


def _wait(browser: Browser, timeout: float = 30) -> WebDriverWait[Any]:
    return WebDriverWait(browser.driver, timeout, poll_frequency=0.3)


def _last_records(bootstrap: str, topic: str, per_partition: int = 400) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        meta = consumer.list_topics(topic, timeout=20).topics[topic]
        starts, ends = [], {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            ends[p] = high
            if high > low:
                starts.append(TopicPartition(topic, p, max(low, high - per_partition)))
        consumer.assign(starts)
        out: list[Any] = []
        done: set[int] = set()
        deadline = time.monotonic() + 30
        while len(done) < len(starts) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    out.append(msg)
                    if (msg.offset() or 0) + 1 >= ends[msg.partition() or 0]:
                        done.add(msg.partition() or 0)
        return out
    finally:
        consumer.close()


def _text(driver: Any, css: str) -> str:
    """An element's text read in one step (the page re-renders it every sample)."""
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css
    )
    return str(found or "")


def _rate(driver: Any) -> float:
    text = _text(driver, "#rate-mqtt-in")
    try:
        return float(text)
    except ValueError:  # a dash before the second sample
        return 0.0


def test_viewer_cannot_command_or_provision(console_stack: ConsoleStack, browser: Browser) -> None:
    login(browser, "view1", console_stack.accounts["view1"], "/console/commands")
    _wait(browser).until(ec.presence_of_element_located((By.ID, "cmd-history")))
    assert browser.driver.find_elements(By.ID, "cmd-form") == []
    browser.open("/console/devices")
    _wait(browser).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#device-list table")))
    assert browser.driver.find_elements(By.ID, "provision-form") == []
    browser.shot("viewer-devices")
    # and the API refuses them, even with a valid session and CSRF token
    send = {"kind": "device", "target": "dev-00000", "name": "reboot", "args": {}}
    assert browser.driver.execute_async_script(POST_JS, "/commands", send) == 403
    assert browser.driver.execute_async_script(POST_JS, "/devices", {"id": "nope-1"}) == 403
    # a change without the CSRF token is refused before anything else
    status = browser.driver.execute_async_script(
        "const d = arguments[0]; fetch('/console/api/logout', {method: 'POST'})"
        ".then(r => d(r.status));"
    )
    assert status == 403


def test_tenant_admin_sees_only_its_devices(console_stack: ConsoleStack, browser: Browser) -> None:
    login(browser, "acme-admin", console_stack.accounts["acme-admin"], "/console/devices")
    _wait(browser).until(ec.presence_of_element_located((By.CSS_SELECTOR, "tr[data-device]")))
    rows = browser.driver.execute_script(
        "return [...document.querySelectorAll('tr[data-device]')].map(r => r.dataset.device);"
    )
    assert rows == ["acme-dev1"]
    assert (
        browser.driver.find_element(By.CSS_SELECTOR, "a[data-page='topics']").is_displayed()
        is False
    )
    browser.shot("tenant-admin-devices")


def test_overview_rate_rises_live(console_stack: ConsoleStack, browser: Browser) -> None:
    login(browser, "admin1", console_stack.accounts["admin1"])
    _wait(browser).until(ec.presence_of_element_located((By.ID, "rate-mqtt-in")))
    browser.driver.execute_script("window.__sameDocument = true;")
    started = time.monotonic()
    _wait(browser, 30).until(lambda d: _rate(d) > 0)
    print(f"overview rate > 0 after {time.monotonic() - started:.1f} s")
    assert browser.driver.execute_script("return window.__sameDocument === true")  # no reload
    assert _text(browser.driver, "[data-service='bridge'] .value") == "up"
    browser.shot("overview-live")


def test_device_page_shows_its_last_value(console_stack: ConsoleStack, browser: Browser) -> None:
    login(browser, "admin1", console_stack.accounts["admin1"], "/console/device/default/dev-00000")
    cell = _wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#last-values td[data-metric]"))
    )
    metric, shown = cell.get_attribute("data-metric"), float(cell.text)
    assert metric
    sent = [
        orjson.loads(m.value())["metrics"].get(metric)
        for m in _last_records(console_stack.kafka_bootstrap, "iot.telemetry")
        if m.key() == b"dev-00000"
    ]
    assert shown in sent, (metric, shown, sent[-5:])
    browser.shot("device-last-value")


def test_command_reaches_device_and_succeeds(console_stack: ConsoleStack, browser: Browser) -> None:
    login(browser, "oper1", console_stack.accounts["oper1"], "/console/commands")
    _wait(browser).until(ec.element_to_be_clickable((By.ID, "cmd-target"))).send_keys("dev-00002")
    browser.driver.find_element(By.ID, "cmd-send").click()
    final = ("succeeded", "failed", "expired", "rejected")

    def state(d: Any) -> str | None:
        found = d.execute_script(
            "const e = document.getElementById('cmd-status');"
            "return e ? e.getAttribute('data-state') : null;"
        )
        return found if found in final else None

    assert _wait(browser, 60).until(state) == "succeeded"
    _wait(browser).until(lambda d: _text(d, "#cmd-reply"))
    reply = orjson.loads(_text(browser.driver, "#cmd-reply"))
    assert reply[-1]["match"] == "matched" or reply[-1].get("status") == "ok", reply
    browser.shot("command-succeeded")


def test_hostile_payload_on_dead_letters_and_replayed(
    console_stack: ConsoleStack, browser: Browser
) -> None:
    marker = f"m{uuid.uuid4().hex[:10]}"
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="hostile-1",
                         protocol=mqtt.MQTTv5)  # fmt: skip
    client.username_pw_set("hostile-1", console_stack.devices["hostile-1"])
    client.connect("127.0.0.1", console_stack.mqtt_port)
    client.loop_start()
    deadline = time.monotonic() + 10
    while not client.is_connected() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.is_connected(), "hostile-1 could not log in"
    try:
        info = client.publish("devices/hostile-1/telemetry", f"<script>{marker}", qos=1)
        info.wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()
    login(browser, "oper1", console_stack.accounts["oper1"], "/console/dead-letters")
    found = None
    deadline = time.monotonic() + 60
    while found is None and time.monotonic() < deadline:
        browser.open("/console/dead-letters")
        _wait(browser).until(ec.presence_of_element_located((By.ID, "dlq-list")))
        time.sleep(0.5)
        for row in browser.driver.find_elements(By.CSS_SELECTOR, "tr[data-code='not_json']"):
            row.find_element(By.TAG_NAME, "button").click()
            text = browser.driver.find_element(By.ID, "dlq-payload").get_attribute("value") or ""
            if marker in text:
                found = row.get_attribute("data-ref")
                break
    assert found is not None, "the hostile payload never showed on the Dead letters page"
    assert "not_json" in browser.driver.find_element(By.CSS_SELECTOR, "#dlq-detail h2").text
    browser.shot("dead-letter")
    fixed = orjson.dumps({"ts": int(time.time() * 1000), "seq": 0, "metrics": {marker: 1.5}})
    box = browser.driver.find_element(By.ID, "dlq-payload")
    box.clear()
    box.send_keys(fixed.decode())
    browser.driver.find_element(By.ID, "dlq-replay").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "dlq-result"), "Replayed to"))
    assert "iot.telemetry" in browser.driver.find_element(By.ID, "dlq-result").text
    replayed = [
        m for m in _last_records(console_stack.kafka_bootstrap, "iot.telemetry", 2000)
        if marker.encode() in (m.value() or b"")
    ]  # fmt: skip
    assert len(replayed) == 1
    assert replayed[0].key() == b"hostile-1"
    headers = dict(replayed[0].headers() or [])
    assert headers["replayed_from"] == f"iot.dlq/{found}".encode()
    assert headers["replayed_by"] == b"svc/oper1"
    audit = [
        orjson.loads(m.value())
        for m in _last_records(console_stack.kafka_bootstrap, "iot.console.audit")
    ]
    assert any(a["action"] == "dlq.replay" and a["ref"] == found for a in audit)


def test_provisioned_device_connects_with_shown_secret(
    console_stack: ConsoleStack, browser: Browser
) -> None:
    new_id = f"console-{uuid.uuid4().hex[:8]}"
    login(browser, "oper1", console_stack.accounts["oper1"], "/console/devices")
    _wait(browser).until(ec.element_to_be_clickable((By.ID, "prov-id"))).send_keys(new_id)
    browser.driver.find_element(By.ID, "prov-submit").click()
    secret = _wait(browser).until(ec.presence_of_element_located((By.ID, "shown-secret"))).text
    username = browser.driver.find_element(By.ID, "shown-username").text
    assert username == new_id
    browser.shot("provisioned")
    assert connack_of(console_stack.mqtt_port, username, secret).value == 0
    assert connack_of(console_stack.mqtt_port, username, "not-the-secret").value != 0
