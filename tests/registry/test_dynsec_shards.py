"""Dynamic security of the MQTT shards: every shard on its own port (no server started)."""

from __future__ import annotations

import pytest

from registry.dynsec import DynsecClient, DynsecError, DynsecFanout, admin_client, parse_ports


def test_shard_ports_are_parsed_and_checked() -> None:
    assert parse_ports("") == ()
    assert parse_ports("1884, 1885") == (1884, 1885)
    with pytest.raises(DynsecError, match="comma-separated ports"):
        parse_ports("1884;1885")
    with pytest.raises(DynsecError, match="1-65535"):
        parse_ports("1884,70000")


def test_the_admin_client_reaches_every_shard_or_the_one_mosquitto() -> None:
    one = admin_client("127.0.0.1", 1883, "svc/registry", "pw")
    assert type(one) is DynsecClient
    assert one.port == 1883
    fanout = admin_client("127.0.0.1", 1883, "svc/registry", "pw", (1884, 1885))
    assert isinstance(fanout, DynsecFanout)
    assert [shard.port for shard in fanout.shards] == [1884, 1885]
    with pytest.raises(DynsecError, match="no Mosquitto"):
        DynsecFanout("127.0.0.1", (), "svc/registry", "pw")


def test_shards_on_hosts_of_their_own_are_reached_there() -> None:
    """docker-compose.shards.yml: each shard is a container of its own (host:port)."""
    shards = parse_ports("mqtt-shard-1:1883, mqtt-shard-2:1883")
    assert shards == (("mqtt-shard-1", 1883), ("mqtt-shard-2", 1883))
    fanout = admin_client("mosquitto", 1883, "svc/registry", "pw", shards)
    assert isinstance(fanout, DynsecFanout)
    assert [(shard.host, shard.port) for shard in fanout.shards] == list(shards)
    mixed = DynsecFanout("127.0.0.1", (1884, ("other", 1883)), "svc/registry", "pw")
    assert [(shard.host, shard.port) for shard in mixed.shards] == [
        ("127.0.0.1", 1884),
        ("other", 1883),
    ]
    for wrong in (":1883", "mqtt-shard-1:x", "mqtt-shard-1:0"):
        with pytest.raises(DynsecError):
            parse_ports(wrong)
