"""The command phase of `make bench-amqp` (issue 34): an application sends commands over
iot-amqp's northbound ``command/{tenant}`` link to devices connected over AMQP, and reads their
replies on ``command_response/{tenant}/{reply_id}`` (docs/amqp.md, "Northbound", "Commands").

Servers: the given Kafka and (anonymous) Mosquitto; a registry on fresh topics holding the
tenant ``default``, an application account (role ``api``) and ``devices`` devices, each with
its own secret; the command path (``iot-cmd serve``) and an ``iot-amqp --registry-auth`` as
processes of their own, on fresh command topics. One python-qpid-proton container is the
application (one connection: a sender on ``command/default``, a receiver on its reply
address) and the devices (a connection each, logged in with its own secret: a ``command``
receiver link, and an anonymous sender answering each command on its ``reply-to``).

Every device first answers one warm-up command (so its MQTT session in iot-amqp is
subscribed); 3 s of commands at the rate follow, unmeasured, until all are answered (a cold
path's first seconds queued up to 5 s into the measured ones); then the application sends
``rate`` commands/s, round robin, for ``seconds``, and waits up to ``timeout_s`` for the last
replies. Measured: the round trip (application send -> device receipt -> reply back at the
application; one process, one monotonic clock), commands/s sent, replies/s, lost (no reply)
and refused, and the CPU seconds per answered command of iot-amqp and of the command path
(from /proc, over the measured span).
"""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from bench.amqp_cmd_model import OK_BODY, CommandSettings, device_of, due, figures
from bench.commands.processes import CMD_READY_LINE, Proc, spawn, wait_until, without_iot_env
from bench.http_api import wait_ready
from bench.procstat import CpuMeter
from registry.errors import ConflictError
from registry.kafka_store import KafkaStore
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from stack.ports import free_port
from stack.provisioning import SIMULATED_FLEET_HASH
from stack.topics import TopicSpec, ensure_topics

TENANT = "default"
WARM_UP_S = 90.0  # every device's first command answered within this, or the phase fails
PRELUDE_S = 3.0


class _Bench(MessagingHandler):
    """The application and the devices in one container (see the module's docstring)."""

    def __init__(
        self,
        url: str,
        *,
        app: tuple[str, str],
        devices: list[tuple[str, str]],
        settings: CommandSettings,
        on_start: Callable[[], None],
        on_end: Callable[[], None],
    ) -> None:
        super().__init__(prefetch=settings.credit, auto_accept=True)
        self.url, self.app, self.devices, self.settings = url, app, devices, settings
        self.on_measure_start, self.on_measure_end = on_start, on_end
        self.reply_to = f"command_response/{TENANT}/bench-{uuid.uuid4().hex[:8]}"
        self.sent_at: dict[str, float] = {}
        self.device_at: dict[str, float] = {}
        self.replied_at: dict[str, float] = {}
        self.refused = self.bad_replies = 0
        self.error = ""
        self.send_span = 0.0
        self._conns: list[Any] = []
        self._dev_senders: dict[str, Any] = {}  # by the device's command link name
        self._opened: set[str] = set()
        self._warm: set[int] = set()
        self._warm_tries = 0
        self._last_warm = 0.0
        self._prelude_sent = self._prelude_back = 0
        self._settle_deadline = 0.0
        self._state = "connecting"
        self._start = self._warm_deadline = self._end_deadline = 0.0
        self._sender: Any = None

    # --- connections ----------------------------------------------------------------------

    def on_start(self, event: Any) -> None:
        c = event.container
        user, secret = self.app
        conn = c.connect(self.url, user=user, password=secret, allowed_mechs="PLAIN")
        self._conns.append(conn)
        self._sender = c.create_sender(conn, f"command/{TENANT}", name="app-commands")
        c.create_receiver(conn, self.reply_to, name="app-replies")
        for i, (device, secret) in enumerate(self.devices):
            conn = c.connect(self.url, user=device, password=secret, allowed_mechs="PLAIN")
            self._conns.append(conn)
            c.create_receiver(conn, "command", name=f"cmd-{i}")
            self._dev_senders[f"cmd-{i}"] = c.create_sender(conn, None, name=f"reply-{i}")
        self._warm_deadline = time.monotonic() + WARM_UP_S
        c.schedule(0.1, self)

    def on_link_opened(self, event: Any) -> None:
        self._opened.add(event.link.name)

    def _all_open(self) -> bool:
        return len(self._opened) >= 2 + 2 * len(self.devices)

    def _fail(self, why: str) -> None:
        if not self.error:
            self.error = why
        self._finish()

    def on_link_error(self, event: Any) -> None:
        self._fail(f"link {event.link.name}: {event.link.remote_condition}")

    def on_connection_error(self, event: Any) -> None:
        self._fail(f"connection: {event.connection.remote_condition}")

    def on_transport_error(self, event: Any) -> None:
        self._fail(f"transport: {event.transport.condition}")

    def _finish(self) -> None:
        if self._state == "done":
            return
        if self._state in ("measuring", "draining"):
            self.on_measure_end()
        self._state = "done"
        for conn in self._conns:
            conn.close()

    # --- the clock: warm-up, paced sends, the end ----------------------------------------

    def on_timer_task(self, event: Any) -> None:
        now = time.monotonic()
        if self._state == "connecting":
            if now > self._warm_deadline:
                self._fail(f"links not open within {WARM_UP_S:.0f} s")
                return
            if self._all_open():
                self._state = "warming"
        if self._state == "warming":
            if now > self._warm_deadline:
                self._fail(f"{len(self._warm)} of {len(self.devices)} devices warmed up")
                return
            if len(self._warm) == len(self.devices):
                self._state, self._start = "prelude", now
            elif self._warm_tries == 0 or now - self._last_warm >= 2.0:
                self._warm_tries += 1
                self._last_warm = now
                for i in range(len(self.devices)):
                    if i not in self._warm:
                        self._send(f"w{self._warm_tries}-{i}", i)
        if self._state == "prelude":
            self._prelude(now)
        if self._state == "settling" and (
            self._prelude_back >= self._prelude_sent or now > self._settle_deadline
        ):
            self._state, self._start = "measuring", now
            self.on_measure_start()
        if self._state == "measuring":
            self._pace(now)
        if self._state == "draining" and now > self._end_deadline:
            self._finish()
            return
        if self._state != "done":
            paced = self._state in ("prelude", "measuring")
            event.container.schedule(0.01 if paced else 0.1, self)

    def _prelude(self, now: float) -> None:
        """PRELUDE_S at the rate, unmeasured: a cold path's first seconds (fresh consumers,
        sessions, fetches) would otherwise queue into the measured commands."""
        planned = max(1, int(self.settings.rate * PRELUDE_S))
        for _ in range(due(now - self._start, self.settings.rate, self._prelude_sent, planned)):
            if self._sender.credit <= 0:
                break
            self._send(f"p{self._prelude_sent}", device_of(self._prelude_sent, len(self.devices)))
            self._prelude_sent += 1
        if self._prelude_sent >= planned:
            self._state, self._settle_deadline = "settling", now + self.settings.timeout_s

    def _pace(self, now: float) -> None:
        planned = self.settings.planned
        for _ in range(due(now - self._start, self.settings.rate, len(self.sent_at), planned)):
            if self._sender.credit <= 0:
                break  # iot-amqp's credit: the rest stays due and goes on the next tick
            cid = f"c{len(self.sent_at)}"
            self.sent_at[cid] = time.monotonic()
            self._send(cid, device_of(len(self.sent_at) - 1, len(self.devices)))
        if len(self.sent_at) >= planned:
            self.send_span = time.monotonic() - self._start
            self._state = "draining"
            self._end_deadline = time.monotonic() + self.settings.timeout_s
            self._maybe_done()

    def _send(self, cid: str, device: int) -> None:
        self._sender.send(
            Message(address=f"command/{TENANT}/{self.devices[device][0]}", subject="bench",
                    correlation_id=cid, reply_to=self.reply_to, body=b'{"n": 1}', inferred=True),
            tag=cid,
        )  # fmt: skip

    def _maybe_done(self) -> None:
        if self._state == "draining" and len(self.replied_at) + self.refused >= len(self.sent_at):
            self._finish()

    # --- messages ------------------------------------------------------------------------

    def on_message(self, event: Any) -> None:
        now, msg, link = time.monotonic(), event.message, event.link.name
        cid = str(msg.correlation_id)
        if link == "app-replies":
            if cid.startswith("w"):
                self._warm.add(int(cid.split("-")[1]))
            elif cid.startswith("p"):
                self._prelude_back += 1
            elif cid in self.sent_at and cid not in self.replied_at:
                self.replied_at[cid] = now
                if (msg.properties or {}).get("status") != 200:
                    self.bad_replies += 1
                self._maybe_done()
            return
        if cid in self.sent_at:
            self.device_at.setdefault(cid, now)
        reply = Message(address=msg.reply_to, correlation_id=msg.correlation_id, body=OK_BODY,
                        inferred=True)  # fmt: skip
        self._dev_senders[link].send(reply)

    def on_rejected(self, event: Any) -> None:
        tag = event.delivery.tag
        tag = tag.decode() if isinstance(tag, bytes) else str(tag)
        if event.link.name == "app-commands" and tag in self.sent_at:
            self.refused += 1
            self._maybe_done()
        elif event.link.name != "app-commands":
            self.error = self.error or f"a reply refused on {event.link.name}"

    on_released = on_rejected
    on_modified = on_rejected


def _registry(
    bootstrap: str, tag: str, devices: int
) -> tuple[KafkaStore, tuple[str, str], list[tuple[str, str]]]:
    """A registry on fresh topics: the account ``svc/bench-app-{tag}`` and the devices, with
    their secrets (kept in memory only)."""
    store = KafkaStore(
        bootstrap,
        topic=f"iot.registry.bench-{tag}",
        audit_topic=f"iot.registry.audit.bench-{tag}",
        transactional_id=f"iot-registry-bench-{tag}",
    )
    store.ensure_topics()
    reg = Registry.open(store, local_admin("bench"), None, write=True)
    with contextlib.suppress(ConflictError):  # a Kafka given with its registry's tenant
        reg.create_tenant(TENANT)
    app = reg.create_account(f"bench-app-{tag}", [Role.API], TENANT).secret
    ids = [f"ac-{tag}-{i}" for i in range(devices)]
    # the simulated fleets' scrypt cost: the log-ins are not what is measured
    issued = reg.add_devices(TENANT, ids, hash_params=SIMULATED_FLEET_HASH)
    if app is None or not all(d.secret for d in issued):
        raise RuntimeError("the registry issued no secret")
    secrets = [(i, str(d.secret)) for i, d in zip(ids, issued, strict=True)]
    return store, (f"svc/bench-app-{tag}", app), secrets


def command_phase(
    bootstrap: str,
    mqtt: tuple[str, int],
    settings: CommandSettings,
    workdir: Path,
    mqtt_login: tuple[str, Path] | None = None,
) -> dict[str, Any]:
    """One run of the phase; its figures (bench.amqp_cmd_model.figures). ``mqtt_login``: the
    MQTT account (user name, password file) of the command path and of iot-amqp's device
    sessions, for a Mosquitto that is not anonymous."""
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"bench.amqpcmd.{k}.{tag}" for k in ("commands", "status", "replies", "dlq")}
    ensure_topics(bootstrap, [TopicSpec(n, compacted=k == "status") for k, n in topics.items()], 3)
    store, app, devices = _registry(bootstrap, tag, settings.devices)
    base = without_iot_env()
    env = base | {"PYTHONUNBUFFERED": "1", "IOT_MQTT_HOST": mqtt[0],
                  "IOT_MQTT_PORT": str(mqtt[1]), "IOT_KAFKA_BOOTSTRAP": bootstrap,
                  "IOT_COMMANDS_ENABLED": "1", "IOT_TOPIC_COMMANDS": topics["commands"],
                  "IOT_TOPIC_COMMAND_STATUS": topics["status"],
                  "IOT_TOPIC_COMMAND_REPLIES": topics["replies"],
                  "IOT_TOPIC_COMMANDS_DLQ": topics["dlq"],
                  "IOT_COMMAND_GROUP_ID": f"bench-amqpcmd-{tag}",
                  "IOT_COMMAND_MQTT_CLIENT_ID": f"bench-amqpcmd-{tag}",
                  "IOT_MQTT_SESSION_EXPIRY_S": "0", "IOT_COMMAND_TIMEOUT_MS": "30000",
                  "IOT_HTTP_PORT": str(free_port()), "IOT_LOG_LEVEL": "WARNING"}  # fmt: skip
    login_args: list[str] = []
    if mqtt_login is not None:
        env |= {"IOT_MQTT_USERNAME": mqtt_login[0], "IOT_MQTT_PASSWORD_FILE": str(mqtt_login[1])}
        login_args = ["--mqtt-username", mqtt_login[0], "--mqtt-password-file", str(mqtt_login[1])]
    cmd_log = workdir / f"command-path-{tag}.log"
    cmd = spawn("iot-cmd serve", [sys.executable, "-m", "commands.cli", "serve"], env, cmd_log)
    port, http = free_port(), free_port()
    amqp: Proc | None = None
    try:
        wait_until(cmd, lambda: CMD_READY_LINE in cmd_log.read_text(errors="replace"), "ready")
        amqp = spawn(
            "iot-amqp",
            [sys.executable, "-m", "amqp", "--registry-auth", "--registry-topic", store.topic,
             "--log-level", "WARNING", "--kafka-bootstrap", bootstrap, "--amqp-port", str(port),
             "--amqps-port", "0", "--http-port", str(http), "--mqtt-host", mqtt[0],
             "--mqtt-port", str(mqtt[1]), "--topic-commands", topics["commands"],
             "--topic-command-replies", topics["replies"],
             "--topic-command-status", topics["status"], "--device-session-expiry-s", "60",
             *login_args],
            base, workdir / f"iot-amqp-cmd-{tag}.log",
        )  # fmt: skip
        wait_ready(f"http://127.0.0.1:{http}/readyz")
        meters = {"amqp": CpuMeter([amqp.popen.pid]), "cmd": CpuMeter([cmd.popen.pid])}
        used: dict[str, float | None] = {}

        def start() -> None:
            for meter in meters.values():
                meter.start()

        def end() -> None:
            used.update({k: m.used() for k, m in meters.items()})

        bench = _Bench(
            f"amqp://127.0.0.1:{port}", app=app, devices=devices, settings=settings,
            on_start=start, on_end=end,
        )  # fmt: skip
        Container(bench).run()
        if bench.error:
            raise RuntimeError(f"command phase: {bench.error}")
        return figures(
            settings=settings, sent_at=bench.sent_at, device_at=bench.device_at,
            replied_at=bench.replied_at, refused=bench.refused, bad_replies=bench.bad_replies,
            send_span_s=bench.send_span, cpu_amqp_s=used.get("amqp"),
            cpu_command_path_s=used.get("cmd"),
        )  # fmt: skip
    finally:
        for proc in (amqp, cmd):
            if proc is not None:
                proc.stop(30)
        store.close()
