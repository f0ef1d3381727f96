"""Group administration through both admin clients: list groups (with state filters), describe a group with
its members and assignments, list, alter and delete committed offsets (altering needs an empty group, which
admin tools commit to with generation -1), remove members, delete groups."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import errors as kafka_errors
from kafka.admin import MemberToRemove, NewTopic
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0
GROUP_ARGS = ("group.initial.rebalance.delay.ms=0",)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def settle(futures: dict[Any, Future[Any]]) -> dict[Any, Any]:
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


@pytest.fixture
def process(fresh_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return fresh_broker(*GROUP_ARGS)


@pytest.fixture
def kafka_python_admin(process: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=process.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    yield admin
    admin.close()


def error_name(error: Any) -> str:
    """kafka-python reports some results as error classes, others as their names."""
    return error if isinstance(error, str) else error.__name__


def consume_and_commit(consumer: Any, count: int, kind: str) -> None:
    """Poll until ``count`` records were read, then commit synchronously."""
    read, deadline = 0, time.monotonic() + TIMEOUT_S
    while read < count and time.monotonic() < deadline:
        if kind == "kafka-python":
            read += sum(len(records) for records in consumer.poll(timeout_ms=2000).values())
        else:
            message = consumer.poll(0.1)
            read += message is not None and message.error() is None
    assert read >= count, f"read only {read} records"
    if kind == "kafka-python":
        consumer.commit()
    else:
        consumer.commit(asynchronous=False)


def produce(process: BrokerProcess, topic: str, per_partition: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0})
    for index in range(per_partition * partitions):
        producer.produce(topic, value=b"x", partition=index % partitions)
    producer.flush(TIMEOUT_S)


def test_kafka_python_admin_manages_a_group(process: BrokerProcess, kafka_python_admin: KafkaAdminClient,
                                            wait_until: WaitUntil) -> None:
    admin = kafka_python_admin
    topic, group = unique("admin-kp"), unique("admin-kp-group")
    admin.create_topics([NewTopic(topic, 3, 1)])
    produce(process, topic, 4, 3)
    consumer = KafkaConsumer(topic, bootstrap_servers=process.bootstrap, group_id=group,
                             group_instance_id="kp-instance", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consume_and_commit(consumer, 12, "kafka-python")
        listed = {item["group_id"]: item for item in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer" and listed[group]["group_state"] == "Stable"
        assert group in [item["group_id"] for item in admin.list_groups(states_filter=["Stable"])]
        assert group not in [item["group_id"] for item in admin.list_groups(states_filter=["Empty"])]
        described = admin.describe_groups([group])[group]
        [member] = described["members"]
        assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
        assert member["group_instance_id"] == "kp-instance"
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1, 2]}]
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: value.offset for tp, value in offsets.items()} == {0: 4, 1: 4, 2: 4}
        # While the group has a member, admin commits and deletions are refused.
        altered = admin.alter_group_offsets(group, {KafkaTopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
        assert list(altered.values()) == [kafka_errors.UnknownMemberIdError]
        refused = admin.delete_group_offsets(group, [KafkaTopicPartition(topic, 0)])
        assert list(refused.values()) == [kafka_errors.GroupSubscribedToTopicError]
        assert error_name(dict(admin.delete_groups([group]))[group]) == "NonEmptyGroupError"
        removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="kp-instance")])
        assert list(removed.values()) == [kafka_errors.NoError]
        wait_until(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", TIMEOUT_S, "not empty")
    finally:
        consumer.close(autocommit=False)
    # The group is empty (it may be rejoined by the closing consumer: wait for Empty again).
    wait_until(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", TIMEOUT_S, "not empty")
    altered = admin.alter_group_offsets(group, {KafkaTopicPartition(topic, 0): OffsetAndMetadata(1, "reset", -1),
                                                KafkaTopicPartition(topic, 1): OffsetAndMetadata(2, "", -1)})
    assert set(altered.values()) == {kafka_errors.NoError}
    deleted = admin.delete_group_offsets(group, [KafkaTopicPartition(topic, 2)])
    assert set(deleted.values()) == {kafka_errors.NoError}
    offsets = admin.list_group_offsets(group)[group]
    assert {tp.partition: (value.offset, value.metadata) for tp, value in offsets.items()} == {0: (1, "reset"),
                                                                                            1: (2, "")}
    assert error_name(dict(admin.delete_groups([group]))[group]) in ("OK", "NoError")
    assert group not in [item["group_id"] for item in admin.list_groups()]
    assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    assert admin.list_group_offsets(group)[group] == {}


def test_confluent_admin_manages_a_group(process: BrokerProcess, kafka_python_admin: KafkaAdminClient,
                                         wait_until: WaitUntil) -> None:
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topic, group = unique("admin-ck"), unique("admin-ck-group")
    kafka_python_admin.create_topics([NewTopic(topic, 2, 1)])
    produce(process, topic, 3, 2)
    consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "partition.assignment.strategy": "roundrobin"})
    consumer.subscribe([topic])
    try:
        consume_and_commit(consumer, 6, "confluent-kafka")
        listing = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(timeout=TIMEOUT_S)
        [listed] = [item for item in listing.valid if item.group_id == group]
        assert listed.state == ConsumerGroupState.STABLE and listed.type == ConsumerGroupType.CLASSIC
        assert not listed.is_simple_consumer_group
        [description] = settle(admin.describe_consumer_groups([group])).values()
        assert description.state == ConsumerGroupState.STABLE and description.partition_assignor == "roundrobin"
        [member] = description.members
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
        assert member.host == "/127.0.0.1"
        [deleting] = admin.delete_consumer_groups([group]).values()
        with pytest.raises(KafkaException) as refused:
            deleting.result(timeout=TIMEOUT_S)
        assert "NON_EMPTY_GROUP" in str(refused.value) or "not empty" in str(refused.value).lower()
    finally:
        consumer.close()
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])]
    [offsets] = settle(admin.list_consumer_group_offsets(request)).values()
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 3), (1, 3)]
    # The group is Empty now: offsets can be altered with generation -1, as admin tools do.
    altered = settle(admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 0)])]))
    assert [tp.error for result in altered.values() for tp in result.topic_partitions] == [None, None]
    [offsets] = settle(admin.list_consumer_group_offsets(request)).values()
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 1), (1, 0)]
    # A group that never existed gets offsets too: it becomes a simple group.
    simple = unique("simple")
    settle(admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(simple, [TopicPartition(topic, 1, 2)])]))
    listing = admin.list_consumer_groups().result(timeout=TIMEOUT_S)
    simple_listing = {item.group_id: item for item in listing.valid}[simple]
    assert simple_listing.is_simple_consumer_group and simple_listing.state == ConsumerGroupState.EMPTY
    settle(admin.delete_consumer_groups([group, simple]))
    listing = admin.list_consumer_groups().result(timeout=TIMEOUT_S)
    assert not {group, simple} & {item.group_id for item in listing.valid}


def test_confluent_admin_describes_a_kip848_group(fresh_broker: Callable[..., BrokerProcess],
                                                  wait_until: WaitUntil) -> None:
    process = fresh_broker("group.consumer.heartbeat.interval.ms=300")
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topic, group = unique("admin-848"), unique("admin-848-group")
    from confluent_kafka.admin import NewTopic as ConfluentNewTopic

    settle(admin.create_topics([ConfluentNewTopic(topic, 4, 1)]))
    consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe([topic])
    try:
        def assigned() -> bool:
            consumer.poll(0.1)
            return len(consumer.assignment()) == 4

        wait_until(assigned, TIMEOUT_S, "the KIP-848 member got no partitions")
        [description] = settle(admin.describe_consumer_groups([group])).values()
        assert description.type == ConsumerGroupType.CONSUMER and description.partition_assignor == "uniform"
        [member] = description.members
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2, 3]
        listing = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=TIMEOUT_S)
        assert [item.group_id for item in listing.valid] == [group]
    finally:
        consumer.close()
