"""Examples that run (issue 12, item 6): every command README.md and docs/*.md show is checked.

- Every command line of ours (a console script, ``python -m ...``, ``make ...``: the recipe
  lines it runs) is handed to the real program's argparse, which must accept it
  (`test_command_parses`); usage lines must name real subcommands and options
  (`test_synopsis_names_real_options`); every console script answers ``--help``.
- Every command of a fenced block is either run by a test of this module (``RUN``: command ->
  the test) or listed in ``NOT_RUN`` with the reason; a new example fails
  `test_every_fenced_command_is_run_or_excused` until someone decides which.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from registry import cli_certs
from registry.ca_store import CaStore
from registry.config import RegistryConfig
from registry.model import Role
from registry.permissions import local_admin
from registry.service import Registry
from stack.ports import free_port as _free_port
from tests.api.http_devices.test_handlers import transactions_ready  # noqa: F401 - fixture
from tests.bridge.helpers import consume
from tests.commands.conftest import CommandEnv, command_env, service_factory  # noqa: F401
from tests.commands.harness import Device, unique, wait_for
from tests.docs_examples import (
    SCRIPTS,
    Example,
    Makefile,
    all_examples,
    entry_point,
    help_text,
    parse,
)
from tests.plugins.jvm_options import KAFKA_JVM_OPTIONS_ENV
from tests.registry.conftest import fresh_store, running_dynsec_mosquitto

EXAMPLES = all_examples()
FENCED = [e for e in EXAMPLES if e.kind == "fenced"]
SYNOPSES = [e for e in EXAMPLES if e.kind == "synopsis"]
OURS = [e for e in EXAMPLES if e.kind != "synopsis" and e.ours]
MAKEFILE = Makefile.read()

# fenced command -> the test below that runs it, as shown (endpoints from the environment)
RUN = {
    "iot-stack status": "test_stack_status_runs",
    "iot-stack systemd --data-dir /var/lib/iot --console --analytics --unit-dir .": (
        "test_systemd_unit_example_runs"
    ),
    "iot-stack up --kafka-nodes 3": "test_kafka_cluster_examples_run",
    "iot-stack up --kafka-bootstrap kafka-a:9092,kafka-b:9092,kafka-c:9092": (
        "test_kafka_cluster_examples_run"
    ),
    "iot-cmd send dev-00001 reboot --args '{\"delay_s\": 1}' --wait": "test_cmd_send_runs",
    "iot-cmd send dev-00042 set-rate --args '{\"hz\": 5}' --timeout 5 --wait": "test_cmd_send_runs",
    "iot-cmd send group:floor-2 reboot --timeout 10 --wait": "test_cmd_send_runs",
    "echo '$?'": "test_cmd_send_runs",  # the exit code of the send before it: 0
    "iot-analytics sql 'SELECT * FROM fleet_minute ORDER BY window_start DESC LIMIT 5'": (
        "test_analytics_commands_run"
    ),
    "iot-analytics sql --format csv "
    "'SELECT device_id, SUM(missing_seq) FROM device_minute GROUP BY 1'": (
        "test_analytics_commands_run"
    ),
    "iot-analytics report": "test_analytics_commands_run",
    "iot-analytics report --since -2h --out var/report": "test_analytics_commands_run",
    "iot-analytics report --since 2026-01-01T08:00 --until 2026-01-01T12:00 --format html": (
        "test_analytics_commands_run"
    ),
    "iot-analytics score --manifest 'var/sim-runs/<run>/manifest.json'": (
        "test_analytics_commands_run"
    ),
    "iot-analytics report --tenant acme --out var/report-acme": "test_analytics_commands_run",
    "iot-analytics sql 'SELECT count(*) AS n FROM fleet_minute VERSION AS OF 0'": (
        "test_analytics_commands_run"
    ),
    "iot-analytics sql 'SELECT _change_type, count(*) AS n FROM "
    "table_changes('\"'\"'device_minute'\"'\"', 0) GROUP BY 1'": "test_analytics_commands_run",
    "iot-analytics sql 'SELECT tenant, SUM(messages) AS n FROM device_minute GROUP BY tenant'": (
        "test_analytics_commands_run"
    ),
    "iot-analytics sql --engine duckdb "
    "'SELECT tenant, sum(messages) AS n FROM device_minute GROUP BY tenant'": (
        "test_analytics_commands_run"
    ),
    "iot-bridge --mqtt-host localhost --mqtt-port 1883 --kafka-bootstrap localhost:9092": (
        "test_bridge_example_runs"
    ),
    "mosquitto_pub -q 1 -t devices/d1/telemetry "
    '-m \'{"ts": 1700000000000, "seq": 0, "metrics": {"t": 21.5}}\'': ("test_bridge_example_runs"),
    # README's publish: run with the bridge's (anonymous, `<secret>` ignored there) and, with
    # authentication, in the same form as security.md's pump-7 by test_own_device_example_runs
    "mosquitto_pub -i d1 -u d1 -P '<secret>' -q 1 -t devices/d1/telemetry "
    '-m \'{"ts": 1700000000000, "seq": 0, "metrics": {"temp": 21.5}}\'': (
        "test_bridge_example_runs"
    ),
    **dict.fromkeys(
        (
            "iot-devices --admin-password-file var/secrets/registry-admin.secret device add d1",
            "export IOT_REGISTRY_ADMIN_PASSWORD_FILE=var/secrets/registry-admin.secret",
            "iot-devices device add pump-7",
            "mosquitto_pub -i pump-7 -u pump-7 -P '<secret>' -q 1 -t devices/pump-7/telemetry "
            '-m \'{"ts": 1700000000000, "seq": 0, "metrics": {"temp": 21.5}}\'',
            "iot-devices device disable pump-7",
            "iot-devices cert pump-3 --out var/certs",
            "mosquitto_pub -p 8883 --cafile var/certs/ca.crt --cert var/certs/pump-3.crt "
            "--key var/certs/pump-3.key -q 1 -t devices/pump-3/telemetry "
            '-m \'{"ts": 1700000000000, "seq": 0, "metrics": {"temp": 21.5}}\'',
            # README's and console.md's: provision, then use at once (issue 37: no wait)
            "iot-devices --admin-password-file var/secrets/registry-admin.secret account create "
            "pub1 --role api",
            "curl -s -u 'pub1:<secret>' -X POST -H 'Content-Type: application/json' "
            "-d '[{\"t\": 21.5}]' localhost:3904/events/demo",
            "iot-api --registry-auth --console --console-admin-password-file "
            "var/secrets/registry-admin.secret",
            "iot-devices --admin-password-file var/secrets/registry-admin.secret account create "
            "alice --role operator",
        ),
        "test_own_device_example_runs",
    ),
    "curl -s localhost:9108/metrics | grep iot_bridge_acked": "test_bridge_example_runs",
    **dict.fromkeys(
        (
            "iot-devices mosquitto-init var/mosquitto/dynsec.json "
            "--password-file var/registry-admin.secret",
            "export IOT_KAFKA_BOOTSTRAP=localhost:9092 IOT_MQTT_HOST=127.0.0.1 IOT_MQTT_PORT=1883",
            "export IOT_REGISTRY_ADMIN_PASSWORD_FILE=var/registry-admin.secret",
            "iot-devices init",
            "iot-devices bootstrap-admin alice",
            "iot-devices tenant create acme --max-devices 1000 --max-msgs-per-s 500",
            "iot-devices device add --tenant acme pump-1 --group floor-1",
            "iot-devices device list --tenant acme --search pump",
            "iot-devices device rotate --tenant acme pump-1",
            "iot-devices device disable --tenant acme pump-1",
            "iot-devices account create bridge --role bridge",
            "iot-devices audit --entity device/acme/",
            "iot-devices mosquitto sync",
            "iot-devices ca init --server-name iot.example",
            "iot-devices ca mosquitto-conf --port 8883",
            "iot-devices cert pump-2 --tenant acme --days 365 --out var/certs",
            "iot-devices cert list --tenant acme pump-2",
            "iot-devices cert revoke --tenant acme pump-2",
        ),
        "test_registry_commands_run",
    ),
    **dict.fromkeys(
        (
            "iot-api --kafka-bootstrap localhost:9092 --insecure-anonymous",
            "curl -s -X POST -H 'Content-Type: application/json' "
            '-d \'{"topicName": "demo", "partitionCount": "3"}\' '
            "localhost:3904/topics/create",
            "curl -s 'localhost:3904/events/demo/g1/c1?timeout=0'",
            "curl -s -X POST -H 'Content-Type: application/json' "
            '-d \'[{"t": 21.5}, {"t": 21.7}]\' localhost:3904/events/demo',
            "curl -s -X POST -H 'Content-Type: application/cambria' "
            "--data-binary '4.11.asdfhello world' localhost:3904/events/demo",
            "curl -s 'localhost:3904/events/demo/g1/c1?timeout=5000&limit=10'",
            "curl -s localhost:3904/topics",
        ),
        "test_api_examples_run",
    ),
    **dict.fromkeys(
        (
            "curl -s -X POST -H 'Content-Type: application/json' -d '{\"t\": 21.5}' "
            "localhost:3904/push/demo-saw",
            "curl -s 'localhost:3904/latest/demo-saw?offset=5'",
            "curl -s -N localhost:3904/realtime/demo-saw",
            "curl -s -X PUT 'localhost:3904/queues/jobs?partitions=3&maxDeliveries=5'",
            "curl -s -X POST -H 'Content-Type: application/json' "
            '-d \'[{"job": 1}, {"job": 2}]\' localhost:3904/queues/jobs/messages',
            "curl -s -X POST "
            "'localhost:3904/queues/jobs/receive?max=10&visibility=30&timeout=5000'",
            "curl -s -X POST -H 'Content-Type: application/json' "
            '-d \'{"receiptHandles": ["HANDLE"]}\' localhost:3904/queues/jobs/ack',
        ),
        "test_api_sawmill_and_queue_examples_run",
    ),
    **dict.fromkeys(
        (
            "curl -s -w ' %{http_code}\\n' -X PUT -H 'Content-Type: application/json' "
            '-d \'{"ts": 1700000000000, "seq": 0, "metrics": {"t": 21.5}}\' '
            "localhost:3904/telemetry/default/pump-1",
            "curl -s -w ' %{http_code}\\n' -X PUT -H 'Content-Type: application/json' "
            '-d \'{"ts": 1700000000000, "seq": 1}\' localhost:3904/telemetry/default/pump-1',
        ),
        "test_api_device_examples_run",
    ),
    "iot-amqp --kafka-bootstrap localhost:9092 --registry-auth": "test_amqp_example_runs",
    **dict.fromkeys(
        (
            "iot-api --kafka-bootstrap localhost:9092 --insecure-anonymous --tls-port 3905 "
            "--tls-ca-dir var/ca",
            "curl -s --cacert var/ca/ca.crt https://localhost:3905/healthz",
        ),
        "test_api_tls_examples_run",
    ),
}

_SIM_RUN = (
    "a load of minutes (1000 or 200 devices); parsed here, and the same run + verify path "
    "runs small in tests/device_sim/test_integration.py"
)
_BENCH = "a benchmark of minutes on its own servers; parsed here, its parts tested in tests/bench/"
_CLUSTER = (
    "needs the Spark cluster `iot-stack up --spark-workers 2` starts on the default ports; "
    "tests/spark_jobs/test_stream_cluster.py runs `stream --spark-master` and `sql "
    "--spark-master` on a master and 2 workers of its own (a few minutes of Spark), and the "
    "report's options run locally in test_analytics_commands_run"
)
NOT_RUN = {
    "iot-stack connect-url --host appliance.example": "needs a stack started with --analytics "
    "(its token); tests/stack/test_supervisor_integration.py runs `connect-url` on the stack of "
    "its `up --analytics` and connects with the URL it prints",
    **dict.fromkeys(
        (
            "iot-stack up --kafka-security sasl_ssl",
            "iot-stack kafka-tenant acme --kafka-security sasl_ssl",
        ),
        "a secured stack on the default ports; tests/stack/test_kafka_security_integration.py "
        "starts the same through the launcher on free ports and adds tenant consumers as "
        "`kafka-tenant` does (kafka_auth.add_tenant_consumer)",
    ),
    **dict.fromkeys(
        (
            "curl -s -i -u 'acme/pump-1:<secret>' -H 'hono-ttd: 30' "
            "-H 'Content-Type: application/json' "
            '-d \'{"ts": 1700000000000, "seq": 2, "metrics": {"t": 21.6}}\' '
            "localhost:3904/telemetry",
            "curl -s -i -u 'acme/pump-1:<secret>' -H 'Content-Type: application/json' "
            '-d \'{"status": "ok", "result": "done"}\' '
            "localhost:3904/command/res/REQ_ID",
        ),
        "needs a registry device, its secret, Mosquitto with dynsec and the command path; "
        "tests/api/http_devices/test_handlers.py makes the same requests (a waiting telemetry "
        "post that gets a command, its reply closing it succeeded) on a registry and broker of "
        "its own",
    ),
    **dict.fromkeys(
        (
            "sudo cp iot-stack.service /etc/systemd/system/",
            "sudo systemctl daemon-reload",
            "sudo systemctl enable --now iot-stack",
            "systemctl status iot-stack",
            "journalctl -u iot-stack",
            "sudo systemctl stop iot-stack",
        ),
        "installs and runs a systemd unit: needs root and systemd as pid 1 (this machine has "
        "neither); tests/stack/test_systemd_unit.py checks the unit (systemd-analyze verify) "
        "and tests/stack/test_supervisor_integration.py what its ExecStart/ExecStop and a "
        "kill -9 of the supervisor do",
    ),
    "make run": "the whole appliance on the default ports, after .ci/setup; its recipe "
    "(iot-stack up --analytics --console --devices 200 --device-rate 2) is parsed here and "
    "`up` is tested by tests/stack/test_stack_integration.py",
    "make test": "the whole test suite (this module included)",
    **dict.fromkeys(
        (
            "make containers",
            "export DOCKER_HOST=unix:///run/iot-containers/docker.sock",
            "DOCKER_BUILDKIT=0 docker build --network host --build-arg "
            "'BASE=$(cat /var/lib/iot-containers/base-image)' -t iot-appliance:latest .",
            "docker-compose up -d",
            "docker-compose ps",
            "docker-compose down -v",
            "make test-containers",
        ),
        "needs the container engine `make containers` installs (root, minutes, ~2.5 GB: "
        "not in this module's run); `make test-containers` (CI, after `make test`) runs "
        "`make containers`, then tests/test_compose_run.py: the same build (the engine's "
        "legacy builder, host network, the pinned base), `docker-compose up -d` of this file "
        "with its ports remapped to free loopback ports, the services healthy, `down -v`",
    ),
    "make stop": "`iot-stack down` would stop the servers this test session shares; "
    "`down` is tested by tests/stack/test_stack_integration.py",
    "make bench-commands": _BENCH,
    "make bench-fleet": _BENCH,
    "make bench-fleet 'FLEET_ARGS=--duration 150 --devices 3000 --rate 1 --name fleet-short'": (
        _BENCH
    ),
    "make bench-fleet 'FLEET_ARGS=--devices 50000 --rate 0.1 --duration 3600 --processes 12 "
    "--connect-rate 500 --name fleet-50k'": _BENCH + "; needs a machine whose open-file hard "
    "limit exceeds 50,000 (20,000 here, not raisable without CAP_SYS_RESOURCE)",
    "ulimit -Hn": "a shell builtin that prints this machine's hard open-file limit (20000); "
    "tests/device_sim/test_open_files.py covers how the fleet reads and raises the limit",
    "sudo sysctl -w 'net.ipv4.ip_local_port_range=10000 65000'": "changes a machine-wide kernel "
    "setting; not for a shared test machine (and not permitted in this container)",
    "python -m bench.fleet --render bench/results/fleet-short.json": "re-renders the recorded "
    "fleet results in place (it would rewrite bench/results/); tests/bench/fleet/ tests it",
    "python -m bench.verify_speed --records 2000000 --workers 1,2 --repeat 2": _BENCH,
    "make bench-http": _BENCH,
    "make bench-amqp": _BENCH,
    "make bench-shards": _BENCH,
    "python -m bench.amqp_profile --label after --variant before=/tmp/amqpfast_base --rounds 2 "
    "--keep-raw /tmp/raw --out-dir bench/results": _BENCH,
    "python -m bench run --suite ingest --mqtt-shards 2 --contenders "
    "mosquitto-limit,iot-bridge-qos1 --quick": _BENCH,
    "python -m bench.shards --runs 3 --out bench/results/shards": _BENCH,
    "make bench-soak": _BENCH,
    "make chaos": _BENCH,
    "make chaos 'CHAOS_ARGS=--services kafka,api --faults kill9,stop30'": _BENCH,
    "python -m bench.chaos --dry-run": "tests/bench/chaos/test_cli.py runs its --dry-run",
    "python -m bench.chaos --kafka-nodes 3 --no-analytics --services "
    "kafka-broker,kafka-controller --faults kill9,stop30,restart --out /tmp/chaos3.md": _BENCH,
    "make bench-soak 'SOAK_ARGS=--duration 300'": _BENCH,
    "python -m bench.soak --render bench/results/soak.json": "re-renders the recorded soak "
    "results in place (it would rewrite bench/results/); tests/bench/soak/ tests it",
    "python -m bench.http_api --seconds 5 --long-polls 1000 --out-dir bench/results": _BENCH,
    "iot-api --kafka-bootstrap localhost:9092 --registry-auth": "needs registry service "
    "accounts; tests/api/plumbing/test_auth.py runs the service with --registry-auth on a "
    "registry of its own",
    **dict.fromkeys(
        (
            "curl -s -u 'root:$ROOT_SECRET' -H 'Content-Type: application/json' "
            '-d \'{"tenant": "acme", "role": "api"}\' localhost:3904/apiKeys/create',
            "'DATE=$(date' '--iso-8601=seconds);' 'SIG=$(echo' -n '$DATE' | openssl sha1 -hmac "
            "'$SECRET' -binary | openssl 'base64)'",
            "curl -s -H 'X-CambriaAuth: $KEY:$SIG' -H 'X-CambriaDate: $DATE' "
            "-H 'Content-Type: text/plain' -d hello localhost:3904/events/iot.acme.demo",
            "curl -s -H 'Authorization: Bearer $KEY:$SECRET' "
            "'localhost:3904/events/iot.acme.demo/g1/c1?timeout=5000'",
        ),
        "needs a registry with an admin account and an iot-api with --registry-auth; "
        "tests/api/mr/test_apikeys.py runs the same sequence (create by admin Basic, HMAC publish "
        "with the date signed as MR's shell recipe does, bearer consume) on a registry of its own",
    ),
    **dict.fromkeys(
        (
            "curl -s -u 'root:$ROOT_SECRET' -H 'Content-Type: application/json' -d "
            '\'{"id": "pump-1", "tenant": "acme", "groups": ["floor-1"]}\' '
            "localhost:3904/ops/devices",
            "curl -s -H 'Authorization: Bearer $KEY:$SECRET' -H 'Content-Type: application/json' "
            '-d \'{"device": "pump-1", "name": "set-rate", "args": {"hz": 5}}\' '
            "'localhost:3904/ops/commands?wait=30'",
            "curl -s -H 'Authorization: Bearer $KEY:$SECRET' "
            "'localhost:3904/ops/commands?device=pump-1&status=succeeded'",
            "curl -s -H 'Authorization: Bearer $KEY:$SECRET' "
            "'localhost:3904/ops/devices?state=online'",
            "curl -s -N -H 'Authorization: Bearer $KEY:$SECRET' "
            "localhost:3904/ops/devices/acme/pump-1/telemetry",
        ),
        "needs the stack's registry (an admin account, a tenant's api key), Mosquitto with "
        "dynamic security and the command path; tests/api/operator/test_app.py runs the same "
        "requests over sockets against `iot-stack up` on free ports: a device added by a "
        "tenant-admin key logs in over MQTT with the secret answered, a command with ?wait "
        "succeeds with its reply, the history filtered by device and status, presence, the "
        "telemetry stream",
    ),
    "docker compose -f docker-compose.yml -f docker-compose.kafka3.yml up -d": "needs the "
    "container engine `make containers` installs, and compose v2 (`docker compose`), which "
    "Debian bookworm lacks; `make test-containers` runs the same two files merged with "
    "Debian's docker-compose 1.29 (tests/test_compose_run.py, variant kafka3: brokers 1-3, "
    "ISR 3), and tests/test_compose.py checks them against the code and renders a node's "
    "config from its environment",
    "iot-stack up": "starts the services on the default ports (1883, 9092, 9100, 9101, 3904), "
    "which may be taken on a test machine; tests/stack/test_stack_integration.py runs `up` "
    "on free ports",
    "iot-stack up --bridges 2": "starts the services on the default ports (1883, 9092, 9100, "
    "9110, 9101), which may be taken on a test machine; tests/stack/test_bridges_integration.py "
    "runs `up --bridges 2` on free ports",
    "iot-stack up --mqtt-shards 2": "starts the services on the default ports "
    "(1883-1885, 8883, 9092, 9100, 9110, 9101, 9111), which may be taken on a test machine; "
    "tests/stack/test_mqtt_shards_integration.py runs `up --mqtt-shards 2` on "
    "free ports",
    "iot-sim run --devices 1000 --rate 5 --duration 60": _SIM_RUN,
    "iot-sim verify": "needs a finished `iot-sim run` (see above); "
    "tests/device_sim/test_integration.py verifies its runs",
    "iot-sim run --devices 200 --rate 2 --duration 120 --malformed-rate 0.01 "
    "--anomaly-rate 0.005 --late-rate 0.01 --out-of-order-rate 0.01 --skew-fraction 0.1 "
    "--churn-rate 0.002 --offline-fraction 0.05 --reply-fail-rate 0.1 "
    "--silent-fraction 0.05": _SIM_RUN,
    "iot-sim run --devices 500 --rate 2 --duration 1200 --event-rate 0.01 --anomaly-rate 0.002 "
    "--churn-rate 0.001 --churn-down-min-s 30 --churn-down-max-s 300 --diurnal-period 600 "
    "--diurnal-min 0.2 --diurnal-max 1.5 --burst-every 120 --burst-factor 5 "
    "--burst-duration 10": "a 20-minute load; parsed here, and the same mix runs small in "
    "tests/device_sim/test_integration.py::"
    "test_realistic_traffic_events_bursts_churn_and_commands_verify_clean",
    "iot-sim verify --json report.json": "needs a finished `iot-sim run`; "
    "tests/device_sim/test_integration.py runs verify --json after its runs",
    "iot-analytics stream": "runs until stopped, reading Kafka on the default port; "
    "tests/spark_jobs/test_kafka_e2e.py runs the job against the test Kafka",
    "iot-analytics stream --available-now": "Spark Structured Streaming from Kafka, about a "
    "minute of Spark on this machine; tests/spark_jobs/test_kafka_e2e.py runs the job with "
    "available-now against the test Kafka",
    "iot-analytics stream --spark-master spark://127.0.0.1:7077": _CLUSTER,
    "iot-stack up --analytics --spark-workers 2": "starts the services and a Spark master and "
    "workers on the default ports (1883, 9092, 7077, 8080, ...), which may be taken on a test "
    "machine; tests/stack/test_spark_cluster.py checks what it starts, "
    "tests/spark_jobs/test_stream_cluster.py runs such a cluster with the job on free ports",
    "iot-analytics sql --spark-master spark://127.0.0.1:7077 "
    "'SELECT tenant, count(*) AS minutes FROM device_minute GROUP BY tenant'": _CLUSTER,
    "python -m bench run --suite ingest": _BENCH,
    "python -m bench.profile_bridge --rates max,half,1% --profile --out /tmp/bridge-profile": (
        _BENCH
    ),
    "python -m bench.profile_bridge --variant base=/tmp/base --variant new=. --rounds 2 "
    "--rates max,half,1%,500 --profile --out /tmp/bridge-ab": _BENCH,
    "python -m bench.hotpath --roots /tmp/base,. --repeat 3 --messages 50000": _BENCH,
    "python -m bench run --suite ingest --quick": _BENCH,
    "python -m bench run --suite ingest --contenders iot-bridge-qos1 --payloads 1024 "
    "--many-devices 0 --repeat 1 --duration 8 --no-latency --bridge-processes 1,2,3 "
    "--out bench/results/bridges-run1": _BENCH,
    "python -m bench report bench/results/ingest.json": "re-renders the recorded benchmark "
    "results in place (it would rewrite bench/results/); tests/bench/test_report.py tests it",
    "python -m bench.commands_rtt --out-dir bench/results": _BENCH,
    "python -m bench.commands_rtt --duration 5 --warmup-load 3 --max-duration 5": _BENCH,
    "python -m bench.commands_rtt --telemetry-rate 20000": _BENCH,
    "python -m bench.commands_rtt --command-path separate "
    "--setting command_mqtt_publishers=0": _BENCH,
    "python -m bench.commands_rtt --responder sim": _BENCH,
    "python -m bench.commands_rtt --mosquitto-autosave-changes 0": _BENCH,
    **dict.fromkeys(
        (
            "iot-devices account create plant-1 --role edge --tenant default",
            "iot-devices device add --site plant-1 pump-1 pump-2",
            "iot-edge init --site plant-1 --central central.example:8883 --tls-ca-file ca.crt "
            "--account-secret-file plant-1.secret --devices-file devices.json --outage-s 3600 "
            "--rate-msgs-per-s 200 --autosave-changes 1000 --site-dir /var/lib/iot-edge --up",
            "iot-edge status --dir /var/lib/iot-edge",
            "iot-edge sites --central 127.0.0.1:1883 --password-file var/secrets/bridge.secret",
        ),
        "an edge site needs root, network namespaces and a NAT router to be what it is; "
        "tests/edge/test_site_integration.py runs these commands (init --up, status, down) in "
        "namespaces against a central registry, tests/registry/test_cli.py the two "
        "iot-devices ones, tests/edge/test_cli.py init/status without a centre",
    ),
}


def _run_by(test: str) -> list[Example]:
    """The fenced examples ``RUN`` gives to ``test``, once each, in document order."""
    seen: dict[str, Example] = {}
    for e in FENCED:
        if RUN.get(e.command) == test:
            seen.setdefault(e.command, e)
    assert seen, f"RUN gives {test} nothing to run"
    return list(seen.values())


def _clean_iot_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # the examples run as on a user's machine, but their brokers with the tests' JVM options
    for name in [n for n in os.environ if n.startswith("IOT_") and n != KAFKA_JVM_OPTIONS_ENV]:
        monkeypatch.delenv(name)


# --- bookkeeping and parsing (no servers) -------------------------------------------------------


def test_the_docs_show_commands() -> None:
    docs = {e.doc for e in FENCED}
    assert {"README.md", "docs/analytics.md", "docs/bridge.md", "docs/device_sim.md"} <= docs
    assert "iot-analytics report --since -2h --out var/report" in {e.command for e in FENCED}


def test_every_fenced_command_is_run_or_excused() -> None:
    shown = {e.command for e in FENCED}
    undecided = sorted(str(e) for e in FENCED if e.command not in RUN and e.command not in NOT_RUN)
    assert not undecided, "run these in a test (RUN) or say why not (NOT_RUN):\n" + "\n".join(
        undecided
    )
    assert not set(RUN) & set(NOT_RUN)
    stale = sorted((set(RUN) | set(NOT_RUN)) - shown)
    assert not stale, f"no longer in the docs: {stale}"
    for test in set(RUN.values()):
        assert callable(globals().get(test)), f"RUN names {test}, which is not a test here"


@pytest.mark.parametrize("example", OURS, ids=str)
def test_command_parses(example: Example) -> None:
    if example.program == "make":
        recipe = MAKEFILE.commands(example.argv[1:])  # the targets and variables exist
        lines = [argv for argv in recipe if Example("Makefile", 0, argv, "fenced").ours]
    else:
        lines = [example.argv]
    for argv in lines:
        result = parse(argv)
        assert result.accepted, f"{example}: {' '.join(argv)} rejected ({result.code}):\n" + (
            result.output
        )


def test_make_variables_and_targets_are_checked() -> None:
    assert MAKEFILE.commands(["run", "DEVICES=1000", "RATE=5"])[-1] == (
        "iot-stack", "up", "--analytics", "--console", "--devices", "1000", "--device-rate", "5",
    )  # fmt: skip
    with pytest.raises(AssertionError, match="no variable DEVCES"):
        MAKEFILE.commands(["run", "DEVCES=1000"])
    with pytest.raises(AssertionError, match="no target 'rnu'"):
        MAKEFILE.commands(["rnu"])


def test_a_rejected_command_fails_the_check() -> None:
    bad = parse(["iot-analytics", "report", "--sinse", "-2h"])
    assert not bad.accepted
    assert bad.code == 2
    assert "unrecognized arguments" in bad.output or "expected one argument" in bad.output
    assert not parse(["iot-cmd", "sned", "dev-1", "reboot"]).accepted
    assert parse(["iot-analytics", "report", "--since", "-2h"]).accepted


@pytest.mark.parametrize("example", SYNOPSES, ids=str)
def test_synopsis_names_real_options(example: Example) -> None:
    words = example.argv
    program = [words[0]]
    if len(words) > 1 and re.fullmatch(r"[a-z][a-z-]*", words[1]):
        program.append(words[1])  # a subcommand
    text = help_text(program)
    options = set(re.findall(r"--[a-z][\w-]*", " ".join(words)))
    unknown = sorted(o for o in options if not re.search(rf"{o}\b", text))
    assert not unknown, f"{example}: {' '.join(program)} has no {unknown}"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_console_script_help(script: str) -> None:
    """The installed console script (the pyproject entry point), not just its main()."""
    path = Path(sys.executable).parent / script
    assert path.exists(), f"{script} is not installed next to {sys.executable}"
    result = subprocess.run(
        [str(path), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {script}")


# --- run against the test servers ---------------------------------------------------------------


@pytest.mark.integration
def test_systemd_unit_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main = entry_point("iot-stack")
    _clean_iot_env(monkeypatch)
    monkeypatch.chdir(tmp_path)  # `--unit-dir .`
    for example in _run_by("test_systemd_unit_example_runs"):
        assert main(list(example.argv[1:])) == 0, example
        unit = (tmp_path / "iot-stack.service").read_text()
        for line in (
            'Environment="IOT_DATA_DIR=/var/lib/iot"',
            'Environment="IOT_STACK_CONSOLE=1"',
            "Restart=on-failure",
            "KillMode=mixed",
            "WantedBy=multi-user.target",
        ):
            assert line in unit.splitlines(), line
        assert "systemctl enable --now iot-stack" in capsys.readouterr().err


def test_stack_status_runs(
    stack: Any,
    tmp_path_factory: pytest.TempPathFactory,
    local_stack_factory: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main = entry_point("iot-stack")

    data_dir = None
    for found in tmp_path_factory.getbasetemp().glob("*/stack.json"):
        if json.loads(found.read_text()).get("mqtt") == stack.mqtt_url:
            data_dir = found.parent  # the session's servers run from this data dir
    if data_dir is None:  # servers someone else runs: start a stack of our own
        data_dir = local_stack_factory().config.data_dir
    recorded = json.loads((data_dir / "stack.json").read_text())
    _clean_iot_env(monkeypatch)
    monkeypatch.setenv("IOT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("IOT_MQTT_PORT", recorded["mqtt"].rsplit(":", 1)[1])
    monkeypatch.setenv("IOT_KAFKA_PORT", recorded["kafka"].rsplit(":", 1)[1])
    for example in _run_by("test_stack_status_runs"):
        assert main(list(example.argv[1:])) == 0, example
        lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
        assert set(lines) == {"mosquitto", "kafka"}  # what that `up` started
        assert "running (pid " in lines["mosquitto"]
        # and the TLS listener `up` opened (authentication on: the session's stack has one)
        tls = recorded.get("mqtt_tls", "off")
        shown = recorded["mqtt"] + ("" if tls == "off" else f", {tls.split()[0]}")
        assert lines["mosquitto"].endswith(shown)
        assert lines["kafka"].endswith(recorded["kafka"])


@pytest.mark.integration
def test_cmd_send_runs(
    command_env: CommandEnv,  # noqa: F811
    service_factory: Callable[..., Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main = entry_point("iot-cmd")

    cfg = command_env.config
    _clean_iot_env(monkeypatch)
    for name in ("kafka_bootstrap", "topic_commands", "topic_command_status"):
        monkeypatch.setenv(f"IOT_{name.upper()}", getattr(cfg, name))
    monkeypatch.setenv("IOT_TOPIC_COMMAND_REPLIES", cfg.topic_command_replies)
    service_factory()
    last_code: int | None = None
    for example in _run_by("test_cmd_send_runs"):
        if example.program == "echo":  # `echo $?` after a send: the doc shows 0
            assert last_code == 0, example
            continue
        target = example.argv[2]
        if target.startswith("group:"):
            for i in range(2):
                name = unique(f"doc-{i}")
                device = Device(name, cfg.mqtt_host, cfg.mqtt_port, groups=(target[6:],))
                command_env.devices.append(device.connect())
        else:
            command_env.devices.append(Device(target, cfg.mqtt_host, cfg.mqtt_port).connect())
        last_code = main(list(example.argv[1:]))
        out = capsys.readouterr().out.splitlines()
        assert last_code == 0, f"{example}: exit {last_code}\n" + "\n".join(out)
        assert any(" succeeded " in f"{line} " for line in out), out
        if not target.startswith("group:"):
            assert any(line.startswith("reply {") for line in out), out


@pytest.mark.integration
def test_bridge_example_runs(
    local_stack_factory: Callable[..., Any], bridge_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """docs/bridge.md's three lines (and README's mosquitto_pub) on servers of its own (the
    session's Mosquitto carries other tests' devices, which this bridge would count too): the
    endpoints in the flags are those servers', the bridge's metrics port is the one it picked.
    Anonymous, explicitly: docs/bridge.md's lines run the bridge on its own against a development
    broker (README's line, with a device's secret, runs authenticated in
    test_own_device_example_runs)."""
    stack = local_stack_factory(partitions=3, insecure_anonymous=True)
    # docs/bridge.md's sequence first (its curl shows 1 acked), then README's publish
    steps = sorted(_run_by("test_bridge_example_runs"), key=lambda e: e.doc != "docs/bridge.md")
    [bridge_line] = [e for e in steps if e.program == "iot-bridge"]
    args = dict(zip(bridge_line.argv[1::2], bridge_line.argv[2::2], strict=True))
    assert set(args) == {"--mqtt-host", "--mqtt-port", "--kafka-bootstrap"}
    bridge = bridge_factory(stack.mqtt_host, stack.mqtt_port, stack.kafka_bootstrap, http_port=0)
    acked = 0.0
    for example in steps:
        if example.program == "mosquitto_pub":
            argv = [*example.argv, "-h", stack.mqtt_host, "-p", str(stack.mqtt_port)]
            subprocess.run(argv, check=True, timeout=30)
            acked += 1
            wait_for(functools.partial(_acked_at_least, bridge, acked), 30, "the ack")
        elif example.program == "curl":
            url = f"http://127.0.0.1:{bridge.http_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
            shown = [line for line in text.splitlines() if "iot_bridge_acked" in line]
            assert shown, text
            assert any(line.split()[-1] in ("1", "1.0") for line in shown), shown  # "# 1"
    assert bridge.metric("iot_bridge_acked_total") == acked == 2
    assert not [k for k in bridge.metrics() if k.startswith("iot_bridge_dlq_total")]


@pytest.mark.integration
def test_registry_commands_run(
    stack: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/security.md's session word for word in a fresh folder: Mosquitto started as its
    comments say on the file `mosquitto-init` wrote, the exported endpoints pointed at the test
    servers (the registry on topics of this test's own)."""
    main = entry_point("iot-devices")
    _clean_iot_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    suffix = unique("doc").replace("-", "")
    monkeypatch.setenv("IOT_REGISTRY_TOPIC", f"iot.registry.{suffix}")
    monkeypatch.setenv("IOT_REGISTRY_AUDIT_TOPIC", f"iot.registry.audit.{suffix}")
    steps = _run_by("test_registry_commands_run")
    assert steps[0].argv[1] == "mosquitto-init"
    assert main(list(steps[0].argv[1:])) == 0
    dynsec = tmp_path / steps[0].argv[2]
    with running_dynsec_mosquitto(dynsec, tmp_path) as (port, _log):
        ours = {
            "IOT_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "IOT_MQTT_HOST": "127.0.0.1",
            "IOT_MQTT_PORT": str(port),
        }
        outputs: dict[str, str] = {}
        for example in steps[1:]:
            if example.program == "export":
                for name, value in (word.split("=", 1) for word in example.argv[1:]):
                    monkeypatch.setenv(name, ours.get(name, value))
                continue
            code = main(list(example.argv[1:]))
            out, err = capsys.readouterr()
            assert code == 0, f"{example}: exit {code}\n{out}\n{err}"
            outputs[" ".join(example.argv[1:3])] = out
    assert "secret" in outputs["device add"]
    assert "pump-1" in outputs["device list"]
    assert "device.rotate" in outputs["audit --entity"]
    assert "device.disable" in outputs["audit --entity"]
    assert "require_certificate true" in outputs["ca mosquitto-conf"]
    assert "username=acme/pump-2" in outputs["cert pump-2"]
    assert (tmp_path / "var/certs/acme_pump-2.key").stat().st_mode & 0o777 == 0o600
    assert "revoked_at=None" in outputs["cert list"]
    assert "revoked_at=20" in outputs["cert revoke"]


@pytest.mark.integration
def test_own_device_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """security.md's "your own devices" (and README's `device add d1`) against a stack started
    as `make run` starts it, authentication on, in a fresh folder: the device added logs in
    with the printed secret and its message reaches a subscriber; disabled, it is refused. Then
    its TLS example: a certificate from the CA `up` made, a publish on the TLS listener."""
    from stack.config import StackConfig
    from stack.launcher import Stack
    from tests.registry.mqtt_probe import Probe, connack_of
    from tests.registry.mqtt_probe import wait_for as arrives

    main = entry_point("iot-devices")
    local = Stack(
        StackConfig.servers_on_free_ports(tmp_path / "var", partitions=1, kafka_heap="512m")
    )
    _clean_iot_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    api: subprocess.Popen[bytes] | None = None
    local.up()
    try:
        monkeypatch.setenv("IOT_KAFKA_BOOTSTRAP", local.kafka_bootstrap)
        monkeypatch.setenv("IOT_MQTT_PORT", str(local.mqtt_port))
        monkeypatch.setenv("IOT_MQTT_HOST", local.mqtt_host)
        bridge_secret = (tmp_path / "var" / "secrets" / "bridge.secret").read_text().strip()
        reader = Probe(local.mqtt_port, "svc/bridge", bridge_secret)
        assert reader.subscribe("devices/+/telemetry").value == 1
        secrets: dict[str, str] = {}
        tls_sent = 0
        # README's `curl` and console.md's log-in go to the iot-api console.md starts (its
        # service line, on a free port): started before the examples, since README's curl
        # comes first in document order
        [service] = [e for e in _run_by("test_own_device_example_runs") if e.program == "iot-api"]
        api_port = _free_port()
        api_log = (tmp_path / "iot-api.log").open("w")
        api_env = {**os.environ, "IOT_KAFKA_BOOTSTRAP": local.kafka_bootstrap,
                   "IOT_MQTT_PORT": str(local.mqtt_port), "IOT_MQTT_HOST": local.mqtt_host,
                   "IOT_CONSOLE_MQTT_HOST": local.mqtt_host,
                   "IOT_CONSOLE_MQTT_PORT": str(local.mqtt_port)}  # fmt: skip
        api = subprocess.Popen(
            [str(Path(sys.executable).parent / service.program), *service.argv[1:],
             "--api-port", str(api_port)],
            stdout=api_log, stderr=subprocess.STDOUT, env=api_env, cwd=tmp_path,
        )  # fmt: skip
        answers: list[str] = []
        wait_for(lambda: _answers(f"http://127.0.0.1:{api_port}/healthz"), 60, "iot-api")
        for example in _run_by("test_own_device_example_runs"):
            if example.program == "iot-api":
                continue  # started above
            if example.program == "curl":  # right after `account create`: no wait (issue 37)
                argv = [
                    a.replace("<secret>", secrets["pub1"]).replace(
                        "localhost:3904", f"127.0.0.1:{api_port}"
                    )
                    for a in example.argv
                ]
                done = subprocess.run([*argv, "-w", "\n%{http_code}"], capture_output=True,
                                      text=True, check=True, timeout=30)  # fmt: skip
                answers.append(done.stdout)
                continue
            if example.program == "export":
                name, value = example.argv[1].split("=", 1)
                monkeypatch.setenv(name, value)
            elif example.program == "mosquitto_pub" and "--cert" in example.argv:
                # the TLS listener `up` opened, a certificate from its CA (`iot-devices cert`)
                tls_port = str(local.config.mqtt_tls_port)
                argv = [tls_port if a == "8883" else a for a in example.argv]
                argv += ["-h", local.mqtt_host, "-V", "mqttv5"]
                subprocess.run(argv, check=True, timeout=30)
                topic = argv[argv.index("-t") + 1]
                assert arrives(functools.partial(_received, reader, topic)), topic
                tls_sent += 1
            elif example.program == "mosquitto_pub":
                user = example.argv[example.argv.index("-u") + 1]
                argv = [secrets[user] if a == "<secret>" else a for a in example.argv]
                argv += ["-h", local.mqtt_host, "-p", str(local.mqtt_port), "-V", "mqttv5"]
                subprocess.run(argv, check=True, timeout=30)
                topic = f"devices/{user}/telemetry"
                assert arrives(functools.partial(_received, reader, topic)), topic
            else:
                code = main(list(example.argv[1:]))
                out, err = capsys.readouterr()
                assert code == 0, f"{example}: exit {code}\n{out}\n{err}"
                if "add" in example.argv or "create" in example.argv:
                    [secret] = [
                        ln.split()[1] for ln in out.splitlines() if ln.startswith("secret:")
                    ]
                    at = example.argv.index("create") + 1 if "create" in example.argv else -1
                    secrets[example.argv[at]] = secret
                if "alice" in example.argv:  # console.md: log in with it, at once
                    login = urllib.request.Request(
                        f"http://127.0.0.1:{api_port}/console/api/login",
                        json.dumps({"name": "alice", "secret": secret}).encode(),
                        {"Content-Type": "application/json"},
                    )
                    with urllib.request.urlopen(login, timeout=30) as response:
                        answers.append(f"login {response.status}")
        assert sorted(secrets) == ["alice", "d1", "pub1", "pump-7"]
        assert len(answers) == 2, answers
        assert answers[0].endswith("\n200"), answers[0]  # the publish as pub1, never a 401
        assert json.loads(answers[0].rsplit("\n", 1)[0])["count"] == 1
        assert answers[1] == "login 200"
        assert tls_sent == 1
        assert connack_of(local.mqtt_port, "pump-7", secrets["pump-7"]).value == 0x87
        assert connack_of(local.mqtt_port, "d1", secrets["d1"]).value == 0
        assert connack_of(local.mqtt_port, None, None).value == 0x87
        reader.close()
    finally:
        if api is not None:
            api.terminate()
            api.wait(30)
        local.down()


def _received(probe: Any, topic: str) -> bool:
    return any(seen == topic for seen, _payload in probe.messages)


def _acked_at_least(bridge: Any, n: float) -> bool:
    return bool(bridge.metric("iot_bridge_acked_total") >= n)


# --- iot-analytics over a small warehouse (Spark) ------------------------------------------------

RUN_ID = "20261121T130727-1e0115"


def _warehouse(session: Any, wh: Path, now: dt.datetime) -> None:
    """Two devices: minutes 10:00-10:02 of 2026-01-01 and the two minutes before ``now``; and
    tenant acme's d1 in the last of them. Partitioned by tenant, as the streaming job writes."""
    from spark_jobs import transforms
    from tests.spark_jobs.frames import kafka_frame, kafka_row, telemetry

    recent = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=3)
    starts = [dt.datetime(2026, 1, 1, 10, m, tzinfo=dt.UTC) for m in range(3)]
    starts += [recent + dt.timedelta(minutes=m) for m in range(2)]
    rows = []
    for device in ("d1", "d2"):
        seq = 0
        for start in starts:
            for second in (10, 40):
                seq += 1
                ms = int((start + dt.timedelta(seconds=second)).timestamp() * 1000)
                body = telemetry(seq, ms, temperature=20.0 + seq % 3)
                rows.append(kafka_row(device, body, received_at=ms))
    for second in (10, 40):  # acme's d1: another device than the default tenant's d1
        ms = int((starts[-1] + dt.timedelta(seconds=second)).timestamp() * 1000)
        row = kafka_row("d1", telemetry(second, ms, temperature=5.0), received_at=ms)
        rows.append((*row[:-1], [*row[-1], ("tenant", b"acme")]))
    valid = transforms.valid_telemetry(transforms.parse_telemetry(kafka_frame(session, rows)))
    for name, table in (
        ("device_minute", transforms.device_minute(valid, ["temperature"])),
        ("fleet_minute", transforms.fleet_minute(valid, ["temperature"])),
    ):
        # Delta, as the job writes them (docs/analytics.md's time travel and change feed)
        table.write.partitionBy("tenant").format("delta").save(str(wh / name))
    t0 = int(starts[0].timestamp() * 1000)
    session.createDataFrame(
        [("d1", t0, 3, "temperature", 30.0), ("d2", t0, 1, "temperature", 31.0)],
        "device_id string, ts long, seq long, metric string, value double",
    ).selectExpr(
        "'default' AS tenant",
        "device_id",
        "timestamp_millis(ts) AS event_time",
        "seq",
        "metric",
        "value",
    ).write.partitionBy("tenant").parquet(str(wh / "anomalies"))


@pytest.mark.spark
def test_analytics_commands_run(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As a new user would, in a folder whose var/ holds the tables (default settings)."""
    main = entry_point("iot-analytics")

    _clean_iot_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    now = dt.datetime.now(dt.UTC)
    _warehouse(spark, tmp_path / "var" / "warehouse", now)
    run_dir = tmp_path / "var" / "sim-runs" / RUN_ID
    run_dir.mkdir(parents=True)
    manifest = {
        "devices": {"d1": {}, "d2": {}},
        "injections": {"anomalies": [{"device": "d1", "seq": 3, "metric": "temperature"}]},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    report_dir = tmp_path / "var" / "report"
    for example in _run_by("test_analytics_commands_run"):
        argv = [a.replace("<run>", RUN_ID) for a in example.argv[1:]]
        code = main(argv)
        out = capsys.readouterr()
        assert code == 0, f"{example}: exit {code}\n{out.err}"
        command = argv[0]
        if command == "sql" and "--format" in argv:
            assert sorted(csv.DictReader(out.out.splitlines()), key=str) != []
            assert out.out.splitlines()[0].startswith("device_id,")
        elif command == "sql" and "tenant" in argv[-1]:
            lines = out.out.splitlines()
            assert lines[0].split() == ["tenant", "n"]
            assert sorted(ln.split()[0] for ln in lines[1:]) == ["acme", "default"]
        elif command == "sql" and "VERSION AS OF 0" in argv[-1]:  # as delta-rs reads it
            fleet = DeltaTable(str(tmp_path / "var/warehouse/fleet_minute"), version=0)
            assert out.out.split() == ["n", str(len(fleet.to_pandas()))]
        elif command == "sql" and "table_changes" in argv[-1]:  # version 0: every row inserted
            minutes = DeltaTable(str(tmp_path / "var/warehouse/device_minute")).to_pandas()
            assert out.out.split() == ["_change_type", "n", "insert", str(len(minutes))]
        elif command == "sql":
            assert "window_start" in out.out.splitlines()[0]
            assert len(out.out.splitlines()) >= 5
        elif command == "report" and "--format" in argv:
            page = (Path(out.out.strip())).read_text()
            assert "Fleet report 2026-01-01 10:00 .. 2026-01-01 10:03 UTC" in page
        elif command == "report" and "--tenant" in argv:  # acme's fleet: its d1 alone
            with (tmp_path / "var" / "report-acme" / "devices.csv").open() as f:
                rows = list(csv.DictReader(f))
            assert [(r["device_id"], r["messages"]) for r in rows] == [("d1", "2")]
            page = (tmp_path / "var" / "report-acme" / "report.md").read_text()
            assert "of tenant acme" in page
        elif command == "report":
            summary = (report_dir / "report.md").read_text()
            assert Path(out.out.strip()) == Path("var/report/report.md")
            with (report_dir / "devices.csv").open() as f:
                uptime = {r["device_id"]: float(r["uptime"]) for r in csv.DictReader(f)}
            if "--since" in argv:  # the last two minutes only: every device sent in both
                assert f"Fleet report {now - dt.timedelta(minutes=3):%Y-%m-%d %H:%M}" in summary
                assert uptime == {"d1": 1.0, "d2": 1.0}
            else:  # everything: 5 minutes with data from 2026-01-01 10:00 to now
                assert "Fleet report 2026-01-01 10:00 .. " in summary
                assert 0 < uptime["d1"] < 0.01
        elif command == "score":
            score = json.loads(out.out)
            assert (score["true_positives"], score["false_positives"]) == (1, 1)
            assert (score["precision"], score["recall"]) == (0.5, 1.0)
        else:
            raise AssertionError(f"{example}: no check for it")


@pytest.mark.integration
def test_api_examples_run(stack: Any, tmp_path: Path) -> None:
    """docs/api.md's service line and curl lines, in order, against that service on a free
    port of the test Kafka (the topic renamed so a rerun starts fresh)."""
    steps = _run_by("test_api_examples_run")
    [service_line] = [e for e in steps if e.program == "iot-api"]
    port = _free_port()
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    program = str(Path(sys.executable).parent / service_line.program)  # the installed script
    argv = [
        program,
        *service_line.argv[1:],
        "--kafka-bootstrap",
        stack.kafka_bootstrap,
        "--api-port",
        str(port),
    ]
    log = (tmp_path / "iot-api.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 60, "iot-api")
        outputs = []
        for example in steps:
            if example.program != "curl":
                continue
            args = [
                a.replace("localhost:3904", f"127.0.0.1:{port}").replace("demo", topic)
                for a in example.argv
            ]
            done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
            output = json.loads(done.stdout)
            # a long poll answers with what is there once something is: again for the rest
            for _ in range(10 if "limit=10" in example.command else 0):
                if len(output) >= 3:
                    break
                again = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
                output += json.loads(again.stdout)
            outputs.append(output)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
        log.close()
    created, first, published, cambria, consumed, topics = outputs
    assert created["name"] == topic
    assert first == []
    assert published["count"] == 2
    assert cambria["count"] == 1
    assert sorted(consumed) == sorted(['{"t":21.5}', '{"t":21.7}', "hello world"])
    assert topic in topics["topics"]


@pytest.mark.integration
def test_api_sawmill_and_queue_examples_run(stack: Any) -> None:
    """docs/api.md's sawmill and queue lines, in order, against an anonymous service."""
    steps = _run_by("test_api_sawmill_and_queue_examples_run")
    port, suffix = _free_port(), uuid.uuid4().hex[:8]
    argv = [
        str(Path(sys.executable).parent / "iot-api"),
        *("--kafka-bootstrap", stack.kafka_bootstrap, "--api-port", str(port)),
        *("--insecure-anonymous", "--queue-markers-topic", f"markers-{suffix}"),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outputs: list[Any] = []
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 60, "iot-api")
        for example in steps:
            args = [
                a.replace("localhost:3904", f"127.0.0.1:{port}")
                .replace("demo-saw", f"demo-saw-{suffix}")
                .replace("/jobs", f"/jobs-{suffix}")
                for a in example.argv
            ]
            if "HANDLE" in example.command:  # one handle the receive before it answered
                handle = outputs[-1]["messages"][0]["receiptHandle"]
                args = [a.replace("HANDLE", handle) for a in args]
            if "/realtime/" in example.command:  # a stream: read up to its first event
                stream = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
                assert stream.stdout is not None
                try:
                    lines = [stream.stdout.readline() for _ in range(4)]
                finally:
                    stream.kill()
                    stream.wait(10)
                outputs.append(lines)
                continue
            done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
            output = json.loads(done.stdout)
            if "/receive" in example.command:  # the long poll answers with the first; the rest
                while len(output["messages"]) < 2:
                    more = subprocess.run(
                        args, capture_output=True, text=True, timeout=60, check=True
                    )
                    output["messages"] += json.loads(more.stdout)["messages"]
            outputs.append(output)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    pushed, latest, stream_lines, queue, sent, received, acked = outputs
    assert pushed == {"message": "added message to producer", "status": "Pass"}
    assert latest == [{"t": 21.5}]
    assert stream_lines[0] == "retry: 1000\n"
    assert stream_lines[2].startswith("id: ")
    assert stream_lines[3] == 'data: {"t":21.5}\n'
    assert queue["deadLetterTopic"] == f"jobs-{suffix}.dlq"
    assert queue["maxDeliveries"] == 5
    assert sent["count"] == 2
    assert sorted(m["message"] for m in received["messages"]) == ['{"job":1}', '{"job":2}']
    assert {m["deliveryCount"] for m in received["messages"]} == {1}
    assert [r["status"] for r in acked["results"]] == ["acked"]


@pytest.mark.integration
def test_api_device_examples_run(stack: Any, topic_factory: Callable[..., str]) -> None:
    """docs/api.md's HTTP device lines against an anonymous service: the good reading lands in
    the telemetry topic, the bad one is answered 400 and dead-lettered."""
    tel, dlq = topic_factory("doctel", partitions=3), topic_factory("docdlq", partitions=1)
    port = _free_port()
    argv = [
        str(Path(sys.executable).parent / "iot-api"),
        *("--kafka-bootstrap", stack.kafka_bootstrap, "--api-port", str(port)),
        *("--insecure-anonymous", "--topic-telemetry", tel, "--topic-dlq", dlq),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outputs = []
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 60, "iot-api")
        for example in _run_by("test_api_device_examples_run"):
            args = [a.replace("localhost:3904", f"127.0.0.1:{port}") for a in example.argv]
            done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
            outputs.append(done.stdout)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert outputs == [
        " 202\n",
        '{"error":"missing_field","detail":"missing field \'metrics\'"} 400\n',
    ]
    (good,) = consume(stack.kafka_bootstrap, [tel], until=lambda rs: len(rs) >= 1, timeout=30)
    assert (good.key, good.json()["seq"]) == (b"pump-1", 0)
    assert good.headers["orig_adapter"] == b"http"
    (bad,) = consume(stack.kafka_bootstrap, [dlq], until=lambda rs: len(rs) >= 1, timeout=30)
    assert (bad.key, bad.headers["error"]) == (b"pump-1", b"missing_field")


def test_api_tls_examples_run(stack: Any, tmp_path: Path) -> None:
    """docs/api.md's TLS lines: the CA made on first use, curl verifying against it."""
    service, request = _run_by("test_api_tls_examples_run")
    port, tls_port = _free_port(), _free_port()

    def local(args: Sequence[str]) -> list[str]:
        return [
            a.replace("var/ca", str(tmp_path / "ca")).replace("3905", str(tls_port))
            .replace("localhost:9092", stack.kafka_bootstrap)
            for a in args
        ]  # fmt: skip

    argv = [str(Path(sys.executable).parent / "iot-api"), *local(service.argv[1:]),
            "--api-port", str(port)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), 60, "iot-api")
        done = subprocess.run(
            local(request.argv), capture_output=True, text=True, timeout=60, check=True
        )
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
    assert json.loads(done.stdout) == {"status": "ok"}


def _doc_block(doc: str, lang: str, index: int = 0) -> str:
    """The ``index``-th fenced block of ``lang`` in ``doc`` (its text)."""
    text = (Path(__file__).resolve().parents[1] / doc).read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)[index]


def test_amqp_example_runs(
    stack: Any,
    topic_factory: Callable[..., str],
    transactions_ready: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    """docs/amqp.md: `iot-amqp` as shown (on free ports, with a registry of the test's own),
    then the python-qpid-proton examples as they stand (PLAIN, northbound, and EXTERNAL over
    TLS with a certificate `iot-devices cert` issued), printing what the doc says they print."""
    store = fresh_store(stack.kafka_bootstrap)
    registry = Registry.open(store, local_admin("docs"), None, write=True)
    registry.create_tenant("default")
    secret = registry.add_device("default", "pump-1").secret
    app_secret = registry.create_account("app", [Role.API]).secret
    assert secret is not None
    assert app_secret is not None
    ca, certs = tmp_path / "ca", tmp_path / "certs"
    CaStore(ca).init()
    reg_cfg = RegistryConfig(stack.kafka_bootstrap, store.topic, store.audit_topic,
                             stack.mqtt_host, stack.mqtt_port, None, ca_dir=ca)  # fmt: skip
    issued = argparse.Namespace(tenant="default", id="pump-1", days=30.0, out=certs)
    cli_certs.issue(registry, issued, reg_cfg)  # `iot-devices cert pump-1 --out certs`
    store.close()
    tel, dlq = topic_factory("amqptel", partitions=3), topic_factory("amqpdlq", partitions=1)
    (example,) = _run_by("test_amqp_example_runs")
    port, http, tls_port = _free_port(), _free_port(), _free_port()
    argv = [
        str(Path(sys.executable).parent / "iot-amqp"),
        *(a.replace("localhost:9092", stack.kafka_bootstrap) for a in example.argv[1:]),
        *("--amqp-port", str(port), "--http-port", str(http), "--registry-topic", store.topic),
        *("--topic-telemetry", tel, "--topic-dlq", dlq),
        *("--amqps-port", str(tls_port), "--tls-ca-dir", str(ca)),
    ]
    # the TLS section's example: the fourth python block (after Queues and topics' third)
    over_tls = _doc_block("docs/amqp.md", "python", 3).replace(
        "localhost:5671", f"localhost:{tls_port}"
    )
    over_tls = over_tls.replace('"certs"', repr(str(certs)))
    code = _doc_block("docs/amqp.md", "python")
    code = code.replace("localhost:5672", f"127.0.0.1:{port}").replace("<secret>", secret)
    # the Northbound section's example: an application reads what the device sends (the second
    # python block; its output is the third text block, after the commands' sketch)
    north = _doc_block("docs/amqp.md", "python", 1).replace("localhost:5672", f"127.0.0.1:{port}")
    north = north.replace("<app-secret>", app_secret).replace("<secret>", secret)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{http}/readyz"), 60, "iot-amqp")
        _prints(code, "docs/amqp.md", 0)
        (good,) = consume(stack.kafka_bootstrap, [tel], until=lambda rs: len(rs) >= 1, timeout=30)
        assert (good.key, good.json()["seq"], good.headers["orig_adapter"]) == (
            b"pump-1", 0, b"amqp",
        )  # fmt: skip
        (bad,) = consume(stack.kafka_bootstrap, [dlq], until=lambda rs: len(rs) >= 1, timeout=30)
        assert (bad.key, bad.headers["error"]) == (b"pump-1", b"missing_field")
        _prints(north, "docs/amqp.md", 2)
        _prints(over_tls, "docs/amqp.md", 4)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_amqp_queue_example_runs(stack: Any, transactions_ready: None) -> None:  # noqa: F811
    """docs/amqp.md, "Queues and topics": the example as it stands against iot-api and iot-amqp
    (on free ports, a registry and queue topics of the test's own), printing what it says."""
    from tests.amqp.harness import running_amqp
    from tests.api.harness import running_api

    store = fresh_store(stack.kafka_bootstrap)
    registry = Registry.open(store, local_admin("docs"), None, write=True)
    app_secret = registry.create_account("app", [Role.API]).secret
    assert app_secret is not None
    suffix = uuid.uuid4().hex[:10]
    shared = {
        "kafka_bootstrap": stack.kafka_bootstrap, "registry_auth": True,
        "registry_topic": store.topic, "queue_markers_topic": f"markers.{suffix}",
        "queue_settings_topic": f"queue-settings.{suffix}",
    }  # fmt: skip
    code = _doc_block("docs/amqp.md", "python", 2).replace("orders", f"orders{suffix}")
    try:
        with running_api(**shared) as api, running_amqp(**shared) as amqp:
            code = code.replace("localhost:3904", f"127.0.0.1:{api.port}")
            code = code.replace("localhost:5672", f"127.0.0.1:{amqp.port}")
            code = code.replace("<app-secret>", app_secret)
            _prints(code, "docs/amqp.md", 3)
    finally:
        store.close()


def _prints(code: str, doc: str, text_index: int) -> None:
    """Run a doc's python example; it must exit 0 and print the doc's text block."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == _doc_block(doc, "text", text_index)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.mark.integration
def test_kafka_cluster_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """operations.md's Kafka cluster: `up --kafka-nodes 3` (authentication on, so the registry's
    topics are made on the cluster too), `status` (the cluster's rows and lines), then a second
    stack on that cluster as an external one (`up --kafka-bootstrap`, with the cluster's real
    addresses for the example's host names): no local broker, and its status shows the cluster.
    """
    from confluent_kafka.admin import AdminClient

    from stack.ports import free_port_run, free_ports

    main = entry_point("iot-stack")
    examples = {e.command: e for e in _run_by("test_kafka_cluster_examples_run")}
    _clean_iot_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    started: list[Path] = []

    kafka_port = free_port_run(6)  # the cluster's nodes: 3 x (client, controller)

    def use(data_dir: Path) -> None:
        taken = range(kafka_port, kafka_port + 6)
        mqtt, bridge, commands, api, tls = [p for p in free_ports(10) if p not in taken][:5]
        monkeypatch.setenv("IOT_DATA_DIR", str(data_dir))
        monkeypatch.setenv("IOT_MQTT_TLS_PORT", str(tls))  # two stacks: not both on 8883
        monkeypatch.setenv("IOT_STACK_API_PORT", str(api))
        monkeypatch.setenv("IOT_MQTT_PORT", str(mqtt))
        monkeypatch.setenv("IOT_STACK_BRIDGE_HTTP_PORT", str(bridge))
        monkeypatch.setenv("IOT_STACK_COMMANDS_HTTP_PORT", str(commands))
        monkeypatch.setenv("IOT_KAFKA_HEAP", "384m")

    def run(argv: list[str]) -> None:
        """`main(argv)` must succeed; if not, fail with what it said (without librdkafka's
        retry lines from other tests' clients, which would bury it)."""
        if main(argv) != 0:
            err = capsys.readouterr().err.splitlines()
            said = [line for line in err if not line.startswith("%")]
            pytest.fail(f"iot-stack {' '.join(argv)} failed:\n" + "\n".join(said[-80:]))

    def status(argv: list[str]) -> dict[str, str]:
        run(argv)
        out = capsys.readouterr().out.splitlines()
        return {
            line.split(":")[0] if line.startswith("kafka ") else line.split()[0]: line
            for line in out
        }

    try:
        use(tmp_path / "cluster")
        monkeypatch.setenv("IOT_KAFKA_PORT", str(kafka_port))
        started.append(tmp_path / "cluster")
        run(list(examples["iot-stack up --kafka-nodes 3"].argv[1:]))
        capsys.readouterr()
        rows = status(["status"])  # the docs' `iot-stack status` (no flags: the last `up`'s)
        for node in ("kafka-1", "kafka-2", "kafka-3"):
            assert "running (pid " in rows[node], rows
        assert "kafka quorum leader" in rows
        assert rows["kafka under-replicated partitions"].endswith(": 0")
        bootstrap = json.loads((tmp_path / "cluster" / "stack.json").read_text())["kafka"]
        assert len(bootstrap.split(",")) == 3

        use(tmp_path / "edge")
        monkeypatch.delenv("IOT_KAFKA_PORT")
        shown = examples["iot-stack up --kafka-bootstrap kafka-a:9092,kafka-b:9092,kafka-c:9092"]
        argv = [bootstrap if a.startswith("kafka-a:") else a for a in shown.argv[1:]]
        started.append(tmp_path / "edge")
        run(argv)
        capsys.readouterr()
        rows = status(["status"])
        assert not any(name.startswith("kafka-") for name in rows), rows  # no local broker
        assert "bridge" in rows
        assert rows["kafka brokers"].count("127.0.0.1:") == 3
        assert not (tmp_path / "edge" / "kafka").exists()
        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        for topic in ("iot.telemetry", "iot.registry", "__consumer_offsets"):
            if topic in meta.topics:
                replicas = {len(p.replicas) for p in meta.topics[topic].partitions.values()}
                assert replicas == {3}, topic
        assert "iot.registry" in meta.topics
    finally:
        for data_dir in reversed(started):
            monkeypatch.setenv("IOT_DATA_DIR", str(data_dir))
            main(["down"])


def test_analytics_delta_reading_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/analytics.md's DuckDB/pandas block as it stands, on Delta tables of the job's
    layout (partitioned by tenant) written by delta-rs: no Spark needed to read them."""
    import pyarrow as pa
    from deltalake import write_deltalake

    wh = tmp_path / "var" / "warehouse"
    minute = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
    tenant = pa.array(["default", "default", "acme"])
    tables = {
        "device_minute": {
            "window_start": [minute] * 3, "device_id": ["d1", "d2", "d1"],
            "messages": [12, 10, 3], "missing_seq": [0, 2, 0], "duplicates": [1, 0, 0],
        },
        "device_status": {"device_id": ["d1", "d2", "d1"], "online": [True, False, True]},
        "fleet_minute": {"window_start": [minute] * 3, "messages": [22, 22, 3]},
        "anomalies": {"device_id": ["d1", "d2", "d1"], "seq": [3, 4, 5]},
    }  # fmt: skip
    for name, columns in tables.items():
        data = pa.table(columns).append_column("tenant", tenant)
        write_deltalake(str(wh / name), data, partition_by=["tenant"])
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(compile(_doc_block("docs/analytics.md", "python"), "analytics.md", "exec"), scope)
    out = capsys.readouterr().out
    assert "d2" in out
    assert "gaps" in out
    assert list(scope["anoms"]["seq"]) == [3, 4]
    assert len(scope["fleet"]) == 3
    assert len(scope["first"]) == 3
    assert len(scope["history"]) == 1
