"""The stack a chaos run hurts: `iot-stack up` (console, command path, simulated devices, the
analytics job if asked; one Kafka node or the 3-node KRaft cluster) in a temp dir on free
ports, Kafka's and Mosquitto's data dirs on small tmpfs mounts when the machine allows it
(root: the disk-full fault), and the run's own logins (an `api` account, an operator, HTTP and
MQTT devices) made through the registry's CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stack.kafka_layout import PORT_STEP
from stack.ports import free_port_run, free_ports
from stack.supervisor_link import SupervisorLink

DEVICE_PREFIX = "chaos"


@dataclass
class ChaosStack:
    data_dir: Path
    ports: dict[str, int]
    analytics: bool
    env: dict[str, str]
    api_account: tuple[str, str] = ("", "")
    operator: tuple[str, str] = ("", "")
    devices: dict[str, str] = field(default_factory=dict)  # chaos device id -> secret
    mounts: dict[str, Path] = field(default_factory=dict)  # service -> its tmpfs data dir
    up_extra: list[str] = field(default_factory=list)  # `up`'s flags beyond the ports
    kafka_nodes: int = 1  # 3: the replicated cluster, node N on the Kafka port + 2(N-1)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    @property
    def kafka_services(self) -> list[str]:
        """The supervisor's names of the Kafka nodes (`kafka`, or `kafka-1` .. `kafka-N`)."""
        if self.kafka_nodes == 1:
            return ["kafka"]
        return [f"kafka-{i}" for i in range(1, self.kafka_nodes + 1)]

    @property
    def kafka_ports(self) -> list[int]:
        return [self.ports["kafka"] + PORT_STEP * i for i in range(self.kafka_nodes)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.kafka_ports)

    @property
    def mqtt_port(self) -> int:
        return self.ports["mqtt"]

    @property
    def args(self) -> list[str]:
        p = self.ports
        nodes = ["--kafka-nodes", str(self.kafka_nodes)] if self.kafka_nodes > 1 else []
        return [
            "--data-dir", str(self.data_dir), "--mqtt-port", str(p["mqtt"]),
            "--mqtt-tls-port", str(p["mqtt_tls"]), "--kafka-port", str(p["kafka"]),
            "--kafka-controller-port", str(p["controller"]),
            "--bridge-http-port", str(p["bridge"]), "--commands-http-port", str(p["commands"]),
            "--api-port", str(p["api"]), *nodes,
        ]  # fmt: skip

    @property
    def ready_urls(self) -> dict[str, str]:
        """The HTTP services' readiness URLs."""
        p = self.ports
        urls = {
            "bridge": f"http://127.0.0.1:{p['bridge']}/readyz",
            "commands": f"http://127.0.0.1:{p['commands']}/readyz",
            "api": f"{self.api_url}/readyz",
        }
        if self.analytics:
            urls["analytics"] = f"http://127.0.0.1:{p['analytics']}/healthz"
        return urls

    @property
    def link(self) -> SupervisorLink:
        return SupervisorLink(self.data_dir / "run")

    def pid(self, service: str) -> int | None:
        """The service's pid as the supervisor last wrote it (the supervisor's own pid file)."""
        if service == "supervisor":
            try:
                return int((self.data_dir / "run" / "supervisor.main-pid").read_text())
            except (OSError, ValueError):
                return None
        record = self.link.record(service)
        return record.pid if record is not None else None


def _cli(module: str, args: list[str], env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args[:3])}... failed: {done.stderr[-2000:]}")
    return done.stdout


def _mount_tmpfs(path: Path, size_mb: int) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


DISK_MB = {"kafka": 1024, "mosquitto": 64}  # the tmpfs data dirs' sizes (disk=True)


def up(
    work_dir: Path,
    *,
    analytics: bool,
    disk: bool,
    devices: int = 4,
    disk_mb: dict[str, int] | None = None,
    kafka_nodes: int = 1,
    bind_host: str = "127.0.0.1",
) -> ChaosStack:
    """`iot-stack up` in ``work_dir`` and the run's logins; raises RuntimeError if it fails.
    ``bind_host`` 0.0.0.0: the servers listen on every address (an edge site in a network
    namespace dials the host's end of its link); clients still use 127.0.0.1.
    ``disk``: Kafka's (one node only) and Mosquitto's data dirs on tmpfs mounts of ``disk_mb``
    (DISK_MB) MiB when the machine allows it (root); :func:`down` unmounts them.
    ``kafka_nodes`` 3: `up --kafka-nodes 3`, the nodes on consecutive ports."""
    stack = ChaosStack((work_dir / "var").resolve(), _ports(kafka_nodes), analytics, {},
                       kafka_nodes=kafka_nodes)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    env |= {
        # the cluster's own default per node (three share the machine)
        "IOT_KAFKA_HEAP": "512m" if kafka_nodes == 1 else "384m",
        "IOT_START_TIMEOUT": "300",
        "IOT_STACK_RESTART_BACKOFF_INITIAL": "1",
        "IOT_STACK_RESTART_BACKOFF_MAX": "8",
        "IOT_STACK_ANALYTICS_HTTP_PORT": str(stack.ports["analytics"]),
        "IOT_STACK_CONNECT": "0",  # no remote query endpoint: a JVM and fixed ports less
        "IOT_BIND_HOST": bind_host,
    }
    stack.env = env
    if disk:
        sizes = DISK_MB | (disk_mb or {})
        dirs = [("kafka", "kafka/data")] if kafka_nodes == 1 else []
        for service, sub in [*dirs, ("mosquitto", "mosquitto")]:
            if _mount_tmpfs(stack.data_dir / sub, sizes[service]):
                stack.mounts[service] = stack.data_dir / sub
    extra = ["--console", "--commands-mode", "separate", "--partitions", "3",
             "--devices", "3", "--device-rate", "1"]  # fmt: skip
    if analytics:
        extra.append("--analytics")
    stack.up_extra = extra
    try:
        _cli("stack.cli", ["up", *stack.args, *extra], env)
        _logins(stack, devices)
    except BaseException:
        down(stack)
        raise
    return stack


def _ports(kafka_nodes: int) -> dict[str, int]:
    """The stack's ports, free now; with a cluster the nodes' client and controller ports
    are one run of consecutive ports from `kafka` (`controller` = `kafka` + 1)."""
    names = ["mqtt", "mqtt_tls", "bridge", "commands", "api", "analytics"]
    if kafka_nodes == 1:
        free = free_ports(len(names) + 2)
        return dict(zip([*names, "kafka", "controller"], free, strict=True))
    first = free_port_run(PORT_STEP * kafka_nodes)
    taken = range(first, first + PORT_STEP * kafka_nodes)
    free = [p for p in free_ports(len(names) + len(taken)) if p not in taken][: len(names)]
    return dict(zip(names, free, strict=True)) | {"kafka": first, "controller": first + 1}


def registry(stack: ChaosStack, *args: str) -> Any:
    """`iot-devices ... --json ARGS` as the registry's admin on the stack: its JSON answer."""
    common = [
        "--kafka-bootstrap", stack.bootstrap, "--mqtt-host", "127.0.0.1",
        "--mqtt-port", str(stack.mqtt_port),
        "--admin-password-file", str(stack.data_dir / "secrets" / "registry-admin.secret"),
        "--json",
    ]  # fmt: skip
    return json.loads(_cli("registry", [*common, *args], stack.env))


def device_secrets(made: Any) -> dict[str, str]:
    """`device add --json`'s answer (one object, or a list of them) as id -> secret."""
    rows = made if isinstance(made, list) else [made]
    return {row["id"]: row["secret"] for row in rows}


def _logins(stack: ChaosStack, devices: int) -> None:
    """The run's `api` account, operator and devices, through the registry's CLI."""
    for role, attr in (("api", "api_account"), ("operator", "operator")):
        name = f"chaos-{role}"
        made = registry(stack, "account", "create", name, "--role", role)
        setattr(stack, attr, (name, made["secret"]))
    ids = [f"{DEVICE_PREFIX}-{i:05d}" for i in range(devices)]
    stack.devices = device_secrets(registry(stack, "device", "add", *ids))
    (stack.data_dir / "chaos-devices.json").write_text(json.dumps(stack.devices))
    logins = {"api": stack.api_account, "operator": stack.operator}
    (stack.data_dir / "secrets" / "chaos-logins.json").write_text(json.dumps(logins))


def down(stack: ChaosStack) -> None:
    """`iot-stack down`, then the tmpfs mounts undone."""
    try:
        _cli("stack.cli", ["down", *stack.args], stack.env, timeout=300)
    finally:
        for path in stack.mounts.values():
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
