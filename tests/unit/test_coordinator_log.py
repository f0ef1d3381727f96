"""Internal coordinator topics: partition choice like Kafka's, append and replay."""

from __future__ import annotations

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.coordinator_log import CoordinatorLog, java_string_hash, partition_for


def memory_cluster() -> Cluster:
    cluster = Cluster(BrokerConfig({"log.storage": "memory", "offsets.topic.num.partitions": "5"}))
    cluster.open()
    return cluster


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("Ж🙂") == (ord("Ж") * 31 + 0xD83D) * 31 + 0xDE42  # UTF-16 surrogates


def test_partition_for_maps_min_value_to_zero() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_append_and_replay() -> None:
    cluster = memory_cluster()
    coordinator_log = CoordinatorLog(cluster.topics, "__consumer_offsets",
                                     cluster.config.get_int("offsets.topic.num.partitions"))
    assert cluster.topics.get("__consumer_offsets") is None
    assert list(coordinator_log.replay_all()) == []
    index = coordinator_log.partition_for("my-group")
    coordinator_log.append(index, [(b"k1", b"v1"), (b"k2", None)], now_ms=1000)
    coordinator_log.append(index, [(b"k1", b"v2")], now_ms=2000)
    topic = cluster.topics.get("__consumer_offsets")
    assert topic is not None and topic.internal and len(topic.partitions) == 5
    assert topic.configs["cleanup.policy"] == "compact"
    replayed = [(partition, r.offset, r.key, r.value) for partition, r in coordinator_log.replay_all()]
    assert replayed == [(index, 0, b"k1", b"v1"), (index, 1, b"k2", None), (index, 2, b"k1", b"v2")]
