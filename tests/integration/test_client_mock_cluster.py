"""The bundled client against a Kafka nobody here wrote: librdkafka's in-memory mock cluster.

The mock (see the ``mock_cluster`` fixture) serves ApiVersions only up to v2, answers a newer
ApiVersions with UNSUPPORTED_VERSION in a layout no version decodes (the client starts over at v0),
has several brokers with partition leaders spread over them, auto-creates topics with 4 partitions,
and implements Produce, Metadata, ListOffsets, InitProducerId, the transaction APIs, FindCoordinator
and the offset APIs, Fetch (with sessions) and the classic group APIs. It lacks CreateTopics,
DeleteTopics, the config APIs, DescribeCluster, ListGroups and the KIP-664 APIs: those are not tested
here, except that a call needing one fails at once with an error naming the API (and DescribeCluster
falls back to Metadata). ListOffsets by timestamp finds nothing.

The mock advertises JoinGroup v6, SyncGroup v4 and LeaveGroup v3-4 but parses them in the layouts of
older versions (it reads a flexible request's arrays as int32 counts and closes the connection, and
answers LeaveGroup v3+ in the v0 layout); librdkafka itself never sends those versions. The group
tests cap these three APIs at the versions librdkafka uses (``mock_group_versions``). Its KIP-848
ConsumerGroupHeartbeat handler aborts the process on a request naming topics without a regex, so
``group.protocol=consumer`` is tested against the kafkalite broker only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kafkalite.client import Admin, ConfigResource, OffsetSpec, Producer, TopicPartition, UnsupportedVersionError
from kafkalite.client import sync as blocking
from kafkalite.client.connection import BrokerConnection
from kafkalite.protocol.messages import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

TIMEOUT_S = 30


@pytest.mark.parametrize("acks", [1, "all"])
def test_produce_to_every_partition_leader(mock_cluster: Any, acks: Any) -> None:
    cluster = mock_cluster(3)
    with blocking.Producer(bootstrap_servers=cluster.bootstrap, acks=acks, partitioner_class="round_robin") as producer:
        futures = [producer.send("mock-produce", f"v{index}".encode()) for index in range(400)]
        results = [future.result(TIMEOUT_S) for future in futures]
    per_partition: dict[int, list[int]] = {}
    for result in results:
        per_partition.setdefault(result.partition, []).append(result.offset)
    assert sorted(per_partition) == [0, 1, 2, 3]
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))  # in order, no gap, no duplicate
    with blocking.Admin(bootstrap_servers=cluster.bootstrap) as admin:
        ends = admin.list_offsets({TopicPartition("mock-produce", index): OffsetSpec.LATEST for index in range(4)})
    assert {tp.partition: result.offset for tp, result in ends.items()} == {
        partition: len(offsets) for partition, offsets in per_partition.items()}


def test_metadata_names_every_broker_and_leader(mock_cluster: Any) -> None:
    cluster = mock_cluster(3)

    async def scenario() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap) as producer:
            assert await producer.partitions_for("mock-meta") == [0, 1, 2, 3]
            metadata = producer._client.metadata  # type: ignore[union-attr]
            assert sorted(metadata.brokers) == [1, 2, 3]
            leaders = [metadata.leader_for(TopicPartition("mock-meta", index)) for index in range(4)]
            assert all(leader in (1, 2, 3) for leader in leaders)  # the mock places leaders at random
            async with Admin(bootstrap_servers=cluster.bootstrap) as admin:
                description = await admin.describe_cluster()
                assert sorted(broker.node_id for broker in description.brokers) == [1, 2, 3]
                topic = (await admin.describe_topics(["mock-meta"]))["mock-meta"]
            assert [partition.leader for partition in topic.partitions] == leaders
            assert all(partition.leader in partition.replicas and set(partition.isr) <= set(partition.replicas)
                       for partition in topic.partitions)

    asyncio.run(scenario())


def test_idempotent_and_transactional_produce(mock_cluster: Any) -> None:
    cluster = mock_cluster(1)
    with blocking.Producer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True) as producer:
        results = [future.result(TIMEOUT_S) for future in
                   [producer.send("mock-idem", f"v{index}".encode(), key=b"k") for index in range(200)]]
    assert [result.offset for result in results] == list(range(200))
    with blocking.Producer(bootstrap_servers=cluster.bootstrap, transactional_id="mock-tx") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        futures = [producer.send("mock-tx-topic", b"v", partition=0) for _ in range(10)]
        producer.commit_transaction()
        assert [future.result(0).offset for future in futures] == list(range(10))
        producer.begin_transaction()
        producer.send("mock-tx-topic", b"gone", partition=0)
        producer.abort_transaction()


def test_consumer_group_offsets(mock_cluster: Any) -> None:
    cluster = mock_cluster(1)
    with blocking.Producer(bootstrap_servers=cluster.bootstrap) as producer:
        producer.send("mock-offsets", b"v", partition=0).result(TIMEOUT_S)
    with blocking.Admin(bootstrap_servers=cluster.bootstrap) as admin:
        partition = TopicPartition("mock-offsets", 0)
        assert admin.alter_consumer_group_offsets("mock-group", {partition: 1})[partition].error is None
        assert admin.list_consumer_group_offsets("mock-group", [partition])[partition].offset == 1


def test_an_api_the_cluster_lacks_is_named(mock_cluster: Any) -> None:
    cluster = mock_cluster(1)
    with blocking.Admin(bootstrap_servers=cluster.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError, match="CreateTopics"):
            admin.create_topics([])
        with pytest.raises(UnsupportedVersionError, match="DescribeConfigs"):
            admin.describe_configs([ConfigResource.topic("mock-offsets")])


_LIBRDKAFKA_GROUP_VERSIONS = {JoinGroupRequest.API_KEY: 5, SyncGroupRequest.API_KEY: 3, LeaveGroupRequest.API_KEY: 1}


@pytest.fixture
def mock_group_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Group requests at the versions librdkafka sends (see the module docstring)."""
    original = BrokerConnection.version_for

    def capped(self: BrokerConnection, request_type: Any, max_version: int | None = None,
               min_version: int | None = None, allow_unstable: bool = False) -> int:
        cap = _LIBRDKAFKA_GROUP_VERSIONS.get(request_type.API_KEY)
        if cap is not None:
            max_version = cap if max_version is None else min(cap, max_version)
        return original(self, request_type, max_version, min_version, allow_unstable)

    monkeypatch.setattr(BrokerConnection, "version_for", capped)


def produce_spread(bootstrap: str, topic: str, count: int) -> None:
    with blocking.Producer(bootstrap_servers=bootstrap, partitioner_class="round_robin") as producer:
        for index in range(count):
            producer.send(topic, f"v{index}".encode(), key=f"k{index}".encode(), headers={"i": str(index).encode()})
        producer.flush()


def test_assign_poll_and_seek_across_partition_leaders(mock_cluster: Any) -> None:
    cluster = mock_cluster(3)
    produce_spread(cluster.bootstrap, "mock-read", 200)
    partitions = [TopicPartition("mock-read", index) for index in range(4)]
    with blocking.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                           fetch_max_wait_ms=100) as consumer:
        consumer.assign(partitions)
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < 200 and time.monotonic() < deadline:
            records.extend(consumer.poll(timeout_ms=200))
        assert sorted(record.value for record in records) == sorted(f"v{index}".encode() for index in range(200))
        assert all(record.headers == (("i", record.value[1:]),) for record in records)
        assert sum(consumer.end_offsets(partitions).values()) == 200
        consumer.seek(partitions[0], 10)
        again = consumer.poll(timeout_ms=5000)
        assert again.records(partitions[0])[0].offset == 10


def test_a_classic_group_of_two_shares_the_partitions_and_commits(mock_cluster: Any,
                                                                  mock_group_versions: None) -> None:
    cluster = mock_cluster(3)
    produce_spread(cluster.bootstrap, "mock-group-topic", 200)
    config = {"bootstrap_servers": cluster.bootstrap, "group_id": "mock-consumers", "auto_offset_reset": "earliest",
              "fetch_max_wait_ms": 100, "session_timeout_ms": 6000, "heartbeat_interval_ms": 300,
              "enable_auto_commit": False}
    with blocking.Consumer(config) as first, blocking.Consumer(config) as second:
        first.subscribe(["mock-group-topic"])
        second.subscribe(["mock-group-topic"])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and (len(values) < 200 or not (first.assignment() and second.assignment())):
            for consumer in (first, second):
                records = consumer.poll(timeout_ms=100)
                values.extend(record.value for record in records)
                if records:
                    consumer.commit()
        assert first.assignment() and second.assignment()
        assert first.assignment() | second.assignment() == {TopicPartition("mock-group-topic", i) for i in range(4)}
        assert not first.assignment() & second.assignment()
        assert sorted(set(values)) == sorted(f"v{index}".encode() for index in range(200))
        committed = first.committed([TopicPartition("mock-group-topic", index) for index in range(4)])
        assert sum(value.offset for value in committed.values() if value is not None) == 200
