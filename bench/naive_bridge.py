"""The naive bridge: the MQTT -> Kafka bridge everyone writes first, as the baseline.

paho-mqtt subscribes at QoS 1; ``on_message`` produces the payload keyed by the device id and
waits for Kafka's delivery (``flush()``) before returning, so paho's automatic PUBACK goes out
only once Kafka has the record -- correct, but one Kafka round trip per message.

Run: ``python -m bench.naive_bridge --mqtt-port 1883 --kafka 127.0.0.1:9092 --topic t``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.naive_bridge", description=__doc__)
    parser.add_argument("--mqtt-host", default="127.0.0.1", help="Mosquitto host")
    parser.add_argument("--mqtt-port", type=int, required=True, help="Mosquitto port")
    parser.add_argument("--client-id", default="bench-naive-bridge", help="MQTT client id")
    parser.add_argument("--kafka", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--topic", required=True, help="Kafka topic to write")
    args = parser.parse_args(argv)

    import paho.mqtt.client as mqtt
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": args.kafka,
            "acks": "all",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
        }
    )
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=args.client_id,
        protocol=mqtt.MQTTv311,
        clean_session=True,
    )

    def on_connect(c: mqtt.Client, _u: Any, _f: Any, _rc: Any, _p: Any) -> None:
        c.subscribe("devices/+/telemetry", qos=1)

    def on_message(_c: mqtt.Client, _u: Any, msg: mqtt.MQTTMessage) -> None:
        device = msg.topic.split("/")[1]
        producer.produce(args.topic, value=bytes(msg.payload), key=device.encode())
        producer.flush()

    client.on_connect = on_connect
    client.on_message = on_message
    done = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    client.connect(args.mqtt_host, args.mqtt_port)
    client.loop_start()
    done.wait()
    client.disconnect()
    client.loop_stop()
    producer.flush(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
