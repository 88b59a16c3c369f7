"""`mq-bridge` (PyPI, Rust core) run as an MQTT -> Kafka route: the open-source peer contender.

Run: ``python -m bench.mqbridge_route --mqtt-url tcp://127.0.0.1:1883 --kafka 127.0.0.1:9092
--topic bench.t``. Blocks until SIGTERM/SIGINT, then stops the route.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any


def route_config(args: argparse.Namespace) -> dict[str, Any]:
    """The route: MQTT 5 persistent-session input at QoS 1, acked after the Kafka send."""
    return {
        "input": {
            "mqtt": {
                "url": args.mqtt_url,
                "topic": args.mqtt_topic,
                "qos": args.qos,
                "client_id": args.client_id,
                "clean_session": False,
                "session_expiry_interval": 0,
                "max_inflight": args.max_inflight,
                "queue_capacity": args.queue_capacity,
                "protocol": "v5",
            }
        },
        "output": {
            "kafka": {
                "url": args.kafka,
                "topic": args.topic,
                "create_topic": False,
                "partition_key": "mqb.src.mqtt_topic",
                "producer_options": [
                    ["acks", "all"],
                    ["enable.idempotence", "true"],
                    ["linger.ms", str(args.linger_ms)],
                    ["batch.size", str(args.kafka_batch_size)],
                    ["compression.type", args.compression],
                ],
            }
        },
        "batch_size": args.batch_size,
        "concurrency": args.concurrency,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.mqbridge_route", description=__doc__)
    parser.add_argument("--mqtt-url", required=True, help="Mosquitto URL, e.g. tcp://host:port")
    parser.add_argument(
        "--mqtt-topic", default="devices/+/telemetry", help="MQTT topic filter to route"
    )
    parser.add_argument("--qos", type=int, default=1, help="subscription QoS")
    parser.add_argument("--client-id", default="bench-mq-bridge", help="MQTT client id")
    parser.add_argument("--max-inflight", type=int, default=8192, help="MQTT in-flight window")
    parser.add_argument(
        "--queue-capacity", type=int, default=8192, help="mq-bridge's internal input queue"
    )
    parser.add_argument("--kafka", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--topic", required=True, help="Kafka topic to write")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=4096,
        help="route batch size (mq-bridge's default is 512; 4096 measured best here)",
    )
    parser.add_argument("--linger-ms", type=int, default=5, help="producer linger.ms")
    parser.add_argument(
        "--kafka-batch-size", type=int, default=262144, help="producer batch.size (bytes)"
    )
    parser.add_argument("--compression", default="lz4", help="producer compression.type")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="route concurrency (above 1 it reorders a device's messages)",
    )
    args = parser.parse_args(argv)

    from mq_bridge import Route

    route = Route.from_config(route_config(args))
    done = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    route.start()
    print("mq-bridge route started", file=sys.stderr, flush=True)
    done.wait()
    route.stop()
    route.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
