"""The bundled admin client against the broker: every call, with an error per resource."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafkalite.client import (
    Admin,
    AlterConfigOp,
    ConfigResource,
    KafkaError,
    NewTopic,
    OffsetSpec,
    TopicPartition,
)
from kafkalite.client import sync as blocking
from kafkalite.client.admin_types import AlterConfigOpType
from kafkalite.protocol.errors import ErrorCode

TIMEOUT_S = 30


def test_topics_partitions_and_configs(broker: Any) -> None:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
        created = admin.create_topics([NewTopic(name, 2, configs={"retention.ms": "100000"}),
                                       NewTopic("bad name!", 1)])
        assert created[name].error is None and created[name].num_partitions == 2
        assert created["bad name!"].error.error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
        assert admin.create_topics([NewTopic(name, 1)])[name].error.error_code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert admin.list_topics()[name] == 2

        topic = ConfigResource.topic(name)
        described = admin.describe_configs([topic, ConfigResource.topic("no-such-topic")])
        assert described[topic].entries["retention.ms"].value == "100000"
        assert described[ConfigResource.topic("no-such-topic")].error is not None
        assert admin.incremental_alter_configs({topic: {"retention.ms": "5000", "cleanup.policy": None}})[
            topic].error is None
        assert admin.incremental_alter_configs({topic: [AlterConfigOp("cleanup.policy", "compact",
                                                                      AlterConfigOpType.APPEND)]})[topic].error is None
        entries = admin.describe_configs([topic])[topic].entries
        assert entries["retention.ms"].value == "5000" and "compact" in (entries["cleanup.policy"].value or "")
        assert admin.alter_configs({topic: {"retention.ms": "7000"}})[topic].error is None
        assert admin.describe_configs([topic], keys=["retention.ms"])[topic].entries["retention.ms"].value == "7000"
        broker_configs = admin.describe_configs([ConfigResource.broker(1)])[ConfigResource.broker(1)]
        assert "log.retention.hours" in broker_configs.entries or broker_configs.error is None

        assert admin.create_partitions({name: 4})[name].error is None
        assert admin.create_partitions({name: 3})[name].error.error_code is ErrorCode.INVALID_PARTITIONS
        cluster = admin.describe_cluster()
        assert cluster.cluster_id and [item.port for item in cluster.brokers] == [broker.port]

        deleted = admin.delete_topics([name, "no-such-topic"])
        assert deleted[name].error is None
        assert deleted["no-such-topic"].error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_topics_are_described_with_leaders_replicas_and_isr(broker: Any) -> None:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 3)])[name].raise_for_error()
        described = admin.describe_topics([name, "no-such-topic", name])
        assert list(described) == [name, "no-such-topic"]
        topic = described[name]
        assert topic.error is None and topic.topic_id is not None and not topic.is_internal
        assert [partition.partition for partition in topic.partitions] == [0, 1, 2]
        assert {(partition.leader, partition.replicas, partition.isr) for partition in topic.partitions} == {
            (1, (1,), (1,))}
        assert topic.replication_factor == 1
        assert described["no-such-topic"].error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert described["no-such-topic"].partitions == ()
        every = admin.describe_topics()
        assert name in every and "__consumer_offsets" not in every and list(every) == sorted(every)


def test_offsets_records_groups_producers(broker: Any) -> None:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    group = f"group-{uuid.uuid4().hex[:8]}"
    partition = TopicPartition(name, 0)
    with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1)])[name].raise_for_error()
        with blocking.Producer(bootstrap_servers=broker.bootstrap) as producer:
            for index in range(10):
                producer.send(name, f"v{index}".encode(), partition=0)
            producer.flush()
        offsets = admin.list_offsets({partition: OffsetSpec.LATEST, TopicPartition(name, 5): OffsetSpec.EARLIEST})
        assert offsets[partition].offset == 10
        assert offsets[TopicPartition(name, 5)].error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert admin.delete_records({partition: 4})[partition].low_watermark == 4
        assert admin.list_offsets({partition: OffsetSpec.EARLIEST})[partition].offset == 4
        producers = admin.describe_producers([partition])[partition]
        assert producers.error is None and producers.active_producers[0].last_sequence == 9

        assert admin.alter_consumer_group_offsets(group, {partition: 7})[partition].error is None
        assert admin.list_consumer_group_offsets(group)[partition].offset == 7
        assert group in [listing.group_id for listing in admin.list_groups()]
        described = admin.describe_groups([group])[group]
        assert described.error is None and described.state == "Empty"
        assert admin.delete_consumer_group_offsets(group, [partition])[partition].error is None
        assert admin.list_consumer_group_offsets(group) == {}
        assert admin.delete_groups([group])[group].error is None
        assert admin.delete_groups([group])[group].error.error_code is ErrorCode.GROUP_ID_NOT_FOUND


def test_transactions_are_described_and_listed(broker: Any) -> None:
    transactional_id = f"admin-tx-{uuid.uuid4().hex[:8]}"
    name = f"admin-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            (await admin.create_topics([NewTopic(name, 1)]))[name].raise_for_error()
            from kafkalite.client import Producer

            async with Producer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id) as producer:
                await producer.init_transactions()
                await producer.begin_transaction()
                await (await producer.send(name, b"open", partition=0))
                description = (await admin.describe_transactions([transactional_id]))[transactional_id]
                assert description.state == "Ongoing" and description.partitions == (TopicPartition(name, 0),)
                listed = await admin.list_transactions(states=["Ongoing"])
                assert transactional_id in [listing.transactional_id for listing in listed]
                await producer.commit_transaction()
            missing = (await admin.describe_transactions(["no-such-id"]))["no-such-id"]
            assert isinstance(missing.error, KafkaError)

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT_S))
