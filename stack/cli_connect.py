"""`iot-stack connect-url`: what an analyst needs to reach the remote query endpoint.

Prints the ``sc://`` URL with the token (read from its secret; only on stdout, never logged)
and, on stderr, the CA certificate the client must trust and how to use both.
"""

from __future__ import annotations

import argparse
import sys

from stack import mqtt_tls
from stack.config import StackConfig
from stack.connect_services import remote_url
from stack.errors import StackError
from stack.secret_files import connect_token_secret, read_secret


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    cmd = sub.add_parser(
        "connect-url", parents=[common],
        help="print the remote query endpoint's sc:// URL with its token (Spark Connect behind "
        "TLS, started by `up --analytics`) and the CA certificate a client must trust",
    )  # fmt: skip
    cmd.add_argument(
        "--host",
        help="the host name the analyst reaches the appliance by (default: the bind address; "
        "it must be in the certificate: IOT_STACK_TLS_SERVER_NAMES)",
    )
    cmd.add_argument(
        "--no-token", dest="with_token", action="store_false",
        help="print the URL without the token (give it as SPARK_CONNECT_AUTHENTICATE_TOKEN)",
    )  # fmt: skip


def run(config: StackConfig, args: argparse.Namespace) -> int:
    secret = connect_token_secret(config.secrets_dir)
    if read_secret(secret) is None:
        raise StackError(
            f"no token in {secret} yet: `iot-stack up --analytics` makes it (with_connect on)"
        )
    print(remote_url(config, args.host, token=args.with_token), flush=True)
    ca = mqtt_tls.ca_dir(config) / "ca.crt"
    print(
        f"trust the appliance CA: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={ca}\n"
        'then: SparkSession.builder.remote("<the URL above>").create()',
        file=sys.stderr,
        flush=True,
    )
    return 0
