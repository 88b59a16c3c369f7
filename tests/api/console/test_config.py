from __future__ import annotations

import pytest

from api.console.config import ConsoleConfig
from api.errors import ConfigError


def test_off_by_default_and_services_parsed() -> None:
    cfg = ConsoleConfig()
    assert cfg.console is False
    assert cfg.services() == {"bridge": "http://127.0.0.1:9100",
                              "commands": "http://127.0.0.1:9101",
                              "analytics": "http://127.0.0.1:9102"}  # fmt: skip


def test_environment_and_flags() -> None:
    import argparse

    from api.console.config import add_arguments, from_namespace

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ns = parser.parse_args(["--console", "--console-services", "b=http://h:1/"])
    cfg = from_namespace(ns, {"IOT_CONSOLE_IDLE_S": "60"})
    assert cfg.console
    assert cfg.console_idle_s == 60.0
    assert cfg.services() == {"b": "http://h:1"}


@pytest.mark.parametrize(
    "bad", [{"console_services": "bridge"}, {"console_idle_s": 0}, {"console_sample_s": 0.01}]
)
def test_invalid_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        ConsoleConfig(**bad)  # type: ignore[arg-type]
