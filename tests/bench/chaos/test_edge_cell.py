"""The edge cell's pure counts: commands accepted and not at the device are lost, a command at
the device more than once is counted as duplicates, another cell's commands are not counted;
times after the heal, "never" for what did not happen."""

from __future__ import annotations

from bench.chaos.edge_cell import command_counts, seconds


def test_every_command_there_once_is_neither_lost_nor_duplicated() -> None:
    sent = ["devices/d/commands/edge-0", "devices/d/commands/edge-1"]
    assert command_counts(sent, list(reversed(sent))) == (0, 0)


def test_missing_and_repeated_commands_are_counted() -> None:
    sent = ["devices/d/commands/edge-0", "devices/d/commands/edge-1", "devices/d/commands/edge-2"]
    got = ["devices/d/commands/edge-0", "devices/d/commands/edge-0", "devices/d/commands/edge-0",
           "devices/d/commands/edge-2", "devices/d/commands/other"]  # fmt: skip
    assert command_counts(sent, got) == (1, 2)


def test_nothing_sent_nothing_lost() -> None:
    assert command_counts([], ["devices/d/commands/x"]) == (0, 0)


def test_seconds_after_the_heal() -> None:
    assert seconds(112.34, 100.0) == "12.3 s"
    assert seconds(None, 100.0) == "never"
