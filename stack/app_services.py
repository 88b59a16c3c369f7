"""The appliance's own processes as the launcher starts them: the bridge (or `--bridges N`
instances sharing a subscription), the command path, the HTTP door, the analytics job and the
simulated devices, each with the argv and environment it runs with."""

from __future__ import annotations

import os
import sys

from bridge.stores import describe, is_full, parse_store_dirs
from device_sim.spec import FleetSpec
from registry.kafka_store import REGISTRY_TOPIC
from stack import kafka_auth, mqtt_tls
from stack.app_service import AppService, alive_for, http_ok
from stack.config import StackConfig
from stack.kafka_server import KafkaServer
from stack.mosquitto_server import MosquittoServer
from stack.provisioning import account_login
from stack.secret_files import account_secret, admin_secret, device_credentials
from stack.spark_cluster import analytics_env
from stack.supervisor_link import SupervisorLink

# the shared subscription group of `--bridges N` and the prefix of the instances' client ids
BRIDGE_SHARE_GROUP = "iot-bridge"


class AppServices:
    """The app services of a :class:`~stack.launcher.Stack` (a base class: it reads the stack's
    config, its supervisor link and Mosquitto's auth-metrics file)."""

    config: StackConfig
    link: SupervisorLink | None
    mosquitto: MosquittoServer
    mqtt_shards: list[MosquittoServer]

    @property
    def kafka_nodes(self) -> list[KafkaServer]:
        raise NotImplementedError  # the launcher's Stack knows its Kafka nodes

    def store_dirs(self) -> str:
        """The bridge's `store_dirs`: each local Kafka node's log dir and each Mosquitto's
        store, whose full disk the first bridge shows on /metrics (docs/operations.md)."""
        kafka = [] if self.config.external_kafka else self.kafka_nodes
        stores = [(k.name, k.log_dirs) for k in kafka]
        stores += [(m.name, m.home) for m in (self.mqtt_shards or [self.mosquitto])]
        return ",".join(f"{name}={path}" for name, path in stores)

    def full_stores(self) -> list[str]:
        """`status`'s warnings: each of those data dirs whose disk is full, named as the
        bridge's gauge and the console name it (``kafka: disk full (...: 0 bytes free)``)."""
        full = []
        for name, path in parse_store_dirs(self.store_dirs()).items():
            try:
                stat = os.statvfs(path)
            except OSError:  # not made yet (never started)
                continue
            free = stat.f_bavail * stat.f_frsize
            if is_full(free, stat.f_blocks * stat.f_frsize):
                full.append(describe(name, path, free))
        return full

    # -- the services, in start order ----------------------------------------------------------
    def _http_service(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        url: str,
        *,
        probe: str = "/readyz",
        endpoint: str | None = None,
    ) -> AppService:
        """A service that is ready once ``url`` + ``probe`` answers 200 (endpoint: /metrics)."""
        return AppService(
            self.config,
            name,
            argv,
            env=env,
            ready=lambda: http_ok(url + probe),
            ready_what=f"{url}{probe} answering 200",
            endpoint=f"{url}/metrics" if endpoint is None else endpoint,
            supervisor=self.link,
        )

    def _app_env(self) -> dict[str, str]:
        cfg = self.config
        return {
            "IOT_MQTT_HOST": cfg.connect_host,
            "IOT_MQTT_PORT": str(cfg.mqtt_port),
            "IOT_KAFKA_BOOTSTRAP": cfg.kafka_bootstrap,
            "IOT_LOG_FORMAT": "json",
        }

    def _login_env(self, account: str) -> dict[str, str]:
        """The service's MQTT user name and password *file* (the secret stays off its env)."""
        if self.config.insecure_anonymous:
            return {}
        login = account_login(self.config.secrets_dir, account)
        return {
            "IOT_MQTT_USERNAME": login.username,
            "IOT_MQTT_PASSWORD_FILE": str(login.password_file),
        }

    def device_ids(self) -> list[str]:
        """The simulator's device ids (`iot-sim run --devices N`: dev-00000 ...)."""
        if self.config.devices <= 0:
            return []
        spec = FleetSpec(devices=self.config.devices)
        return [spec.device_id(i) for i in range(spec.devices)]

    def bridge(self, index: int = 0) -> AppService:
        """The bridge; index 0 = the only one, i >= 1 = instance `bridge-i` of `--bridges N`.

        Instances share one subscription ($share/<group>/devices/+/...), so Mosquitto spreads
        the messages over them. Each has its own client id, hence its own persistent session
        (a shared id would take over the other's session), and its own metrics port.
        """
        cfg = self.config
        port = cfg.bridge_http_port_of(index)
        url = f"http://{cfg.connect_host}:{port}"
        sharded = cfg.mqtt_shards > 1
        # separate: the `commands` service runs it; inline: a thread of the (first) bridge;
        # with MQTT shards: a thread of each shard's bridge, for the devices of its shard
        inline = cfg.commands_mode == "inline" and (sharded or index <= 1)
        env = (
            self._app_env()
            | self._login_env("bridge")
            | kafka_auth.service_env(cfg, "bridge")
            | {
                "IOT_HTTP_HOST": cfg.connect_host,
                "IOT_HTTP_PORT": str(port),
                "IOT_COMMANDS_ENABLED": "1" if inline else "0",
            }
            # tenants' msgs/s quotas come from the registry (none without authentication)
            | ({} if cfg.insecure_anonymous else {"IOT_REGISTRY_TOPIC": REGISTRY_TOPIC})
        )
        if index <= 1 and not cfg.insecure_anonymous:
            # Mosquitto's refused log-ins and publishes: one bridge exports them, not each
            env["IOT_MQTT_AUTH_METRICS_FILE"] = str(self.mosquitto.auth_metrics_path)
        if index <= 1:
            env["IOT_STORE_DIRS"] = self.store_dirs()  # one bridge exports them, not each
        if sharded:
            # bridge-i reads shard i alone, on its own port: one subscription per shard, so
            # a device's messages keep their order into Kafka, as with one Mosquitto
            env |= {
                "IOT_MQTT_PORT": str(cfg.mqtt_shard_ports[index - 1]),
                "IOT_MQTT_CLIENT_ID": f"{BRIDGE_SHARE_GROUP}-{index}",
            }
            if inline:
                env |= self._command_shard_env(index)
        elif index >= 1:
            env |= {
                "IOT_MQTT_CLIENT_ID": f"{BRIDGE_SHARE_GROUP}-{index}",
                "IOT_MQTT_SHARE_GROUP": BRIDGE_SHARE_GROUP,
            }
        return self._http_service(
            f"bridge-{index}" if index >= 1 else "bridge",
            [sys.executable, "-m", "commands.inline" if inline else "bridge.cli"],
            env,
            url,
        )

    def bridges(self) -> list[AppService]:
        """What `up` starts: the one bridge, or `bridge-1` .. `bridge-N` sharing a subscription,
        or one per MQTT shard (`bridge-i` reads shard i)."""
        instances = self.config.bridge_instances
        if instances == 1:
            return [self.bridge()]
        return [self.bridge(i) for i in range(1, instances + 1)]

    def _command_shard_env(self, index: int) -> dict[str, str]:
        """Shard ``index``'s command path (1-based): it reads every command (a consumer group
        of its own) and sends those of its shard's devices, on that shard."""
        cfg = self.config
        return {
            "IOT_MQTT_PORT": str(cfg.mqtt_port + index),  # shard i's own port
            "IOT_COMMAND_SHARD": str(index - 1),
            # (`status`/`down` without --mqtt-shards build the shards' services to find them)
            "IOT_COMMAND_SHARDS": str(max(cfg.mqtt_shards, index)),
            "IOT_COMMAND_GROUP_ID": f"iot-bridge-commands-shard-{index}",
            "IOT_COMMAND_MQTT_CLIENT_ID": f"iot-bridge-commands-{index}",
        }

    def commands(self, index: int = 0) -> AppService:
        """The command path as its own process (`iot-cmd serve`), apart from the bridge;
        index i >= 1: `commands-i`, the one of MQTT shard i (`--mqtt-shards N`)."""
        cfg = self.config
        port = cfg.commands_http_port_of(index)
        url = f"http://{cfg.connect_host}:{port}"
        env = (
            self._app_env()
            | self._login_env("commands")
            | kafka_auth.service_env(self.config, "commands")
            | {
                "IOT_HTTP_HOST": cfg.connect_host,
                "IOT_COMMAND_HTTP_PORT": str(port),
            }
        )
        if index >= 1:
            env |= self._command_shard_env(index)
        return self._http_service(
            f"commands-{index}" if index >= 1 else "commands",
            [sys.executable, "-m", "commands.cli", "serve"],
            env,
            url,
        )

    def shard_command_paths(self) -> list[AppService]:
        """`commands-i` of this config's shards and of those an earlier `up` started."""
        names = [path.stem for path in self.config.run_dir.glob("commands-*.pid")]
        seen = {int(n[9:]) for n in names if n[9:].isdigit() and int(n[9:]) >= 1}
        shards = self.config.mqtt_shards
        wanted = set(range(1, shards + 1)) if shards > 1 else set()
        return [self.commands(i) for i in sorted(seen | wanted)]

    def command_paths(self) -> list[AppService]:
        """What `up` starts in `separate` mode: `commands`, or `commands-i` per MQTT shard."""
        if self.config.mqtt_shards == 1:
            return [self.commands()]
        return [self.commands(i) for i in range(1, self.config.mqtt_shards + 1)]

    def api(self) -> AppService:
        """iot-api, the HTTP door: registry Basic auth, or anonymous when the stack is."""
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.api_port}"
        auth = "IOT_INSECURE_ANONYMOUS" if cfg.insecure_anonymous else "IOT_REGISTRY_AUTH"
        env = {
            "IOT_KAFKA_BOOTSTRAP": cfg.kafka_bootstrap,
            "IOT_API_HOST": cfg.connect_host,
            "IOT_API_PORT": str(cfg.api_port),
            auth: "1",
            # devices added over HTTP (/ops) reach Mosquitto as svc/registry
            "IOT_REGISTRY_MQTT_HOST": cfg.connect_host,
            "IOT_REGISTRY_MQTT_PORT": str(cfg.mqtt_port),
            # HTTP devices' commands: one MQTT session per device, as svc/api
            "IOT_MQTT_HOST": cfg.connect_host,
            "IOT_MQTT_PORT": str(cfg.mqtt_port),
        }
        env |= kafka_auth.service_env(cfg, "api")
        if not cfg.insecure_anonymous:
            env["IOT_REGISTRY_ADMIN_PASSWORD_FILE"] = str(admin_secret(cfg.secrets_dir))
            api_login = account_login(cfg.secrets_dir, "api")
            env["IOT_MQTT_USERNAME"] = api_login.username
            env["IOT_MQTT_PASSWORD_FILE"] = str(api_login.password_file)
        if cfg.mqtt_shards > 1:  # registry changes over HTTP reach every shard
            ports = ",".join(str(p) for p in cfg.mqtt_shard_ports)
            env |= {"IOT_REGISTRY_MQTT_SHARD_PORTS": ports, "IOT_CONSOLE_MQTT_SHARD_PORTS": ports}
        if cfg.api_tls_port:  # HTTPS beside HTTP, certificate from the appliance CA
            env |= {
                "IOT_TLS_PORT": str(cfg.api_tls_port),
                "IOT_TLS_CA_DIR": str(cfg.data_dir / "ca"),
            }
        if cfg.api_console:  # docs/console.md; device changes reach Mosquitto as svc/registry
            host = cfg.connect_host
            env |= {
                "IOT_CONSOLE": "1",
                "IOT_CONSOLE_MQTT_HOST": host,
                "IOT_CONSOLE_MQTT_PORT": str(cfg.mqtt_port),
                "IOT_CONSOLE_SERVICES": ",".join(
                    f"{b.name}=http://{host}:{cfg.bridge_http_port_of(i)}"
                    for i, b in enumerate(
                        self.bridges(), start=0 if cfg.bridge_instances == 1 else 1
                    )
                )
                + "".join(  # with MQTT shards, each shard's command path (added up)
                    f",{c.name}=http://{host}:{cfg.commands_http_port_of(i)}"
                    for i, c in enumerate(self.command_paths(), start=int(cfg.mqtt_shards > 1))
                )
                + f",analytics=http://{host}:{cfg.analytics_http_port}"
                + (f",amqp=http://{host}:{cfg.amqp_http_port}" if cfg.with_amqp else ""),
                "IOT_CONSOLE_WAREHOUSE": str(cfg.warehouse_dir),
                "IOT_CONSOLE_REPORT": str(cfg.data_dir / "report" / "report.html"),
            }
            if not cfg.insecure_anonymous:
                env["IOT_CONSOLE_ADMIN_PASSWORD_FILE"] = str(admin_secret(cfg.secrets_dir))
                # edge sites, read as `iot-stack status` reads them (docs/edge.md)
                env["IOT_CONSOLE_SITES_PASSWORD_FILE"] = str(
                    account_secret(cfg.secrets_dir, "bridge")
                )
        return self._http_service("api", [sys.executable, "-m", "api"], env, url, endpoint=url)

    def doors(self) -> list[tuple[str, AppService]]:
        """What `up` starts of the doors: iot-api (unless --no-api), iot-amqp (with --amqp)."""
        found = [("api", self.api())] if self.config.with_api else []
        return found + ([("amqp", self.amqp())] if self.config.with_amqp else [])

    def amqp(self) -> AppService:
        """iot-amqp, the AMQP 1.0 door: SASL PLAIN against the registry, or anonymous when the
        stack is."""
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.amqp_http_port}"
        auth = "IOT_INSECURE_ANONYMOUS" if cfg.insecure_anonymous else "IOT_REGISTRY_AUTH"
        env = {
            "IOT_KAFKA_BOOTSTRAP": cfg.kafka_bootstrap,
            "IOT_AMQP_HOST": cfg.connect_host,
            "IOT_AMQP_PORT": str(cfg.amqp_port),
            "IOT_HTTP_HOST": cfg.connect_host,
            "IOT_HTTP_PORT": str(cfg.amqp_http_port),
            auth: "1",
            # devices' commands: one MQTT session per device, as svc/api (iot-api's way)
            "IOT_MQTT_HOST": cfg.connect_host,
            "IOT_MQTT_PORT": str(cfg.mqtt_port),
        } | kafka_auth.service_env(cfg, "amqp")
        if not cfg.insecure_anonymous:
            api_login = account_login(cfg.secrets_dir, "api")
            env["IOT_MQTT_USERNAME"] = api_login.username
            env["IOT_MQTT_PASSWORD_FILE"] = str(api_login.password_file)
        endpoint = f"amqp://{cfg.connect_host}:{cfg.amqp_port}"
        if cfg.amqp_tls and not cfg.insecure_anonymous:  # the CA `up` makes for Mosquitto
            env |= {"IOT_AMQPS_PORT": str(cfg.amqp_tls_port),
                    "IOT_TLS_CA_DIR": str(mqtt_tls.ca_dir(cfg))}  # fmt: skip
            endpoint += f", amqps://{cfg.connect_host}:{cfg.amqp_tls_port} (PLAIN or EXTERNAL)"
        else:
            env["IOT_AMQPS_PORT"] = "0"
        return self._http_service(
            "amqp", [sys.executable, "-m", "amqp"], env, url,
            endpoint=f"{endpoint} (metrics {url}/metrics)",
        )  # fmt: skip

    def analytics(self) -> AppService:
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.analytics_http_port}"
        env = (
            self._app_env()
            | {
                "IOT_WAREHOUSE_DIR": str(cfg.warehouse_dir),
                "IOT_CHECKPOINT_DIR": str(cfg.data_dir / "checkpoints"),
                "IOT_ANALYTICS_HTTP_HOST": cfg.connect_host,
                "IOT_ANALYTICS_HTTP_PORT": str(cfg.analytics_http_port),
            }
            | analytics_env(cfg)
            | kafka_auth.service_env(cfg, "analytics")
        )
        endpoint = f"{url}/metrics"
        if cfg.analytics_master.startswith("spark://"):
            ui = f"http://{cfg.connect_host}:{cfg.spark_app_ui_port}"
            endpoint += f" on {cfg.analytics_master} ui {ui}"
        # /healthz answers once the session is up and the queries started
        return self._http_service(
            "analytics",
            [sys.executable, "-m", "spark_jobs.cli", "stream"],
            env,
            url,
            probe="/healthz",
            endpoint=endpoint,
        )

    def devices(self) -> AppService:
        cfg = self.config
        argv = [
            sys.executable, "-m", "device_sim.cli", "run",
            "--devices", str(cfg.devices),
            "--rate", str(cfg.device_rate),
            "--duration", str(int(cfg.device_hours * 3600)),
            "--runs-dir", str(cfg.data_dir / "sim-runs"),
            "--no-progress",
        ]  # fmt: skip
        if not cfg.insecure_anonymous:  # each device logs in with its own secret
            argv += ["--credentials", str(device_credentials(cfg.secrets_dir))]
        return AppService(
            cfg,
            "devices",
            argv,
            env=self._app_env(),
            ready=lambda: alive_for(3.0),
            ready_what="the simulator staying up",
            endpoint=f"{cfg.devices} devices at {cfg.device_rate}/s",
            supervisor=self.link,
        )
