"""Mosquitto's mutual-TLS listener in the appliance (issue 13, docs/security.md).

On by default with authentication: at every render the appliance CA is made if missing
(``registry.ca_store``: CA, the listener's server certificate, an empty CRL; or the operator's
own CA copied in on first start; a server certificate that lacks one of the names is issued
again with them), and the listener lines ``iot-devices ca mosquitto-conf``
prints are added to mosquitto.conf. A device certificate's CN is its MQTT user name, so the
registry's dynsec roles apply to it as to a password login. Off with ``--insecure-anonymous``:
that broker has no identities a certificate could stand for.

With ``--mqtt-shards N`` (N > 1) HAProxy terminates this listener's TLS instead and hands each
device to its shard over the shard's front socket (:func:`front_socket`), where the
``iot_front_auth`` plugin logs it in as its client id (docs/scaling.md, "TLS through the front").
"""

from __future__ import annotations

import logging
from pathlib import Path

from registry import pki
from registry.ca_store import DEFAULT_NAMES, CaStore
from registry.errors import RegistryError
from stack.config import StackConfig
from stack.errors import StackError

log = logging.getLogger(__name__)


def enabled(config: StackConfig) -> bool:
    return config.mqtt_tls and not config.insecure_anonymous


def ca_dir(config: StackConfig) -> Path:
    """The CA `up` uses; `iot-devices` finds the same one through IOT_REGISTRY_CA_DIR."""
    return Path(config.tls_ca_dir).resolve() if config.tls_ca_dir else config.data_dir / "ca"


def server_names(config: StackConfig) -> list[str]:
    """Names in the listener's certificate: localhost, the bind address, the extra names."""
    extra = [n.strip() for n in config.tls_server_names.split(",") if n.strip()]
    names = [*DEFAULT_NAMES, config.connect_host, *extra]
    return list(dict.fromkeys(names))  # unique, in order


def _own_ca(config: StackConfig) -> tuple[Path, Path] | None:
    if not (config.tls_ca_cert or config.tls_ca_key):
        return None
    if not (config.tls_ca_cert and config.tls_ca_key):
        raise StackError("the operator's CA needs both tls_ca_cert and tls_ca_key")
    return Path(config.tls_ca_cert), Path(config.tls_ca_key)


def ensure_ca(config: StackConfig) -> tuple[CaStore, bool]:
    """The CA store, created on first start; True if it was created now.

    An existing CA is kept (every device certificate hangs on it); an operator CA given later
    that is not the one in use is refused rather than silently ignored.
    """
    store = CaStore(ca_dir(config))
    own = _own_ca(config)
    if store.exists():
        if own is not None:
            given = pki.fingerprint(pki.load_cert(own[0].read_bytes()))
            if given != pki.fingerprint(store.authority().cert):
                raise StackError(
                    f"{store.dir} already holds another CA; the operator CA {own[0]} is used "
                    "only on first start (move the CA directory away to switch)"
                )
        names = server_names(config)
        try:
            if store.cover_names(names):
                log.info("the TLS listeners' certificate issued again for %s", names)
        except (RegistryError, ValueError, OSError) as exc:
            raise StackError(f"the TLS listeners' certificate: {exc}") from exc
        return store, False
    try:
        made = store.init(server_names(config), own)
    except (RegistryError, ValueError, OSError) as exc:
        raise StackError(f"the TLS listener's CA: {exc}") from exc
    return store, made


def listener_lines(config: StackConfig) -> str:
    """The mosquitto.conf block of the TLS listener ('' when off)."""
    if not enabled(config):
        return "# no TLS listener (off, or an anonymous development broker)"
    store, _made = ensure_ca(config)
    return store.listener_conf(config.mqtt_tls_port, config.bind_host or None)


# sun_path holds 108 bytes with its terminating NUL, but HAProxy (Debian's 2.6), which connects
# to the front sockets and binds the admin socket, refuses paths over 97 ("too long (max 97)":
# it keeps room to bind through a temporary name), so the shorter limit holds for all of them
MAX_SOCKET_PATH = 97


def front_dir(config: StackConfig) -> Path:
    """The shards' front sockets: only the appliance's user (HAProxy's) may enter it (0700)."""
    return config.data_dir.resolve() / "mqtt-front"


def checked_socket_path(path: Path) -> Path:
    """``path``, or StackError when it is too long for a unix socket."""
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        raise StackError(
            f"the unix socket {path} is longer than {MAX_SOCKET_PATH} bytes (a unix socket "
            "path's limit): use a shorter data_dir"
        )
    return path


def front_socket(config: StackConfig, shard: int) -> Path:
    """Shard ``shard``'s (1-based) unix socket that only HAProxy's TLS front connects to."""
    return checked_socket_path(front_dir(config) / f"shard-{shard}.sock")


def ensure_front_dir(config: StackConfig) -> Path:
    """Create the front sockets' directory and (re)set it to 0700: the whole of what keeps
    other local users from logging in password-less as any device (docs/scaling.md)."""
    path = front_dir(config)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def url(config: StackConfig) -> str:
    return f"mqtts://{config.connect_host}:{config.mqtt_tls_port}"


def describe(config: StackConfig) -> str:
    """`up`'s and `status`' line for the listener."""
    if not enabled(config):
        return "off"
    front = ", terminated by HAProxy" if config.mqtt_shards > 1 else ""
    return f"{url(config)} (mutual TLS{front}, CA {ca_dir(config) / 'ca.crt'})"
