"""`iot-api` in this process (its own event loop on a thread) and a tiny HTTP client."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from api.config import ApiConfig
from api.service import ApiService


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    def __init__(self, port: int, auth: str | None = None) -> None:
        self.port = port
        self.auth = auth

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 90.0,
    ) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = dict(headers or {})
        if content_type is not None:
            sent["Content-Type"] = content_type
        if self.auth is not None:
            sent.setdefault("Authorization", self.auth)
        data = body.encode() if isinstance(body, str) else body
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            return Reply(response.status, dict(response.getheaders()), response.read())
        finally:
            conn.close()

    def publish(
        self, topic: str, body: bytes | str, content_type: str = "application/json", query: str = ""
    ) -> Reply:
        return self.request("POST", f"/events/{topic}{query}", body, content_type)

    def consume(self, topic: str, group: str, cid: str, query: str = "?timeout=5000") -> Reply:
        return self.request("GET", f"/events/{topic}/{group}/{cid}{query}")


@contextmanager
def running_api(**settings: Any) -> Iterator[ApiService]:
    """Start the service on a free port in a thread of its own; stop it on exit."""
    settings.setdefault("api_port", 0)
    service = ApiService(ApiConfig.load([], environ={}, **settings))
    with serving_in_thread(service, "iot-api"):
        yield service


class _Served(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


S = TypeVar("S", bound=_Served)


@contextmanager
def serving_in_thread(service: S, name: str) -> Iterator[S]:
    """``service.start()`` on an event loop in a thread of its own (its failure raised here),
    ``service.stop()`` on exit: iot-api here, iot-amqp in tests/amqp/harness.py."""
    loop = asyncio.new_event_loop()
    failed: list[BaseException] = []
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(service.start())
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failed.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name=f"{name}-test", daemon=True)
    thread.start()
    ready.wait(60)
    if failed:
        raise failed[0]
    try:
        yield service
    finally:
        asyncio.run_coroutine_threadsafe(service.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def read_topic(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[Any]:
    """``count`` records of ``topic`` from the beginning of every partition (key, value)."""
    import time
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(found) < count and time.monotonic() < deadline:
            batch = consumer.consume(100, 0.5)
            found.extend((m.key(), m.value()) for m in batch if m.error() is None)
        # anything past ``count`` shows up within a short extra read
        batch = consumer.consume(100, 1.0)
        found.extend((m.key(), m.value()) for m in batch if m.error() is None)
    finally:
        consumer.close()
    return found


def basic(user: str, secret: str) -> str:
    """An ``Authorization`` header's value for HTTP Basic."""
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def run_module(module: str, args: list[str], env: dict[str, str], timeout: float = 300) -> str:
    """``python -m module args`` to its end; its standard output (a failure fails the test)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, f"{module} {args}: {done.stderr}"
    return done.stdout
