"""``iot-devices``: tenants, devices, service accounts and Mosquitto's access rules.

Reads run on a snapshot of the registry topic; changes first make this process the single
registry writer (kafka_store), then write. A new secret is printed once and never again.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from registry import cli_certs, dynsec_config, hashing, ids
from registry.audit import AuditRecord
from registry.config import RegistryConfig, add_arguments
from registry.dynsec import DynsecClient, admin_client, parse_ports
from registry.errors import RegistryError
from registry.kafka_store import KafkaStore
from registry.model import Quotas, Role, public_view
from registry.permissions import local_admin
from registry.service import Issued, Registry
from registry.sync import sync_mosquitto
from registry.topics import ADMIN_USERNAME

log = logging.getLogger("iot-devices")

# Commands that change the registry (the process becomes the writer for them).
WRITES = {
    ("tenant", "create"), ("tenant", "disable"), ("tenant", "enable"), ("tenant", "delete"),
    ("tenant", "quotas"), ("device", "add"), ("device", "disable"), ("device", "enable"),
    ("device", "rotate"), ("device", "delete"), ("device", "groups"), ("account", "create"),
    ("device", "site"), ("account", "disable"), ("account", "enable"), ("account", "rotate"),
    ("account", "delete"), ("bootstrap-admin", None), ("init", None), ("cert", "issue"),
}  # fmt: skip


_TENANT_HELP = {
    "create": "Create a tenant.",
    "quotas": "Replace a tenant's quotas (an omitted quota means unlimited).",
    "show": "Show one tenant.",
    "disable": "Disable a tenant: its devices and accounts are dropped and refused.",
    "enable": "Enable a tenant again.",
    "delete": "Delete a tenant (refused while it has devices or accounts, unless --cascade).",
}
_DEVICE_HELP = {
    "show": "Show one device (never its secret).",
    "disable": "Disable a device: Mosquitto drops it at once and refuses it after.",
    "enable": "Enable a device again.",
    "rotate": "Issue a new secret (printed once); the old one stops working at once.",
    "delete": "Delete a device and its Mosquitto client.",
}
_ACCOUNT_HELP = {
    "show": "Show one account.",
    "disable": "Disable an account.",
    "enable": "Enable an account again.",
    "rotate": "Issue a new secret (printed once).",
    "delete": "Delete an account.",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iot-devices", description=__doc__)
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="Print JSON instead of text.")
    sub = parser.add_subparsers(dest="area", required=True)

    sub.add_parser("init", help="Create the registry topics and the default tenant.")
    boot = sub.add_parser("bootstrap-admin", help="Create the first administrator account.")
    boot.add_argument("name", help="Account name of the first administrator.")
    minit = sub.add_parser(
        "mosquitto-init", help="Write Mosquitto's first dynamic-security file (admin only)."
    )
    minit.add_argument("config_file", type=Path, help="plugin_opt_config_file of Mosquitto.")
    minit.add_argument("--password-file", type=Path, required=True, help="Where to keep the "
                       "generated admin password (mode 0600).")  # fmt: skip
    audit = sub.add_parser("audit", help="The audit trail: who changed what, when.")
    audit.add_argument("--entity", help="Only entities whose key starts so (device/t1/...).")
    audit.add_argument("--limit", type=int, default=50, help="The newest N records.")
    mosq = sub.add_parser("mosquitto", help="Mosquitto's access rules.")
    mosq.add_subparsers(dest="action", required=True).add_parser(
        "sync", help="Make Mosquitto's clients, roles and groups match the registry."
    )

    tenant = sub.add_parser("tenant", help="Tenants.").add_subparsers(dest="action", required=True)
    tenant.add_parser("list", help="List tenants.")
    for name, text in _TENANT_HELP.items():
        p = tenant.add_parser(name, help=text)
        p.add_argument("id", help="Tenant id.")
        if name in ("create", "quotas"):
            p.add_argument("--max-devices", type=int, help="Device quota (default: unlimited).")
            p.add_argument(
                "--max-msgs-per-s", type=float, help="Message rate quota (default: unlimited)."
            )
        if name == "delete":
            p.add_argument("--cascade", action="store_true", help="Delete its devices too.")

    device = sub.add_parser("device", help="Devices.").add_subparsers(dest="action", required=True)
    add = device.add_parser("add", help="Register a device; prints its secret once.")
    add.add_argument("--group", action="append", default=[], help="Group (repeatable).")
    add.add_argument(
        "--cert-fingerprint", help="SHA-256 fingerprint of its client certificate (one device)."
    )
    add.add_argument("--no-secret", action="store_true", help="Certificate only, no secret.")
    add.add_argument("--site", help="The edge site (edge account) the device is behind.")
    lst = device.add_parser("list", help="List or search devices.")
    lst.add_argument("--search", help="Part of the device id (any case).")
    lst.add_argument("--group", help="Only members of this group.")
    for name, text in _DEVICE_HELP.items():
        device.add_parser(name, help=text)
    grp = device.add_parser("groups", help="Change group membership.")
    grp.add_argument("--add", action="append", default=[], help="Join a group (repeatable).")
    grp.add_argument("--remove", action="append", default=[], help="Leave a group (repeatable).")
    site = device.add_parser("site", help="Put a device behind an edge site, or none.")
    site.add_argument("--site", help="The edge account; omit to connect the device centrally.")
    for name, p in device.choices.items():
        if name == "list":
            p.add_argument("--tenant", help="Only this tenant's devices.")
            continue
        p.add_argument("--tenant", default=ids.DEFAULT_TENANT, help="The device's tenant.")
        if name == "add":  # several at once: one transaction, one Mosquitto batch
            p.add_argument("id", nargs="+", help="Device id(s).")
        else:
            p.add_argument("id", help="Device id.")

    account = sub.add_parser("account", help="Service accounts.")
    acts = account.add_subparsers(dest="action", required=True)
    create = acts.add_parser("create", help="Create an account; prints its secret once.")
    create.add_argument("name", help="Account name.")
    create.add_argument(
        "--role", action="append", required=True, choices=[str(r) for r in Role],
        help="Role (repeatable).",
    )  # fmt: skip
    create.add_argument("--tenant", help="Its tenant; omit for a system-wide account.")
    acts.add_parser("list", help="List accounts.")
    for name, text in _ACCOUNT_HELP.items():
        acts.add_parser(name, help=text).add_argument("name", help="Account name.")
    cli_certs.add_parsers(sub)
    return parser


def _quotas(args: argparse.Namespace) -> Quotas:
    return Quotas(args.max_devices, args.max_msgs_per_s)


def _tenant(reg: Registry, args: argparse.Namespace) -> Any:
    act = args.action
    actions: dict[str, Callable[[], Any]] = {
        "create": lambda: reg.create_tenant(args.id, _quotas(args)),
        "list": reg.tenants,
        "show": lambda: reg.tenant(args.id),
        "disable": lambda: reg.set_tenant_disabled(args.id, True),
        "enable": lambda: reg.set_tenant_disabled(args.id, False),
        "delete": lambda: reg.delete_tenant(args.id, args.cascade),
        "quotas": lambda: reg.set_quotas(args.id, _quotas(args)),
    }
    return actions[act]()


def _device(reg: Registry, args: argparse.Namespace) -> Any:
    t = args.tenant
    actions: dict[str, Callable[[], Any]] = {
        "add": lambda: (
            reg.add_device(
                t, args.id[0], args.group, args.cert_fingerprint, not args.no_secret, site=args.site
            )
            if len(args.id) == 1
            else reg.add_devices(t, args.id, args.group, None, not args.no_secret, site=args.site)
        ),
        "list": lambda: reg.devices(t, args.search, args.group),
        "show": lambda: reg.device(t, args.id),
        "disable": lambda: reg.set_device_disabled(t, args.id, True),
        "enable": lambda: reg.set_device_disabled(t, args.id, False),
        "rotate": lambda: reg.rotate_device(t, args.id),
        "delete": lambda: reg.delete_device(t, args.id),
        "groups": lambda: reg.set_device_groups(t, args.id, args.add, args.remove),
        "site": lambda: reg.set_device_site(t, args.id, args.site),
    }
    return actions[args.action]()


def _account(reg: Registry, args: argparse.Namespace) -> Any:
    actions: dict[str, Callable[[], Any]] = {
        "create": lambda: reg.create_account(args.name, [Role(r) for r in args.role], args.tenant),
        "list": reg.accounts,
        "show": lambda: reg.account(args.name),
        "disable": lambda: reg.set_account_disabled(args.name, True),
        "enable": lambda: reg.set_account_disabled(args.name, False),
        "rotate": lambda: reg.rotate_account(args.name),
        "delete": lambda: reg.delete_account(args.name),
    }
    return actions[args.action]()


def _init(reg: Registry, _args: argparse.Namespace) -> Any:
    if ids.DEFAULT_TENANT in reg.state.tenants:
        return reg.state.tenants[ids.DEFAULT_TENANT]
    return reg.create_tenant(ids.DEFAULT_TENANT)


def _audit(reg: Registry, args: argparse.Namespace) -> list[dict[str, Any]]:
    records = [AuditRecord.decode(v) for _, v in reg.store.read_all(reg.store.audit_topic) if v]
    if args.entity:
        records = [r for r in records if r.entity.startswith(args.entity)]
    return [asdict(r) for r in records[-args.limit :]]


def _mosquitto_init(args: argparse.Namespace) -> int:
    if args.config_file.exists():
        print(f"{args.config_file} exists: not overwritten", file=sys.stderr)
        return 1
    password = hashing.generate_secret()
    args.password_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(args.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    args.config_file.parent.mkdir(parents=True, exist_ok=True)
    args.config_file.write_text(dynsec_config.render(password))
    print(f"wrote {args.config_file}; admin {ADMIN_USERNAME}, password in {args.password_file}")
    return 0


def _view(item: Any) -> dict[str, Any]:
    if isinstance(item, Issued):
        view = public_view(item.entity)
        return view if item.secret is None else {**view, "secret": item.secret}
    return item if isinstance(item, dict) else public_view(item)


def _render(result: Any, as_json: bool) -> None:
    if result is None:
        print("ok")
        return
    rows = result if isinstance(result, list) else [result]
    views = [_view(r) for r in rows]
    if as_json:
        print(json.dumps(views if isinstance(result, list) else views[0], indent=2, sort_keys=True))
        return
    for view in views:
        secret = view.pop("secret", None)
        print(" ".join(f"{k}={_short(v)}" for k, v in view.items()))
        if secret is not None:
            print(f"secret: {secret}")
    if any(isinstance(r, Issued) and r.secret for r in rows):
        print("(secrets shown once: the registry keeps only their hashes)", file=sys.stderr)


def _short(value: Any) -> str:
    return (
        json.dumps(value, separators=(",", ":")) if isinstance(value, dict | list) else str(value)
    )


def _mosquitto(cfg: RegistryConfig) -> DynsecClient | None:
    if cfg.admin_password_file is None:
        log.warning("no admin password file: changes go to the registry only, not to Mosquitto")
        return None
    password = cfg.admin_password_file.read_text().strip()
    shards = parse_ports(cfg.mqtt_shard_ports)
    return admin_client(cfg.mqtt_host, cfg.mqtt_port, ADMIN_USERNAME, password, shards).start()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    args = _parser().parse_args(cli_certs.normalise_argv(sys.argv[1:] if argv is None else argv))
    if args.area == "mosquitto-init":
        return _mosquitto_init(args)
    try:
        cfg = RegistryConfig.from_args(args)
    except RegistryError as exc:
        print(f"iot-devices: {exc}", file=sys.stderr)
        return 2
    if args.area in ("ca", "cert") and not cli_certs.needs_kafka(args):
        try:
            return cli_certs.run_offline(args, cfg)
        except (RegistryError, OSError, ValueError) as exc:
            print(f"iot-devices: {exc}", file=sys.stderr)
            return 1
    if args.area == "cert":  # before Kafka: a wrong --ca-dir must write nothing anywhere
        try:
            cli_certs.require_ca(cfg)
        except RegistryError as exc:
            print(f"iot-devices: {exc}", file=sys.stderr)
            return 1
    store = KafkaStore(cfg.kafka_bootstrap, cfg.topic, cfg.audit_topic, security=cfg.kafka_security)
    action = getattr(args, "action", None)
    writes = (args.area, action) in WRITES or args.area == "mosquitto"
    mosquitto: DynsecClient | None = None
    try:
        if args.area == "init":
            store.ensure_topics()
        if writes and args.area != "init":
            mosquitto = _mosquitto(cfg)
        reg = Registry.open(store, local_admin(getpass.getuser()), mosquitto, write=writes)
        handlers: dict[str, Callable[[Registry, argparse.Namespace], Any]] = {
            "init": _init,
            "bootstrap-admin": lambda r, a: r.bootstrap_admin(a.name),
            "tenant": _tenant,
            "device": _device,
            "account": _account,
            "mosquitto": lambda r, _a: sync_mosquitto(r),
            "audit": _audit,
            "cert": lambda r, a: cli_certs.issue(r, a, cfg),
        }
        _render(handlers[args.area](reg, args), args.json)
    except (RegistryError, OSError) as exc:
        print(f"iot-devices: {exc}", file=sys.stderr)
        return 1
    finally:
        if mosquitto is not None:
            mosquitto.close()
        store.close()
    return 0
