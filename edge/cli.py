"""`iot-edge`: install, run and watch an edge site (docs/edge.md).

Exit codes: 0 ok, 1 runtime error, 2 usage error (bad settings included).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from edge import config as edge_config
from edge.errors import ConfigError, EdgeError
from edge.install import install
from edge.render import SitePaths

log = logging.getLogger("iot-edge")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iot-edge", description=__doc__)
    parser.add_argument("--log-level", default="INFO", help="Logging level.")
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="Write a site's configuration (site directory).")
    edge_config.add_arguments(init)
    init.add_argument("--up", action="store_true", help="Then start the site (as `iot-edge up`).")
    init.add_argument("--json", action="store_true", help="With --up: print the status as JSON.")
    init.add_argument("--timeout", type=float, default=30.0, help="With --up: seconds to wait.")
    for name, text in (
        ("up", "Start the site broker under its supervisor (in the background)."),
        ("down", "Stop the site broker cleanly (its store is saved)."),
        ("status", "Link state, queued messages and broker state of the site."),
        ("run", "Run the supervisor in the foreground (what `up` starts)."),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--dir", default="var/edge", help="The site directory (init's --site-dir).")
        if name in ("up", "status"):
            p.add_argument("--json", action="store_true", help="Print JSON.")
        if name == "up":
            p.add_argument(
                "--timeout", type=float, default=30.0, help="Seconds to wait for the broker."
            )
    sites = sub.add_parser("sites", help="The centre's view: every site's link, last seen, queue.")
    sites.add_argument("--central", required=True, help="Central Mosquitto HOST:PORT.")
    sites.add_argument("--username", default="svc/bridge", help="A central account (role bridge).")
    sites.add_argument("--password-file", required=True, help="File holding its secret.")
    sites.add_argument("--tls-ca-file", default="", help="CA of the centre's TLS listener.")
    sites.add_argument("--json", action="store_true", help="Print JSON.")
    sites.add_argument(
        "--metrics-port",
        type=int,
        help="Keep watching and serve Prometheus metrics on this port (127.0.0.1).",
    )
    return parser


def _alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _status_data(paths: SitePaths) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if paths.status.exists():
        try:
            data = json.loads(paths.status.read_text())
        except ValueError:
            data = {}
    supervisor = _alive(paths.supervisor_pid)
    data["supervisor_running"] = supervisor is not None
    if supervisor is None:
        data.update(broker_running=False, link="down", broker_pid=None)
    elif "at_ms" in data:
        data["status_age_s"] = round(time.time() - data["at_ms"] / 1000, 1)
    return data


def _print_status(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, sort_keys=True))
        return
    keys = ("site", "tenant", "supervisor_running", "broker_running", "link", "held_messages",
            "held_bytes", "clients", "broker_restarts", "status_age_s")  # fmt: skip
    for key in keys:
        if key in data:
            print(f"{key:20} {data[key]}")


def _up(paths: SitePaths, args: argparse.Namespace) -> int:
    edge_config.read_site(paths.root)
    if _alive(paths.supervisor_pid) is None:
        paths.status.unlink(missing_ok=True)
        with paths.supervisor_log.open("ab") as out:
            subprocess.Popen(
                [sys.executable, "-m", "edge", "run", "--dir", str(paths.root)],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives this shell
            )
    deadline = time.monotonic() + args.timeout
    while True:
        data = _status_data(paths)
        if data.get("broker_running"):
            _print_status(data, args.json)
            return 0
        if time.monotonic() > deadline:
            print(f"site broker not running after {args.timeout} s: see {paths.supervisor_log}",
                  file=sys.stderr)  # fmt: skip
            return 1
        time.sleep(0.1)


def _down(paths: SitePaths) -> int:
    pid = _alive(paths.supervisor_pid)
    if pid is None:
        print("not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _alive(paths.supervisor_pid) is not None:
        if time.monotonic() > deadline:
            print(f"supervisor {pid} still running after 60 s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print("stopped")
    return 0


def _run(paths: SitePaths) -> int:
    from edge.supervisor import SiteSupervisor

    config = edge_config.read_site(paths.root)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    SiteSupervisor(config, paths).run(stop)
    return 0


def _sites(args: argparse.Namespace) -> int:
    from edge import central

    host, _, port = args.central.rpartition(":")
    password = Path(args.password_file).read_text().strip()
    if args.metrics_port is None:
        views = central.snapshot(host, int(port), args.username, password, ca_file=args.tls_ca_file)
        rows = [v.as_dict() for v in views]
        if args.json:
            print(json.dumps(rows, sort_keys=True))
        else:
            print(f"{'tenant':12} {'site':20} {'link':8} {'last seen s':>12} {'held':>10}")
            for r in rows:
                print(f"{r['tenant']:12} {r['site']:20} {r['link']:8} "
                      f"{r['last_seen_s']!s:>12} {r['held_messages']!s:>10}")  # fmt: skip
        return 0
    from edge.metrics import serve

    watch = central.CentralWatch(host, int(port), args.username, password, args.tls_ca_file)
    watch.start()
    serve(watch.views, args.metrics_port)
    log.info("serving site metrics on 127.0.0.1:%d/metrics", args.metrics_port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    watch.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command == "init":
            config = edge_config.from_namespace(args)
            paths = install(config)
            q = config.queues()
            print(f"site {config.site} written to {paths.root}")
            print(f"  queue: {q.max_queued_messages} messages / {q.max_queued_bytes} bytes "
                  f"({config.outage_s:g} s at {config.rate_msgs_per_s:g} msg/s), "
                  f"~{q.memory_bytes // 2**20} MiB when full")  # fmt: skip
            print(f"  kill -9 / power cut loses fewer than {q.loss_bound} acknowledged messages")
            if args.up:
                return _up(paths, args)
            print(f"  start it: iot-edge up --dir {paths.root}")
            return 0
        if args.command == "sites":
            return _sites(args)
        paths = SitePaths(Path(args.dir).resolve())
        if args.command == "up":
            return _up(paths, args)
        if args.command == "down":
            return _down(paths)
        if args.command == "status":
            edge_config.read_site(paths.root)
            data = _status_data(paths)
            _print_status(data, args.json)
            return 0 if data.get("broker_running") else 1
        return _run(paths)
    except ConfigError as exc:
        print(f"iot-edge: {exc}", file=sys.stderr)
        return 2
    except (EdgeError, OSError) as exc:
        print(f"iot-edge: {exc}", file=sys.stderr)
        return 1
