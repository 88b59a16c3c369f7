"""`iot-stack`: run the appliance's services as local processes where there is no Docker."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from dataclasses import fields
from pathlib import Path

from bridge.console import new_parser
from registry.dynsec import DynsecError, parse_ports
from stack import cli_connect
from stack.cli_flags import insecure_flag, kafka_bootstrap_flag, tls_flags, up_flags
from stack.cli_systemd import write_unit
from stack.config import MQTT_AUTOSAVE_CHANGES, StackConfig
from stack.errors import StackError
from stack.haproxy_server import HaproxyServer
from stack.kafka_auth import add_tenant_consumer, client_config, prepare
from stack.kafka_security import MODES
from stack.kafka_server import KafkaServer
from stack.launcher import Stack
from stack.mosquitto_server import INSECURE_WARNING, MosquittoServer
from stack.provisioning import provision
from stack.secret_files import account_secret, read_secret
from stack.systemd_unit import UNIT_NAME
from stack.topics import DESIGN_TOPICS, ensure_topics


def _parser() -> argparse.ArgumentParser:
    parser = new_parser(
        "iot-stack",
        "Start, inspect and stop the local appliance stack: Mosquitto, Kafka (KRaft), the "
        "bridge, the command path and iot-api (the HTTP door), and optionally the Spark "
        "analytics job and simulated devices. Every option also reads an IOT_* environment "
        "variable (see docs/operations.md).",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, help="data, logs and pid files (default var/, env IOT_DATA_DIR)"
    )
    common.add_argument("--mqtt-port", type=int, help="Mosquitto port (default 1883)")
    common.add_argument(
        "--mqtt-tls-port", type=int,
        help="Mosquitto's mutual-TLS port for devices with certificates (default 8883)",
    )  # fmt: skip
    common.add_argument("--kafka-port", type=int, help="Kafka port (default 9092)")
    common.add_argument(
        "--kafka-controller-port", type=int, help="KRaft controller port (default Kafka port + 1)"
    )
    common.add_argument("--bind-host", help="address to listen on (default 127.0.0.1)")
    common.add_argument(
        "--kafka-nodes", type=int,
        help="Kafka nodes (broker+controller each): 1, or 3 for a replicated KRaft cluster on "
        "ports Kafka port +2 per node (env IOT_KAFKA_NODES)",
    )  # fmt: skip
    common.add_argument(
        "--kafka-security", choices=MODES,
        help="Kafka's listeners: plaintext (default, one machine) or sasl_ssl (TLS from the "
        "appliance CA, SCRAM per service, ACLs; env IOT_KAFKA_SECURITY; docs/security.md)",
    )  # fmt: skip
    common.add_argument(
        "--bridge-http-port", type=int, help="bridge metrics/health port (default 9100)"
    )
    common.add_argument(
        "--commands-http-port",
        type=int,
        help="metrics/health port of the separate command path process (default 9101)",
    )
    common.add_argument("--api-port", type=int, help="iot-api's HTTP port (default 3904)")
    common.add_argument("--amqp-port", type=int, help="iot-amqp's AMQP port (default 5672)")
    common.add_argument(
        "--amqp-tls-port", type=int, help="iot-amqp's amqps (TLS) port (default 5671)"
    )
    common.add_argument(
        "--amqp-http-port", type=int, help="iot-amqp's metrics and health port (default 9106)"
    )
    common.add_argument(
        "--mosquitto-autosave-changes", dest="mqtt_autosave_changes", type=int, metavar="N",
        help="Mosquitto saves its store every N changes, so a kill -9 loses about N "
        f"acknowledged messages at most (default {MQTT_AUTOSAVE_CHANGES}: a save every "
        "IOT_MQTT_AUTOSAVE_INTERVAL s, 5 by default, which loses at most what arrived in that "
        "time; env IOT_MQTT_AUTOSAVE_CHANGES; with a backlog, saves every N changes come back to "
        "back: docs/operations.md)",
    )  # fmt: skip
    common.add_argument(
        "--api-tls-port", type=int,
        help="also serve iot-api over HTTPS on this port, with the appliance CA's server "
        "certificate (<data-dir>/ca; env IOT_STACK_API_TLS_PORT)",
    )  # fmt: skip
    common.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", parents=[common], help="start the stack and print its endpoints")
    up_flags(up)

    sub.add_parser("down", parents=[common], help="stop every service of the stack")
    sub.add_parser(
        "status", parents=[common],
        help="show which services run, their restarts and last exit, and where",
    )  # fmt: skip
    sub.add_parser(
        "reload-crl", parents=[common],
        help="after `iot-devices cert revoke`: the TLS listener (HAProxy's with --mqtt-shards, "
        "else Mosquitto's) checks new connections against the CA's current CRL",
    )  # fmt: skip
    sub.add_parser(
        "supervise", parents=[common],
        help="run the supervisor in the foreground (`up` starts it in the background): it "
        "restarts every service `up` started when it dies, with backoff",
    )  # fmt: skip

    cli_connect.add_parser(sub, common)
    unit = sub.add_parser(
        "systemd", parents=[common],
        help="write (or print) a systemd unit that runs `up` at boot and again after a crash "
        "(Restart=on-failure), `down` on stop; takes `up`'s flags (docs/operations.md)",
    )  # fmt: skip
    up_flags(unit)
    unit.add_argument(
        "--unit-dir", type=Path, metavar="DIR",
        help="write <DIR>/<name>.service (e.g. /etc/systemd/system) instead of printing it",
    )  # fmt: skip
    unit.add_argument(
        "--unit-name", default=UNIT_NAME, help=f"the unit's name (default {UNIT_NAME})"
    )
    unit.add_argument(
        "--user", dest="unit_user",
        help="the user the stack runs as, who owns the data dir (default: the current user)",
    )  # fmt: skip
    unit.add_argument("--group", dest="unit_group", help="its group (default: the user's own)")

    serve = sub.add_parser(
        "serve", parents=[common],
        help="run one server in the foreground (container entry point)",
    )  # fmt: skip
    serve.add_argument(
        "server", choices=["mosquitto", "kafka", "mqtt-front"],
        help="which server; mqtt-front: HAProxy before MQTT shards on hosts of their own "
        "(--mqtt-shard-hosts), each device sent to the shard of its client id",
    )  # fmt: skip
    serve.add_argument(
        "--mqtt-shard", type=int, dest="shard", default=0, metavar="I",
        help="mosquitto: be MQTT shard I (1-based) behind `serve mqtt-front`, on a host of its "
        "own: on --mqtt-port, with the TLS front's socket in <data-dir>/mqtt-front",
    )  # fmt: skip
    shard_hosts_flag(serve)
    serve.add_argument(
        "--kafka-node-id", type=int,
        help="with --kafka-nodes N: which node this is, 1..N (env IOT_KAFKA_NODE_ID)",
    )  # fmt: skip
    insecure_flag(serve)
    tls_flags(serve)
    prov = sub.add_parser(
        "provision", parents=[common],
        help="create the registry topics, the service accounts of the bridge and the command "
        "path and N simulated devices (only the missing ones; secrets in 0600 files under the "
        "secrets dir); `up` does this itself, docker-compose's auth-init service runs it",
    )  # fmt: skip
    kafka_bootstrap_flag(prov, "Kafka holding the registry")
    prov.add_argument(
        "--mqtt-host", default=os.environ.get("IOT_MQTT_HOST", "127.0.0.1"),
        help="Mosquitto whose dynamic security the registry drives (env IOT_MQTT_HOST)",
    )  # fmt: skip
    prov.add_argument(
        "--devices", type=int, help="simulated devices to provision (env IOT_STACK_DEVICES)"
    )
    shard_hosts_flag(prov)
    tenant = sub.add_parser(
        "kafka-tenant", parents=[common],
        help="with sasl_ssl: add (or renew) tenant TENANT's Kafka consumer principal, reading "
        "only iot.TENANT.* topics; its secret goes to <secrets>/kafka/tenant-TENANT.secret",
    )  # fmt: skip
    tenant.add_argument("tenant", help="the tenant id")
    topics = sub.add_parser(
        "topics", parents=[common], help="create the design's topics that do not exist yet"
    )
    kafka_bootstrap_flag(topics, "Kafka to create them on")
    topics.add_argument(
        "--partitions", type=int, default=int(os.environ.get("IOT_PARTITIONS", "12")),
        help="partitions per topic (env IOT_PARTITIONS, default 12)",
    )  # fmt: skip
    return parser


def shard_hosts_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mqtt-shard-hosts", dest="shard_hosts", type=_shard_hosts, default=(), metavar="H:P,..",
        help="MQTT shards on hosts of their own, in shard order (docker-compose.shards.yml): "
        "mqtt-front routes to them, provision gives each the registry's clients",
    )  # fmt: skip


def _shard_hosts(text: str) -> list[tuple[str, int]]:
    try:
        shards = parse_ports(text)
    except DynsecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if not all(isinstance(s, tuple) for s in shards):
        raise argparse.ArgumentTypeError(f"host:port, comma separated: {text!r}")
    return [s for s in shards if isinstance(s, tuple)]


def _config(args: argparse.Namespace) -> StackConfig:
    """The environment's config with the flags given (None = not given) of the subcommand: each
    flag's dest is the setting it sets, but `--timeout` (start_timeout)."""
    given = vars(args) | {"start_timeout": getattr(args, "timeout", None)}
    settings = {f.name for f in fields(StackConfig)}
    return StackConfig.from_env(**{k: v for k, v in given.items() if k in settings})


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _serve(config: StackConfig, args: argparse.Namespace) -> int:
    """Replace this process with the server, config rendered as `up` would (for containers)."""
    if args.server == "kafka":
        if config.kafka_nodes > 1 and config.kafka_node_hosts and not config.kafka_cluster_id:
            raise StackError("nodes on their own hosts need IOT_KAFKA_CLUSTER_ID: one id for all")
        argv = KafkaServer(config, config.kafka_node_id).command()
    elif args.server == "mqtt-front":
        if not args.shard_hosts:
            raise StackError("serve mqtt-front needs --mqtt-shard-hosts (host:port of each shard)")
        argv = HaproxyServer(config, args.shard_hosts).command()
    else:
        if config.insecure_anonymous:
            _say("WARNING: " + INSECURE_WARNING % config.mqtt_url)
        server = MosquittoServer(config, args.shard, own_host=True) if args.shard else None
        argv = (server or Stack(config).mosquitto).command(log_to_stdout=True)
    sys.stdout.flush()
    os.execv(argv[0], argv)  # noqa: S606 - exec of our own server binary
    return 1  # not reached


def _supervise(config: StackConfig) -> int:
    from stack.supervisor import Supervisor, install_stop_signals

    logging.getLogger().setLevel(logging.INFO)
    stop = threading.Event()
    install_stop_signals(stop)
    Supervisor(config.run_dir, config.restart_policy).run(stop)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "topics":
        ks = prepare(_config(args), args.kafka_bootstrap)  # sasl_ssl: the services' ACLs
        created = ensure_topics(args.kafka_bootstrap, DESIGN_TOPICS, args.partitions, security=ks)
        _say(f"created: {', '.join(created) if created else 'none (all existed)'}")
        return 0
    stack = Stack(_config(args))
    if args.command == "provision":
        cfg = stack.config
        provision(
            args.kafka_bootstrap, args.mqtt_host, cfg.mqtt_port, cfg.secrets_dir,
            stack.device_ids(), progress=_say,
            shard_ports=args.shard_hosts or stack.recorded_shard_ports(),
            kafka_security=client_config(cfg),
        )  # fmt: skip
        _say(f"provisioned; secrets in {cfg.secrets_dir}")
        return 0
    if args.command == "kafka-tenant":
        _say(f"secret in {add_tenant_consumer(stack.config, args.tenant)}")
        return 0
    if args.command == "serve":
        return _serve(stack.config, args)
    if args.command == "supervise":
        return _supervise(stack.config)
    if args.command == "reload-crl":
        _say(stack.reload_crl())
        return 0
    if args.command == "connect-url":
        return cli_connect.run(stack.config, args)
    if args.command == "systemd":
        return write_unit(args, stack.config)
    if args.command == "up":
        stack.up(progress=_say)
        for name, value in stack.endpoints().items():
            print(f"{name:10} {value}")
        return 0
    if args.command == "down":
        stopped = stack.down(progress=_say)
        _say(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
        return 0
    statuses = stack.status()
    auth = stack.recorded_auth()
    if auth is not None and auth.startswith("ANONYMOUS"):
        _say(f"WARNING: mqtt_auth {auth}: Mosquitto accepts anonymous clients")
    for st in statuses:
        print(f"{st.name:10} {st.state:22} {st.supervision:32} {st.endpoint}".rstrip())
    for full in stack.full_stores():  # Kafka exits on it, Mosquitto's saves fail
        _say(f'WARNING: {full} (docs/operations.md, "A full disk")')
    if any(st.name == "mosquitto" and st.running for st in statuses):
        _edge_sites(stack.config)
    if stack.recorded_kafka_nodes() is not None:  # a cluster, or an external one
        for line in stack.kafka_health():
            print(line)
    return 0 if all(st.running for st in statuses) else 1


def _edge_sites(config: StackConfig) -> None:
    """Edge sites (docs/edge.md) as the central Mosquitto sees them, read as svc/bridge."""
    from edge.central import snapshot
    from edge.errors import EdgeError

    secret = read_secret(account_secret(config.secrets_dir, "bridge"))
    if secret is None:  # an anonymous development stack has no sites
        return
    try:
        views = snapshot(config.connect_host, config.mqtt_port, "svc/bridge", secret, settle_s=0.5)
    except EdgeError as exc:
        _say(f"edge sites: not read ({exc})")
        return
    for v in views:
        row = v.as_dict()
        print(f"site       {v.tenant}/{v.site:20} link {row['link']:8} "
              f"last seen {row['last_seen_s']} s  held {row['held_messages']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return _run(args)
    except StackError as exc:
        _say(f"iot-stack: error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
