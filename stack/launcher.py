"""The local stack: the same services docker-compose runs, as processes on one machine."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from device_sim.spec import FleetSpec
from stack.app_service import AppService, alive_for, http_ok
from stack.config import StackConfig
from stack.errors import StackError
from stack.kafka_server import KafkaServer
from stack.mosquitto_server import INSECURE_WARNING, MosquittoServer
from stack.process import ManagedProcess
from stack.provisioning import account_login, provision
from stack.secret_files import admin_secret, device_credentials
from stack.supervision import ServiceRecord
from stack.supervisor_link import SupervisorLink
from stack.topics import DESIGN_TOPICS, ensure_topics

log = logging.getLogger(__name__)


class Service(Protocol):
    process: ManagedProcess

    def start(self) -> None: ...
    def stop(self, timeout: float = ...) -> bool: ...
    def running(self) -> bool: ...


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    endpoint: str
    record: ServiceRecord | None = None  # the supervisor's, when the service is supervised

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def state(self) -> str:
        if self.pid is not None:
            return f"running (pid {self.pid})"
        rec = self.record
        if rec is not None and rec.next_start_at is not None:
            return f"restarting in {max(rec.next_start_at - time.time(), 0):.0f} s"
        return "stopped"

    @property
    def supervision(self) -> str:
        """Restart count and last exit, for `status` ('' when not supervised)."""
        rec = self.record
        if rec is None:
            return ""
        text = f"restarts {rec.restarts}"
        return f"{text} (last: {rec.last_exit})" if rec.last_exit else text


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


class Stack:
    """Mosquitto + Kafka, then the appliance's own processes, under one data dir."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        # With supervision on, every service is started by the supervisor daemon, which
        # restarts it with backoff when it dies (docs/operations.md, "Supervision").
        self.link = SupervisorLink(config.run_dir) if config.supervise else None
        self.supervisor = SupervisorService(config, SupervisorLink(config.run_dir))
        self.mosquitto = MosquittoServer(config)
        self.kafka = KafkaServer(config)
        self.mosquitto.process.supervisor = self.link
        self.kafka.process.supervisor = self.link

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

    def bridge(self) -> AppService:
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.bridge_http_port}"
        env = (
            self._app_env()
            | self._login_env("bridge")
            | {
                "IOT_HTTP_HOST": cfg.connect_host,
                "IOT_HTTP_PORT": str(cfg.bridge_http_port),
                # separate: the `commands` service runs it; inline: a thread of this process
                "IOT_COMMANDS_ENABLED": "1" if cfg.commands_mode == "inline" else "0",
            }
        )
        return AppService(
            cfg,
            "bridge",
            [sys.executable, "-m", "bridge.cli"],
            env=env,
            ready=lambda: http_ok(f"{url}/readyz"),
            ready_what=f"{url}/readyz answering 200",
            endpoint=f"{url}/metrics",
            supervisor=self.link,
        )

    def commands(self) -> AppService:
        """The command path as its own process (`iot-cmd serve`), apart from the bridge."""
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.commands_http_port}"
        env = (
            self._app_env()
            | self._login_env("commands")
            | {
                "IOT_HTTP_HOST": cfg.connect_host,
                "IOT_COMMAND_HTTP_PORT": str(cfg.commands_http_port),
            }
        )
        return AppService(
            cfg,
            "commands",
            [sys.executable, "-m", "bridge.commands.cli", "serve"],
            env=env,
            ready=lambda: http_ok(f"{url}/readyz"),
            ready_what=f"{url}/readyz answering 200",
            endpoint=f"{url}/metrics",
            supervisor=self.link,
        )

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
        }
        if cfg.api_console:  # docs/console.md; device changes reach Mosquitto as svc/registry
            host = cfg.connect_host
            env |= {
                "IOT_CONSOLE": "1",
                "IOT_CONSOLE_MQTT_HOST": host,
                "IOT_CONSOLE_MQTT_PORT": str(cfg.mqtt_port),
                "IOT_CONSOLE_SERVICES": f"bridge=http://{host}:{cfg.bridge_http_port},"
                f"commands=http://{host}:{cfg.commands_http_port},"
                f"analytics=http://{host}:{cfg.analytics_http_port}",
                "IOT_CONSOLE_WAREHOUSE": str(cfg.warehouse_dir),
                "IOT_CONSOLE_REPORT": str(cfg.data_dir / "report" / "report.html"),
            }
            if not cfg.insecure_anonymous:
                env["IOT_CONSOLE_ADMIN_PASSWORD_FILE"] = str(admin_secret(cfg.secrets_dir))
        return AppService(
            cfg,
            "api",
            [sys.executable, "-m", "api"],
            env=env,
            ready=lambda: http_ok(f"{url}/readyz"),
            ready_what=f"{url}/readyz answering 200",
            endpoint=url,
            supervisor=self.link,
        )

    def analytics(self) -> AppService:
        cfg = self.config
        url = f"http://{cfg.connect_host}:{cfg.analytics_http_port}"
        env = self._app_env() | {
            "IOT_WAREHOUSE_DIR": str(cfg.warehouse_dir),
            "IOT_CHECKPOINT_DIR": str(cfg.data_dir / "checkpoints"),
            "IOT_ANALYTICS_HTTP_HOST": cfg.connect_host,
            "IOT_ANALYTICS_HTTP_PORT": str(cfg.analytics_http_port),
        }
        return AppService(
            cfg,
            "analytics",
            [sys.executable, "-m", "spark_jobs.cli", "stream"],
            env=env,
            # /healthz answers once the session is up and the queries started
            ready=lambda: http_ok(f"{url}/healthz"),
            ready_what=f"{url}/healthz answering 200",
            endpoint=f"{url}/metrics",
            supervisor=self.link,
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

    def services(self) -> list[tuple[str, Service]]:
        found: list[tuple[str, Service]] = [("mosquitto", self.mosquitto), ("kafka", self.kafka)]
        if self.config.with_bridge:
            found.append(("bridge", self.bridge()))
            if self.config.commands_mode == "separate":
                found.append(("commands", self.commands()))
        if self.config.with_api:
            found.append(("api", self.api()))
        if self.config.with_analytics:
            found.append(("analytics", self.analytics()))
        if self.config.devices > 0:
            found.append(("devices", self.devices()))
        return found

    def _all_known(self) -> list[tuple[str, Service]]:
        # `down`/`status` must find whatever an earlier `up` started, whatever its flags.
        return [
            ("mosquitto", self.mosquitto),
            ("kafka", self.kafka),
            ("bridge", self.bridge()),
            ("commands", self.commands()),
            ("api", self.api()),
            ("analytics", self.analytics()),
            ("devices", self.devices()),
        ]

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
        try:
            for name, service in wanted:
                if service.running():
                    progress(f"{name} already running")
                else:
                    progress(f"starting {name} ...")
                    service.start()
                    started.append((name, service))
                    progress(f"{name} ready")
                if name == "kafka":
                    self._after_kafka(progress)
        except (StackError, OSError) as exc:
            # Leave nothing half-started behind: stop what this call started, newest first.
            for _name, service in reversed(started):
                service.stop()
            if isinstance(exc, StackError):
                raise
            raise StackError(str(exc)) from exc
        self._write_endpoints()
        return [name for name, _ in started]

    def _after_kafka(self, progress: Callable[[str], None]) -> None:
        """The design's topics, then (auth on) the registry's accounts and devices."""
        cfg = self.config
        created = ensure_topics(cfg.kafka_bootstrap, DESIGN_TOPICS, cfg.partitions)
        if created:
            progress(f"created topics: {', '.join(created)}")
        if not cfg.insecure_anonymous:
            provision(
                cfg.kafka_bootstrap, cfg.connect_host, cfg.mqtt_port, cfg.secrets_dir,
                self.device_ids(), progress=progress,
            )  # fmt: skip

    def down(self, progress: Callable[[str], None] = log.info) -> list[str]:
        """Stop everything, newest first, the supervisor last; returns the names that ran."""
        # No restarts from here on, whatever `up` (and whichever config) started them.
        self.supervisor.link.withdraw_all()
        stopped: list[str] = []
        for name, service in reversed([("supervisor", self.supervisor), *self._all_known()]):
            if service.running():
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
            apps = {name for name, _ in self._all_known()[2:]}
            wanted = (wanted - apps) | (apps & set(recorded))
        state = self.supervisor.link.state()
        records = state.services if state is not None else {}
        found = [
            ServiceStatus(
                name, service.process.pid(), self._endpoint(name, service), records.get(name)
            )
            for name, service in self._all_known()
            if name in wanted or service.running()
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
        if name == "mosquitto":
            return self.config.mqtt_url
        if name == "kafka":
            return self.config.kafka_bootstrap
        if name == "supervisor":
            return str(self.supervisor.link.state_path)
        # what the `up` that started it printed, whatever flags `status` was given
        recorded = self._recorded_endpoints().get(name)
        if recorded and service.running():
            return recorded
        return service.endpoint if isinstance(service, AppService) else ""

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
        for name, service in self.services()[2:]:
            found[name] = self._endpoint(name, service)
        if self.link is not None:
            found["supervisor"] = str(self.supervisor.link.state_path)
        found["mqtt_auth"] = (
            "ANONYMOUS (insecure, development only)"
            if self.config.insecure_anonymous
            else f"registry credentials (secrets in {self.config.secrets_dir})"
        )
        found["data_dir"] = str(self.config.data_dir)
        found["logs"] = str(self.config.log_dir)
        return found

    def _write_endpoints(self) -> None:
        path = self.config.data_dir / "stack.json"
        path.write_text(json.dumps(self.endpoints(), indent=2) + "\n")
