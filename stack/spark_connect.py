"""The remote query endpoint's processes: Spark Connect on loopback, nginx (TLS) in front.

Builds what the two processes run from (``stack.connect_conf``): the token (a secret under
``var/secrets``, made on first use like the services' passwords), the server's properties file
(0600: it holds the token), nginx's configuration, and both command lines. Starting and
supervising them is the caller's (the launcher's services, or a test).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pyspark

import spark_jobs
from stack import connect_conf
from stack.errors import StackError
from stack.secret_files import connect_token_secret, read_secret, write_private, write_secret


def ensure_token(secrets_dir: Path) -> str:
    """The endpoint's token: the one in ``var/secrets`` or, on first use, a new one kept there."""
    path = connect_token_secret(secrets_dir)
    token = read_secret(path)
    if token is None:
        token = secrets.token_urlsafe(32)
        write_secret(path, token)
    return token


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")
    if not found:
        raise StackError("nginx is not installed (the set-up installs it: bash .ci/setup)")
    return found


@dataclass(frozen=True, slots=True)
class ConnectPlan:
    server_argv: list[str]
    server_env: dict[str, str]
    proxy_argv: list[str]
    url: str  # what a remote client connects to, without the token


def plan(
    work_dir: Path,
    *,
    token: str,
    listen_host: str,
    listen_port: int,
    server_port: int,
    cert: Path,
    key: Path,
    master: str = "local[1]",
    driver_memory: str = "512m",
) -> ConnectPlan:
    """Write the server's properties and nginx's configuration under ``work_dir``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "tmp").mkdir(exist_ok=True)
    props = work_dir / "spark-connect.properties"
    write_private(props, connect_conf.server_properties(token, server_port))
    conf = work_dir / "nginx.conf"
    conf.write_text(
        connect_conf.proxy_conf(
            listen_host=listen_host,
            listen_port=listen_port,
            upstream_port=server_port,
            cert=cert,
            key=key,
            prefix=work_dir,
        )
    )
    home = Path(pyspark.__file__).parent
    server_argv = [
        str(home / "bin" / "spark-submit"),
        "--master", master,
        "--driver-memory", driver_memory,
        "--name", "iot-connect",
        "--properties-file", str(props),
        "--class", connect_conf.SERVER_CLASS,
    ]  # fmt: skip
    env = {"SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable}
    server_env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")} | env
    # the job's log4j2.properties (warnings only) unless the operator has a conf dir of their own
    server_env.setdefault("SPARK_CONF_DIR", str(Path(spark_jobs.__file__).parent / "conf"))
    proxy_argv = [nginx_binary(), "-c", str(conf), "-p", str(work_dir), "-e", "stderr"]
    url = connect_conf.remote_url(listen_host, listen_port, None)
    return ConnectPlan(server_argv, server_env, proxy_argv, url)
