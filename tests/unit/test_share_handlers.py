"""The share-group handlers at every version they serve, without sockets: requests and responses round-trip
through the codec at the version under test against an in-memory broker on a real event loop."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig, ConfigSource
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.registry import HANDLERS
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeConfigsRequest,
    DescribeShareGroupOffsetsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from kafkalite.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kafkalite.protocol.messages.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequestTopic
from kafkalite.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkalite.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkalite.protocol.messages.share_acknowledge_request import AcknowledgementBatch as AckBatch
from kafkalite.protocol.messages.share_acknowledge_request import AcknowledgePartition, AcknowledgeTopic
from kafkalite.protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
)
from kafkalite.protocol.records import RecordBatchBuilder, iter_batches
from tests.unit.test_groups_handlers import call

GROUP_RESOURCE = 32
SET, DELETE = 0, 1
NODE = 1


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    config = BrokerConfig({"log.storage": "memory", "node.id": str(NODE), "offsets.topic.num.partitions": "2",
                           "share.coordinator.state.topic.num.partitions": "2"})
    made = Cluster(config)
    made.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    made.open()
    made.topics.create("t", 1)
    yield made
    made.close()


def produce(cluster: Cluster, count: int) -> None:
    builder = RecordBatchBuilder()
    for number in range(count):
        builder.append(timestamp=0, key=None, value=f"v{number}".encode())
    partition = cluster.topics.partition("t", 0)
    assert partition is not None
    partition.append_internal(builder.build(), 0)


def topic_id(cluster: Cluster) -> uuid.UUID:
    topic = cluster.topics.get("t")
    assert topic is not None
    return topic.topic_id


def received(response: Any) -> list[int]:
    """The offsets a client keeps from a ShareFetch answer: records inside the acquired ranges."""
    kept = []
    for topic in response.responses:
        for partition in topic.partitions:
            wanted = {o for r in partition.acquired_records for o in range(r.first_offset, r.last_offset + 1)}
            for batch in iter_batches(partition.records or b""):
                kept += [record.offset for record in batch.records() if record.offset in wanted]
    return sorted(kept)


async def set_group_config(cluster: Cluster, group: str, name: str, value: str | None, operation: int = SET) -> int:
    response = await call(cluster, IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[AlterableConfig(name=name, config_operation=operation, value=value)])]), 1)
    return int(response.responses[0].error_code)


async def join(cluster: Cluster, group: str, member: str) -> Any:
    return await call(cluster, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                          subscribed_topic_names=["t"]), 1)


def fetch_request(cluster: Cluster, group: str, member: str, epoch: int, *, acks: list[AcknowledgementBatch] | None
                  = None, max_wait_ms: int = 0, max_records: int = 100, forget: bool = False) -> ShareFetchRequest:
    return ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=100,
        topics=[] if forget else [FetchTopic(topic_id=topic_id(cluster), partitions=[
            FetchPartition(partition_index=0, acknowledgement_batches=acks or [])])],
        forgotten_topics_data=[ForgottenTopic(topic_id=topic_id(cluster), partitions=[0])] if forget else [])


@pytest.mark.parametrize("version", [1, 2])
def test_a_share_consumer_lifecycle_at_every_version(cluster: Cluster, version: int) -> None:
    group = f"queue-v{version}"

    async def scenario() -> None:
        assert await set_group_config(cluster, group, "share.auto.offset.reset", "earliest") == 0
        produce(cluster, 5)
        joined = await join(cluster, group, "m1")
        assert joined.error_code == 0 and joined.member_epoch == 1 and joined.heartbeat_interval_ms == 5000
        assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [(topic_id(cluster),
                                                                                                 [0])]
        opened = await call(cluster, fetch_request(cluster, group, "m1", 0, max_records=0), version)
        assert opened.error_code == 0 and received(opened) == [] and opened.acquisition_lock_timeout_ms == 30_000
        fetched = await call(cluster, fetch_request(cluster, group, "m1", 1), version)
        assert received(fetched) == [0, 1, 2, 3, 4]
        assert [(r.first_offset, r.last_offset, r.delivery_count)
                for r in fetched.responses[0].partitions[0].acquired_records] == [(0, 4, 1)]
        batches = [AckBatch(first_offset=0, last_offset=1, acknowledge_types=[1]),
                   AckBatch(first_offset=2, last_offset=4, acknowledge_types=[1, 2, 1])]
        acknowledged = await call(cluster, ShareAcknowledgeRequest(
            group_id=group, member_id="m1", share_session_epoch=2, topics=[AcknowledgeTopic(
                topic_id=topic_id(cluster),
                partitions=[AcknowledgePartition(partition_index=0, acknowledgement_batches=batches)])]), version)
        assert acknowledged.error_code == 0 and acknowledged.responses[0].partitions[0].error_code == 0
        if version >= 2:
            assert acknowledged.acquisition_lock_timeout_ms == 30_000
        again = await call(cluster, fetch_request(cluster, group, "m1", 3), version)
        assert received(again) == [3]
        assert again.responses[0].partitions[0].acquired_records[0].delivery_count == 2
        wrong = await call(cluster, fetch_request(cluster, group, "m1", 3), version)
        assert wrong.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        described = await call(cluster, ShareGroupDescribeRequest(group_ids=[group, "ghost"]), 1)
        live, ghost = described.groups
        assert (live.group_state, live.assignor_name, ghost.error_code) == ("Stable", "simple",
                                                                          ErrorCode.GROUP_ID_NOT_FOUND)
        assert live.members[0].member_id == "m1" and live.members[0].assignment.topic_partitions[0].topic_name == "t"
        offsets = await call(cluster, DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=None)]), min(version - 1, 1))
        partition = offsets.groups[0].topics[0].partitions[0]
        assert (offsets.groups[0].topics[0].topic_name, partition.start_offset) == ("t", 3)
        assert partition.lag == (-1 if version == 1 else 1)  # v0 has no lag; v1: only offset 3 is not done
        final = await call(cluster, fetch_request(cluster, group, "m1", -1, acks=[
            AcknowledgementBatch(first_offset=3, last_offset=3, acknowledge_types=[1])]), version)
        assert final.error_code == 0 and received(final) == []
        assert cluster.share_partitions.sessions.get(group, "m1") is None
        left = await call(cluster, ShareGroupHeartbeatRequest(group_id=group, member_id="m1", member_epoch=-1), 1)
        assert left.error_code == 0 and left.member_epoch == -1
        listed = await call(cluster, ListGroupsRequest(types_filter=["share"]), 5)
        assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed.groups
                if g.group_id == group] == [(group, "share", "share", "Empty")]
        deleted = await call(cluster, DeleteGroupsRequest(groups_names=[group]), 2)
        assert deleted.results[0].error_code == 0
        assert cluster.share_partitions.share_partition(group, topic_id(cluster), 0) is None

    asyncio.run(scenario())


def test_a_share_fetch_waits_for_records(cluster: Cluster) -> None:
    async def scenario() -> None:
        await set_group_config(cluster, "waiting", "share.auto.offset.reset", "earliest")
        await join(cluster, "waiting", "m1")
        await call(cluster, fetch_request(cluster, "waiting", "m1", 0, max_records=0), 1)
        parked = asyncio.ensure_future(call(cluster, fetch_request(cluster, "waiting", "m1", 1, max_wait_ms=5000), 1))
        await asyncio.sleep(0)
        assert not parked.done()
        produce(cluster, 2)
        assert received(await asyncio.wait_for(parked, 5)) == [0, 1]
        empty = await call(cluster, fetch_request(cluster, "waiting", "m1", 2, max_wait_ms=20), 1)
        assert empty.error_code == 0 and received(empty) == []

    asyncio.run(scenario())


def test_share_fetch_refusals(cluster: Cluster) -> None:
    async def scenario() -> None:
        ghost = await call(cluster, fetch_request(cluster, "ghost", "m1", 0), 1)
        assert ghost.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await join(cluster, "g", "m1")
        acks_on_open = await call(cluster, fetch_request(cluster, "g", "m1", 0, acks=[
            AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])]), 1)
        assert acks_on_open.error_code == ErrorCode.INVALID_REQUEST
        missing = await call(cluster, fetch_request(cluster, "g", "m2", 4), 1)
        assert missing.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        renewing = fetch_request(cluster, "g", "m1", 0)
        renewing.is_renew_ack = True
        assert (await call(cluster, renewing, 2)).error_code == ErrorCode.INVALID_REQUEST
        unknown = fetch_request(cluster, "g", "m1", 0)
        unknown.topics[0].topic_id = uuid.uuid4()
        answer = await call(cluster, unknown, 1)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        closing = await call(cluster, fetch_request(cluster, "g", "m1", -1, forget=True), 1)
        assert closing.error_code == ErrorCode.INVALID_REQUEST  # a final fetch forgets nothing
        acknowledge = await call(cluster, ShareAcknowledgeRequest(group_id="g", member_id="m1",
                                                                  share_session_epoch=0), 1)
        assert acknowledge.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH

    asyncio.run(scenario())


def test_the_share_offsets_admin(cluster: Cluster) -> None:
    async def scenario() -> None:
        produce(cluster, 10)
        topics = [AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=[
            AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=4),
            AlterShareGroupOffsetsRequestPartition(partition_index=5, start_offset=4)]),
            AlterShareGroupOffsetsRequestTopic(topic_name="nope", partitions=[
                AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]
        altered = await call(cluster, AlterShareGroupOffsetsRequest(group_id="admin", topics=topics), 0)
        assert altered.error_code == 0  # a new, empty share group
        assert [[p.error_code for p in t.partitions] for t in altered.responses] == [
            [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
        described = await call(cluster, DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequestGroup(group_id="admin", topics=[
                DescribeShareGroupOffsetsRequestTopic(topic_name="t", partitions=[0])]),
            DescribeShareGroupOffsetsRequestGroup(group_id="ghost", topics=None)]), 1)
        found, ghost = described.groups
        assert (found.topics[0].partitions[0].start_offset, found.topics[0].partitions[0].lag) == (4, 6)
        assert ghost.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await join(cluster, "admin", "m1")
        busy = await call(cluster, AlterShareGroupOffsetsRequest(group_id="admin", topics=topics), 0)
        assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
        assert (await call(cluster, DeleteShareGroupOffsetsRequest(group_id="admin", topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name="t")]), 0)).error_code == ErrorCode.NON_EMPTY_GROUP
        await call(cluster, ShareGroupHeartbeatRequest(group_id="admin", member_id="m1", member_epoch=-1), 1)
        deleted = await call(cluster, DeleteShareGroupOffsetsRequest(group_id="admin", topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name="t"),
            DeleteShareGroupOffsetsRequestTopic(topic_name="x")]), 0)
        assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
            ("t", 0), ("x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        missing = await call(cluster, DeleteShareGroupOffsetsRequest(group_id="ghost", topics=[]), 0)
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    asyncio.run(scenario())


def test_group_configs_are_described_and_altered(cluster: Cluster) -> None:
    async def scenario() -> None:
        assert await set_group_config(cluster, "cfg", "share.record.lock.duration.ms", "20000") == 0
        assert await set_group_config(cluster, "cfg", "share.record.lock.duration.ms", "1000") == \
            ErrorCode.INVALID_CONFIG
        assert await set_group_config(cluster, "cfg", "share.auto.offset.reset", "sometimes") == \
            ErrorCode.INVALID_CONFIG
        assert await set_group_config(cluster, "cfg", "share.isolation.level", "read_committed", operation=2) == \
            ErrorCode.INVALID_CONFIG
        described = await call(cluster, DescribeConfigsRequest(resources=[DescribeConfigsResource(
            resource_type=GROUP_RESOURCE, resource_name="cfg", configuration_keys=None)], include_synonyms=True), 4)
        configs = {entry.name: entry for entry in described.results[0].configs}
        assert (configs["share.record.lock.duration.ms"].value,
                configs["share.record.lock.duration.ms"].config_source) == ("20000", ConfigSource.GROUP_CONFIG)
        assert [synonym.name for synonym in configs["share.record.lock.duration.ms"].synonyms] == [
            "share.record.lock.duration.ms", "group.share.record.lock.duration.ms"]
        assert (configs["share.auto.offset.reset"].value,
                configs["share.auto.offset.reset"].config_source) == ("latest", ConfigSource.DEFAULT_CONFIG)
        assert cluster.share_partitions.group_config("cfg").record_lock_duration_ms == 20_000
        assert await set_group_config(cluster, "cfg", "share.record.lock.duration.ms", None, DELETE) == 0
        assert cluster.share_partitions.group_config("cfg").record_lock_duration_ms == 30_000

    asyncio.run(scenario())


def test_every_share_api_is_served_at_the_versions_clients_send() -> None:
    served = {key: (HANDLERS[key].min_version, HANDLERS[key].max_version) for key in (76, 77, 78, 79, 90, 91, 92)}
    assert served == {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
