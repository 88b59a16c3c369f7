"""Every `iot-stack` sub-command accepts the common options (issue 33, bug 1: `iot-stack
topics` had no `-v`, so `main()` died reading `args.verbose` and compose's topic-init exited 1)."""

from __future__ import annotations

import argparse

import pytest

import stack.cli
from stack.cli import _parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("iot-stack has no sub-commands")


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions if a.option_strings}


COMMON = {"verbose", "data_dir", "mqtt_port", "kafka_port", "bind_host"}


@pytest.mark.parametrize("name", sorted(_subparsers(_parser())))
def test_every_sub_command_has_the_common_options(name: str) -> None:
    sub = _subparsers(_parser())[name]
    assert _dests(sub) >= COMMON, f"`iot-stack {name}` lacks {sorted(COMMON - _dests(sub))}"


def test_topics_runs_through_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """What compose's topic-init runs: `iot-stack topics` with the environment's settings."""
    calls: list[tuple[str, int]] = []

    def fake_ensure(
        bootstrap: str, topics: object, partitions: int, *, security: dict[str, str]
    ) -> list[str]:
        assert security == {}  # plaintext unless IOT_KAFKA_SECURITY=sasl_ssl
        calls.append((bootstrap, partitions))
        return []

    monkeypatch.setattr(stack.cli, "ensure_topics", fake_ensure)
    assert stack.cli.main(["topics", "--kafka-bootstrap", "kafka:9092", "--partitions", "3"]) == 0
    assert stack.cli.main(["topics", "-v", "--kafka-bootstrap", "kafka:9092"]) == 0
    assert calls[0] == ("kafka:9092", 3)
