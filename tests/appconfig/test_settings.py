"""The settings machinery every service's config is built on."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from appconfig import settings as s


class BadSettingError(Exception):
    pass


@dataclass(frozen=True)
class Example:
    port: int = s.setting(80, "a port")
    ratio: float = s.setting(0.5, "a ratio (50% by default)")
    name: str = s.setting("x", "a name")
    on: bool = s.setting(False, "a switch")
    token: str = s.setting("", "a secret", secret=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    s.add_arguments(p, Example, "example settings")
    return p


def build(argv: list[str], env: dict[str, str], **overrides: object) -> Example:
    return s.from_namespace(Example, parser().parse_args(argv), env, overrides, BadSettingError)


def test_names_derive_from_the_field() -> None:
    assert s.env_name("mqtt_host") == "IOT_MQTT_HOST"
    assert s.flag_name("mqtt_host") == "--mqtt-host"


def test_defaults_then_environment_then_flags_then_overrides() -> None:
    assert build([], {}) == Example()
    env = {"IOT_PORT": "81", "IOT_RATIO": "0.25", "IOT_NAME": "env", "IOT_ON": "yes"}
    assert build([], env) == Example(81, 0.25, "env", True)
    assert build(["--port", "82", "--no-on"], env) == Example(82, 0.25, "env", False)
    assert build(["--port", "82"], env, port=83).port == 83


def test_bad_values_raise_the_callers_error() -> None:
    with pytest.raises(BadSettingError, match="IOT_PORT: cannot read 'eighty' as int"):
        build([], {"IOT_PORT": "eighty"})
    with pytest.raises(BadSettingError, match="not a boolean"):
        s.parse_bool("maybe", BadSettingError)
    with pytest.raises(BadSettingError, match=r"unknown settings: \['nope'\]"):
        build([], {}, nope=1)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", True), ("TRUE", True), ("on", True), ("0", False), ("off", False), ("", False)],
)
def test_booleans(text: str, value: bool) -> None:
    assert s.parse_bool(text, BadSettingError) is value


def test_help_names_the_environment_and_default_and_keeps_percent_signs() -> None:
    text = parser().format_help()
    assert "example settings (each also settable as IOT_<NAME>)" in text
    assert "[env IOT_PORT, default 80]" in text
    assert "50% by default" in text
    assert s.setting("", "h", secret=True).metadata["secret"] is True


def test_a_bound_parser_loads_defaults_env_flags_overrides_in_order() -> None:
    bound = s.SettingsParser(Example, "example settings", BadSettingError)
    env = {"IOT_PORT": "81", "IOT_NAME": "env"}
    assert bound.load([], {}) == Example()
    assert bound.load(None, env) == Example(port=81, name="env")
    assert bound.load(["--port", "82", "--on"], env) == Example(port=82, name="env", on=True)
    assert bound.load(["--port", "82"], env, port=83, token="t") == Example(
        83, 0.5, "env", False, "t"
    )
    with pytest.raises(BadSettingError, match="IOT_PORT: cannot read 'x' as int"):
        bound.load([], {"IOT_PORT": "x"})
    p = argparse.ArgumentParser()
    bound.add_arguments(p)
    assert bound.from_namespace(p.parse_args(["--ratio", "0.75"]), {}) == Example(ratio=0.75)


def test_check_all_names_every_failed_check_in_order() -> None:
    s.check_all([(True, "fine")], "example", BadSettingError)  # nothing failed: no error
    with pytest.raises(BadSettingError) as err:
        s.check_all([(False, "a must be > 0"), (True, "ok"), (False, "b")], "x", BadSettingError)
    assert str(err.value) == "invalid x configuration: a must be > 0; b"


def test_redacted_hides_only_secrets_that_are_set() -> None:
    assert s.redacted(Example(token="hunter2")) == {
        "port": 80, "ratio": 0.5, "name": "x", "on": False, "token": "***",
    }  # fmt: skip
    assert s.redacted(Example())["token"] == ""


def test_kafka_client_security_reads_the_password_file(tmp_path: Path) -> None:
    from appconfig.kafka_security import check, client_security

    secret = tmp_path / "bridge.secret"
    secret.write_text("s3cret\n")
    conf = client_security("sasl_ssl", "scram-sha-512", "bridge", str(secret), "/ca.crt")
    assert conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bridge",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/ca.crt",
    }
    assert client_security("", "SCRAM-SHA-512", "", "", "") == {}
    assert check("SASL_SSL", "SCRAM-SHA-512", "bridge", "") is not None
    assert check("TLS", "", "", "") is not None
    assert check("SASL_SSL", "SCRAM-SHA-512", "bridge", str(secret)) is None
