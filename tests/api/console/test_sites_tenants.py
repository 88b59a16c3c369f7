"""The Overview's edge sites, from a real site (`iot-edge init --up`: a site Mosquitto bridged
to the stack's, its supervisor publishing the site's status), and the Tenants page's rates and
quota use from the bridge's per-tenant counters while a tenant's device exceeds its quota."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import paho.mqtt.client as mqtt
import pytest
from selenium.webdriver.support.ui import WebDriverWait

from stack.ports import free_ports
from tests.api.console.conftest import Browser, ConsoleStack
from tests.api.console.test_flows import POST_JS
from tests.api.console.test_history import GET_JS
from tests.api.console.test_pages import login

pytestmark = pytest.mark.integration


def _cli(stack: ConsoleStack, module: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, env=stack.env,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{module} {args}: {done.stdout}{done.stderr}"
    return done.stdout


def _site_row(driver: Any, key: str) -> dict[str, str] | None:
    found = driver.execute_script(
        "const r = document.querySelector(`tr[data-site='${arguments[0]}']`);"
        "return r ? {link: r.dataset.link, seen: r.querySelector('.last-seen').textContent,"
        " held: r.querySelector('.held').textContent} : null;",
        key,
    )
    return dict(found) if found else None


def test_a_real_site_shows_on_the_overview(
    console_stack: ConsoleStack, browser: Browser, tmp_path: Path
) -> None:
    site, device = f"plant-{uuid.uuid4().hex[:6]}", f"pump-{uuid.uuid4().hex[:6]}"
    reg = console_stack.registry_args
    out = _cli(console_stack, "registry", *reg, "account", "create", site, "--role", "edge",
               "--tenant", "default")  # fmt: skip
    (tmp_path / "site.secret").write_text(json.loads(out)["secret"])
    out = _cli(console_stack, "registry", *reg, "device", "add", "--site", site, device)
    (tmp_path / "devices.json").write_text(json.dumps({device: json.loads(out)["secret"]}))
    [listen] = free_ports(1)
    site_dir = tmp_path / "site"
    _cli(console_stack, "edge", "init", "--site", site,
         "--central", f"127.0.0.1:{console_stack.mqtt_port}", "--insecure-plain-link",
         "--account-secret-file", str(tmp_path / "site.secret"),
         "--devices-file", str(tmp_path / "devices.json"), "--outage-s", "60",
         "--rate-msgs-per-s", "10", "--listen-host", "127.0.0.1", "--listen-port", str(listen),
         "--status-interval-s", "1", "--site-dir", str(site_dir), "--up", "--timeout", "60",
         timeout=120)  # fmt: skip
    try:
        login(browser, "admin1", console_stack.accounts["admin1"])
        wait = WebDriverWait(browser.driver, 60, poll_frequency=0.5)
        # the link state (the bridge's $SYS notification) can show before the site's first
        # status record: wait for both
        found = wait.until(lambda d: (_site_row(d, f"default/{site}") or {}).get("link") == "up"
                           and (_site_row(d, f"default/{site}") or {}).get("seen") != "never"
                           and _site_row(d, f"default/{site}"))  # fmt: skip
        assert isinstance(found, dict)
        row: dict[str, str] = found
        assert row["seen"].endswith("s ago"), row
        assert float(row["seen"].split()[0]) < 30, row
        assert row["held"].isdigit(), row  # the site's own count, from its $SYS counters
        browser.shot("overview-site-up")
        _cli(console_stack, "edge", "down", "--dir", str(site_dir), timeout=60)
        wait.until(lambda d: (_site_row(d, f"default/{site}") or {}).get("link") == "down")
        browser.shot("overview-site-down")
        assert browser.console_errors() == []
        assert browser.failed_requests() == []
    finally:
        subprocess.run(
            [sys.executable, "-m", "edge", "down", "--dir", str(site_dir)],
            env=console_stack.env, timeout=60, check=False, capture_output=True,
        )  # fmt: skip


def _publish(stack: ConsoleStack, user: str, secret: str, topic: str, stop: threading.Event,
             rate: float) -> None:  # fmt: skip
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv5)
    client.username_pw_set(user, secret)
    client.connect("127.0.0.1", stack.mqtt_port)
    client.loop_start()
    seq = 0
    try:
        while not stop.is_set():
            seq += 1
            body = {"ts": int(time.time() * 1000), "seq": seq, "metrics": {"level": 1.0}}
            client.publish(topic, orjson.dumps(body), qos=0)
            stop.wait(1 / rate)
    finally:
        client.loop_stop()
        client.disconnect()


def _tenant(driver: Any, tenant: str) -> dict[str, str]:
    return dict(driver.execute_script(
        "const r = document.querySelector(`tr[data-tenant='${arguments[0]}']`);"
        "return r ? {in: r.querySelector('.msgs-in').textContent,"
        " over: r.querySelector('.over-quota').textContent,"
        " use: r.querySelector('.quota-use').textContent} : {};", tenant,
    ))  # fmt: skip


def test_tenant_rates_and_quota_use_from_the_bridge(
    console_stack: ConsoleStack, browser: Browser
) -> None:
    device = f"rate-{uuid.uuid4().hex[:6]}"
    out = _cli(console_stack, "registry", *console_stack.registry_args, "device", "add",
               "--tenant", "acme", device)  # fmt: skip
    secret = json.loads(out)["secret"]
    login(browser, "admin1", console_stack.accounts["admin1"], "/console/tenants")
    quota = {"msgs_per_s": 2}
    assert browser.driver.execute_async_script(POST_JS, "/tenants/acme/quotas", quota) == 200
    time.sleep(7)  # the bridge re-reads the registry's quotas every 5 s
    stop = threading.Event()
    sender = threading.Thread(
        target=_publish,
        args=(console_stack, f"acme/{device}", secret,
              f"tenants/acme/devices/{device}/telemetry", stop, 8.0),
    )  # fmt: skip
    sender.start()
    try:
        wait = WebDriverWait(browser.driver, 60, poll_frequency=0.5)

        def busy(d: Any) -> dict[str, str] | None:
            row = _tenant(d, "acme")
            try:
                ok = float(row["in"]) > 4 and float(row["over"]) > 1
            except (KeyError, ValueError):
                return None
            return row if ok and row["use"].endswith("%") else None

        found = wait.until(busy)
        assert found is not None
        row = found
        assert int(row["use"].split()[0]) > 150, row  # ~8 msgs/s against a quota of 2

        # its records are on acme's own topic: the device shows with its last value (a tenant
        # topic made after iot-api started is followed within the tailer's 10 s re-check)
        def listed(d: Any) -> dict[str, Any] | None:
            page = d.execute_async_script(GET_JS, f"/devices?tenant=acme&q={device}")
            rows = [r for r in page["rows"] if r["id"] == device]
            return rows[0] if rows and rows[0]["values"] else None

        shown = WebDriverWait(browser.driver, 30, poll_frequency=0.5).until(listed)
        assert shown is not None
        assert shown["values"] == {"level": 1.0}, shown
        assert shown["last_seen"], shown
        browser.shot("tenants-over-quota")
        assert browser.console_errors() == []
        assert browser.failed_requests() == []
    finally:
        stop.set()
        sender.join(10)
        browser.driver.execute_async_script(
            POST_JS, "/tenants/acme/quotas", {"msgs_per_s": ""}
        )  # fmt: skip
