"""The metrics and health endpoint: ``/metrics``, ``/healthz``, ``/readyz`` (a daemon thread).

``/metrics`` is Prometheus text from a registry; ``/healthz`` and ``/readyz`` answer 200 while
their check holds, else 503 with a line (or lines) saying why. Used by the bridge, the command
path and the analytics job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

TEXT = "text/plain"


class HealthServer:
    """Serves Prometheus text from ``registry`` and liveness/readiness from callables.

    ``not_alive`` and ``not_ready`` give the text of a 503 (called only then)."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        alive: Callable[[], bool],
        ready: Callable[[], bool],
        not_alive: Callable[[], str] = lambda: "not alive",
        not_ready: Callable[[], str] = lambda: "not ready",
        thread_name: str = "http",
    ) -> None:
        self.host = host
        self.requested_port = port
        self.registry = registry
        self.alive = alive
        self.ready = ready
        self.not_alive = not_alive
        self.not_ready = not_ready
        self.thread_name = thread_name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def answer(self, path: str) -> tuple[int, bytes, str]:
        """Status, body and content type of a GET of ``path``."""
        if path == "/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if path == "/healthz":
            if self.alive():
                return 200, b"ok\n", TEXT
            return 503, _line(self.not_alive()), TEXT
        if path == "/readyz":
            if self.ready():
                return 200, b"ready\n", TEXT
            return 503, _line(self.not_ready()), TEXT
        return 404, b"not found: try /metrics, /healthz, /readyz\n", TEXT

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, body, ctype = outer.answer(self.path.split("?", 1)[0])
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((self.host, self.requested_port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=self.thread_name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _line(text: str) -> bytes:
    return (text if text.endswith("\n") else text + "\n").encode()
