"""``iot-devices ca ...`` and ``iot-devices cert ...``: the appliance CA and device certificates.

``cert DEVICE`` (short for ``cert issue DEVICE``) issues a key and certificate from the existing
CA (subject CN = the device's MQTT user name, O = its tenant), records the certificate's
fingerprint in the registry (adding the device, certificate only, if it is new) and shows or
writes the key once. ``ca`` and ``cert list/revoke`` need no Kafka.

Only ``ca init`` creates a CA (``iot-stack up`` runs the same code for its own). Every other
``ca``/``cert`` command pointed at a folder without one stops before writing anything, says
so, and names a CA it finds where the stack keeps one (issue 37: a CA made silently in the
wrong folder issues certificates no listener trusts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from registry import ids
from registry.ca_store import CA_DAYS, DEFAULT_NAMES, DEVICE_DAYS, CaError, CaStore
from registry.config import RegistryConfig
from registry.service import Registry

CERT_ACTIONS = ("issue", "revoke", "list")
CHECKOUT_CA = Path(__file__).resolve().parents[1] / "var" / "ca"  # `make run`'s
HUP_NOTE = (
    "the TLS listener reads the CRL at start: run `iot-stack reload-crl` (HAProxy's front with "
    "--mqtt-shards, else a SIGHUP to Mosquitto) so new connections with a revoked certificate "
    "are refused"
)


def add_parsers(sub: Any) -> None:
    """The ``ca`` and ``cert`` areas under ``iot-devices``' sub-parsers."""
    ca = sub.add_parser("ca", help="The appliance CA for mutual TLS.")
    acts = ca.add_subparsers(dest="action", required=True)
    init = acts.add_parser(
        "init", help="Create the CA, the TLS listener's certificate and an empty CRL (once)."
    )
    names = acts.add_parser("server-cert", help="Re-issue the TLS listener's certificate.")
    for p in (init, names):
        p.add_argument("--server-name", action="append", default=[], help="Host name or IP "
                       "of the listener (repeatable; localhost and 127.0.0.1 always).")  # fmt: skip
        p.add_argument("--key-owner", help="chown the server key to the user Mosquitto runs "
                       "as (e.g. mosquitto, when it is started as root).")  # fmt: skip
    init.add_argument("--ca-cert", type=Path, help="The operator's own CA certificate (PEM).")
    init.add_argument("--ca-key", type=Path, help="The operator's own CA key (PEM, EC).")
    init.add_argument("--days", type=float, default=CA_DAYS, help="Validity of a new CA.")
    acts.add_parser("show", help="The CA, its files and the issued certificates' count.")
    acts.add_parser("crl", help="Re-issue the CRL (it expires after a year).")
    conf = acts.add_parser("mosquitto-conf", help="Print the TLS listener's mosquitto.conf lines.")
    conf.add_argument("--port", type=int, default=8883, help="Listener port.")
    conf.add_argument("--bind", help="Address to bind (default: all).")

    cert = sub.add_parser(
        "cert",
        help="Device certificates; `cert DEVICE` issues one.",
        description="`iot-devices cert DEVICE [--tenant T] [--days N] [--out DIR]` is short for "
        "`cert issue DEVICE ...`: a key and certificate (CN = the device's MQTT user name).",
    )
    acts = cert.add_subparsers(dest="action", required=True)
    issue = acts.add_parser("issue", help="Issue a key and certificate (key shown once).")
    issue.add_argument("--days", type=float, default=DEVICE_DAYS, help="Validity in days.")
    issue.add_argument("--out", type=Path, help="Write KEY (0600), CRT and ca.crt here.")
    revoke = acts.add_parser("revoke", help="Revoke a device's certificates; rewrites the CRL.")
    revoke.add_argument("--serial", action="append", default=[], help="Only this serial "
                        "(hex, from `cert list`; repeatable).")  # fmt: skip
    lst = acts.add_parser("list", help="Issued certificates.")
    for p in (issue, revoke, lst):
        p.add_argument("--tenant", default=ids.DEFAULT_TENANT, help="The device's tenant.")
        p.add_argument("id", nargs="?" if p is lst else None, help="Device id.")


def normalise_argv(argv: Sequence[str]) -> list[str]:
    """``cert DEVICE ...`` means ``cert issue DEVICE ...``."""
    args = list(argv)
    if "cert" in args:
        at = args.index("cert") + 1
        if at < len(args) and args[at] not in (*CERT_ACTIONS, "-h", "--help"):
            args.insert(at, "issue")
    return args


def needs_kafka(args: argparse.Namespace) -> bool:
    return args.area == "cert" and args.action == "issue"


def _print(data: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    elif isinstance(data, list):
        for row in data:
            print(" ".join(f"{k}={v}" for k, v in row.items()))
    else:
        print(" ".join(f"{k}={v}" for k, v in data.items()))


def stack_ca_dirs(cfg: RegistryConfig) -> list[Path]:
    """Folders holding a CA where a stack keeps one, other than ``cfg.ca_dir``: the services'
    ``IOT_TLS_CA_DIR``, ``ca/`` beside the admin secret's folder (``iot-stack``'s data dir
    holds ``secrets/`` and ``ca/``), and the checkout's ``var/ca``."""
    candidates = [Path(p) for p in (os.environ.get("IOT_TLS_CA_DIR"),) if p]
    if cfg.admin_password_file is not None:
        candidates.append(cfg.admin_password_file.resolve().parent.parent / "ca")
    candidates.append(CHECKOUT_CA)
    mine = cfg.ca_dir.resolve()
    found: list[Path] = []
    for candidate in candidates:
        path = candidate.resolve()
        if path != mine and path not in found and CaStore(path).exists():
            found.append(path)
    return found


def missing_ca(cfg: RegistryConfig) -> str:
    """What to say when ``cfg.ca_dir`` holds no CA."""
    where = cfg.ca_dir.resolve()
    found = stack_ca_dirs(cfg)
    if found:
        hint = (
            f"a CA exists in {found[0]}: pass --ca-dir {found[0]} "
            "(env IOT_REGISTRY_CA_DIR) to use the stack's"
        )
    else:
        hint = (
            "no CA found where a stack keeps one either (IOT_TLS_CA_DIR, <data dir>/ca beside "
            "the admin secret's folder, the checkout's var/ca): pass the stack's --ca-dir"
        )
    return (
        f"no CA in {where} (no ca.key and ca.crt), nothing written; {hint}, or create a new "
        f"CA there with `iot-devices --ca-dir {where} ca init` (Mosquitto trusts only the CA "
        "its TLS listener was started with)"
    )


def require_ca(cfg: RegistryConfig) -> None:
    """Refuse, before anything is written or Kafka is asked, a CA folder without a CA."""
    if not CaStore(cfg.ca_dir).exists():
        raise CaError(missing_ca(cfg))


def run_offline(args: argparse.Namespace, cfg: RegistryConfig) -> int:
    """``ca ...``, ``cert list`` and ``cert revoke``: the CA directory only."""
    store = CaStore(cfg.ca_dir)
    if not (args.area == "ca" and args.action == "init"):
        require_ca(cfg)
    if args.area == "ca" and args.action == "init":
        own = None
        if args.ca_cert or args.ca_key:
            if not (args.ca_cert and args.ca_key):
                print("iot-devices: --ca-cert and --ca-key go together", file=sys.stderr)
                return 2
            own = (args.ca_cert, args.ca_key)
        made = store.init([*DEFAULT_NAMES, *args.server_name], own, args.days, args.key_owner)
        print(f"{'created' if made else 'kept the existing'} CA in {cfg.ca_dir}")
        others = stack_ca_dirs(cfg)
        if made and others:
            print(f"note: another CA exists in {others[0]}; a listener started with that one "
                  "does not trust certificates of this one", file=sys.stderr)  # fmt: skip
        return 0
    if args.area == "ca":
        return _ca(store, args)
    records = [r for r in store.issued() if r.tenant == args.tenant and args.id in (None, r.device)]
    if args.action == "list":
        _print([asdict(r) for r in records], args.json)
        return 0
    serials = args.serial or [r.serial for r in records if r.revoked_at is None]
    mine = {r.serial for r in records}
    foreign = [s for s in serials if s.lower() not in mine]
    if foreign:
        print(f"iot-devices: not {args.id}'s certificate(s): {', '.join(foreign)}", file=sys.stderr)
        return 1
    done = store.revoke(serials)
    _print([asdict(r) for r in done], args.json)
    print(f"revoked {len(done)}; {HUP_NOTE}", file=sys.stderr)
    return 0


def _ca(store: CaStore, args: argparse.Namespace) -> int:
    if args.action == "mosquitto-conf":
        store.authority()  # refuse lines that point at files not made yet
        print(store.listener_conf(args.port, args.bind), end="")
    elif args.action == "crl":
        store.write_crl()
        print(f"wrote {store.crl}; {HUP_NOTE}")
    elif args.action == "server-cert":
        store.issue_server([*DEFAULT_NAMES, *args.server_name], key_owner=args.key_owner)
        print(f"wrote {store.server_cert}; Mosquitto reads it at start and on SIGHUP")
    else:  # show
        cert = store.authority().cert
        issued = store.issued()
        _print(
            {
                "subject": cert.subject.rfc4514_string(),
                "not_after": cert.not_valid_after_utc.isoformat(),
                "dir": str(store.dir),
                "issued": len(issued),
                "revoked": sum(r.revoked_at is not None for r in issued),
            },
            args.json,
        )
    return 0


def issue(reg: Registry, args: argparse.Namespace, cfg: RegistryConfig) -> dict[str, Any]:
    """Issue the device's certificate and record its fingerprint in the registry."""
    require_ca(cfg)  # never a CA made on the fly (main checks before Kafka too)
    store = CaStore(cfg.ca_dir)
    reg.tenant(args.tenant)  # refuse an unknown tenant before issuing anything
    made = store.issue(args.tenant, args.id, args.days)
    reg.record_certificate(args.tenant, args.id, made.record.fingerprint)
    view: dict[str, Any] = {k: v for k, v in asdict(made.record).items() if k != "revoked_at"}
    if args.out is None:
        view["key_pem"], view["cert_pem"] = made.key_pem.decode(), made.cert_pem.decode()
        if not args.json:
            sys.stdout.write(view.pop("key_pem") + view.pop("cert_pem"))
        print("(the private key is shown once: the appliance does not keep it)", file=sys.stderr)
        return view
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.id if args.tenant == ids.DEFAULT_TENANT else f"{args.tenant}_{args.id}"
    key, crt, ca = args.out / f"{stem}.key", args.out / f"{stem}.crt", args.out / "ca.crt"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(made.key_pem)
    crt.write_bytes(made.cert_pem)
    ca.write_bytes(store.ca_cert.read_bytes())
    view.update(key_file=str(key), cert_file=str(crt), ca_file=str(ca))
    return view
