"""`iot-stack`'s flags that several subcommands share: what `up` starts (also `systemd`'s: the
unit runs `up`), Kafka's bootstrap, the anonymous development mode and the TLS CA."""

from __future__ import annotations

import argparse
import os

from stack.config import COMMANDS_MODES


def up_flags(parser: argparse.ArgumentParser) -> None:
    """What `up` starts and how: `up`'s own flags, also `systemd`'s (the unit runs `up`)."""
    parser.add_argument("--partitions", type=int, help="partitions of the data topics (default 12)")
    parser.add_argument(
        "--timeout", type=float, help="seconds to wait for each server (default 90)"
    )
    parser.add_argument(
        "--no-bridge", dest="with_bridge", action="store_false", default=None,
        help="start only the servers, not the bridge",
    )  # fmt: skip
    parser.add_argument(
        "--bridges", type=int,
        help="bridge processes (default 1); more share one MQTT subscription, each with its own "
        "session and metrics port (bridge_http_port + 10 x (i - 1)), and lose per-device order "
        "across them (docs/scaling.md); env IOT_STACK_BRIDGES",
    )  # fmt: skip
    parser.add_argument(
        "--mqtt-shards", type=int,
        help="Mosquitto processes (default 1) behind HAProxy on --mqtt-port, each device sent "
        "to its shard by a hash of its client id; shard i listens on mqtt_port + i and has its "
        "own bridge-i and command path (docs/scaling.md); env IOT_STACK_MQTT_SHARDS",
    )  # fmt: skip
    parser.add_argument(
        "--commands-mode", choices=COMMANDS_MODES, default=None,
        help="the command path: its own process `commands` (separate, default), a thread of "
        "the bridge (inline) or not at all (off); env IOT_STACK_COMMANDS_MODE",
    )  # fmt: skip
    parser.add_argument(
        "--no-api", dest="with_api", action="store_false", default=None,
        help="do not start iot-api, the HTTP door (env IOT_STACK_API=0)",
    )  # fmt: skip
    parser.add_argument(
        "--console", dest="api_console", action="store_true", default=None,
        help="serve the operator console under iot-api's /console (env IOT_STACK_CONSOLE)",
    )  # fmt: skip
    parser.add_argument(
        "--amqp", dest="with_amqp", action="store_true", default=None,
        help="also start iot-amqp, the AMQP 1.0 door for devices (docs/amqp.md; env "
        "IOT_STACK_AMQP=1)",
    )  # fmt: skip
    parser.add_argument(
        "--analytics", dest="with_analytics", action="store_true", default=None,
        help="also start the Spark streaming job (tables under <data-dir>/warehouse)",
    )  # fmt: skip
    parser.add_argument(
        "--no-connect", dest="with_connect", action="store_false", default=None,
        help="with --analytics, start no remote query endpoint (Spark Connect behind TLS, "
        "docs/analytics.md; env IOT_STACK_CONNECT=0)",
    )  # fmt: skip
    parser.add_argument(
        "--devices", type=int,
        help="also run this many simulated devices (provisioned through the registry, each "
        "with its own secret)",
    )  # fmt: skip
    parser.add_argument("--device-rate", type=float, help="messages/s per simulated device")
    parser.add_argument(
        "--spark-workers", type=int, metavar="N",
        help="start a Spark standalone master (FILESYSTEM recovery) and N workers, all "
        "supervised; the analytics job runs on them (env IOT_STACK_SPARK_WORKERS)",
    )  # fmt: skip
    parser.add_argument(
        "--spark-worker-cores", type=int,
        help="cores each Spark worker offers (default 2, env IOT_STACK_SPARK_WORKER_CORES)",
    )  # fmt: skip
    parser.add_argument(
        "--spark-worker-memory",
        help="memory each Spark worker offers its executors (default 1g, env "
        "IOT_STACK_SPARK_WORKER_MEMORY)",
    )
    parser.add_argument(
        "--spark-master", metavar="URL",
        help="run the analytics job on this master instead: local[N] or spark://host:port of "
        "a cluster elsewhere (env IOT_SPARK_MASTER; not with --spark-workers)",
    )  # fmt: skip
    parser.add_argument(
        "--kafka-bootstrap", dest="external_kafka",
        help="use this existing Kafka cluster (host:port,...) and start no local broker "
        "(env IOT_STACK_KAFKA_BOOTSTRAP)",
    )  # fmt: skip

    insecure_flag(parser)
    tls_flags(parser)


def kafka_bootstrap_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--kafka-bootstrap", default=os.environ.get("IOT_KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
        help=f"{what} (env IOT_KAFKA_BOOTSTRAP)",
    )  # fmt: skip


def insecure_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--insecure-anonymous", dest="insecure_anonymous", action="store_true", default=None,
        help="development only: Mosquitto accepts anonymous clients (no registry, no device "
        "secrets); logged as a WARNING at every start and in `status` "
        "(env IOT_STACK_INSECURE_ANONYMOUS)",
    )  # fmt: skip


def tls_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-mqtt-tls", dest="mqtt_tls", action="store_false", default=None,
        help="open no mutual-TLS listener (env IOT_STACK_MQTT_TLS=0)",
    )  # fmt: skip
    parser.add_argument(
        "--no-amqp-tls", dest="amqp_tls", action="store_false", default=None,
        help="iot-amqp without its amqps listener (env IOT_STACK_AMQP_TLS=0)",
    )  # fmt: skip
    parser.add_argument(
        "--tls-ca-cert", metavar="PEM",
        help="the operator's own CA certificate instead of a CA made on first start (with "
        "--tls-ca-key; env IOT_STACK_TLS_CA_CERT)",
    )  # fmt: skip
    parser.add_argument(
        "--tls-ca-key",
        metavar="PEM",
        help="the operator's own CA key (EC; env IOT_STACK_TLS_CA_KEY)",
    )
