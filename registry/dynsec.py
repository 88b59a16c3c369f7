"""Mosquitto dynamic-security adapter: runs dynsec commands over ``$CONTROL`` (adapter).

Request: a JSON ``{"commands": [...]}`` published to ``$CONTROL/dynamic-security/v1``; each
command carries ``correlationData`` and Mosquitto answers every one on ``.../response``.
Changes take effect at once, no restart (field notes B.4). Synchronous (paho's network thread):
the CLI and the service call it between Kafka writes.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from registry.dynsec_plan import Command
from registry.errors import RegistryError

log = logging.getLogger(__name__)

CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = f"{CONTROL_TOPIC}/response"
BATCH = 100  # commands per request message


class DynsecError(RegistryError):
    """Mosquitto refused a command, or could not be reached."""


class DynsecClient:
    def __init__(
        self, host: str, port: int, username: str, password: str, timeout: float = 10.0
    ) -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self._credentials = (username, password)
        self._lock = threading.Lock()
        self._waiting: dict[str, dict[str, Any] | None] = {}
        self._arrived = threading.Condition(self._lock)
        self._ready = threading.Event()
        self._connect_error: str | None = None
        self._client: mqtt.Client | None = None

    def start(self) -> DynsecClient:
        """Log in as the dynsec admin and subscribe to the responses; returns self."""
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"iot-registry-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv5,
        )
        client.username_pw_set(*self._credentials)
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        try:
            client.connect(self.host, self.port, keepalive=30)
        except OSError as exc:
            raise DynsecError(f"cannot reach Mosquitto at {self.host}:{self.port}: {exc}") from exc
        self._client = client
        client.loop_start()
        if not self._ready.wait(self.timeout) or self._connect_error:
            self.close()
            raise DynsecError(f"Mosquitto admin login failed: {self._connect_error or 'no answer'}")
        return self

    def _on_connect(
        self, client: mqtt.Client, _u: Any, _f: Any, rc: ReasonCode, _p: Properties | None
    ) -> None:
        if rc.is_failure:
            self._connect_error = str(rc)
            self._ready.set()
            return
        client.subscribe(RESPONSE_TOPIC, qos=1)

    def _on_subscribe(
        self, _c: mqtt.Client, _u: Any, _mid: int, rcs: list[ReasonCode], _p: Properties | None
    ) -> None:
        if any(rc.is_failure for rc in rcs):
            self._connect_error = f"subscribe to {RESPONSE_TOPIC} refused: not a dynsec admin"
        self._ready.set()

    def _on_message(self, _c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        try:
            responses = json.loads(msg.payload)["responses"]
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable dynsec response: %r", msg.payload[:200])
            return
        with self._arrived:
            for response in responses:
                corr = response.get("correlationData")
                if corr in self._waiting:
                    self._waiting[corr] = response
            self._arrived.notify_all()

    def call(self, commands: Sequence[Command]) -> list[dict[str, Any]]:
        """Run ``commands`` in order; DynsecError on the first error not tolerated."""
        results: list[dict[str, Any]] = []
        for start in range(0, len(commands), BATCH):
            results += self._call_batch(commands[start : start + BATCH])
        return results

    def _call_batch(self, commands: Sequence[Command]) -> list[dict[str, Any]]:
        ids = [uuid.uuid4().hex for _ in commands]
        bodies = [{**c.body, "correlationData": i} for c, i in zip(commands, ids, strict=True)]
        with self._arrived:
            self._waiting.update(dict.fromkeys(ids))
        if self._client is None:
            raise DynsecError("not connected: call start() first")
        info = self._client.publish(CONTROL_TOPIC, json.dumps({"commands": bodies}), qos=1)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise DynsecError(f"publish to {CONTROL_TOPIC} failed: {mqtt.error_string(info.rc)}")
        with self._arrived:
            done = self._arrived.wait_for(
                lambda: all(self._waiting[i] is not None for i in ids), self.timeout
            )
            answers = [self._waiting.pop(i) for i in ids]
        if not done:
            raise DynsecError(f"Mosquitto did not answer {len(ids)} dynsec command(s)")
        results = []
        for command, answer in zip(commands, answers, strict=True):
            assert answer is not None
            error = answer.get("error")
            if error and error not in command.tolerate:
                raise DynsecError(f"dynsec {command.body['command']} refused: {error}")
            results.append(answer)
        return results

    def list_clients(self) -> list[str]:
        answer = self.call([Command({"command": "listClients", "verbose": False})])[0]
        return [str(c) for c in answer.get("data", {}).get("clients", [])]

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.disconnect()
            client.loop_stop()


# an MQTT shard as the registry reaches it: a port on the admin connection's host (the shards
# of `iot-stack up --mqtt-shards N`), or (host, port) (each shard its own host, as the compose
# overlay docker-compose.shards.yml runs them)
Shard = int | tuple[str, int]


class DynsecFanout(DynsecClient):
    """Dynamic security of several Mosquittos kept alike (the shards of `iot-stack up
    --mqtt-shards N`): every call goes to each, in order; answers and clients are the first's.
    The shards start from copies of one dynsec file, so the same commands keep them equal."""

    def __init__(
        self, host: str, ports: Sequence[Shard], username: str, password: str, timeout: float = 10.0
    ) -> None:
        if not ports:
            raise DynsecError("no Mosquitto to manage")
        addresses = [(host, p) if isinstance(p, int) else p for p in ports]
        super().__init__(*addresses[0], username, password, timeout)
        self.shards = [DynsecClient(h, p, username, password, timeout) for h, p in addresses]

    def start(self) -> DynsecFanout:
        try:
            for shard in self.shards:
                shard.start()
        except BaseException:
            self.close()
            raise
        return self

    def call(self, commands: Sequence[Command]) -> list[dict[str, Any]]:
        results = [shard.call(commands) for shard in self.shards]
        return results[0]

    def list_clients(self) -> list[str]:
        return self.shards[0].list_clients()

    def close(self) -> None:
        for shard in self.shards:
            shard.close()


def parse_ports(text: str) -> tuple[Shard, ...]:
    """``"1884,1885"`` -> (1884, 1885); ``"mqtt-shard-1:1883,mqtt-shard-2:1883"`` ->
    (("mqtt-shard-1", 1883), ("mqtt-shard-2", 1883)); "" -> (): the MQTT shards' own ports,
    or their addresses when each runs on a host of its own."""
    shards: list[Shard] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        try:
            number = int(port)
        except ValueError as exc:
            raise DynsecError(
                f"MQTT shards must be comma-separated ports or host:port, got {text!r}"
            ) from exc
        if not 0 < number < 65536 or (_ and not host):
            raise DynsecError(f"MQTT shard ports must be 1-65535 (host:port: a host), got {text!r}")
        shards.append((host, number) if host else number)
    return tuple(shards)


def admin_client(
    host: str, port: int, username: str, password: str, shard_ports: Sequence[Shard] = ()
) -> DynsecClient:
    """Mosquitto's dynamic security as its admin, not started: the one Mosquitto on ``port``,
    or every shard (``shard_ports``, `iot-stack up --mqtt-shards N`; or their host:port): behind
    HAProxy an admin connection reaches one shard only, so each shard is reached directly."""
    if shard_ports:
        return DynsecFanout(host, shard_ports, username, password)
    return DynsecClient(host, port, username, password)
