"""The optional TLS listener's certificate (``--tls-port``): the operator's files, or else the
appliance CA's server certificate (``registry.ca_store``; the CA is made as `iot-devices ca
init` makes it when there is none yet), so clients verify iot-api against the same CA as
Mosquitto's TLS listener (docs/security.md)."""

from __future__ import annotations

import ssl
from pathlib import Path

from api.config import ApiConfig
from api.errors import ConfigError
from registry.ca_store import CaStore


def certificate_files(cfg: ApiConfig) -> tuple[Path, Path]:
    """(certificate chain, key) the TLS listener serves."""
    if cfg.tls_cert_file:
        return Path(cfg.tls_cert_file), Path(cfg.tls_key_file)
    store = CaStore(Path(cfg.tls_ca_dir))
    store.init()  # nothing changes when the CA exists
    return store.server_cert, store.server_key


def server_context(cfg: ApiConfig) -> ssl.SSLContext:
    cert, key = certificate_files(cfg)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS certificate {cert} / key {key}: {exc}") from exc
    return context
