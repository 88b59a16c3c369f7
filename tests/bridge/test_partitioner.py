import pytest

from bridge.partitioner import murmur2, partition_for

# Computed with the Java client itself (kafka-clients 4.3.1):
# Utils.murmur2(key.getBytes(UTF_8)), Utils.toPositive(h) % 12, % 3.
JAVA_GOLDEN = [
    ("", 275646681, 9, 0),
    ("a", -1563381124, 4, 1),
    ("ab", 316155434, 2, 2),
    ("abc", 479470107, 3, 0),
    ("abcd", -1323649548, 8, 2),
    ("abcde", 461995741, 1, 1),
    ("d1", 1393188025, 1, 1),
    ("d2", -735841882, 10, 1),
    ("device-0001", -580787201, 3, 0),
    ("device-0199", 949744466, 2, 2),
    ("sensor.42:temp_x", -141892636, 4, 1),
    ("\u00e9t\u00e9-\u6e2c", -1674483724, 4, 1),
    ("A" * 62, -1485829210, 10, 1),
    ("0", 971027396, 8, 2),
    ("12", 126087238, 10, 1),
    ("kafka", -798503068, 4, 1),
]


@pytest.mark.parametrize(("key", "h", "p12", "p3"), JAVA_GOLDEN)
def test_matches_java_client(key: str, h: int, p12: int, p3: int) -> None:
    data = key.encode()
    assert murmur2(data) == h
    assert partition_for(data, 12) == p12
    assert partition_for(data, 3) == p3
