"""A site behind a NAT router, made of network namespaces (root only; names start `edge`).

    host (centre) edge-h0 10.217.0.1 <-veth-> edge-r0 10.217.0.2 [ns edge-r, the router]
                  edge-r1 10.217.1.1 [edge-r] <-veth-> edge-s0 10.217.1.2 [ns edge-s, the site]

The router masquerades what the site sends out and forwards nothing new inbound (nft rules
live in its namespace only; the host's netfilter is untouched). The host gets a route to the
site's subnet through the router, so "the centre cannot connect in" is the NAT's doing, not a
missing route. A cut is the router's WAN link down (a cable pull); heal brings it up.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

SITE_NS, ROUTER_NS = "edge-s", "edge-r"
HOST_IF, ROUTER_WAN, ROUTER_LAN, SITE_IF = "edge-h0", "edge-r0", "edge-r1", "edge-s0"
CENTRE_IP, ROUTER_WAN_IP, ROUTER_LAN_IP, SITE_IP = (
    "10.217.0.1",
    "10.217.0.2",
    "10.217.1.1",
    "10.217.1.2",
)

NFT = f"""
table ip edge_nat {{
  chain postrouting {{ type nat hook postrouting priority srcnat;
    oifname "{ROUTER_WAN}" masquerade; }}
}}
table inet edge_filter {{
  chain forward {{ type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "{ROUTER_LAN}" oifname "{ROUTER_WAN}" accept
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
    probe = "edge-probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class NatSite:
    def in_site(self, *cmd: str) -> list[str]:
        """A command line that runs inside the site's namespace."""
        return ["ip", "netns", "exec", SITE_NS, *cmd]

    def create(self) -> NatSite:
        self.destroy()  # leftovers of an interrupted run
        for ns in (SITE_NS, ROUTER_NS):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("link", "add", HOST_IF, "type", "veth", "peer", "name", ROUTER_WAN)
        _ip("link", "set", ROUTER_WAN, "netns", ROUTER_NS)
        _ip("link", "add", ROUTER_LAN, "type", "veth", "peer", "name", SITE_IF)
        _ip("link", "set", ROUTER_LAN, "netns", ROUTER_NS)
        _ip("link", "set", SITE_IF, "netns", SITE_NS)
        _ip("addr", "add", f"{CENTRE_IP}/24", "dev", HOST_IF)
        _ip("link", "set", HOST_IF, "up")
        _ip("-n", ROUTER_NS, "addr", "add", f"{ROUTER_WAN_IP}/24", "dev", ROUTER_WAN)
        _ip("-n", ROUTER_NS, "addr", "add", f"{ROUTER_LAN_IP}/24", "dev", ROUTER_LAN)
        _ip("-n", SITE_NS, "addr", "add", f"{SITE_IP}/24", "dev", SITE_IF)
        for ns, dev in ((ROUTER_NS, ROUTER_WAN), (ROUTER_NS, ROUTER_LAN), (SITE_NS, SITE_IF)):
            _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", SITE_NS, "route", "add", "default", "via", ROUTER_LAN_IP)
        # the route exists: only the NAT router keeps the centre out
        _ip("route", "add", "10.217.1.0/24", "via", ROUTER_WAN_IP, "dev", HOST_IF)
        subprocess.run(
            ["ip", "netns", "exec", ROUTER_NS, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
            check=True,
        )
        # A bridge connect begun during a cut keeps retrying its SYN with Linux's backoff
        # (default 6 retries, ~127 s; ICMP unreachable is a soft error then) and Mosquitto 2.0.11
        # waits for it: measured 60+ s from heal to link up. docs/edge.md advises this setting
        # on site machines; the test site gets it too.
        subprocess.run(
            ["ip", "netns", "exec", SITE_NS, "sysctl", "-qw", "net.ipv4.tcp_syn_retries=2"],
            check=True,
        )
        subprocess.run(
            ["ip", "netns", "exec", ROUTER_NS, "nft", "-f", "-"], input=NFT, text=True, check=True
        )
        return self

    def cut(self) -> None:
        _ip("-n", ROUTER_NS, "link", "set", ROUTER_WAN, "down")

    def heal(self) -> None:
        _ip("-n", ROUTER_NS, "link", "set", ROUTER_WAN, "up")
        _ip("link", "set", HOST_IF, "up")
        # the host's route through the router goes with the carrier; put it back
        _ip("route", "replace", "10.217.1.0/24", "via", ROUTER_WAN_IP, "dev", HOST_IF, check=False)

    def destroy(self) -> None:
        _ip("link", "del", HOST_IF, check=False)  # its peer (and the host route) go with it
        for ns in (SITE_NS, ROUTER_NS):
            _ip("netns", "del", ns, check=False)
