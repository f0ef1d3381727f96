"""murmur2 and the default partitioner: equal to the Java client, kafka-python and librdkafka.

If our hash differed from the clients' by one bit, a key written by one client would land in a
different partition than the same key written by another, breaking per-key ordering. So the hash is
checked against Kafka's own test vectors, against kafka-python's implementation, and against
librdkafka twice: its exported partitioner function, and the partitions its ``murmur2_random``
partitioner actually delivers to on librdkafka's built-in mock cluster (loopback only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.murmur2 import default_partition, murmur2, to_positive

# From Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([ord("a"), ord("b"), ord("c")]), 479470107),
]

key_strategy = st.binary(min_size=0, max_size=96)
partition_count_strategy = st.integers(min_value=1, max_value=1000)


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS)
def test_java_utils_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS)
def test_accepts_any_bytes_like(key: bytes, expected: int) -> None:
    assert murmur2(bytearray(key)) == expected
    assert murmur2(memoryview(key)) == expected


def test_result_is_a_signed_32_bit_int() -> None:
    rng = random.Random(20240611)
    results = [murmur2(rng.randbytes(rng.randrange(0, 40))) for _ in range(2000)]
    assert all(-(2**31) <= value < 2**31 for value in results)
    assert any(value < 0 for value in results) and any(value >= 0 for value in results)


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(0) == 0
    assert to_positive(5) == 5
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


def test_default_partition_uses_the_positive_hash_modulo() -> None:
    assert default_partition(b"21", 7) == to_positive(-973932308) % 7
    assert default_partition(b"foobar", 1) == 0
    with pytest.raises(ValueError):
        default_partition(b"key", 0)


def _kafka_python_murmur2() -> Callable[[bytes], int]:
    return pytest.importorskip("kafka.partitioner.default").murmur2  # type: ignore[no-any-return]


def _librdkafka_partition() -> Callable[[bytes, int], int]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    function = getattr(confluent_kafka, "murmur2", None)
    if function is None:
        pytest.skip("this confluent-kafka does not export murmur2()")
    return function  # type: ignore[no-any-return]


@settings(max_examples=500, deadline=None)
@given(key=key_strategy)
def test_agrees_with_kafka_python(key: bytes) -> None:
    # kafka-python returns the same 32 bits as an unsigned number.
    assert murmur2(key) & 0xFFFFFFFF == _kafka_python_murmur2()(key)


def test_agrees_with_kafka_python_on_many_random_keys() -> None:
    kafka_python_murmur2 = _kafka_python_murmur2()
    rng = random.Random(1729)
    for _ in range(10_000):
        key = rng.randbytes(rng.randrange(0, 80))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key), key


@settings(max_examples=500, deadline=None)
@given(key=key_strategy, num_partitions=partition_count_strategy)
def test_agrees_with_librdkafka_partitioner_function(key: bytes, num_partitions: int) -> None:
    """confluent_kafka.murmur2(key, n) runs librdkafka's own murmur2 partitioner in-process."""
    assert default_partition(key, num_partitions) == _librdkafka_partition()(key, num_partitions)


def test_agrees_with_librdkafka_partitioner_function_on_many_random_keys() -> None:
    librdkafka_partition = _librdkafka_partition()
    rng = random.Random(4104)
    for _ in range(10_000):
        key = rng.randbytes(rng.randrange(0, 80))
        num_partitions = rng.randrange(1, 5000)
        assert default_partition(key, num_partitions) == librdkafka_partition(key, num_partitions), key


# --- librdkafka's mock cluster -------------------------------------------------------------------
#
# The mock cluster answers Metadata and Produce but not CreateTopics, and topics it auto-creates get
# 4 partitions. To get other partition counts the fixture creates the cluster through librdkafka's
# public mock C API (rd_kafka_mock_cluster_new / rd_kafka_mock_topic_create), loaded with ctypes
# from the library confluent-kafka ships; the Producer under test then connects to it over loopback.

MOCK_TOPICS = {"murmur2-p7": 7, "murmur2-p13": 13, "murmur2-p64": 64}


def _load_librdkafka() -> ctypes.CDLL | None:
    """Find the librdkafka that confluent-kafka uses: the wheel's bundled copy, else the system one."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    package_dir = os.path.dirname(confluent_kafka.__file__)
    candidates = sorted(glob.glob(os.path.join(package_dir, os.pardir, "confluent_kafka.libs", "librdkafka*.so*")))
    system_library = ctypes.util.find_library("rdkafka")
    if system_library:
        candidates.append(system_library)
    for candidate in candidates:
        try:
            library = ctypes.CDLL(candidate)
        except OSError:
            continue
        if hasattr(library, "rd_kafka_mock_topic_create"):
            return library
    return None


@pytest.fixture(scope="module")
def mock_cluster_bootstrap() -> Iterator[str]:
    """Start a one-broker librdkafka mock cluster holding MOCK_TOPICS; yield its bootstrap address."""
    library = _load_librdkafka()
    if library is None:
        pytest.skip("librdkafka's mock C API is not reachable through ctypes")
    void_p, char_p = ctypes.c_void_p, ctypes.c_char_p
    library.rd_kafka_conf_new.restype = void_p
    library.rd_kafka_conf_set.argtypes = [void_p, char_p, char_p, char_p, ctypes.c_size_t]
    library.rd_kafka_new.restype = void_p
    library.rd_kafka_new.argtypes = [ctypes.c_int, void_p, char_p, ctypes.c_size_t]
    library.rd_kafka_mock_cluster_new.restype = void_p
    library.rd_kafka_mock_cluster_new.argtypes = [void_p, ctypes.c_int]
    library.rd_kafka_mock_topic_create.restype = ctypes.c_int
    library.rd_kafka_mock_topic_create.argtypes = [void_p, char_p, ctypes.c_int, ctypes.c_int]
    library.rd_kafka_mock_cluster_bootstraps.restype = char_p
    library.rd_kafka_mock_cluster_bootstraps.argtypes = [void_p]
    library.rd_kafka_mock_cluster_destroy.argtypes = [void_p]
    library.rd_kafka_destroy.argtypes = [void_p]

    error_text = ctypes.create_string_buffer(512)
    configuration = library.rd_kafka_conf_new()
    # The handle only hosts the mock cluster; silence its "no bootstrap.servers" warning.
    library.rd_kafka_conf_set(configuration, b"log_level", b"0", error_text, len(error_text))
    host_handle = library.rd_kafka_new(0, configuration, error_text, len(error_text))  # 0 = producer
    assert host_handle, error_text.value
    cluster = library.rd_kafka_mock_cluster_new(host_handle, 1)
    try:
        assert cluster
        for topic, num_partitions in MOCK_TOPICS.items():
            assert library.rd_kafka_mock_topic_create(cluster, topic.encode(), num_partitions, 1) == 0
        bootstrap = library.rd_kafka_mock_cluster_bootstraps(cluster).decode()
        assert bootstrap.startswith(("127.0.0.1:", "localhost:", "[::1]:")), bootstrap
        yield bootstrap
    finally:
        if cluster:
            library.rd_kafka_mock_cluster_destroy(cluster)
        library.rd_kafka_destroy(host_handle)


def _produce_and_collect(
    configuration: dict[str, Any], records: list[tuple[str, bytes]]
) -> tuple[list[tuple[str, bytes, int]], dict[str, int]]:
    """Produce keyed records with confluent-kafka.

    Returns ``(topic, key, partition)`` for each delivery report, and each topic's partition count as
    the producer's metadata reports it.
    """
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"partitioner": "murmur2_random", "linger.ms": 5, **configuration})
    delivered: list[tuple[str, bytes, int]] = []
    failures: list[Any] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(error)
        else:
            delivered.append((message.topic(), message.key(), message.partition()))

    for topic, key in records:
        producer.produce(topic, value=b"", key=key, on_delivery=on_delivery)
    remaining = producer.flush(10)
    assert remaining == 0 and not failures, (remaining, failures[:3])
    assert len(delivered) == len(records)
    metadata = producer.list_topics(timeout=5)
    partition_counts = {topic: len(metadata.topics[topic].partitions) for topic, _ in records}
    return delivered, partition_counts


def _random_keys(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    generated = [rng.randbytes(rng.randrange(1, 64)) for _ in range(count)]
    readable = [f"user-{index}".encode() for index in range(count // 4)]
    return [b"", b"21", b"foobar", *readable, *generated]


def test_librdkafka_murmur2_random_partitioner_on_mock_cluster(mock_cluster_bootstrap: str) -> None:
    records = [(topic, key) for topic in MOCK_TOPICS for key in _random_keys(400, seed=len(topic))]
    delivered, partition_counts = _produce_and_collect({"bootstrap.servers": mock_cluster_bootstrap}, records)
    assert partition_counts == MOCK_TOPICS
    mismatches = [
        (topic, key, partition)
        for topic, key, partition in delivered
        if partition != default_partition(key, MOCK_TOPICS[topic])
    ]
    assert not mismatches, mismatches[:5]
    # Every partition was hit, so the comparison exercised the whole modulo range.
    for topic, num_partitions in MOCK_TOPICS.items():
        assert {partition for name, _, partition in delivered if name == topic} == set(range(num_partitions))


def test_librdkafka_on_auto_created_mock_topic() -> None:
    """Without ctypes: the mock cluster confluent-kafka starts itself, on an auto-created topic."""
    pytest.importorskip("confluent_kafka")
    records = [("murmur2-auto", key) for key in _random_keys(200, seed=7)]
    delivered, partition_counts = _produce_and_collect({"test.mock.num.brokers": 1, "log_level": 0}, records)
    num_partitions = partition_counts["murmur2-auto"]
    assert num_partitions > 1  # librdkafka's mock auto-creates topics with several partitions (4 today)
    for _, key, partition in delivered:
        assert partition == default_partition(key, num_partitions), key
