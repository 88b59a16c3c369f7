"""A service's settings as one frozen dataclass: env names, flags and parsing derived from it.

Each setting is a dataclass field declared with :func:`setting` (default and help text). Its
environment variable is ``IOT_`` + the field name in upper case (``mqtt_host`` ->
``IOT_MQTT_HOST``) and its flag ``--`` + the name with dashes (``--mqtt-host``). Precedence:
defaults < environment < flags < explicit overrides. The field's type is its default's type
(bool, int, float or str), so a setting never needs a second declaration. Errors are raised as
the calling package's own config error, which each function is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

ENV_PREFIX = "IOT_"
# what the services' configs check their settings against
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
KAFKA_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

T = TypeVar("T")


def setting(default: Any, help_text: str, *, secret: bool = False) -> Any:
    """A config field: its default, its help text; env name and flag derive from its name."""
    return dataclasses.field(default=default, metadata={"help": help_text, "secret": secret})


def env_name(field_name: str) -> str:
    """The environment variable of a setting."""
    return ENV_PREFIX + field_name.upper()


def flag_name(field_name: str) -> str:
    """The command-line flag of a setting."""
    return "--" + field_name.replace("_", "-")


def parse_bool(text: str, error: type[Exception]) -> bool:
    """An environment boolean (1/0, true/false, yes/no, on/off; empty is false)."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise error(f"not a boolean: {text!r}")


def convert(f: dataclasses.Field[Any], text: str, source: str, error: type[Exception]) -> Any:
    """An environment string as the type of the field's default."""
    kind: type = type(f.default)
    try:
        if kind is bool:
            return parse_bool(text, error)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except (ValueError, error) as exc:
        raise error(f"{source}: cannot read {text!r} as {kind.__name__}") from exc
    return text


def add_arguments(parser: argparse.ArgumentParser, cls: type, title: str) -> None:
    """One flag per setting of ``cls`` (default None = not given, so the environment shows)."""
    group = parser.add_argument_group(f"{title} (each also settable as {ENV_PREFIX}<NAME>)")
    for f in dataclasses.fields(cls):
        kind: type = type(f.default)
        help_text = f"{f.metadata['help']} [env {env_name(f.name)}, default {f.default!r}]"
        help_text = help_text.replace("%", "%%")
        if kind is bool:
            group.add_argument(
                flag_name(f.name),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            group.add_argument(
                flag_name(f.name),
                dest=f.name,
                type=kind,
                default=None,
                metavar=kind.__name__.upper(),
                help=help_text,
            )


def from_namespace(
    cls: type[T],
    ns: argparse.Namespace,
    environ: Mapping[str, str] | None,
    overrides: Mapping[str, Any],
    error: type[Exception],
) -> T:
    """``cls`` built from defaults < environment < parsed flags < overrides."""
    env = os.environ if environ is None else environ
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for f in fields:
        name = env_name(f.name)
        if name in env:
            values[f.name] = convert(f, env[name], name, error)
        flag_value = getattr(ns, f.name, None)
        if flag_value is not None:
            values[f.name] = flag_value
    values.update(overrides)
    unknown = set(values) - {f.name for f in fields}
    if unknown:
        raise error(f"unknown settings: {sorted(unknown)}")
    return cls(**values)


class SettingsParser(Generic[T]):
    """One service's settings class bound to its flags' title and its package's config error:
    the ``add_arguments``, ``from_namespace`` and ``load`` each config module offers."""

    def __init__(self, cls: type[T], title: str, error: type[Exception]) -> None:
        self.cls = cls
        self.title = title
        self.error = error

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """One flag per setting (default None = not given, so the environment shows through)."""
        add_arguments(parser, self.cls, self.title)

    def from_namespace(
        self, ns: argparse.Namespace, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> T:
        """Defaults < environment < parsed flags < overrides."""
        return from_namespace(self.cls, ns, environ, overrides, self.error)

    def load(
        self,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> T:
        """Defaults < ``IOT_*`` environment < ``argv`` flags < keyword ``overrides``."""
        parser = argparse.ArgumentParser(add_help=False)
        self.add_arguments(parser)
        return self.from_namespace(parser.parse_args(list(argv or [])), environ, **overrides)


def check_all(checks: Iterable[tuple[bool, str]], what: str, error: type[Exception]) -> None:
    """Raise ``error`` listing every failed check: ``invalid <what> configuration: a; b``."""
    problems = [message for ok, message in checks if not ok]
    if problems:
        raise error(f"invalid {what} configuration: " + "; ".join(problems))


def redacted(config: Any) -> dict[str, Any]:
    """A settings dataclass as a dict with its secret settings hidden (``***``), for logs."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out[f.name] = "***" if f.metadata.get("secret") and value else value
    return out
