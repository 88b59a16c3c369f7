"""Spark Connect behind TLS: the files the remote query endpoint runs from (pure).

Spark Connect (the server class is in the pyspark wheel) checks a pre-shared bearer token
(``spark.connect.authenticate.token``) but has no TLS, and pyspark 4.0.0's client sends its token
only over TLS (or to ``localhost``). So the server listens on loopback, and nginx terminates
TLS in front of it with the appliance CA's server certificate and passes gRPC on
(``grpc_pass``). nginx, not stunnel: gRPC's C core refuses a TLS peer that does not select the
``h2`` ALPN protocol ("Cannot check peer: missing selected ALPN property"), which nginx's
``listen ... ssl http2`` does. An analyst connects with
``SparkSession.builder.remote("sc://host:15002/;use_ssl=true;token=...")`` and the CA
certificate as gRPC's roots (``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``).

The server runs as the very JVM command ``spark-submit`` would build (``bin/spark-class`` execs
java after a launcher run, which changes the process's argv after the launcher recorded it, as
for the Spark cluster's daemons), with the Delta jars on its class path so that
``DeltaCatalog`` and the session extension load, and in-memory catalog (no Derby
``metastore_db``). nginx runs without a master process (``master_process off``): a master
rewrites its process title, which the launcher compares with the pid file to find it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
DEFAULT_PORT = 15002
# what Spark's launcher adds to a driver's JVM (JavaModuleOptions): Arrow and Spark's own
# reflection need these opens on Java 17
_OPENS = (
    "java.base/java.lang java.base/java.lang.invoke java.base/java.lang.reflect java.base/java.io "
    "java.base/java.net java.base/java.nio java.base/java.util java.base/java.util.concurrent "
    "java.base/java.util.concurrent.atomic java.base/jdk.internal.ref java.base/sun.nio.ch "
    "java.base/sun.nio.cs java.base/sun.security.action java.base/sun.util.calendar "
    "java.security.jgss/sun.security.krb5"
)
JAVA_OPTIONS = [
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-modules=jdk.incubator.vector",
    *(f"--add-opens={module}=ALL-UNNAMED" for module in _OPENS.split()),
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
]
DELTA_CATALOG = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.catalogImplementation": "in-memory",
}


def server_command(
    java: str,
    classpath: list[str],
    props: Path,
    *,
    master: str,
    memory: str,
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """The Connect server's JVM command line (what ``spark-submit`` runs, without its script)."""
    return [
        java, "-cp", ":".join(classpath), f"-Xmx{memory}", *JAVA_OPTIONS, *jvm_options,
        SUBMIT_CLASS, "--master", master, "--conf", f"spark.driver.memory={memory}",
        "--properties-file", str(props), "--class", SERVER_CLASS, "--name", "iot-connect",
        "spark-internal",
    ]  # fmt: skip


def remote_url(host: str, port: int, token: str | None) -> str:
    """The ``sc://`` URL a remote client gives ``SparkSession.builder.remote``."""
    url = f"sc://{host}:{port}/;use_ssl=true"
    return f"{url};token={token}" if token else url


def server_properties(
    token: str, port: int, extra: Mapping[str, str] | None = None, host: str = "127.0.0.1"
) -> str:
    """``spark-submit --properties-file`` text of the Connect server (the token stays out of
    the process's command line, where ``ps`` would show it)."""
    props = {
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.authenticate.token": token,
        "spark.ui.enabled": "false",
        **(extra or {}),
    }
    return "".join(f"{k} {v}\n" for k, v in props.items())


def proxy_conf(
    *,
    listen_host: str,
    listen_port: int,
    upstream_port: int,
    cert: Path,
    key: Path,
    prefix: Path,
) -> str:
    """nginx's whole configuration: one TLS + HTTP/2 listener passing gRPC to the server on
    loopback; pid and temp files under ``prefix``, errors to stderr, in the foreground."""
    temp = prefix / "tmp"
    temps = "".join(
        f"  {kind}_temp_path {temp / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        "master_process off;\n"
        f"pid {prefix / 'nginx.pid'};\n"
        "error_log stderr warn;\n"
        "daemon off;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        "  access_log off;\n"
        f"{temps}"
        "  client_max_body_size 0;\n"
        "  server {\n"
        f"    listen {listen_host}:{listen_port} ssl http2;\n"
        f"    ssl_certificate {cert};\n"
        f"    ssl_certificate_key {key};\n"
        "    ssl_protocols TLSv1.2 TLSv1.3;\n"
        "    grpc_read_timeout 1d;\n"
        "    grpc_send_timeout 1d;\n"
        f"    location / {{ grpc_pass grpc://127.0.0.1:{upstream_port}; }}\n"
        "  }\n"
        "}\n"
    )
