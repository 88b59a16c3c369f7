"""The shared metrics and health endpoint over HTTP, its checks flipped by hand."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from health.server import HealthServer


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.headers["Content-Type"], err.read().decode()


def test_metrics_health_and_readiness_follow_the_checks() -> None:
    registry = CollectorRegistry()
    Counter("probe_hits", "a counter of the test's own", registry=registry).inc(3)
    state = {"alive": False, "ready": False}
    server = HealthServer(
        "127.0.0.1",
        0,
        registry,
        alive=lambda: state["alive"],
        ready=lambda: state["ready"],
    )
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert _get(f"{base}/healthz") == (503, "text/plain", "not alive\n")
        assert _get(f"{base}/readyz?x=1") == (503, "text/plain", "not ready\n")
        state["alive"] = state["ready"] = True
        assert _get(f"{base}/healthz") == (200, "text/plain", "ok\n")
        assert _get(f"{base}/readyz") == (200, "text/plain", "ready\n")
        code, ctype, body = _get(f"{base}/metrics")
        assert (code, ctype.split(";")[0]) == (200, "text/plain")
        assert "probe_hits_total 3.0" in body.splitlines()
        assert _get(f"{base}/other") == (
            404,
            "text/plain",
            "not found: try /metrics, /healthz, /readyz\n",
        )
    finally:
        server.stop()


def test_a_503_says_why_in_the_callers_words() -> None:
    server = HealthServer(
        "127.0.0.1",
        0,
        CollectorRegistry(),
        alive=lambda: False,
        ready=lambda: False,
        not_alive=lambda: "not running",
        not_ready=lambda: "q1: stalled\nq2: restarting",
    )
    assert server.answer("/healthz") == (503, b"not running\n", "text/plain")
    assert server.answer("/readyz") == (503, b"q1: stalled\nq2: restarting\n", "text/plain")
