"""kill -9 of iot-amqp (its own process) while a device has hundreds of unsettled uploads in
flight: every message the device saw accepted is in Kafka (accepted = Kafka acknowledged)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from stack.ports import free_port
from tests.amqp.test_uploads import Door, door, reading, seq_of  # noqa: F401 - fixture
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.commands.harness import wait_for
from tests.plugins.jvm_options import environ_without_settings

pytestmark = pytest.mark.integration
TOTAL = 3000
KILL_AFTER = 200  # accepted messages before the kill


class Uploader(MessagingHandler):
    """Sends TOTAL readings unsettled as fast as credit allows; records which were accepted.
    Runs in the container's thread only (no proton object leaves it)."""

    def __init__(self, url: str, user: str, secret: str, halfway: threading.Event) -> None:
        super().__init__()
        self.url, self.user, self.secret = url, user, secret
        self.halfway = halfway
        self.sent = 0
        self.seq_of: dict[str, int] = {}
        self.accepted: set[int] = set()
        self.settled_otherwise = 0

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(
            self.url, user=self.user, password=self.secret, allowed_mechs="PLAIN",
            reconnect=False,
        )  # fmt: skip
        event.container.create_sender(conn, None)

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < TOTAL:
            dlv = event.sender.send(Message(address="t", body=reading(self.sent), inferred=True))
            self.seq_of[dlv.tag] = self.sent
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        self.accepted.add(self.seq_of[event.delivery.tag])
        if len(self.accepted) >= KILL_AFTER:
            self.halfway.set()

    def on_rejected(self, event: Any) -> None:
        self.settled_otherwise += 1

    def on_released(self, event: Any) -> None:
        self.settled_otherwise += 1

    def on_transport_error(self, event: Any) -> None:
        if event.connection is not None:  # the server died: nothing more to send
            event.connection.close()


@pytest.fixture
def amqp_process(door: Door) -> Iterator[tuple[subprocess.Popen[bytes], int]]:  # noqa: F811
    port, http = free_port(), free_port()
    env = environ_without_settings()
    argv = [
        sys.executable, "-m", "amqp", "--registry-auth",
        "--kafka-bootstrap", door.bootstrap, "--registry-topic", door.registry_topic,
        "--amqp-port", str(port), "--amqps-port", "0", "--http-port", str(http),
        "--topic-telemetry", door.topic("telemetry"), "--topic-events", door.topic("events"),
        "--topic-dlq", door.topic("dlq"), "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, 60, "iot-amqp")
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_kill_9_with_uploads_in_flight_loses_nothing_accepted(
    door: Door,  # noqa: F811
    amqp_process: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = amqp_process
    halfway = threading.Event()
    uploader = Uploader(f"amqp://127.0.0.1:{port}", "pump-1", door.secrets["pump-1"], halfway)
    container = Container(uploader)
    thread = threading.Thread(target=container.run, name="uploader", daemon=True)
    thread.start()
    assert halfway.wait(60), "no uploads accepted"
    os.kill(proc.pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    accepted = set(uploader.accepted)
    assert len(accepted) >= KILL_AFTER
    assert len(accepted) < uploader.sent, "nothing was in flight at the kill"
    assert proc.wait(10) == -signal.SIGKILL
    found = door.read(
        door.topic("telemetry"),
        len(accepted),
        lambda r: seq_of(r) in accepted and r.key == b"pump-1",
    )
    assert accepted <= {seq_of(r) for r in found}
