"""Kafka between hosts: SASL_SSL with SCRAM-SHA-512, principals and ACLs (pure; issue 33).

``kafka_security = "plaintext"`` (the default) keeps one machine's loopback PLAINTEXT listener.
``"sasl_ssl"`` renders every listener of every node as SASL_SSL with a certificate from the
appliance CA:

- clients and brokers (inter-broker): SCRAM-SHA-512, one principal per service (``bridge``,
  ``commands``, ``api``, ``analytics``, ``registry``, ``amqp``), the launcher's ``kafka-admin``
  and the brokers' ``kafka-broker``; their credentials are written into the storage at format
  time (``kafka-storage format --add-scram``, KIP-900) so the first start needs no plaintext
  door; tenant consumers are added later through the admin API (``iot-stack kafka-tenant``);
- controllers: PLAIN over TLS as ``kafka-broker`` (SCRAM credentials live in the metadata the
  controllers serve, so the quorum cannot depend on them; KAFKA-15513);
- ``StandardAuthorizer``, nothing allowed without an ACL: ``kafka-broker`` and ``kafka-admin``
  are super users, the services get what they use, a tenant consumer reads only the topics of
  its tenant (``iot.<tenant>.*``, bridge.topics.tenant_kafka_topic) with groups of the same
  prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stack.errors import StackError

MODES = ("plaintext", "sasl_ssl")
MECHANISM = "SCRAM-SHA-512"
BROKER = "kafka-broker"
ADMIN = "kafka-admin"
SERVICES = ("bridge", "commands", "api", "analytics", "registry", "amqp")
# principals whose SCRAM credentials the storage is formatted with
FORMAT_PRINCIPALS = (BROKER, ADMIN, *SERVICES)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise StackError(f"kafka_security must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def tenant_principal(tenant: str) -> str:
    """The SCRAM user name of tenant ``tenant``'s consumer."""
    return f"tenant-{tenant}"


def tenant_prefix(tenant: str) -> str:
    """What every Kafka topic of ``tenant`` starts with (``iot.telemetry`` -> ``iot.t.telemetry``;
    bridge.topics.tenant_kafka_topic) and its consumer groups too."""
    return f"iot.{tenant}."


def _quote(text: str) -> str:
    if '"' in text or "\\" in text or "\n" in text:
        raise StackError("a Kafka secret may not hold quotes, backslashes or new lines")
    return f'"{text}"'


@dataclass(frozen=True)
class TlsFiles:
    """The node's PEM key store (PKCS#8 key + certificate chain) and the CA it trusts."""

    keystore: str
    truststore: str


def listener_lines(
    mode: str,
    *,
    client: str,
    controller: str,
    advertised: str,
    tls: TlsFiles | None = None,
    broker_secret: str = "",
) -> str:
    """server.properties' listener block: ``client``/``controller``/``advertised`` as
    ``host:port``; with ``sasl_ssl`` also TLS, SASL, JAAS and the authorizer."""
    if check_mode(mode) == "plaintext":
        return "\n".join(
            [
                f"listeners=PLAINTEXT://{client},CONTROLLER://{controller}",
                f"advertised.listeners=PLAINTEXT://{advertised}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
            ]
        )
    if tls is None or not broker_secret:
        raise StackError("sasl_ssl needs the node's TLS files and the broker's secret")
    secret = _quote(broker_secret)
    return "\n".join(
        [
            f"listeners=SASL_SSL://{client},CONTROLLER://{controller}",
            f"advertised.listeners=SASL_SSL://{advertised}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name=SASL_SSL",
            f"sasl.enabled.mechanisms={MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={_PLAIN_LOGIN} required "
            f"username={_quote(BROKER)} password={secret} user_{BROKER}={secret};",
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config={_SCRAM_LOGIN} "
            f"required username={_quote(BROKER)} password={secret};",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={tls.keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={tls.truststore}",
            "ssl.client.auth=none",
            "ssl.endpoint.identification.algorithm=https",
            f"authorizer.class.name={AUTHORIZER}",
            f"super.users=User:{BROKER};User:{ADMIN}",
            "allow.everyone.if.no.acl.found=false",
        ]
    )


def scram_format_args(secrets: Mapping[str, str]) -> list[str]:
    """``kafka-storage format`` arguments adding each principal's SCRAM-SHA-512 credential.
    They hold the secrets: pass them in a 0600 argument file, never on the command line."""
    args: list[str] = []
    for name, secret in sorted(secrets.items()):
        if not secret.replace("-", "").replace("_", "").isalnum():
            raise StackError(f"the Kafka secret of {name} is not URL-safe base64")
        args += ["--add-scram", f"{MECHANISM}=[name={name},password={secret}]"]
    return args


def client_settings(username: str, password: str, ca_file: str) -> dict[str, str]:
    """librdkafka settings of a client of a ``sasl_ssl`` cluster."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": ca_file,
    }


def java_client_properties(settings: Mapping[str, str]) -> str:
    """Kafka's Java tools' ``--command-config`` for a client of :func:`client_settings` (""
    for a plaintext one): the same login, the CA as a PEM trust store."""
    if not settings:
        return ""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username={_quote(settings['sasl.username'])} "
        f"password={_quote(settings['sasl.password'])};"
    )
    lines = {
        "security.protocol": settings["security.protocol"],
        "sasl.mechanism": settings["sasl.mechanism"],
        "sasl.jaas.config": jaas,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": settings["ssl.ca.location"],
    }
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def client_env(username: str, password_file: str, ca_file: str) -> dict[str, str]:
    """The ``IOT_KAFKA_*`` settings a service reads them from (appconfig.kafka_security)."""
    return {
        "IOT_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "IOT_KAFKA_SASL_MECHANISM": MECHANISM,
        "IOT_KAFKA_SASL_USERNAME": username,
        "IOT_KAFKA_SASL_PASSWORD_FILE": password_file,
        "IOT_KAFKA_SSL_CA_FILE": ca_file,
    }


@dataclass(frozen=True)
class Grant:
    """One ACL: principal, resource type (topic, group, cluster, transactional_id), name,
    pattern (literal or prefixed), operation, ``allow`` or ``deny`` (a DENY wins over every
    ALLOW), and why the service needs it (docs/security.md's table)."""

    principal: str
    resource: str
    name: str
    pattern: str
    operation: str
    permission: str = "allow"
    reason: str = ""


# The design's topics (stack.topics.DESIGN_TOPICS and the services' defaults; a test keeps
# them equal). Tenant t's copies are iot.t.<name> (bridge.topics.tenant_kafka_topic), so the
# services that route every tenant's records need the prefix "iot.", which also matches the
# topics below: the services that must not touch them get them DENIED by name.
TELEMETRY_TOPICS = ("iot.telemetry", "iot.events", "iot.dlq", "iot.presence")
COMMANDS, STATUS, REPLIES, COMMANDS_DLQ = (
    "iot.commands", "iot.command-status", "iot.command-replies", "iot.commands.dlq",
)  # fmt: skip
COMMAND_TOPICS = (COMMANDS, STATUS, REPLIES, COMMANDS_DLQ)
REGISTRY_TOPICS = ("iot.registry", "iot.registry.audit")
REGISTRY_TXN = "iot-registry"  # the registry writers' transactional.id (fencing)
API_TOPICS = ("iot.api.queue-markers", "iot.api.queue-settings", "iot.console.audit")
# literal names, never prefixes: tenant "registry"'s topics are iot.registry.telemetry, ...
INTERNAL_TOPICS = (*COMMAND_TOPICS, *REGISTRY_TOPICS, *API_TOPICS)
CLUSTER = "kafka-cluster"


def _grants(service: str, rows: list[tuple[str, str, str, tuple[str, ...], str]]) -> list[Grant]:
    """(resource, name, pattern, operations, reason) rows -> one ALLOW per operation."""
    user = f"User:{service}"
    return [Grant(user, r, n, p, op, "allow", why) for r, n, p, ops, why in rows for op in ops]


def _deny(service: str, topics: tuple[str, ...], ops: tuple[str, ...], why: str) -> list[Grant]:
    user = f"User:{service}"
    return [Grant(user, "topic", t, "literal", op, "deny", why) for t in topics for op in ops]


_IDEMPOTENT = ("cluster", CLUSTER, "literal", ("idempotent_write",),
               "its producer sets enable.idempotence (no duplicates on retries)")  # fmt: skip
_REGISTRY_GROUPS = ("group", "iot-registry-", "prefixed", ("read",),
                    "registry.kafka_store's readers (iot-registry-load-*, -follow-*, -end-*, "
                    "-writer-*; assign only, never commit)")  # fmt: skip


def _bridge() -> list[Grant]:
    return _grants("bridge", [
        ("topic", "iot.", "prefixed", ("write", "create"),
         "writes telemetry, events, DLQ and presence: iot.telemetry, iot.events, iot.dlq, "
         "iot.presence and each tenant's copies iot.<t>.*; creates a new tenant's copies "
         "(bridge.tenant_watch)"),
        ("topic", "iot.registry", "literal", ("read",),
         "reads tenants and their msgs/s quotas (bridge.tenant_watch)"),
        _REGISTRY_GROUPS,
        _IDEMPOTENT,
    ]) + _deny("bridge", INTERNAL_TOPICS, ("write", "create"),
               "the prefix iot. also names the command path's, the registry's and iot-api's "
               "topics: a bridge writes none of them")  # fmt: skip


def _commands() -> list[Grant]:
    return _grants("commands", [
        ("topic", COMMANDS, "literal", ("read",), "consumes the commands"),
        ("topic", COMMANDS, "literal", ("write",),
         "`iot-cmd send` in the command path's container (docs/commands.md) logs in as it; "
         "its MQTT account already delivers to every device, so this gives it no more"),
        ("topic", STATUS, "literal", ("read", "write"),
         "writes each command's state; reads it back at start to adopt pending commands "
         "(commands.status_snapshot)"),
        ("topic", REPLIES, "literal", ("write", "read"),
         "writes the devices' replies; `iot-cmd send --wait` reads them back"),
        ("topic", COMMANDS_DLQ, "literal", ("write",),
         "writes commands that expired or ran out of attempts"),
        ("group", "iot-bridge-commands", "prefixed", ("read",),
         "its consumer group (command_group_id, iot-bridge-commands; per MQTT shard "
         "iot-bridge-commands-shard-N)"),
        ("group", "iot-cmd-", "prefixed", ("read",),
         "the status snapshot's reader (iot-cmd-snapshot-*) and `iot-cmd`'s tails (iot-cmd-*)"),
        _IDEMPOTENT,
    ])  # fmt: skip


def _analytics() -> list[Grant]:
    return _grants("analytics", [
        ("topic", "iot.", "prefixed", ("read",),
         "reads iot.telemetry, iot.presence and every tenant's copy (iot.<t>.telemetry, by "
         "pattern: spark_jobs.tenants), and their end offsets (spark_jobs.kafka_offsets)"),
        ("group", "spark-kafka-source-", "prefixed", ("read",),
         "Spark's Kafka source names its groups so"),
        ("group", "iot-analytics-", "prefixed", ("read",),
         "the health probe's end-offset reader (iot-analytics-health-*)"),
    ]) + _deny("analytics", INTERNAL_TOPICS, ("read",),
               "the prefix iot. also names commands, replies, the registry's secrets' hashes "
               "and iot-api's queues: analytics reads none of them")  # fmt: skip


def _registry() -> list[Grant]:
    return _grants("registry", [
        ("topic", "iot.registry", "literal", ("read", "write", "create"),
         "the registry's compacted store (registry.kafka_store)"),
        ("topic", "iot.registry.audit", "literal", ("read", "write", "create"),
         "its audit records, written in the same transaction"),
        ("transactional_id", REGISTRY_TXN, "literal", ("write", "describe"),
         "one writer at a time: init_transactions fences an older writer"),
        _REGISTRY_GROUPS,
        _IDEMPOTENT,
    ])  # fmt: skip


def _door(service: str, *, registry_writer: bool) -> list[Grant]:
    """iot-api and iot-amqp serve MR topics of any name users choose (and queues, tenants'
    topics, commands), so they keep broad topic and group rights; no ALTER, no DELETE of the
    appliance's own topics (iot.*), nothing on the cluster but idempotent writes."""
    rows = [
        (
            "topic",
            "*",
            "literal",
            ("read", "write", "create"),
            "MR topics of any name (publish, consume, auto-create), queues and their markers, "
            "tenants' telemetry and events, commands, replies and statuses",
        ),
        (
            "group",
            "*",
            "literal",
            ("read",),
            "MR consumer groups <group>--<topic> and AMQP link groups of any name, the queues' "
            "groups (iot-api.queue--*)"
            + ("; lists groups and lags (console)" if registry_writer else ""),
        ),
        _IDEMPOTENT,
    ]
    if registry_writer:
        rows += [
            (
                "topic",
                "*",
                "literal",
                ("delete",),
                "MR's DELETE /topics/{name} (never the appliance's iot.* topics: denied below)",
            ),
            ("group", "*", "literal", ("describe",), "the console's consumer-group view"),
            (
                "transactional_id",
                REGISTRY_TXN,
                "literal",
                ("write", "describe"),
                "writes the registry (/apiKeys, MR ACLs, /ops devices and tenants) as its one "
                "fenced writer",
            ),
        ]
    grants = _grants(service, rows)
    user = f"User:{service}"
    if registry_writer:
        grants.append(
            Grant(
                user,
                "topic",
                "iot.",
                "prefixed",
                "delete",
                "deny",
                "the appliance's own topics are never deleted through a door",
            )
        )
    else:
        grants += _deny(
            service,
            REGISTRY_TOPICS,
            ("write",),
            "iot-amqp reads the registry (logins), iot-api is its writer",
        )
    return grants  # fmt: skip


def service_grants(service: str) -> list[Grant]:
    """What service principal ``service`` may do: what its code reads, writes, creates and
    which consumer groups it uses (docs/security.md, "Kafka between hosts", the table)."""
    table = {
        "bridge": _bridge,
        "commands": _commands,
        "analytics": _analytics,
        "registry": _registry,
        "api": lambda: _door("api", registry_writer=True),
        "amqp": lambda: _door("amqp", registry_writer=False),
    }
    if service not in table:
        raise StackError(f"no Kafka grants for service {service!r}")
    return table[service]()


def tenant_grants(tenant: str) -> list[Grant]:
    """A tenant consumer: read and describe its tenant's topics, its own groups; nothing else."""
    user, prefix = f"User:{tenant_principal(tenant)}", tenant_prefix(tenant)
    return [
        Grant(user, "topic", prefix, "prefixed", "read"),
        Grant(user, "topic", prefix, "prefixed", "describe"),
        Grant(user, "group", prefix, "prefixed", "read"),
        Grant(user, "group", prefix, "prefixed", "describe"),
    ]
