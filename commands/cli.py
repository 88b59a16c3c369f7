"""``iot-cmd``: send commands to devices, look up and follow their status, or run the path.

Exit codes: 0 ok / succeeded, 1 runtime error, 2 usage error; ``send --wait`` also:
3 failed, 4 expired, 5 rejected, 6 no final state within ``--wait-timeout``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from bridge.config import kafka_client_security, parse_kafka_extra
from bridge.console import new_parser, parse_args, stop_on_signals
from bridge.errors import BridgeError, ConfigError
from commands.client import CommandClient
from commands.config import CommandConfig, add_arguments, from_namespace
from commands.model import DEVICE_ID_RE, CommandPathError, State
from commands.status import StatusRecord, decode_status, status_fields
from mqtt_codec import MqttProtocolError

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CODES = {
    State.SUCCEEDED: 0,
    State.FAILED: 3,
    State.EXPIRED: 4,
    State.REJECTED: 5,
}
EXIT_WAIT_TIMEOUT = 6


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "iot-cmd",
        "Send commands to devices through Kafka and follow what becomes of them.",
        epilog="Exit codes: 0 ok/succeeded, 1 error, 2 usage, 3 failed, 4 expired, 5 rejected, "
        "6 --wait timed out.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    kafka = argparse.ArgumentParser(add_help=False)
    kafka.add_argument(
        "--kafka-bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: env IOT_KAFKA_BOOTSTRAP or localhost:9092)",
    )
    kafka.add_argument(
        "--topic-commands", default=None, help="commands topic (env IOT_TOPIC_COMMANDS)"
    )
    kafka.add_argument(
        "--topic-command-status",
        default=None,
        help="status topic (env IOT_TOPIC_COMMAND_STATUS)",
    )
    kafka.add_argument(
        "--topic-command-replies",
        default=None,
        help="replies topic (env IOT_TOPIC_COMMAND_REPLIES)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    send = sub.add_parser("send", parents=[kafka], help="send a command to a device or group")
    send.add_argument("device", metavar="DEVICE", help="device id, or group:{name} to broadcast")
    send.add_argument("name", metavar="NAME", help="command name (one MQTT topic level)")
    send.add_argument("--args", default="{}", help="command arguments as a JSON object")
    send.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait for a reply per attempt"
    )
    send.add_argument("--attempts", type=int, default=None, help="delivery attempts at most")
    send.add_argument(
        "--ttl",
        type=float,
        default=None,
        help="seconds the command stays valid (default timeout x attempts)",
    )
    send.add_argument("--no-reply", action="store_true", help="the device sends no reply")
    send.add_argument("--id", default=None, help="command id (default: a new random id)")
    send.add_argument(
        "--tenant",
        default=None,
        help="the sender's tenant: the command reaches only that tenant's devices "
        "(default: the default tenant)",
    )
    send.add_argument(
        "--wait", action="store_true", help="follow the status until it is final; exit code says it"
    )
    send.add_argument(
        "--wait-timeout",
        type=float,
        default=None,
        help="give up waiting after this many seconds (default: TTL + 30)",
    )
    send.add_argument("--json", action="store_true", help="print statuses as JSON lines")

    status = sub.add_parser("status", parents=[kafka], help="print the last status of a command")
    status.add_argument("command_id", metavar="COMMAND_ID", help="the command id")
    status.add_argument("--json", action="store_true", help="print the status as JSON")

    watch = sub.add_parser("watch", parents=[kafka], help="print statuses as they are written")
    watch.add_argument(
        "--from-beginning", action="store_true", help="start at the beginning of the topic"
    )
    watch.add_argument("--json", action="store_true", help="print statuses as JSON lines")
    watch.add_argument("--count", type=int, default=None, help="stop after this many statuses")
    watch.add_argument("--duration", type=float, default=None, help="stop after this many seconds")

    serve = sub.add_parser(
        "serve", help="run the command path alone (iot-bridge --commands-enabled does it too)"
    )
    add_arguments(serve)
    return parser


def _config(ns: argparse.Namespace) -> CommandConfig:
    overrides = {
        k: v
        for k, v in (
            ("kafka_bootstrap", getattr(ns, "kafka_bootstrap", None)),
            ("topic_commands", getattr(ns, "topic_commands", None)),
            ("topic_command_status", getattr(ns, "topic_command_status", None)),
            ("topic_command_replies", getattr(ns, "topic_command_replies", None)),
        )
        if v is not None
    }
    return from_namespace(argparse.Namespace(), **overrides)


def _client(cfg: CommandConfig) -> CommandClient:
    return CommandClient(
        cfg.kafka_bootstrap,
        topic_commands=cfg.topic_commands,
        topic_status=cfg.topic_command_status,
        topic_replies=cfg.topic_command_replies,
        extra=parse_kafka_extra(cfg.kafka_extra) | kafka_client_security(cfg),
    )


def _format(status: StatusRecord, as_json: bool) -> str:
    if as_json:
        doc = status_fields(status)
        if status.replies:
            doc["replies"] = dict(status.replies)
        return orjson.dumps(doc).decode()
    at = datetime.fromtimestamp(status.at / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    detail = f"  {status.detail}" if status.detail else ""
    return (
        f"{at}  {status.command_id}  {status.device_id}  {status.state.value:<9} "
        f"attempt {status.attempt}{detail}"
    )


def _cmd_send(ns: argparse.Namespace) -> int:
    if not (ns.device.startswith("group:") or DEVICE_ID_RE.fullmatch(ns.device)):
        raise _UsageError(f"DEVICE {ns.device!r} is neither a device id nor group:{{name}}")
    try:
        args = orjson.loads(ns.args)
    except orjson.JSONDecodeError as exc:
        raise _UsageError(f"--args is not JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise _UsageError("--args must be a JSON object")
    for flag, value in (("--timeout", ns.timeout), ("--ttl", ns.ttl)):
        if value is not None and value <= 0:
            raise _UsageError(f"{flag} must be positive")
    if ns.attempts is not None and ns.attempts < 1:
        raise _UsageError("--attempts must be >= 1")
    cfg = _config(ns)
    client = _client(cfg)
    timeout_ms = round(ns.timeout * 1000) if ns.timeout is not None else None
    ttl_ms = round(ns.ttl * 1000) if ns.ttl is not None else None
    status_tail = client.tail_status() if ns.wait else None
    reply_tail = client.tail_replies() if ns.wait else None
    try:
        cid = client.send(
            ns.device,
            ns.name,
            args,
            command_id=ns.id,
            timeout_ms=timeout_ms,
            max_attempts=ns.attempts,
            reply_expected=not ns.no_reply,
            ttl_ms=ttl_ms,
            tenant=ns.tenant,
        )
        if status_tail is None or reply_tail is None:
            print(cid)
            return EXIT_OK
        print(f"command {cid} sent to {ns.device}", file=sys.stderr)
        if ns.wait_timeout is not None:
            limit = ns.wait_timeout
        else:
            per_attempt = timeout_ms or cfg.command_timeout_ms
            attempts = (
                1 if ns.device.startswith("group:") else (ns.attempts or cfg.command_max_attempts)
            )
            limit = (ttl_ms or per_attempt * attempts) / 1000 + 30
        deadline = time.monotonic() + limit
        final: StatusRecord | None = None
        replies: list[dict[str, Any]] = []
        while final is None and time.monotonic() < deadline:
            for msg in status_tail.poll(0.1):
                status = decode_status(msg.key(), msg.value())
                if status is not None and status.command_id == cid:
                    print(_format(status, ns.json))
                    if status.final:
                        final = status
            for msg in reply_tail.poll(0):
                doc = orjson.loads(msg.value() or b"{}")
                if isinstance(doc, dict) and doc.get("command_id") == cid:
                    replies.append(doc)
        # a reply record and its status are written together: pick up stragglers
        end = time.monotonic() + 1.0
        while (
            final is not None
            and final.state in (State.SUCCEEDED, State.FAILED)
            and (not replies and time.monotonic() < end)
        ):
            for msg in reply_tail.poll(0.1):
                doc = orjson.loads(msg.value() or b"{}")
                if isinstance(doc, dict) and doc.get("command_id") == cid:
                    replies.append(doc)
        for doc in replies:
            print("reply " + orjson.dumps(doc).decode())
        if final is None:
            print(f"no final status for {cid} within {limit:.0f}s", file=sys.stderr)
            return EXIT_WAIT_TIMEOUT
        return EXIT_CODES.get(final.state, EXIT_ERROR)
    finally:
        for tail in (status_tail, reply_tail):
            if tail is not None:
                tail.close()
        client.close()


def _cmd_status(ns: argparse.Namespace) -> int:
    cfg = _config(ns)
    client = _client(cfg)
    try:
        status = client.status(ns.command_id)
    finally:
        client.close()
    if status is None:
        print(f"no status for {ns.command_id}", file=sys.stderr)
        return EXIT_ERROR
    print(_format(status, ns.json))
    if status.command is not None and not ns.json:
        print("command " + orjson.dumps(status.command).decode())
    return EXIT_OK


def _cmd_watch(ns: argparse.Namespace) -> int:
    cfg = _config(ns)
    client = _client(cfg)
    tail = client.tail_status(from_beginning=ns.from_beginning)
    seen = 0
    deadline = time.monotonic() + ns.duration if ns.duration is not None else None
    try:
        with stop_on_signals(signal.SIGTERM) as stop:
            while not stop.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                for msg in tail.poll(0.2):
                    status = decode_status(msg.key(), msg.value())
                    if status is None:
                        continue
                    print(_format(status, ns.json), flush=True)
                    seen += 1
                    if ns.count is not None and seen >= ns.count:
                        return EXIT_OK
    except KeyboardInterrupt:
        pass
    finally:
        tail.close()
        client.close()
    return EXIT_OK


def _cmd_serve(ns: argparse.Namespace) -> int:
    from bridge import logs

    cfg = from_namespace(ns)
    if not ns.verbose:  # -v/-vv keep the plain text set-up of main()
        logs.configure(cfg.log_level, cfg.log_format)
    with stop_on_signals(signal.SIGTERM, signal.SIGINT) as stop:
        return _serve(cfg, stop)


def _serve(cfg: CommandConfig, stop: threading.Event) -> int:
    from commands.metrics import CommandHealth, health_server
    from commands.service import CommandService

    service = CommandService(cfg)
    health = CommandHealth(service)
    http = None
    if cfg.command_http_port:
        http = health_server(cfg.http_host, cfg.command_http_port, health)
        try:
            http.start()
        except OSError as exc:
            log.critical("cannot listen on %s:%s: %s", cfg.http_host, cfg.command_http_port, exc)
            return EXIT_ERROR
        log.info(
            "metrics/health on http://%s:%d (/metrics /healthz /readyz)",
            cfg.http_host,
            http.port,
            extra={"http_port": http.port, "event": "http_listening"},
        )
    try:
        try:
            service.start()
        except BaseException:
            health.mark_start_failed()
            raise
        health.mark_started()
        log.info(
            "command path running (group %s)",
            cfg.command_group_id,
            extra={"event": "commands_ready"},
        )
        print("command path ready", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            if not service.is_alive():
                break
    finally:
        service.stop(cfg.shutdown_timeout_s + 5)
        if http is not None:
            http.stop()
    if service.failure is not None:
        print(f"iot-cmd serve: {service.failure}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(_parser(), argv)
    if isinstance(ns, int):
        return ns
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(ns.verbose, 2)]
    if ns.command == "serve" and ns.log_level is not None and not ns.verbose:
        level = getattr(logging, str(ns.log_level).upper(), logging.INFO)
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    handlers = {
        "send": _cmd_send,
        "status": _cmd_status,
        "watch": _cmd_watch,
        "serve": _cmd_serve,
    }
    try:
        return handlers[ns.command](ns)
    except (_UsageError, ConfigError) as exc:
        print(f"iot-cmd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (CommandPathError, BridgeError, MqttProtocolError) as exc:
        print(f"iot-cmd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        log.debug("iot-cmd failed", exc_info=True)
        print(f"iot-cmd: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
