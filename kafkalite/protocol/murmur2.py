"""Kafka's murmur2 key hash and the default key-to-partition mapping built on it.

The Java producer (``BuiltInPartitioner.partitionForKey``) places a record with a non-null key in
partition ``to_positive(murmur2(key)) % num_partitions``, where ``murmur2`` is
``org.apache.kafka.common.utils.Utils.murmur2``: MurmurHash2, 32-bit, seed ``0x9747b28c``, reading the
key as little-endian 4-byte words and finishing with the usual tail and final mix. librdkafka's
``murmur2`` and ``murmur2_random`` partitioners compute the same value, so a key lands in the same
partition whichever client produced it. Brokers never hash keys; this lives in ``protocol`` because
both the bundled client and the tests need the one definition.

Java arithmetic is on signed 32-bit ``int`` with wrap-around, and the final mixes use the logical
shift ``>>>``. Here every intermediate value is kept as an *unsigned* 32-bit number (masked with
``0xFFFFFFFF`` after each multiply), so Python's ``>>`` is exactly Java's ``>>>`` and XOR/multiply
give the same low 32 bits Java would; only the final result is converted to a signed value.
"""

from __future__ import annotations

import struct

__all__ = ["default_partition", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_MULTIPLIER = 0x5BD1E995
_SHIFT = 24
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return the signed 32-bit murmur2 hash of ``data``, bit-for-bit equal to Kafka's ``Utils.murmur2``.

    Accepts any bytes-like object (``bytes``, ``bytearray``, ``memoryview``).
    """
    length = len(data)
    multiplier = _MULTIPLIER
    mask = _MASK32
    hash_value = (_SEED ^ length) & mask

    word_count = length >> 2
    # All full little-endian words in one call instead of four byte reads per word.
    for word in struct.unpack_from(f"<{word_count}I", data):
        word = (word * multiplier) & mask
        word ^= word >> _SHIFT
        word = (word * multiplier) & mask
        hash_value = ((hash_value * multiplier) & mask) ^ word

    tail_start = word_count << 2
    remaining = length - tail_start
    if remaining:
        # Java's fall-through switch: XOR in the 1..3 trailing bytes, then one multiply.
        if remaining == 3:
            hash_value ^= data[tail_start + 2] << 16
        if remaining >= 2:
            hash_value ^= data[tail_start + 1] << 8
        hash_value ^= data[tail_start]
        hash_value = (hash_value * multiplier) & mask

    hash_value ^= hash_value >> 13
    hash_value = (hash_value * multiplier) & mask
    hash_value ^= hash_value >> 15

    return hash_value - 0x1_0000_0000 if hash_value & 0x8000_0000 else hash_value


def to_positive(number: int) -> int:
    """Clear the sign bit of a 32-bit value, as Kafka's ``Utils.toPositive`` does (not ``abs``).

    ``to_positive(-1) == 0x7fffffff`` and ``to_positive(-2**31) == 0``.
    """
    return number & 0x7FFFFFFF


def default_partition(key: bytes, num_partitions: int) -> int:
    """Return the partition the Java client's default partitioner picks for a non-null ``key``.

    Equal to librdkafka's ``murmur2`` / ``murmur2_random`` partitioners for the same key. Records
    without a key are not covered: clients spread those by their own (sticky or random) policy.

    Raises ``ValueError`` if ``num_partitions`` is not positive.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
