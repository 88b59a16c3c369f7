"""The Analytics page with data: telemetry with a planted spike on the stack's Kafka, the real
Spark job (`spark_jobs.stream`, availableNow) writes fleet_minute and anomalies, the real
report writes report.html; an iot-api on that warehouse shows the charts, the anomaly and the
report link, with no console error."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from stack.ports import free_ports
from tests.api.console.conftest import Browser, ConsoleStack, start_api, stop_api
from tests.api.console.test_pages import login

# the streaming job's five queries take minutes on a loaded 2-core box (10+ at load 50)
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.timeout(1800)]  # fmt: skip
DEVICES = ("an-1", "an-2", "an-3")
SPIKED = "an-2"
CLOCK = "zz-clock"  # far ahead: the watermark closes every minute sent


def _telemetry(bootstrap: str, topic: str, base_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for device in DEVICES:
        for i in range(48):  # 4 minutes, one reading every 5 s
            ts = base_ms + i * 5000 + 500
            value = 500.0 if (device == SPIKED and i == 30) else 20.0 + (i % 3) * 0.1
            body = {"ts": ts, "seq": i + 1, "metrics": {"temperature": value}}
            producer.produce(topic, key=device.encode(), value=json.dumps(body).encode(),
                             headers=[("received_at", str(ts + 20).encode())])  # fmt: skip
    clock = {"ts": base_ms + 10 * 60_000, "seq": 1, "metrics": {"temperature": 0.0}}
    producer.produce(topic, key=CLOCK.encode(), value=json.dumps(clock).encode())
    assert producer.flush(30) == 0


def _table_rows(driver: Any, heading: str) -> list[list[str]]:
    return list(driver.execute_script(
        "const h = [...document.querySelectorAll('h2')].find(x => x.textContent === arguments[0]);"
        "const t = h && h.nextElementSibling && h.nextElementSibling.querySelector('table');"
        "return t ? [...t.querySelectorAll('tbody tr')].map(r =>"
        " [...r.children].map(c => c.textContent)) : [];", heading,
    ))  # fmt: skip


def test_analytics_page_shows_the_spark_tables(
    console_stack: ConsoleStack, spark: Any, tmp_path: Path
) -> None:
    from spark_jobs import stream
    from spark_jobs.cli import main as analytics_main
    from spark_jobs.config import AnalyticsConfig

    topic = f"console-analytics-{uuid.uuid4().hex[:8]}"
    base_ms = (int(time.time() * 1000) // 60_000 - 20) * 60_000  # whole minutes, 20 min ago
    _telemetry(console_stack.kafka_bootstrap, topic, base_ms)
    warehouse, report = tmp_path / "warehouse", tmp_path / "report"
    cfg = AnalyticsConfig.load(
        env={}, kafka_bootstrap=console_stack.kafka_bootstrap, topic_telemetry=topic,
        warehouse_dir=warehouse, spark_master="local[2]", shuffle_partitions=2,
        spark_driver_memory="1g", watermark="30 seconds",
        tables=("device_minute", "fleet_minute", "anomalies"),  # the page's and the report's
    )  # fmt: skip
    assert stream.run(cfg, available_now=True, spark=spark) == 0  # the shared session
    args = ["report", "--warehouse-dir", str(warehouse), "--out", str(report),
            "--format", "html", "--since", "-2h"]  # fmt: skip
    assert analytics_main(args) == 0  # uses the active session and leaves it running
    assert (report / "report.html").is_file()
    [port] = free_ports(1)
    api = start_api(console_stack, port, tmp_path / "api.log", "--console-warehouse",
                    str(warehouse), "--console-report", str(report / "report.html"))  # fmt: skip
    browser = Browser(f"http://127.0.0.1:{port}", tmp_path / "screenshots")
    try:
        login(browser, "view1", console_stack.accounts["view1"], "/console/analytics")
        wait = WebDriverWait(browser.driver, 30, poll_frequency=0.3)
        chart = wait.until(ec.presence_of_element_located(
            (By.CSS_SELECTOR, "svg.chart[aria-label='fleet_minute']")
        ))  # fmt: skip
        assert len(chart.find_elements(By.TAG_NAME, "path")) == 2  # messages, active devices
        minutes = _table_rows(browser.driver, "fleet_minute")
        assert len(minutes) >= 4, minutes  # the 4 minutes sent (and the clock's)
        header = browser.driver.execute_script(
            "return [...document.querySelectorAll('h2')].find(x => x.textContent === "
            "'fleet_minute').nextElementSibling.querySelector('thead').textContent"
        )
        assert "messages" in header
        counts = sorted(int(float(r[header_index(browser, "messages")])) for r in minutes)
        assert counts[-4:] == [36, 36, 36, 36], minutes  # 3 devices x 12 readings a minute
        anomalies = _table_rows(browser.driver, "Latest anomalies")
        assert any(SPIKED in r and "500" in r for r in anomalies), anomalies
        assert not any(d in r for r in anomalies for d in DEVICES if d != SPIKED), anomalies
        link = browser.driver.find_element(By.ID, "report-link")
        assert link.tag_name == "a"
        assert (link.get_attribute("href") or "").endswith("/console/report/report.html")
        browser.shot("analytics-data")
        assert browser.console_errors() == []
        assert browser.failed_requests() == []
        # the link serves the report (this session's cookie), and its plots
        fetched = browser.driver.execute_async_script(
            "const [url, done] = arguments; fetch(url).then(async r => done([r.status,"
            " r.headers.get('content-type'), await r.text()]), e => done([0, '', String(e)]));",
            link.get_attribute("href"),
        )
        assert fetched[0] == 200, fetched[:2]
        assert fetched[1].startswith("text/html"), fetched[:2]
        assert "<h1>" in fetched[2]
        assert "<table" in fetched[2]
    finally:
        browser.close()
        stop_api(api)


def header_index(browser: Browser, column: str) -> int:
    heads = browser.driver.execute_script(
        "return [...[...document.querySelectorAll('h2')].find(x => x.textContent === "
        "'fleet_minute').nextElementSibling.querySelectorAll('th')].map(x => x.textContent)"
    )
    return list(heads).index(column)
