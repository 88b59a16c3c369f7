"""The chaos run's edge site (adapter): a site in its own network namespace behind a NAT router
(:mod:`bench.chaos.netns`), installed with the real `iot-edge init --up` inside it and dialling
the chaos stack's Mosquitto; the site's account and its devices made in the stack's registry,
each device with its own login (docs/edge.md "Install a site"); its devices' processes
(:mod:`bench.chaos.edge_device`), run in the site's namespace; the site's own status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.chaos import netns
from bench.chaos import stack as chaos_stack

ROOT = Path(__file__).resolve().parents[2]
DEVICE_SCRIPT = Path(__file__).with_name("edge_device.py")
SITE = "chaos-site"
PUBLISHERS = ("chaos-edge-0", "chaos-edge-1")  # publish telemetry through the site
COMMAND_TARGET = "chaos-edge-cmd"  # listens for commands (its client id is its own)
LISTEN_PORT = 1883  # the site broker's, on the site namespace's own loopback
LINK_UP_TIMEOUT_S = 60.0


def unavailable() -> str | None:
    """Why no edge site can be made here (not root, no namespaces), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    return netns.unavailable()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOT_")}
    return env | {"PYTHONPATH": str(ROOT)}


@dataclass
class EdgeSite:
    ns: netns.NatSite
    dir: Path
    devices: dict[str, str]  # device id -> secret

    def status(self) -> dict[str, Any]:
        """The site supervisor's status.json (link, held_messages, ...); {} until written."""
        try:
            data = json.loads((self.dir / "status.json").read_text())
        except (OSError, ValueError):  # not yet written, or caught mid-write
            return {}
        return data if isinstance(data, dict) else {}

    def device(self, mode: str, device: str, **opts: Any) -> subprocess.Popen[str]:
        """A device of the site (``mode`` of :mod:`bench.chaos.edge_device`) in its namespace,
        with its own login; stdout piped."""
        sub = "commands/#" if mode == "listen" else "telemetry"
        cmd = [sys.executable, str(DEVICE_SCRIPT), mode, "--port", str(LISTEN_PORT),
               f"--user={device}", f"--secret={self.devices[device]}",
               "--topic", f"devices/{device}/{sub}"]  # fmt: skip
        for key, value in opts.items():
            cmd += [f"--{key}", str(value)]
        return subprocess.Popen(self.ns.in_site(*cmd), stdout=subprocess.PIPE, text=True,
                                cwd=ROOT, env=_env())  # fmt: skip

    def wait_link_up(self, timeout: float) -> float | None:
        """Seconds until the site reports its link up (None: not within ``timeout``)."""
        started = time.monotonic()
        while time.monotonic() - started <= timeout:
            if self.status().get("link") == "up":
                return time.monotonic() - started
            time.sleep(0.2)
        return None


def _edge(site_ns: netns.NatSite, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        site_ns.in_site(sys.executable, "-m", "edge", *args),
        capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"iot-edge {args[0]} failed ({done.returncode}): "
                           f"{(done.stderr + done.stdout)[-1500:]}")  # fmt: skip
    return done.stdout


def up(stack: chaos_stack.ChaosStack, work_dir: Path) -> EdgeSite:
    """The namespaces, the site account and its devices in the stack's registry, the site
    installed and started (`iot-edge init --up`) with its link up; RuntimeError if not.
    The stack's Mosquitto must listen on every address (``chaos_stack.up(bind_host=...)``)."""
    site_ns = netns.NatSite().create()
    site_dir = work_dir / "edge-site"
    try:
        made = chaos_stack.registry(stack, "account", "create", SITE, "--role", "edge",
                                    "--tenant", "default")  # fmt: skip
        devices = chaos_stack.device_secrets(chaos_stack.registry(
            stack, "device", "add", "--site", SITE, "--tenant", "default",
            *PUBLISHERS, COMMAND_TARGET))  # fmt: skip
        secret_file, devices_file = work_dir / "edge-site.secret", work_dir / "edge-devices.json"
        secret_file.write_text(made["secret"])
        devices_file.write_text(json.dumps(devices))
        for path in (secret_file, devices_file):
            path.chmod(0o600)
        site = EdgeSite(site_ns, site_dir, devices)
        # as the edge tests install theirs: a plain link (both ends on this machine), a short
        # keepalive and reconnect backoff, the status every second
        central = f"{site_ns.centre_ip}:{stack.mqtt_port}"
        _edge(site_ns, "init", "--site", SITE, "--central", central,
              "--account-secret-file", str(secret_file), "--devices-file", str(devices_file),
              "--site-dir", str(site_dir), "--listen-host", "127.0.0.1",
              "--listen-port", str(LISTEN_PORT), "--insecure-plain-link", "--keepalive-s", "5",
              "--restart-min-s", "1", "--restart-max-s", "2", "--status-interval-s", "1",
              "--up")  # fmt: skip
        if site.wait_link_up(LINK_UP_TIMEOUT_S) is None:
            raise RuntimeError(f"edge site link not up within {LINK_UP_TIMEOUT_S:.0f} s: "
                               f"{site.status()}")  # fmt: skip
    except BaseException:
        _down(site_ns, site_dir)
        raise
    return site


def _down(site_ns: netns.NatSite, site_dir: Path) -> None:
    try:
        site_ns.heal()  # a run stopped during a cut: the site's stop needs no link, but tidy
        if (site_dir / "site.json").exists():
            _edge(site_ns, "down", "--dir", str(site_dir))
    except (RuntimeError, subprocess.SubprocessError, OSError):
        pass  # the namespace goes next, and its processes' sockets with it
    finally:
        site_ns.destroy()


def down(site: EdgeSite) -> None:
    """The site stopped (`iot-edge down`: its store saved), then its namespaces removed."""
    _down(site.ns, site.dir)
