"""Kafka down shows as such: on a private stack, stop Kafka under a logged-in console; the
Overview says Kafka is down (not a blank page), and so does a page that needs Kafka."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from stack.launcher import Stack
from stack.ports import free_ports
from tests.api.console.conftest import Browser, operator_console, stop_api
from tests.api.console.test_pages import login

pytestmark = pytest.mark.integration


def _text(driver: Any, css: str) -> str:
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css
    )
    return str(found or "")


def test_kafka_down_is_shown(local_stack_factory: Callable[..., Stack], tmp_path: Path) -> None:
    local = local_stack_factory(partitions=1)
    [port] = free_ports(1)
    secret, api = operator_console(local.kafka_bootstrap, port, tmp_path / "api.log")
    browser = Browser(f"http://127.0.0.1:{port}", tmp_path / "screenshots")
    try:
        login(browser, "ops", secret)
        wait = WebDriverWait(browser.driver, 60, poll_frequency=0.5)
        wait.until(lambda d: _text(d, "[data-service='kafka'] .value") == "up")
        assert _text(browser.driver, "[data-service='bridge'] .value") == "down"  # no bridge
        local.kafka.stop()
        wait.until(lambda d: _text(d, "[data-service='kafka'] .value") == "down")
        wait.until(lambda d: "Kafka is down" in _text(d, "#lag"))
        browser.shot("overview-kafka-down")
        browser.open("/console/topics")
        state = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".error-state")))
        assert "Kafka" in state.text
        browser.shot("topics-kafka-down")
    finally:
        browser.close()
        stop_api(api)
