"""Edge site: publish cost vs kill -9 loss bound of ``autosave_on_changes`` (docs/edge.md).

For each autosave setting a fresh site broker (the config `iot-edge init` writes) whose bridge
points at a closed port, so every message stays queued as during an outage: one device
publishes COUNT QoS 1 messages (paho, 200 in flight), the time to the last PUBACK is the
publish cost; 0.3 s later the broker is killed with SIGKILL and restarted, and the messages
still held (``$SYS`` stored minus retained) give the loss. Run: ``python -m bench.edge_autosave``.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge.broker import SiteBroker
from edge.config import EdgeConfig
from edge.install import install
from edge.render import MONITOR_USER, SitePaths
from edge.status import RETAINED, STORED
from stack.ports import free_ports


def _client(port: int, user: str, secret: str) -> mqtt.Client:
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv311)
    c.username_pw_set(user, secret)
    c.max_inflight_messages_set(200)
    c.max_queued_messages_set(0)
    c.connect("127.0.0.1", port)
    return c


def _held(port: int, secret: str) -> int:
    values: dict[str, int] = {}
    got = threading.Event()

    def on_message(_c: mqtt.Client, _u: object, m: mqtt.MQTTMessage) -> None:
        values[m.topic] = int(m.payload)
        if len(values) == 2:
            got.set()

    c = _client(port, MONITOR_USER, secret)
    c.on_message = on_message
    c.subscribe([(STORED, 0), (RETAINED, 0)])
    c.loop_start()
    got.wait(10)
    c.loop_stop()
    c.disconnect()
    return values[STORED] - values[RETAINED]


def run(autosave: int, count: int, workdir: Path) -> dict[str, float]:
    port, central = free_ports(2)
    (workdir / "acct").write_text("x")
    (workdir / "devices.json").write_text(json.dumps({"d1": "pw"}))
    cfg = EdgeConfig(
        site="bench", central=f"127.0.0.1:{central}", site_dir=str(workdir / "site"),
        account_secret_file=str(workdir / "acct"), devices_file=str(workdir / "devices.json"),
        listen_host="127.0.0.1", listen_port=port, insecure_plain_link=True,
        outage_s=count, rate_msgs_per_s=1.0, autosave_changes=max(1, autosave),
    )  # fmt: skip
    paths: SitePaths = install(cfg)
    if autosave == 0:  # Mosquitto's default: a save every 1800 s, none on changes
        text = paths.conf.read_text().replace(
            "autosave_on_changes true", "autosave_on_changes false"
        )
        paths.conf.write_text(text.replace("autosave_interval 1\n", "autosave_interval 1800\n"))
    broker = SiteBroker(paths, "127.0.0.1", port)
    broker.start()
    secret = paths.monitor_secret.read_text().strip()
    done, acked = threading.Event(), [0]

    def on_publish(*_a: object) -> None:
        acked[0] += 1
        if acked[0] == count:
            done.set()

    c = _client(port, "d1", "pw")
    c.on_publish = on_publish
    c.loop_start()
    started = time.monotonic()
    for seq in range(count):
        c.publish("devices/d1/telemetry", json.dumps({"ts": 1, "seq": seq, "metrics": {}}), 1)
    done.wait(120)
    took = time.monotonic() - started
    c.loop_stop()
    c.disconnect()
    time.sleep(0.3)
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait()
    broker.start()
    time.sleep(3)  # two $SYS intervals
    held = _held(port, secret)
    broker.stop()
    return {
        "autosave": autosave, "count": count, "acked": acked[0], "publish_s": round(took, 3),
        "msgs_per_s": round(count / took), "held_after_kill": held, "lost": count - held,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=10_000, help="Messages per run.")
    parser.add_argument(
        "--autosave", type=int, nargs="+", default=[0, 10_000, 1000, 100, 10],
        help="autosave_interval values in changes (0 = Mosquitto's default).",
    )  # fmt: skip
    args = parser.parse_args()
    for autosave in args.autosave:
        with tempfile.TemporaryDirectory(prefix="edge-bench-") as tmp:
            print(json.dumps(run(autosave, args.count, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
