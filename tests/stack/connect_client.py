"""A real remote Spark Connect client for the endpoint's tests: pyspark's own Connect client in
a fresh interpreter that trusts only the appliance CA (gRPC's roots), as an analyst's notebook
on another machine would be set up (docs/analytics.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from deltalake import DeltaTable

CLIENT = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.remote(sys.argv[1]).create()
    rows = spark.sql(sys.argv[2]).collect()
    print("ANSWER", sorted(str(v) for row in rows for v in row))
except Exception as exc:  # the client's error, as the analyst sees it
    print("REFUSED", " ".join(str(exc).split()))
"""


def ask(url: str, query: str, ca_cert: Path) -> str:
    """``ANSWER [values...]`` (every value of every row, as strings, sorted) or ``REFUSED ...``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "GRPC_"))}
    env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(ca_cert)  # trust the appliance CA only
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url, query],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("ANSWER", "REFUSED"))]
    assert lines, done.stdout + done.stderr
    return lines[-1]


def _versions_with_rows(table: Path, timeout: float) -> tuple[int, list[str]]:
    """A version of ``device_status`` with devices in it, and their ids, as delta-rs reads it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any((table / "_delta_log").glob("*.json")):  # a first commit
            found = DeltaTable(str(table))
            ids = sorted(str(d) for d in found.to_pandas()["device_id"])
            if ids:
                return found.version(), ids
        time.sleep(0.5)
    raise AssertionError(f"no version of {table} with devices within {timeout:.0f} s")


def check_endpoint(url: str, printed_err: str, data_dir: Path) -> None:
    """The endpoint `up --analytics` started, at ``url`` (`iot-stack connect-url`'s stdout):
    a remote client over TLS with the token reads a Delta table the job wrote (the rows delta-rs
    reads from its log at the same version); a wrong token and none are refused; the token is
    in no log and not on `connect-url`'s stderr."""
    token = url.split(";token=", 1)[1]
    assert token not in printed_err
    table = data_dir / "warehouse" / "device_status"
    version, expected = _versions_with_rows(table, 300)
    query = f"SELECT device_id FROM delta.`{table}` VERSION AS OF {version}"
    ca = data_dir / "ca" / "ca.crt"
    assert ask(url, query, ca) == f"ANSWER {expected}"
    wrong = ask(url.replace(token, token[::-1] + "x"), query, ca)
    assert wrong.startswith("REFUSED"), wrong
    assert "Invalid authentication token" in wrong
    missing = ask(url.split(";token=", 1)[0], query, ca)
    assert missing.startswith("REFUSED"), missing
    assert "No authentication token provided" in missing
    for log in ("connect.log", "connect-tls.log", "supervisor.log"):
        assert token not in (data_dir / "logs" / log).read_text()
