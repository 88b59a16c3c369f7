"""Dead letters and command history older than the console's memory: records written before
this iot-api started, pushed out of its in-memory window by newer ones, are found by the
pages' filters (the console reads back through Kafka), opened and replayed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from api.console.tailer import BACKLOG
from stack.ports import free_ports
from tests.api.console.conftest import Browser, ConsoleStack, start_api, stop_api
from tests.api.console.test_pages import login

pytestmark = pytest.mark.integration

SET_LOCAL_TIME = """
const [id, ms] = arguments; const d = new Date(ms); const p = (n) => String(n).padStart(2, '0');
document.getElementById(id).value = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}` +
  `T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
"""
GET_JS = """
const [path, done] = arguments;
fetch('/console/api' + path).then(r => r.json()).then(done, e => done(String(e)));
"""


def _write_old_records(bootstrap: str, device: str, cid: str) -> int:
    """A dead letter and a command of ``device``, then enough newer records on the same
    partition to push both out of the console's start-up window. Returns the letter's time."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    now = int(time.time() * 1000)
    headers: list[tuple[str, str | bytes | None]] = [
        ("mqtt_topic", f"devices/{device}/telemetry".encode()), ("error", b"not_json"),
        ("error_detail", b"old test letter"), ("received_at", str(now).encode()),
    ]  # fmt: skip
    producer.produce("iot.dlq", key=device.encode(), value=b"{broken " + device.encode(),
                     headers=headers, partition=0, timestamp=now)  # fmt: skip
    status = {"command_id": cid, "device_id": device, "state": "expired", "at": now,
              "command": {"name": "old-reboot", "args": {}}}  # fmt: skip
    producer.produce("iot.command-status", key=cid.encode(), value=orjson.dumps(status),
                     partition=0)  # fmt: skip
    filler: list[tuple[str, str | bytes | None]] = [
        ("mqtt_topic", b"devices/filler/telemetry"),
        ("error", b"oversized"),
    ]
    for i in range(int(BACKLOG["dlq"] or 0) + 200):
        producer.produce("iot.dlq", key=b"filler", value=b"x", headers=filler, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    for i in range(int(BACKLOG["status"] or 0) + 200):
        doc = {"command_id": f"filler-{i}", "device_id": "filler", "state": "expired", "at": now}
        producer.produce("iot.command-status", key=f"filler-{uuid.uuid4().hex}".encode(),
                         value=orjson.dumps(doc), partition=0)  # fmt: skip
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return now


def _rows(driver: Any, css: str) -> list[str]:
    return list(driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);", css
    ))  # fmt: skip


def test_old_dead_letter_and_command_are_found_after_a_restart(
    console_stack: ConsoleStack, tmp_path: Path
) -> None:
    device, cid = f"old-{uuid.uuid4().hex[:8]}", f"old-cmd-{uuid.uuid4().hex[:12]}"
    at = _write_old_records(console_stack.kafka_bootstrap, device, cid)
    [port] = free_ports(1)
    api = start_api(console_stack, port, tmp_path / "api.log")  # starts after the records
    browser = Browser(f"http://127.0.0.1:{port}", tmp_path / "screenshots")
    wait = WebDriverWait(browser.driver, 60, poll_frequency=0.3)
    try:
        login(browser, "oper1", console_stack.accounts["oper1"], "/console/dead-letters")
        # not in memory: the API says it read Kafka for it
        time.sleep(3)  # the tailer's start-up read
        found = browser.driver.execute_async_script(GET_JS, f"/dead-letters?device={device}")
        assert "iot.dlq" in found["source"].removeprefix("kafka:").split(","), found
        assert [r["device"] for r in found["rows"]] == [device]
        assert found["scanned"] > int(BACKLOG["dlq"] or 0)
        # the page: by device, then by error code and time only
        wait.until(ec.element_to_be_clickable((By.ID, "dlq-device"))).send_keys(device)
        browser.driver.find_element(By.ID, "dlq-filter").click()
        wait.until(lambda d: _rows(d, "#dlq-list td.device") == [device])
        assert "searched" in browser.driver.find_element(By.ID, "dlq-count").text
        browser.shot("dead-letters-old")
        browser.driver.find_element(By.ID, "dlq-device").clear()
        Select(browser.driver.find_element(By.ID, "dlq-code")).select_by_value("not_json")
        browser.driver.execute_script(SET_LOCAL_TIME, "dlq-since", at - 1000)
        browser.driver.execute_script(SET_LOCAL_TIME, "dlq-until", at + 1000)
        browser.driver.find_element(By.ID, "dlq-filter").click()
        wait.until(lambda d: device in _rows(d, "#dlq-list td.device"))
        assert "filler" not in _rows(browser.driver, "#dlq-list td.device")
        # open it and replay it fixed: the record is read back from Kafka by its ref
        row = browser.driver.find_element(By.XPATH, f"//tr[td[@class='device'][text()='{device}']]")
        row.find_element(By.TAG_NAME, "button").click()
        box = wait.until(ec.presence_of_element_located((By.ID, "dlq-payload")))
        assert device in (box.get_attribute("value") or "")
        box.clear()
        box.send_keys(orjson.dumps({"ts": at, "seq": 1, "metrics": {"t": 1.0}}).decode())
        browser.driver.find_element(By.ID, "dlq-replay").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "dlq-result"), "Replayed to"))
        assert "iot.telemetry" in browser.driver.find_element(By.ID, "dlq-result").text
        # the command history, filtered by target
        browser.open("/console/commands")
        target = wait.until(ec.element_to_be_clickable((By.ID, "hist-target")))
        target.send_keys(device, Keys.ENTER)
        row = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, f"tr[data-command='{cid}']"))
        )
        assert "expired" in row.text
        assert "old-reboot" in row.text
        assert "searched" in browser.driver.find_element(By.ID, "hist-note").text
        browser.shot("commands-old")
        assert browser.console_errors() == []
        assert browser.failed_requests() == []
    finally:
        browser.close()
        stop_api(api)
