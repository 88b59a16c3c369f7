"""A site behind a NAT router, made of network namespaces (root only; names start `edge`):
the edge tests' (tests/edge/conftest.py) and the chaos run's `edge` cell's
(bench/chaos/edge_site.py).

    host (centre) e{k}h0 10.217.{2k}.1 <-veth-> e{k}r0 10.217.{2k}.2 [ns edge{k}-r, the router]
                  e{k}r1 10.217.{2k+1}.1 [edge{k}-r] <-veth-> e{k}s0 10.217.{2k+1}.2 [ns edge{k}-s]

The router masquerades what the site sends out and forwards nothing new inbound (nft rules
live in its namespace only; the host's netfilter is untouched). The host gets a route to the
site's subnet through the router, so "the centre cannot connect in" is the NAT's doing, not a
missing route. A cut is the router's WAN link down (a cable pull); heal brings it up.

Names, addresses and the host route are machine-wide, so each NatSite takes a *slot* `k` (a
lock file held while it lives): two test runs at once (or a run beside a helper's) each get
their own, and a slot's leftovers from a killed run are cleared by the next owner.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

SLOTS = 32
LOCK_DIR = Path("/run/lock")

_NFT = """
table ip edge_nat {{
  chain postrouting {{ type nat hook postrouting priority srcnat;
    oifname "{wan}" masquerade; }}
}}
table inet edge_filter {{
  chain forward {{ type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "{lan}" oifname "{wan}" accept
  }}
}}
"""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (apt-get install iproute2 nftables)"
    probe = f"edge-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class NatSite:
    slot: int = -1
    _lock: IO[str] | None = field(default=None, repr=False)

    # -- this slot's names and addresses ------------------------------------------------------
    @property
    def site_ns(self) -> str:
        return f"edge{self.slot}-s"

    @property
    def router_ns(self) -> str:
        return f"edge{self.slot}-r"

    @property
    def host_if(self) -> str:
        return f"e{self.slot}h0"

    @property
    def router_wan(self) -> str:
        return f"e{self.slot}r0"

    @property
    def router_lan(self) -> str:
        return f"e{self.slot}r1"

    @property
    def site_if(self) -> str:
        return f"e{self.slot}s0"

    @property
    def wan_net(self) -> str:
        return f"10.217.{2 * self.slot}"

    @property
    def lan_net(self) -> str:
        return f"10.217.{2 * self.slot + 1}"

    @property
    def centre_ip(self) -> str:
        return f"{self.wan_net}.1"

    @property
    def router_wan_ip(self) -> str:
        return f"{self.wan_net}.2"

    @property
    def router_lan_ip(self) -> str:
        return f"{self.lan_net}.1"

    @property
    def site_ip(self) -> str:
        return f"{self.lan_net}.2"

    def _take_slot(self) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        for slot in range(SLOTS):
            lock = (LOCK_DIR / f"iot-edge-netns-{slot}.lock").open("w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            lock.write(str(os.getpid()))
            lock.flush()
            self.slot, self._lock = slot, lock
            return
        raise RuntimeError(f"all {SLOTS} edge namespace slots are taken")

    def in_site(self, *cmd: str) -> list[str]:
        """A command line that runs inside the site's namespace."""
        return ["ip", "netns", "exec", self.site_ns, *cmd]

    def create(self) -> NatSite:
        self._take_slot()
        self._clear()  # this slot's leftovers of an interrupted run
        for ns in (self.site_ns, self.router_ns):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.router_wan)
        _ip("link", "set", self.router_wan, "netns", self.router_ns)
        _ip("link", "add", self.router_lan, "type", "veth", "peer", "name", self.site_if)
        _ip("link", "set", self.router_lan, "netns", self.router_ns)
        _ip("link", "set", self.site_if, "netns", self.site_ns)
        _ip("addr", "add", f"{self.centre_ip}/24", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        _ip("-n", self.router_ns, "addr", "add", f"{self.router_wan_ip}/24", "dev", self.router_wan)
        _ip("-n", self.router_ns, "addr", "add", f"{self.router_lan_ip}/24", "dev", self.router_lan)
        _ip("-n", self.site_ns, "addr", "add", f"{self.site_ip}/24", "dev", self.site_if)
        for ns, dev in (
            (self.router_ns, self.router_wan),
            (self.router_ns, self.router_lan),
            (self.site_ns, self.site_if),
        ):
            _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", self.site_ns, "route", "add", "default", "via", self.router_lan_ip)
        # the route exists: only the NAT router keeps the centre out
        _ip("route", "add", f"{self.lan_net}.0/24", "via", self.router_wan_ip, "dev", self.host_if)
        subprocess.run(
            ["ip", "netns", "exec", self.router_ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
            check=True,
        )
        # A bridge connect begun during a cut keeps retrying its SYN with Linux's backoff
        # (default 6 retries, ~127 s; ICMP unreachable is a soft error then) and Mosquitto 2.0.11
        # waits for it: measured 60+ s from heal to link up. docs/edge.md advises this setting
        # on site machines; the test site gets it too.
        subprocess.run(
            ["ip", "netns", "exec", self.site_ns, "sysctl", "-qw", "net.ipv4.tcp_syn_retries=2"],
            check=True,
        )
        subprocess.run(
            ["ip", "netns", "exec", self.router_ns, "nft", "-f", "-"],
            input=_NFT.format(wan=self.router_wan, lan=self.router_lan),
            text=True,
            check=True,
        )
        return self

    def cut(self) -> None:
        _ip("-n", self.router_ns, "link", "set", self.router_wan, "down")

    def heal(self) -> None:
        _ip("-n", self.router_ns, "link", "set", self.router_wan, "up")
        _ip("link", "set", self.host_if, "up")
        # the host's route through the router goes with the carrier; put it back
        _ip(
            "route",
            "replace",
            f"{self.lan_net}.0/24",
            "via",
            self.router_wan_ip,
            "dev",
            self.host_if,
            check=False,
        )

    def _clear(self) -> None:
        _ip("link", "del", self.host_if, check=False)  # its peer (and the host route) go with it
        for ns in (self.site_ns, self.router_ns):
            _ip("netns", "del", ns, check=False)

    def destroy(self) -> None:
        """Everything this site made, then its slot freed."""
        if self._lock is None:
            return
        self._clear()
        self._lock.close()  # releases the flock
        self._lock = None
