"""The chaos run's HTTP client (stdlib urllib): Basic auth, a console session's cookie, an
answer as ``(status, body)`` with status 0 for no answer (refused, reset, timed out)."""

from __future__ import annotations

import base64
import http.cookiejar
import json
import urllib.error
import urllib.request
from typing import Any

Answer = tuple[int, bytes]


def basic(name: str, secret: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


class Http:
    """Requests to one base URL; a cookie jar of its own (a console session)."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self.base = base.rstrip("/")
        self.headers = dict(headers or {})
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Answer:
        data = None
        hdrs = self.headers | (headers or {})
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        # the base is the stack's own http:// URL
        request = urllib.request.Request(self.base + path, data, hdrs, method=method)  # noqa: S310
        try:
            with self._opener.open(request, timeout=timeout) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:  # a timeout is an OSError
            return 0, f"{type(exc).__name__}: {exc}".encode()

    def stream_opens(self, path: str, timeout: float = 10.0) -> Answer:
        """A Server-Sent Events stream: its status once the headers came (then closed)."""
        url = self.base + path  # the stack's own http:// URL
        request = urllib.request.Request(url, None, self.headers, method="GET")  # noqa: S310
        try:
            with self._opener.open(request, timeout=timeout) as r:
                return int(r.status), b""
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            return 0, f"{type(exc).__name__}: {exc}".encode()


def describe(answer: Answer) -> str:
    """A short text of a failed answer for the matrix ("503 kafka_unavailable", "0 refused")."""
    status, body = answer
    text = body.decode("utf-8", "replace").replace("\n", " ").strip()
    return f"{status} {text[:80]}".strip()
