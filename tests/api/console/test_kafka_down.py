"""Kafka down shows as such: on a private stack, stop Kafka under a logged-in console; the
Overview says Kafka is down (not a blank page), and so does a page that needs Kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from stack.launcher import Stack
from stack.ports import free_ports
from tests.api.console.conftest import Browser, _wait_http
from tests.api.console.test_pages import login

pytestmark = pytest.mark.integration


def _text(driver: Any, css: str) -> str:
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css
    )
    return str(found or "")


def test_kafka_down_is_shown(local_stack_factory: Callable[..., Stack], tmp_path: Path) -> None:
    local = local_stack_factory(partitions=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    reg = [sys.executable, "-m", "registry", "--kafka-bootstrap", local.kafka_bootstrap, "--json"]
    for args in (["init"], ["account", "create", "ops", "--role", "operator"]):
        done = subprocess.run([*reg, *args], capture_output=True, text=True, env=env,
                              timeout=120, check=True)  # fmt: skip
    secret = json.loads(done.stdout)["secret"]
    [port] = free_ports(1)
    log = (tmp_path / "api.log").open("wb")
    api = subprocess.Popen(
        [sys.executable, "-m", "api", "--registry-auth", "--api-port", str(port),
         "--kafka-bootstrap", local.kafka_bootstrap, "--console", "--console-sample-s", "1",
         "--console-services", "bridge=http://127.0.0.1:9"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    browser = Browser(f"http://127.0.0.1:{port}", tmp_path / "screenshots")
    try:
        _wait_http(f"http://127.0.0.1:{port}/healthz", 60)
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
        api.terminate()
        try:
            api.wait(30)
        except subprocess.TimeoutExpired:
            api.kill()
        log.close()
