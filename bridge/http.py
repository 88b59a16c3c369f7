"""The metrics and health endpoint: ``/metrics``, ``/healthz``, ``/readyz`` (a daemon thread)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


class HealthServer:
    """Serves Prometheus text from ``registry`` and liveness/readiness from callables."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        *,
        alive: Callable[[], bool],
        ready: Callable[[], bool],
    ) -> None:
        self.host = host
        self.requested_port = port
        self.registry = registry
        self.alive = alive
        self.ready = ready
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body = generate_latest(outer.registry)
                    self._reply(200, body, CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = outer.alive()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"not alive\n")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._reply(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
                else:
                    self._reply(404, b"not found: try /metrics, /healthz, /readyz\n")

            def _reply(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((self.host, self.requested_port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
