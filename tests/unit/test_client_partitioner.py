"""Partition choice: keys as the Java client and librdkafka hash them; sticky and round-robin spread."""

from __future__ import annotations

import random

import pytest

from kafkalite.client.producer.partitioner import Partitioner
from kafkalite.protocol.murmur2 import default_partition

# Partitions the Java client (and librdkafka's murmur2_random) picks for keys of Kafka's murmur2 test
# vectors: (murmur2(key) & 0x7fffffff) % count, with murmur2("21") = -973932308, murmur2("foobar") =
# -790332482, murmur2("a-little-bit-long-string") = -985981536, murmur2("abc") = 479470107.
VECTORS = [(b"21", 12, 0), (b"foobar", 12, 6), (b"a-little-bit-long-string", 10, 2), (b"abc", 7, 4)]


@pytest.mark.parametrize(("key", "count", "expected"), VECTORS)
def test_keys_land_where_the_java_client_puts_them(key: bytes, count: int, expected: int) -> None:
    assert Partitioner().partition("t", key, count) == expected == default_partition(key, count)


def test_keys_always_hash_even_with_round_robin() -> None:
    partitioner = Partitioner("round_robin")
    assert {partitioner.partition("t", b"foobar", 12) for _ in range(5)} == {6}


def test_sticky_keeps_a_partition_until_its_batch_is_complete() -> None:
    partitioner = Partitioner("sticky", rng=random.Random(1))
    first = partitioner.partition("t", None, 6)
    assert {partitioner.partition("t", None, 6) for _ in range(20)} == {first}
    second = partitioner.next_sticky("t", first, 6)
    assert second != first
    assert partitioner.partition("t", None, 6) == second
    assert partitioner.next_sticky("t", first, 6) == second  # a late switch request for the old one: no change


def test_sticky_prefers_available_partitions() -> None:
    partitioner = Partitioner(rng=random.Random(3))
    assert {partitioner.next_sticky("t", 0, 8, available=[0, 5]) for _ in range(10)} <= {0, 5}
    assert partitioner.next_sticky("t", 5, 8, available=[5]) == 5


def test_round_robin_cycles() -> None:
    partitioner = Partitioner("round_robin")
    assert [partitioner.partition("t", None, 3) for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_ignore_keys_spreads_keyed_records() -> None:
    partitioner = Partitioner("round_robin", ignore_keys=True)
    assert [partitioner.partition("t", b"same", 2) for _ in range(4)] == [0, 1, 0, 1]


def test_a_callable_partitioner_is_checked() -> None:
    assert Partitioner(lambda topic, key, count: count - 1).partition("t", b"k", 4) == 3
    with pytest.raises(ValueError, match="partition 9"):
        Partitioner(lambda topic, key, count: 9).partition("t", b"k", 4)
