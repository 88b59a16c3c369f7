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
from collections.abc import Mapping
from typing import Any, TypeVar

ENV_PREFIX = "IOT_"

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
