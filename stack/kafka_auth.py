"""Kafka's SASL_SSL files and principals on disk and through the admin API (issue 33).

What :mod:`stack.kafka_security` renders needs: a SCRAM secret per principal, generated once
into ``<secrets>/kafka/<principal>.secret`` (mode 0600; never in an image, a command line or an
environment), a PEM key store per node signed by the appliance CA (``<data>/kafka/tls/``), the
services' ACLs once the cluster runs, and the tenant consumers' credentials and ACLs added
through the admin API (``iot-stack kafka-tenant``).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from registry import pki
from registry.ca_store import SERVER_DAYS
from stack import mqtt_tls
from stack.config import StackConfig
from stack.errors import StackError
from stack.kafka_layout import KafkaNode
from stack.kafka_security import (
    ADMIN,
    FORMAT_PRINCIPALS,
    SERVICES,
    Grant,
    TlsFiles,
    client_env,
    client_settings,
    service_grants,
    tenant_grants,
    tenant_principal,
)
from stack.secret_files import read_secret, write_private, write_secret

SCRAM_ITERATIONS = 4096


def enabled(config: StackConfig) -> bool:
    return config.kafka_security == "sasl_ssl"


def secret_path(config: StackConfig, principal: str) -> Path:
    return config.secrets_dir / "kafka" / f"{principal}.secret"


def ensure_secret(config: StackConfig, principal: str) -> str:
    """The principal's SCRAM secret, generated (URL-safe, 256 bits) on first use."""
    path = secret_path(config, principal)
    secret = read_secret(path)
    if secret is not None:
        return secret
    # containers sharing the secrets volume (the nodes of a cluster) may race here: the first
    # link wins and every other one reads its secret. The temporary name is random, not the
    # pid: every container's iot-stack may have the same pid (the kafka3 compose stack's three
    # nodes once collided on `.commands.secret.1.new`)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.new")
    write_secret(tmp, secrets.token_urlsafe(32))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    secret = read_secret(path)
    if secret is None:
        raise StackError(f"{path} is empty: remove it to have a new secret made")
    return secret


def format_secrets(config: StackConfig) -> dict[str, str]:
    """Every principal the storage is formatted with, and its secret."""
    return {name: ensure_secret(config, name) for name in FORMAT_PRINCIPALS}


def ca_file(config: StackConfig) -> Path:
    return mqtt_tls.ca_dir(config) / "ca.crt"


def node_tls(config: StackConfig, node: KafkaNode) -> TlsFiles:
    """Node ``node``'s PEM key store (key + certificate, issued by the appliance CA on first
    use for its host name, localhost and the TLS server names) and the CA file."""
    store, _made = mqtt_tls.ensure_ca(config)
    keystore = config.data_dir / "kafka" / "tls" / f"node-{node.node_id}.pem"
    if not keystore.exists():
        key = pki.new_key()
        names = [node.host, config.kafka_advertised_host, *mqtt_tls.server_names(config)]
        now = dt.datetime.now(dt.UTC)
        cert = pki.build_server(
            store.authority(),
            key,
            [n for n in dict.fromkeys(names) if n],
            now=now,
            days=SERVER_DAYS,
        )
        write_private(keystore, (pki.key_pem(key) + pki.cert_pem(cert)).decode())
    return TlsFiles(str(keystore), str(ca_file(config)))


def client_config(config: StackConfig, principal: str = ADMIN) -> dict[str, str]:
    """librdkafka settings for the launcher's own clients ({} with plaintext)."""
    if not enabled(config):
        return {}
    return client_settings(principal, ensure_secret(config, principal), str(ca_file(config)))


def service_env(config: StackConfig, service: str) -> dict[str, str]:
    """The ``IOT_KAFKA_*`` settings of a service's principal (the secret as a file)."""
    if not enabled(config):
        return {}
    ensure_secret(config, service)
    return client_env(service, str(secret_path(config, service)), str(ca_file(config)))


_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.BROKER,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
}
_PATTERNS = {"literal": ResourcePatternType.LITERAL, "prefixed": ResourcePatternType.PREFIXED}


def _binding(grant: Grant) -> AclBinding:
    return AclBinding(
        _RESOURCES[grant.resource],
        grant.name,
        _PATTERNS[grant.pattern],
        grant.principal,
        "*",
        AclOperation[grant.operation.upper()],
        AclPermissionType[grant.permission.upper()],
    )


def _admin(config: StackConfig, bootstrap: str | None = None) -> AdminClient:
    servers = bootstrap or config.kafka_bootstrap
    return AdminClient({"bootstrap.servers": servers, **client_config(config)})


def _wait(futures: dict[Any, Any], what: str, timeout: float) -> None:
    for key, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            raise StackError(f"{what} {key}: {exc.args[0]}") from exc


def create_grants(
    config: StackConfig, grants: Iterable[Grant], timeout: float = 30.0, bootstrap: str = ""
) -> None:
    """Create the ACLs (creating an existing one again is a no-op)."""
    bindings = [_binding(g) for g in grants]
    if bindings:
        admin = _admin(config, bootstrap)  # held: a client destroyed early fails its futures
        _wait(admin.create_acls(bindings, request_timeout=timeout), "ACL", timeout)


def acls_of(admin: AdminClient, principal: str, timeout: float) -> list[AclBinding]:
    """Every ACL of ``principal`` (``User:name``), whatever its resource, operation or host."""
    anything: Any = None  # a filter's None matches any name or host (the stubs say str)
    every = AclBindingFilter(
        ResourceType.ANY, anything, ResourcePatternType.ANY, principal, anything,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    return list(admin.describe_acls(every, request_timeout=timeout).result(timeout=timeout))


def prune_grants(
    config: StackConfig,
    keep: Iterable[Grant],
    principals: Iterable[str],
    timeout: float = 30.0,
    bootstrap: str = "",
) -> list[AclBinding]:
    """Delete the ACLs of ``principals`` (``User:name``) that ``keep`` does not hold (an
    earlier version's broader grants: a cluster formatted before them keeps its ACLs); returns
    what was deleted."""
    wanted = {_binding(g) for g in keep}
    admin = _admin(config, bootstrap)
    stale: list[AclBinding] = []
    for principal in principals:
        try:
            found = acls_of(admin, principal, timeout)
        except KafkaException as exc:
            raise StackError(f"ACLs of {principal}: {exc.args[0]}") from exc
        stale += [b for b in found if b not in wanted]
    if stale:
        exact = [
            AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                             b.operation, b.permission_type)
            for b in stale
        ]  # fmt: skip
        _wait(admin.delete_acls(exact, request_timeout=timeout), "ACL", timeout)
    return stale


def prepare(config: StackConfig, bootstrap: str = "") -> dict[str, str]:
    """Once the cluster runs (`up`, compose's topic-init: `iot-stack topics`; every time, it is
    idempotent): the services' ACLs, and no others for their principals (the new ones first,
    then what an earlier version granted beyond them); returns the launcher's own client
    settings ({} with plaintext). ``bootstrap``: Kafka's address when it is not the config's
    own."""
    if enabled(config):
        grants = [g for s in SERVICES for g in service_grants(s)]
        create_grants(config, grants, bootstrap=bootstrap)
        prune_grants(config, grants, [f"User:{s}" for s in SERVICES], bootstrap=bootstrap)
    return client_config(config)


def add_tenant_consumer(config: StackConfig, tenant: str, timeout: float = 30.0) -> Path:
    """Tenant ``tenant``'s consumer principal: its SCRAM credential (secret generated into its
    file) and its ACLs; returns the secret file. Again for a tenant that has one: the same."""
    if not enabled(config):
        raise StackError("tenant consumers need kafka_security sasl_ssl")
    principal = tenant_principal(tenant)
    secret = ensure_secret(config, principal)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upsert = UserScramCredentialUpsertion(principal, info, secret.encode())
    admin = _admin(config)
    _wait(admin.alter_user_scram_credentials([upsert], request_timeout=timeout), "SCRAM", timeout)
    create_grants(config, tenant_grants(tenant), timeout)
    return secret_path(config, principal)
