"""The remote query endpoint's processes: Spark Connect on loopback, nginx (TLS) in front.

Builds what the two processes run from (``stack.connect_conf``): the token (a secret under
``var/secrets``, made on first use like the services' passwords), the server's properties file
(0600: it holds the token), nginx's configuration, and both command lines. The command lines
depend only on the settings (``iot-stack status`` builds them to find the processes again);
the files are written by ``write_files`` right before a start. Starting and supervising them
is the caller's (the launcher's services, ``stack.connect_services``, or a test).
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.config import default_jars_dir
from spark_jobs.delta_conf import DELTA_JAR_PREFIX, delta_conf
from stack import connect_conf
from stack.errors import StackError
from stack.secret_files import connect_token_secret, read_secret, write_private, write_secret
from stack.spark_cluster import spark_conf_dir, spark_home

# Connect answers one analyst's queries at a time on a small box: few shuffle partitions
SHUFFLE_PARTITIONS = 4


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


def delta_jars(env: dict[str, str] | None = None) -> list[Path]:
    """Delta Lake's jars (and the connector's folder's others) for the server's class path."""
    folder = Path(
        (env or dict(os.environ)).get("IOT_SPARK_JARS_DIR") or default_jars_dir(os.environ)
    )
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not any(j.name.startswith(DELTA_JAR_PREFIX) for j in jars):
        raise StackError(
            f"no {DELTA_JAR_PREFIX}*.jar in {folder} (IOT_SPARK_JARS_DIR): run the set-up "
            "(bash .ci/setup) first"
        )
    return [j.resolve() for j in jars]


@dataclass(frozen=True, slots=True)
class ConnectPlan:
    server_argv: list[str]
    server_env: dict[str, str]
    proxy_argv: list[str]
    url: str  # what a remote client connects to, without the token
    props: Path
    proxy_conf: Path


def plan(
    work_dir: Path,
    *,
    listen_host: str,
    listen_port: int,
    server_port: int,
    master: str = "local[1]",
    driver_memory: str = "512m",
    jvm_options: str = "",
    url_host: str | None = None,
) -> ConnectPlan:
    """The two command lines, their environment and files under ``work_dir`` (not written)."""
    java = shutil.which("java")
    if java is None:
        raise StackError("java not found: install OpenJDK 17 or newer (`make setup` checks)")
    home = spark_home()
    jars = home / "jars"
    slf4j = sorted(jars.glob("slf4j-api-*.jar"))
    classpath = [str(spark_conf_dir()), *map(str, slf4j), f"{jars}/*", *map(str, delta_jars())]
    props = work_dir / "spark-connect.properties"
    server_argv = connect_conf.server_command(
        java, classpath, props, master=master, memory=driver_memory,
        jvm_options=shlex.split(jvm_options),
    )  # fmt: skip
    env = {
        "SPARK_HOME": str(home),
        "SPARK_SCALA_VERSION": "2.13",
        "SPARK_CONF_DIR": str(spark_conf_dir()),  # the job's log4j2.properties: warnings only
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    conf = work_dir / "nginx.conf"
    proxy_argv = [nginx_binary(), "-c", str(conf), "-p", str(work_dir), "-e", "stderr"]
    url = connect_conf.remote_url(url_host or listen_host, listen_port, None)
    return ConnectPlan(server_argv, env, proxy_argv, url, props, conf)


def write_files(
    p: ConnectPlan,
    *,
    token: str,
    listen_host: str,
    listen_port: int,
    server_port: int,
    cert: Path,
    key: Path,
) -> None:
    """The server's properties (0600: the token) and nginx's configuration."""
    work_dir = p.props.parent
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "tmp").mkdir(exist_ok=True)
    delta = delta_conf(SHUFFLE_PARTITIONS)
    # the job's own VACUUM needs it off; here Delta's check stays (Connect is for reading)
    delta.pop("spark.databricks.delta.retentionDurationCheck.enabled", None)
    extra = (
        connect_conf.DELTA_CATALOG
        | delta
        | {
            "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.warehouse.dir": str(work_dir / "spark-warehouse"),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
    )
    write_private(p.props, connect_conf.server_properties(token, server_port, extra))
    p.proxy_conf.write_text(
        connect_conf.proxy_conf(
            listen_host=listen_host,
            listen_port=listen_port,
            upstream_port=server_port,
            cert=cert,
            key=key,
            prefix=work_dir,
        )
    )
