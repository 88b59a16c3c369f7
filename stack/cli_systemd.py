"""`iot-stack systemd`: the host's facts (user, group, interpreter, PATH) and the unit written.

The unit's text is `stack.systemd_unit` (pure); this module looks the user and group up, and
prints the unit or writes it where it is asked to.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import shutil
import sys

from stack.config import StackConfig
from stack.errors import StackError
from stack.paths import project_root
from stack.systemd_unit import UNIT_NAME, UnitHost, render_unit


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_unit(args: argparse.Namespace, config: StackConfig) -> int:
    """Print the unit, or write it to --unit-dir and say what to run next."""
    name = args.unit_name
    if not name or "/" in name or name.endswith(".service"):
        raise StackError(f"--unit-name {name!r}: a bare name like {UNIT_NAME}")
    user = args.unit_user or pwd.getpwuid(os.getuid()).pw_name
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise StackError(f"--user {user!r}: no such user on this host") from None
    if args.unit_group:
        try:
            group = grp.getgrnam(args.unit_group).gr_name
        except KeyError:
            raise StackError(f"--group {args.unit_group!r}: no such group") from None
    else:
        group = grp.getgrgid(entry.pw_gid).gr_name
    java = shutil.which("java")
    host = UnitHost(
        python=sys.executable,
        user=user,
        group=group,
        path=os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        project_root=project_root(),
        java_home=os.environ.get("JAVA_HOME", ""),
    )
    text = render_unit(config, host, name=name, start_timeout_s=config.start_timeout)
    if java is None:
        say("iot-stack: warning: no java on this PATH: the unit's Kafka will not start")
    if args.unit_dir is None:
        sys.stdout.write(text)
        return 0
    path = args.unit_dir / f"{name}.service"
    try:
        args.unit_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise StackError(f"cannot write {path}: {exc}") from exc
    say(f"wrote {path} (runs as {user}:{group}, data in {config.data_dir})")
    say(f"next: sudo systemctl daemon-reload && sudo systemctl enable --now {name}")
    return 0
