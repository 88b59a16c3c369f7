"""``GET /docs`` in a real browser (Debian's headless Chromium): every endpoint of /openapi.json
listed, one tried from the page, no console error and no request leaving the service."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.routes import ROUTES
from tests.api.console.conftest import CHROMEDRIVER, CHROMIUM, Browser
from tests.api.harness import Client, running_api

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api_port() -> Iterator[int]:
    with socket.socket() as s:  # Kafka is not needed for the page: nothing listens here
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with running_api(kafka_bootstrap=dead, insecure_anonymous=True) as svc:
        yield svc.port


@pytest.fixture
def page(api_port: int, tmp_path: Path) -> Iterator[Browser]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail("chromium and chromium-driver are needed (.ci/setup installs them)")
    browser = Browser(f"http://127.0.0.1:{api_port}", tmp_path / "screenshots")
    try:
        yield browser
    finally:
        browser.close()


def _wait(check: Any, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


def _network(browser: Browser) -> tuple[list[str], list[str]]:
    """(every URL the page requested, the answers >= 400 and the failed loads); the
    performance log is read once (reading empties it)."""
    urls, failed = [], []
    for entry in browser.driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        params = msg.get("params", {})
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(params["request"]["url"])
        elif (
            msg.get("method") == "Network.responseReceived" and params["response"]["status"] >= 400
        ):
            failed.append(f"{params['response']['status']} {params['response']['url']}")
        elif msg.get("method") == "Network.loadingFailed":
            failed.append(f"{params.get('errorText')} {params.get('requestId')}")
    return urls, failed


def test_the_page_lists_every_endpoint_and_tries_one(page: Browser, api_port: int) -> None:
    from selenium.webdriver.common.by import By

    page.open("/docs")
    driver = page.driver
    blocks = _wait(lambda: driver.find_elements(By.CSS_SELECTOR, ".opblock-summary"))
    _wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, ".opblock")) >= len(ROUTES))
    shown = set()
    for block in driver.find_elements(By.CSS_SELECTOR, ".opblock"):
        method = block.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text.lower()
        path = block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute(
            "data-path"
        )
        shown.add((method, path))
    assert shown == {(r.method.lower(), r.path) for r in ROUTES}
    assert blocks
    # try GET /healthz from the page: it answers in the page's response panel
    health = driver.find_element(By.ID, "operations-service-get_healthz")
    health.find_element(By.CSS_SELECTOR, ".opblock-summary").click()
    _wait(lambda: health.find_elements(By.CSS_SELECTOR, ".try-out__btn"))[0].click()
    _wait(lambda: health.find_elements(By.CSS_SELECTOR, ".execute"))[0].click()
    status = _wait(
        lambda: [
            e.text
            for e in health.find_elements(
                By.CSS_SELECTOR, ".live-responses-table tbody .response-col_status"
            )
            if e.text.strip()
        ]
    )
    assert status[0].strip().startswith("200")
    page.shot("docs")
    assert page.console_errors() == []
    urls, failed = _network(page)
    assert failed == []
    own = f"http://127.0.0.1:{api_port}/"
    assert f"{own}openapi.json" in urls
    assert f"{own}healthz" in urls  # the try from the page
    assert [u for u in urls if not u.startswith((own, "data:"))] == []  # offline only


def test_the_page_and_its_files_are_served_with_a_strict_policy(api_port: int) -> None:
    client = Client(api_port)
    page = client.request("GET", "/docs")
    assert page.status == 200
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert b"<script>" not in page.body  # no inline script: the policy forbids it
    for path, kind in [
        ("/docs/swagger-ui-bundle.js", "text/javascript"),
        ("/docs/swagger-ui.css", "text/css"),
        ("/docs/init.js", "text/javascript"),
    ]:
        reply = client.request("GET", path)
        assert reply.status == 200, path
        assert reply.headers["Content-Type"].startswith(kind)
        assert len(reply.body) > 0
    assert b'"/openapi.json"' in client.request("GET", "/docs/init.js").body
