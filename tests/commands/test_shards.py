"""A command path of one MQTT shard (`command_shards` > 1) sends what its shard holds."""

from __future__ import annotations

import pytest

from bridge.errors import ConfigError
from commands.config import CommandConfig
from commands.model import Command, Rejection, Target
from commands.service import CommandService


def _path(shard: int, shards: int) -> CommandService:
    service = CommandService.__new__(CommandService)  # only its config is read here
    service.config = CommandConfig(command_shard=shard, command_shards=shards)
    return service


def _command(target: Target) -> Command:
    return Command("c1", target, "ping", {}, 1000, 1, False, 0, 1000)


def test_each_device_command_goes_out_on_exactly_the_shard_of_its_device() -> None:
    # crc32("dev-00000") is even and crc32("dev-00004") odd (bridge/shards.py)
    paths = [_path(0, 2), _path(1, 2)]
    for device, owner in (("dev-00000", 0), ("dev-00004", 1)):
        command = _command(Target(device_id=device))
        assert [p._other_shard(command) for p in paths] == [owner != 0, owner != 1]


def test_group_commands_go_out_on_every_shard_and_rejections_on_the_first_only() -> None:
    paths = [_path(0, 3), _path(1, 3), _path(2, 3)]
    group = _command(Target(group="floor-2"))
    assert [p._other_shard(group) for p in paths] == [False, False, False]
    rejection = Rejection("c2", "??", "bad_key", "not a device id")
    assert [p._other_shard(rejection) for p in paths] == [False, True, True]
    assert _path(0, 1)._other_shard(_command(Target(device_id="dev-00001"))) is False


def test_a_shard_outside_the_shards_is_refused() -> None:
    with pytest.raises(ConfigError, match="command_shard < command_shards"):
        CommandConfig(command_shard=2, command_shards=2)
