"""The local stack: the same services docker-compose runs, as processes on one machine."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable

from stack import kafka_auth, mqtt_tls
from stack.app_services import AppServices
from stack.config import StackConfig
from stack.connect_services import connect_services
from stack.errors import StackError
from stack.kafka_health import health_lines
from stack.kafka_server import KafkaCluster, KafkaServer
from stack.mosquitto_server import INSECURE_WARNING
from stack.mqtt_tier import MqttTier, Service, is_server
from stack.process import ManagedProcess
from stack.provisioning import provision
from stack.spark_cluster import SparkMaster, SparkWorker, live_endpoint, worker_numbers
from stack.supervision import ServiceStatus
from stack.supervisor_link import SupervisorLink
from stack.topics import ensure_topics

log = logging.getLogger(__name__)


class SupervisorService:
    """The supervisor daemon as one of the stack's services: started first, stopped last."""

    def __init__(self, config: StackConfig, link: SupervisorLink) -> None:
        self.config = config
        self.link = link
        self.process = ManagedProcess(
            "supervisor", config.run_dir, config.log_dir / "supervisor.log"
        )

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "stack.cli", "supervise",
            "--data-dir", str(self.config.data_dir),
        ]  # fmt: skip

    def start(self) -> None:
        # Specs of services that no longer run (a machine restart, a `kill` of everything)
        # are stale: the launcher starts those again itself, in order and waiting for each.
        for name in self.link.specs():
            if ManagedProcess(name, self.config.run_dir, self.config.log_dir / "x").pid() is None:
                self.link.withdraw(name)
        env = dict(os.environ) | {"PYTHONUNBUFFERED": "1"}
        pid = self.process.start(self.command(), env=env)

        def ready() -> bool:
            state = self.link.state()
            return state is not None and state.pid == pid

        self.process.wait_ready(ready, self.config.start_timeout, "its state file written")

    def stop(self, timeout: float = 10.0) -> bool:
        return self.process.stop(timeout)

    def running(self) -> bool:
        return self.process.running()


class Stack(AppServices, MqttTier):
    """Mosquitto + Kafka, then the appliance's own processes, under one data dir."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        # With supervision on, every service is started by the supervisor daemon, which
        # restarts it with backoff when it dies (docs/operations.md, "Supervision").
        self.link = SupervisorLink(config.run_dir) if config.supervise else None
        self.supervisor = SupervisorService(config, SupervisorLink(config.run_dir))
        self._init_mqtt_tier(config, self.link)
        self.kafka = _kafka_for(config, self.link)
        self.spark_master = SparkMaster(config)
        self.spark_master.process.supervisor = self.link

    @property
    def kafka_nodes(self) -> list[KafkaServer]:
        """The local Kafka nodes (one unless `kafka_nodes` > 1; none run with `external_kafka`)."""
        return self.kafka.nodes if isinstance(self.kafka, KafkaCluster) else [self.kafka]

    @property
    def mqtt_host(self) -> str:
        return self.config.connect_host

    @property
    def mqtt_port(self) -> int:
        return self.config.mqtt_port

    @property
    def kafka_bootstrap(self) -> str:
        return self.config.kafka_bootstrap

    # -- the services, in start order ----------------------------------------------------------
    def _bridge_instances_seen(self) -> set[int]:
        """Instances an earlier `up --bridges N` recorded or left pid files for (`down` and
        `status` must find them all, whatever their own flags)."""
        names = [path.stem for path in self.config.run_dir.glob("bridge-*.pid")]
        names += list(self._recorded_endpoints())
        suffixes = [name.removeprefix("bridge-") for name in names if name.startswith("bridge-")]
        return {int(s) for s in suffixes if s.isdigit() and int(s) >= 1}

    def spark_cluster(self, numbers: list[int] | None = None) -> list[tuple[str, Service]]:
        """The Spark master and workers 1..N (`--spark-workers N`), in start order."""
        if numbers is None:
            numbers = list(range(1, self.config.spark_workers + 1))
        if not numbers:
            return []
        found: list[tuple[str, Service]] = [("spark-master", self.spark_master)]
        for number in numbers:
            worker = SparkWorker(self.config, number)
            worker.process.supervisor = self.link
            found.append((worker.name, worker))
        return found

    def services(self) -> list[tuple[str, Service]]:
        found: list[tuple[str, Service]] = list(self.mqtt_tier())
        if not self.config.external_kafka:  # an existing cluster: no local broker
            found.append(("kafka", self.kafka))
        found += self.spark_cluster()
        if self.config.with_bridge:
            found += [(bridge.name, bridge) for bridge in self.bridges()]
            if self.config.commands_mode == "separate":  # one per MQTT shard with shards
                found += [(path.name, path) for path in self.command_paths()]
        found += self.doors()
        if self.config.with_analytics:  # and the remote query endpoint, unless --no-connect
            found += [("analytics", self.analytics()), *self._connect(self.config.with_connect)]
        if self.config.devices > 0:
            found.append(("devices", self.devices()))
        return found

    def _all_known(self) -> list[tuple[str, Service]]:
        # `down`/`status` must find whatever an earlier `up` started, whatever its flags.
        instances = self.config.bridge_instances
        wanted = set(range(1, instances + 1)) if instances > 1 else set()
        shared = [self.bridge(i) for i in sorted(wanted | self._bridge_instances_seen())]
        return [
            *self.mqtt_tier_known(),
            ("kafka", self._kafka_as_started()),
            *self.spark_cluster(worker_numbers(self.config, self._recorded_endpoints())),
            ("bridge", self.bridge()),
            *[(bridge.name, bridge) for bridge in shared],
            ("commands", self.commands()),
            *[(path.name, path) for path in self.shard_command_paths()],
            ("api", self.api()),
            ("amqp", self.amqp()),
            ("analytics", self.analytics()),
            *self._connect(True),
            ("devices", self.devices()),
        ]

    def _connect(self, wanted: bool) -> list[tuple[str, Service]]:
        return list(connect_services(self.config, self.link)) if wanted else []

    # -- life cycle ----------------------------------------------------------------------------
    def up(self, progress: Callable[[str], None] = log.info) -> list[str]:
        """Start what is not running yet; returns the names started. All or nothing."""
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        if self.config.insecure_anonymous:
            log.warning(INSECURE_WARNING, self.config.mqtt_url)
            progress("WARNING: " + INSECURE_WARNING % self.config.mqtt_url)
        started: list[tuple[str, Service]] = []
        wanted: list[tuple[str, Service]] = list(self.services())
        if self.link is not None:
            wanted.insert(0, ("supervisor", self.supervisor))
            if not self.supervisor.running():
                self._stop_leftovers(progress)
        try:
            for name, service in wanted:
                if service.running():
                    progress(f"{name} already running")
                else:
                    progress(f"starting {name} ...")
                    service.start()
                    started.append((name, service))
                    progress(f"{name} ready")
                last_mqtt = self.mqtt_tier()[-1][0]
                if name == "kafka" or (name == last_mqtt and self.config.external_kafka):
                    self._after_kafka(progress)
        except BaseException as exc:
            # Leave nothing half-started behind: stop what this call started, newest first,
            # also on a Kafka client error or a Ctrl-C (the servers run in sessions of their
            # own: nothing else would stop them).
            for _name, service in reversed(started):
                service.stop()
            if isinstance(exc, OSError):
                raise StackError(str(exc)) from exc
            raise
        self._write_endpoints()
        return [name for name, _ in started]

    def _stop_leftovers(self, progress: Callable[[str], None]) -> list[str]:
        """Stop what a dead supervisor left (shutting down after its SIGTERM), as `down` does."""
        if "supervisor" not in self._recorded_endpoints():
            return []  # an unsupervised `up` (test stacks): its servers have no supervisor to lose
        stopped: list[str] = []
        for name, service in reversed(self._all_known()):
            for node_name, node in _per_node(name, service):
                if node.running():
                    progress(f"{node_name} runs without its supervisor: stopping it first ...")
                    node.stop()
                    stopped.append(node_name)
                else:
                    node.process.sweep_orphaned_group()
        return stopped

    def _after_kafka(self, progress: Callable[[str], None]) -> None:
        """The design's topics, then (auth on) the registry's accounts and devices."""
        cfg = self.config
        n = None if cfg.external_kafka else cfg.kafka_nodes
        ks = kafka_auth.prepare(cfg)  # the services' ACLs; {} unless kafka_security sasl_ssl
        made = ensure_topics(cfg.kafka_bootstrap, partitions=cfg.partitions, brokers=n, security=ks)
        if made:
            progress(f"created topics: {', '.join(made)}")
        if not cfg.insecure_anonymous:
            provision(
                cfg.kafka_bootstrap, cfg.connect_host, cfg.mqtt_port, cfg.secrets_dir,
                self.device_ids(), progress=progress, offline=self.apply_offline,
                shard_ports=[server.port for server in self.mqtt_shards],
                kafka_security=ks,
            )  # fmt: skip

    def down(self, progress: Callable[[str], None] = log.info) -> list[str]:
        """Stop everything, newest first, the supervisor last; returns the names that ran."""
        # No restarts from here on, whatever `up` (and whichever config) started them.
        self.supervisor.link.withdraw_all()
        stopped: list[str] = []
        for name, service in reversed([("supervisor", self.supervisor), *self._all_known()]):
            if service.running() or _any_node_running(service):  # a cluster with a node down
                progress(f"stopping {name} ...")
                if service.stop():
                    stopped.append(name)
        return stopped

    def status(self) -> list[ServiceStatus]:
        wanted = {name for name, _ in self.services()}
        recorded = self._recorded_endpoints()
        if recorded:
            # the processes the last `up` started, whatever flags `status` was given (an
            # `up --commands-mode inline` has no `commands` process to miss)
            apps = {name for name, _ in self._all_known() if not is_server(name)}
            wanted = (wanted - apps) | (apps & set(recorded)) | self.recorded_tier_names()
            if recorded.get("kafka_nodes") == "external":
                wanted.discard("kafka")  # `up --kafka-bootstrap` started no broker
        state = self.supervisor.link.state()
        records = state.services if state is not None else {}
        found = [
            ServiceStatus(
                node_name,
                pid := node.process.pid(),
                live_endpoint(name, self._endpoint(name, node), self.config)
                if pid is not None
                else self._endpoint(name, node),
                records.get(node_name),
            )
            for name, service in self._all_known()
            if name in wanted or service.running() or _any_node_running(service)
            for node_name, node in _per_node(name, service)
        ]
        supervisor_pid = self.supervisor.process.pid()
        # an unsupervised `up` (test and benchmark stacks) records no supervisor: none is missed
        supervised_up = not recorded or "supervisor" in recorded
        if supervisor_pid is not None or (
            self.link is not None and supervised_up and any(st.running for st in found)
        ):
            # shown while it runs, and missing when services run without it (they would not
            # be restarted): `status` then exits 1 and `up` starts a new one, which adopts them
            where = str(self.supervisor.link.state_path)
            found.insert(0, ServiceStatus("supervisor", supervisor_pid, where))
        return found

    def _endpoint(self, name: str, service: Service) -> str:
        # the TLS listener the last `up` opened, if any: Mosquitto's, or HAProxy's with shards
        tls = self._recorded_endpoints().get("mqtt_tls", "off")
        tls_url = "" if tls == "off" else f", {tls.split()[0]}"
        if (shard := self.shard_endpoint(name, service)) is not None:
            return shard + (tls_url if name == "haproxy" else "")
        if name == "mosquitto":
            return self.config.mqtt_url + tls_url
        if name == "kafka" and isinstance(service, KafkaServer):
            # where the last `up` put the node (its --kafka-port may not be this call's)
            addresses = self._recorded_endpoints().get("kafka", "").split(",")
            index = service.node.node_id - 1
            if service.running() and len(addresses) > index and addresses[index]:
                return addresses[index]
            return service.bootstrap
        if name == "supervisor":
            return str(self.supervisor.link.state_path)
        # what the `up` that started it printed, whatever flags `status` was given
        recorded = self._recorded_endpoints().get(name)
        if recorded and service.running():
            return recorded
        return str(getattr(service, "endpoint", ""))

    def recorded_kafka_nodes(self) -> str | None:
        """The last `up`'s Kafka: a node count, or "external" (None: one local node)."""
        return self._recorded_endpoints().get("kafka_nodes")

    def recorded_auth(self) -> str | None:
        """How the last `up` started Mosquitto (anonymous or not), if it recorded it."""
        return self._recorded_endpoints().get("mqtt_auth")

    def _recorded_endpoints(self) -> dict[str, str]:
        try:
            found = json.loads((self.config.data_dir / "stack.json").read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def endpoints(self) -> dict[str, str]:
        found = {"mqtt": self.config.mqtt_url, "kafka": self.config.kafka_bootstrap}
        if self.config.external_kafka:
            found["kafka_nodes"] = "external"
        elif self.config.kafka_nodes > 1:
            found["kafka_nodes"] = str(self.config.kafka_nodes)
        if self.mqtt_shards:
            found["mqtt_shards"] = str(len(self.mqtt_shards))
        for name, service in self.services():
            if not is_server(name):
                found[name] = self._endpoint(name, service)
        if self.link is not None:
            found["supervisor"] = str(self.supervisor.link.state_path)
        found["mqtt_auth"] = (
            "ANONYMOUS (insecure, development only)"
            if self.config.insecure_anonymous
            else f"registry credentials (secrets in {self.config.secrets_dir})"
        )
        found["mqtt_tls"] = mqtt_tls.describe(self.config)
        found["data_dir"] = str(self.config.data_dir)
        found["logs"] = str(self.config.log_dir)
        return found

    def _kafka_as_started(self) -> KafkaServer | KafkaCluster:
        """The local Kafka the last `up` started, whatever `--kafka-nodes` this call has."""
        recorded = self._recorded_endpoints()
        # no `up` recorded yet, or an external cluster: the config says it all
        nodes = recorded.get("kafka_nodes", "1") if recorded else ""
        if not nodes.isdigit() or int(nodes) == self.config.kafka_nodes:
            return self.kafka
        cfg = self.config.with_changes(kafka_nodes=int(nodes), kafka_node_id=1, kafka_node_hosts="")
        return _kafka_for(cfg, self.link)

    def kafka_health(self) -> list[str]:
        """`status` lines on the Kafka cluster the last `up` used (see `health_lines`)."""
        bootstrap = self._recorded_endpoints().get("kafka") or self.config.kafka_bootstrap
        return health_lines(bootstrap, kafka_auth.client_config(self.config))

    def _write_endpoints(self) -> None:
        path = self.config.data_dir / "stack.json"
        path.write_text(json.dumps(self.endpoints(), indent=2) + "\n")


def _kafka_for(config: StackConfig, link: SupervisorLink | None) -> KafkaServer | KafkaCluster:
    kafka: KafkaServer | KafkaCluster
    kafka = KafkaCluster(config) if config.kafka_nodes > 1 else KafkaServer(config)
    for node in kafka.nodes if isinstance(kafka, KafkaCluster) else [kafka]:
        node.process.supervisor = link  # each node is supervised on its own
    return kafka


def _per_node(name: str, service: Service) -> list[tuple[str, Service]]:
    """A cluster is one service to start and stop, one row per node in `status`."""
    if isinstance(service, KafkaCluster):
        return [(node.name, node) for node in service.nodes]
    return [(name, service)]


def _any_node_running(service: Service) -> bool:
    return isinstance(service, KafkaCluster) and any(n.running() for n in service.nodes)
