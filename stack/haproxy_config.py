"""HAProxy's config for the sharded MQTT tier (pure): one TCP front on the MQTT listener
address that reads each connection's CONNECT packet and sends it to the shard of its client
identifier (:func:`stack.mqtt_shards.shard_of` computes the same shard in Python).

With the TLS listener on, a second front terminates mutual TLS (HAProxy must read the
CONNECT, which passthrough would hide), refuses a CONNECT whose client id or user name is not
the certificate's CN, and hands the stream to the same shard over that shard's front socket,
where our plugin logs the device in as its client id (docs/scaling.md, "TLS through the
front")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# how long HAProxy waits for a whole CONNECT before it drops the connection
CONNECT_WAIT_S = 10
# longer than any device's MQTT keep-alive x 1.5 (Mosquitto closes idle clients itself)
IDLE_TIMEOUT_S = 3600
# the shards' names looked up again at run time (`render(resolve=True)`): the nameservers of
# /etc/resolv.conf (a container's: its engine's DNS), an answer kept for 10 s
RESOLVER = "dns"
RESOLVERS = [f"resolvers {RESOLVER}", "    parse-resolv-conf", "    hold valid 10s", ""]


@dataclass(frozen=True)
class ShardAddress:
    host: str
    port: int
    # the shard's unix socket behind the TLS front ('' without one)
    front_socket: str = ""


@dataclass(frozen=True)
class TlsFront:
    """The mutual-TLS listener: ``pem`` holds the server certificate and its key; the
    device certificate must chain to ``ca_file`` and not be in ``crl_file``."""

    port: int
    pem: str
    ca_file: str
    crl_file: str
    # HAProxy's admin socket (0600): `iot-stack reload-crl` sends it the new CRL
    admin_socket: str


def backend_name(index: int) -> str:
    """The backend of 0-based shard ``index`` (shards are numbered from 1 for people)."""
    return f"shard-{index + 1}"


def render(
    bind_host: str,
    port: int,
    shards: Sequence[ShardAddress],
    *,
    connect_wait_s: int = CONNECT_WAIT_S,
    idle_timeout_s: int = IDLE_TIMEOUT_S,
    tls: TlsFront | None = None,
    resolve: bool = False,
) -> str:
    """The whole config file. Shard ``i`` of ``shards`` (0-based) gets every client whose
    ``crc32(client id) % len(shards) == i``; anything that is not a valid MQTT CONNECT
    within ``connect_wait_s`` is refused. With ``tls``, every shard needs its front socket.
    With ``resolve`` (shards named by host, each a container of its own), HAProxy looks the
    names up again at run time (the resolvers of /etc/resolv.conf): a shard's container that
    comes back with another address is found there, and one not up yet does not stop HAProxy."""
    if not shards:
        raise ValueError("need at least one shard")
    if tls is not None and not all(shard.front_socket for shard in shards):
        raise ValueError("the TLS front needs every shard's front socket")
    n = len(shards)
    lines = [
        "# HAProxy in front of the MQTT shards, rendered by `iot-stack up --mqtt-shards N`",
        "# (stack/haproxy_config.py). Do not edit: rewritten on every start.",
        "global",
        # no maxconn: HAProxy derives it from the file-descriptor limit it runs with
        *([f"    stats socket {tls.admin_socket} mode 600 level admin"] if tls else []),
        "",
        *(RESOLVERS if resolve else []),
        "defaults",
        "    mode tcp",
        "    timeout connect 5s",
        f"    timeout client {idle_timeout_s}s",
        f"    timeout server {idle_timeout_s}s",
        "",
        "frontend mqtt",
        f"    bind {bind_host}:{port}",
        f"    tcp-request inspect-delay {connect_wait_s}s",
        "    tcp-request content reject unless { req.payload(0,0),mqtt_is_valid }",
        "    tcp-request content set-var(sess.shard) "
        f"req.payload(0,0),mqtt_field_value(connect,client_identifier),crc32,mod({n})",
    ]
    lines += [
        f"    use_backend {backend_name(i)} if {{ var(sess.shard) -m int {i} }}" for i in range(n)
    ]
    # a CONNECT without a client id field never happens (MQTT 3.1.1 and 5 both carry one,
    # possibly empty: crc32 of nothing is 0, shard 1, as in Python)
    lines.append(f"    default_backend {backend_name(0)}")
    for i, shard in enumerate(shards):
        lines += [
            "",
            f"backend {backend_name(i)}",
            f"    server mosquitto-{i + 1} {shard.host}:{shard.port}"
            + (f" resolvers {RESOLVER} init-addr libc,none" if resolve else ""),
        ]
    if tls is not None:
        lines += _tls_front(bind_host, tls, shards, connect_wait_s)
    return "\n".join(lines) + "\n"


def _tls_front(
    bind_host: str, tls: TlsFront, shards: Sequence[ShardAddress], connect_wait_s: int
) -> list[str]:
    n = len(shards)
    payload = "req.payload(0,0),mqtt_field_value(connect"
    lines = [
        "",
        "# mutual TLS, terminated here: a certificate is required (as on one Mosquitto's TLS",
        "# listener), and its CN must be the CONNECT's client id and user name (if one is",
        "# given); the shard takes the client id as the user name without a password",
        "frontend mqtt-tls",
        f"    bind {bind_host}:{tls.port} ssl crt {tls.pem} ca-file {tls.ca_file} "
        f"verify required crl-file {tls.crl_file} ssl-min-ver TLSv1.2",
        f"    tcp-request inspect-delay {connect_wait_s}s",
        "    tcp-request content reject unless { req.payload(0,0),mqtt_is_valid }",
        "    tcp-request content set-var(sess.cn) ssl_c_s_dn(CN)",
        f"    tcp-request content set-var(sess.client_id) {payload},client_identifier)",
        "    tcp-request content reject unless { var(sess.cn) -m len gt 0 }",
        "    tcp-request content reject unless { var(sess.client_id),strcmp(sess.cn) eq 0 }",
        f"    tcp-request content reject if {{ {payload},username) -m found }} "
        f"!{{ {payload},username),strcmp(sess.cn) eq 0 }}",
        f"    tcp-request content set-var(sess.shard) var(sess.client_id),crc32,mod({n})",
    ]
    lines += [
        f"    use_backend {backend_name(i)}-tls if {{ var(sess.shard) -m int {i} }}"
        for i in range(n)
    ]
    lines.append(f"    default_backend {backend_name(0)}-tls")
    for i, shard in enumerate(shards):
        lines += [
            "",
            f"backend {backend_name(i)}-tls",
            f"    server mosquitto-{i + 1}-tls unix@{shard.front_socket}",
        ]
    return lines
