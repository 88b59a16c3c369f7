"""The shard hash of the sharded MQTT tier: stable (known CRC-32 answers) and balanced."""

from __future__ import annotations

from collections import Counter

import pytest

from bridge.shards import shard_of


def test_the_shard_is_the_ieee_crc32_of_the_client_id_modulo_the_shards() -> None:
    # the CRC-32 check value of "123456789" is 0xCBF43926 = 3421780262 (IEEE 802.3)
    assert 3421780262 % 7 == 5
    assert shard_of("123456789", 7) == 5
    assert shard_of("123456789", 2) == 0
    assert shard_of("", 5) == 0  # CRC-32 of nothing is 0
    assert shard_of("anything", 1) == 0


def test_the_same_id_always_lands_on_the_same_shard() -> None:
    ids = [f"dev-{i:05d}" for i in range(1000)]
    assert [shard_of(d, 4) for d in ids] == [shard_of(d, 4) for d in reversed(ids)][::-1]


@pytest.mark.parametrize("shards", [2, 3, 4, 8])
@pytest.mark.parametrize("pattern", ["dev-{:05d}", "sensor/{}", "{}"])
def test_100000_ids_are_spread_within_5_percent(shards: int, pattern: str) -> None:
    counts = Counter(shard_of(pattern.format(i), shards) for i in range(100_000))
    fair = 100_000 / shards
    assert sorted(counts) == list(range(shards))
    assert all(abs(n - fair) <= 0.05 * fair for n in counts.values()), counts


def test_no_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="shards must be >= 1"):
        shard_of("dev-1", 0)
