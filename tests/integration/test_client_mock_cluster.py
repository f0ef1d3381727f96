"""The bundled client against a Kafka nobody here wrote: librdkafka's in-memory mock cluster.

The mock (see the ``mock_cluster`` fixture) serves ApiVersions only up to v2, answers a newer
ApiVersions with UNSUPPORTED_VERSION in a layout no version decodes (the client starts over at v0),
has several brokers with partition leaders spread over them, auto-creates topics with 4 partitions,
and implements Produce, Metadata, ListOffsets, InitProducerId, the transaction APIs, FindCoordinator
and the offset APIs. It lacks CreateTopics, DeleteTopics, the config APIs, DescribeCluster,
ListGroups and the KIP-664 APIs: those are not tested here, except that a call needing one fails at
once with an error naming the API (and DescribeCluster falls back to Metadata).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkalite.client import Admin, ConfigResource, OffsetSpec, Producer, TopicPartition, UnsupportedVersionError
from kafkalite.client import sync as blocking

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
