"""The remote query endpoint as two of the stack's services: `connect` (Spark Connect on
loopback, token-checked) and `connect-tls` (nginx: TLS with the appliance CA's server
certificate, gRPC passed on). `up --analytics` starts both after the job unless
`with_connect` is off (`--no-connect`, IOT_STACK_CONNECT=0); supervised like the others.

Their command lines and files are made when they start (``stack.spark_connect``): `status` and
`down` find them by their pid files and need neither java, nginx nor the Delta jars.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from stack import connect_conf, mqtt_tls, spark_connect
from stack.app_service import AppService
from stack.config import StackConfig
from stack.secret_files import connect_token_secret, read_secret
from stack.supervisor_link import SupervisorLink

SERVER = "connect"
PROXY = "connect-tls"


def port_open(host: str, port: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False

    return check


def work_dir(config: StackConfig) -> Path:
    return config.data_dir / "connect"


def remote_url(config: StackConfig, host: str | None = None, *, token: bool = False) -> str:
    """The ``sc://`` URL of the endpoint (with the token read from its secret if asked)."""
    secret = read_secret(connect_token_secret(config.secrets_dir)) if token else None
    return connect_conf.remote_url(host or config.connect_host, config.connect_port, secret)


class ConnectService(AppService):
    """One of the endpoint's two processes; its argv and files are made at `start()`."""

    def __init__(self, config: StackConfig, name: str, link: SupervisorLink | None) -> None:
        port = config.connect_server_port if name == SERVER else config.connect_port
        host = "127.0.0.1" if name == SERVER else config.connect_host
        if name == SERVER:
            endpoint = f"127.0.0.1:{port} (Spark Connect, loopback, token-checked)"
        else:
            endpoint = f"{remote_url(config)} (token: iot-stack connect-url)"
        super().__init__(
            config,
            name,
            [],
            env={},
            ready=lambda: port_open(host, port),
            ready_what=f"{host}:{port} open",
            endpoint=endpoint,
            supervisor=link,
        )

    def start(self) -> None:
        cfg = self.config
        plan = spark_connect.plan(
            work_dir(cfg),
            listen_host=cfg.bind_host,
            listen_port=cfg.connect_port,
            server_port=cfg.connect_server_port,
            url_host=cfg.connect_host,
            jvm_options=cfg.connect_jvm_options,
        )
        store, _made = mqtt_tls.ensure_ca(cfg)
        spark_connect.write_files(
            plan,
            token=spark_connect.ensure_token(cfg.secrets_dir),
            listen_host=cfg.bind_host,
            listen_port=cfg.connect_port,
            server_port=cfg.connect_server_port,
            cert=store.server_cert,
            key=store.server_key,
        )
        if self.name == SERVER:
            self.argv, self.env = plan.server_argv, plan.server_env
        else:
            self.argv, self.env = plan.proxy_argv, {}
        super().start()


def connect_services(
    config: StackConfig, link: SupervisorLink | None
) -> list[tuple[str, ConnectService]]:
    """Both processes, in start order."""
    return [(name, ConnectService(config, name, link)) for name in (SERVER, PROXY)]
