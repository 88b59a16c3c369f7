"""Site devices, run inside an edge site's namespace (`ip netns exec`) by the edge tests and the
chaos run's `edge` cell; a script (paho only), run by its path.

publish: one device publishes COUNT QoS 1 telemetry messages (seq START..) to the site broker and
prints {"acked": n, "seconds": s}: n counts PUBACKs, what the site took responsibility for.
stream: one device publishes QoS 1 telemetry at RATE msgs/s (seq 0.., each record marked with
CELL) until SIGINT or SIGTERM, waits up to TIMEOUT s for the PUBACKs still due, and prints
{"sent": n, "acked": [seq, ...]}: the seqs the site acknowledged.
listen: one device subscribes to its commands (persistent session) and appends every command
topic it gets to OUT, one per line, until killed; it reconnects when the site broker restarts.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


def _client(args: argparse.Namespace, clean: bool) -> mqtt.Client:
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=args.user, protocol=mqtt.MQTTv311,
        clean_session=clean,
    )  # fmt: skip
    client.username_pw_set(args.user, args.secret)
    client.max_inflight_messages_set(200)
    client.max_queued_messages_set(0)
    client.reconnect_delay_set(1, 2)
    return client


def publish(args: argparse.Namespace) -> None:
    client = _client(args, clean=True)
    acked = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_publish(*_a: object) -> None:
        nonlocal acked
        with lock:
            acked += 1
            if acked == args.count:
                done.set()

    client.on_publish = on_publish
    client.connect(args.host, args.port, keepalive=30)
    client.loop_start()
    started = time.monotonic()
    for seq in range(args.start, args.start + args.count):
        payload = json.dumps({"ts": int(time.time() * 1000), "seq": seq, "metrics": {"v": seq}})
        client.publish(args.topic, payload, qos=1)
    done.wait(args.timeout)
    took = time.monotonic() - started
    client.loop_stop()
    client.disconnect()
    print(json.dumps({"acked": acked, "seconds": round(took, 3)}))


def stream(args: argparse.Namespace) -> None:
    client = _client(args, clean=True)
    stop = threading.Event()
    # mids acknowledged, appended by paho's thread; no lock of ours in the callback: paho calls
    # it holding the lock publish() takes
    acked_mids: collections.deque[int] = collections.deque()
    seq_of: dict[int, int] = {}  # mid -> seq (mids are unique below MAX_STREAM)

    def on_publish(_c: mqtt.Client, _u: object, mid: int, *_a: object) -> None:
        acked_mids.append(mid)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_a: stop.set())
    client.on_publish = on_publish
    client.connect(args.host, args.port, keepalive=30)
    client.loop_start()
    seq, started = 0, time.monotonic()
    while not stop.is_set() and seq < MAX_STREAM:
        payload = json.dumps({"ts": int(time.time() * 1000), "seq": seq, "metrics": {"v": seq},
                              "cell": args.cell})  # fmt: skip
        seq_of[client.publish(args.topic, payload, qos=1).mid] = seq
        seq += 1
        stop.wait(max(0.0, started + seq / args.rate - time.monotonic()))
    deadline = time.monotonic() + args.timeout
    while len(acked_mids) < seq and time.monotonic() < deadline:
        time.sleep(0.1)
    client.loop_stop()
    client.disconnect()
    acked = sorted(seq_of[m] for m in list(acked_mids) if m in seq_of)
    print(json.dumps({"sent": seq, "acked": acked}), flush=True)


def listen(args: argparse.Namespace) -> None:
    client = _client(args, clean=False)

    def on_connect(c: mqtt.Client, *_a: object) -> None:
        c.subscribe(args.topic, qos=1)
        print("connected", flush=True)

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with open(args.out, "a") as out:
            out.write(msg.topic + "\n")

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(args.host, args.port, keepalive=5)
    client.loop_forever(retry_first_connection=True)


MAX_STREAM = 65_000  # stream: paho's message ids wrap at 65,535
MODES = {"publish": publish, "stream": stream, "listen": listen}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=list(MODES))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", default="")
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--cell", default="")
    args = parser.parse_args()
    MODES[args.mode](args)
    sys.exit(0)


if __name__ == "__main__":
    main()
