"""The group handlers at every version they serve, without sockets: requests and responses round-trip
through the codec at the version under test against an in-memory broker on a real event loop."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafkalite.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkalite.protocol.messages.leave_group_request import MemberIdentity
from kafkalite.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkalite.protocol.messages.offset_delete_request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from kafkalite.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkalite.protocol.messages.sync_group_request import SyncGroupRequestAssignment

NODE = 1


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    config = BrokerConfig({"log.storage": "memory", "node.id": str(NODE), "group.initial.rebalance.delay.ms": "0",
                           "group.min.session.timeout.ms": "1000", "offsets.topic.num.partitions": "4"})
    cluster = Cluster(config)
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    cluster.topics.create("t", 3)
    yield cluster
    cluster.close()


async def call(cluster: Cluster, request: Message, version: int) -> Any:
    """Encode at ``version``, decode as the broker does, handle (waiting if needed), round-trip the answer."""
    handler = HANDLERS[request.API_KEY]
    assert handler.supports(version)
    decoded = handler.request_type.decode(request.encode(version), version)
    context = RequestContext(cluster, request.API_KEY, version, 7, "test-client", "127.0.0.1:5555")
    result = handler.handle(context, decoded)
    if not isinstance(result, Message):
        result = await asyncio.wait_for(result, 5)  # type: ignore[arg-type]
    assert isinstance(result, handler.response_type)
    return handler.response_type.decode(result.encode(version), version)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_answers_this_node_for_groups_and_transactions(cluster: Cluster, version: int) -> None:
    async def scenario() -> None:
        if version < 4:
            for key_type in (0, 1) if version >= 1 else (0,):
                response = await call(cluster, FindCoordinatorRequest(key="g", key_type=key_type), version)
                assert (response.error_code, response.node_id, response.host, response.port) == (0, NODE, "127.0.0.1",
                                                                                                 9092)
            if version >= 1:
                response = await call(cluster, FindCoordinatorRequest(key="g:topic:0", key_type=2), version)
                assert response.error_code == 0 and response.node_id == NODE  # the share coordinator
                response = await call(cluster, FindCoordinatorRequest(key="g", key_type=3), version)
                assert response.error_code == ErrorCode.INVALID_REQUEST and response.node_id == -1
        else:
            for key_type in (0, 1):
                response = await call(cluster, FindCoordinatorRequest(key_type=key_type, coordinator_keys=["a", "b"]),
                                      version)
                assert [(c.key, c.node_id, c.error_code) for c in response.coordinators] == [("a", NODE, 0),
                                                                                            ("b", NODE, 0)]
        assert cluster.topics.get("__consumer_offsets") is not None

    run(scenario())


@pytest.mark.parametrize("version", range(10))
def test_classic_group_lifecycle_at_every_join_version(cluster: Cluster, version: int) -> None:
    sync_version, heartbeat_version, leave_version = min(version, 5), min(version, 4), min(version, 5)
    group = f"group-v{version}"
    instance = "instance-1" if version >= 5 else None

    async def scenario() -> None:
        join = JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                                group_instance_id=instance, protocol_type="consumer",
                                protocols=[JoinGroupRequestProtocol("range", b"sub")])
        response = await call(cluster, join, version)
        if version >= 4 and instance is None:
            assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
            join.member_id = response.member_id
            response = await call(cluster, join, version)
        assert response.error_code == 0 and response.generation_id == 1 and response.leader == response.member_id
        assert response.protocol_name == "range" and [m.metadata for m in response.members] == [b"sub"]
        member_id, generation = response.member_id, response.generation_id
        sync = SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                                group_instance_id=instance if sync_version >= 3 else None,
                                protocol_type="consumer", protocol_name="range",
                                assignments=[SyncGroupRequestAssignment(member_id, b"assigned")])
        response = await call(cluster, sync, sync_version)
        assert response.error_code == 0 and response.assignment == b"assigned"
        beat = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                group_instance_id=instance if heartbeat_version >= 3 else None)
        assert (await call(cluster, beat, heartbeat_version)).error_code == 0
        beat.generation_id = generation + 1
        assert (await call(cluster, beat, heartbeat_version)).error_code == ErrorCode.ILLEGAL_GENERATION
        described = await call(cluster, DescribeGroupsRequest(groups=[group, "ghost"],
                                                              include_authorized_operations=True), min(version, 5))
        stable, ghost = described.groups
        assert (stable.group_state, stable.protocol_data, ghost.group_state) == ("Stable", "range", "Dead")
        assert stable.members[0].member_assignment == b"assigned"
        assert stable.members[0].client_id == "test-client" and stable.members[0].client_host == "/127.0.0.1"
        if leave_version >= 3:
            leave = LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id, instance)])
            response = await call(cluster, leave, leave_version)
            assert response.error_code == 0 and [m.error_code for m in response.members] == [0]
        else:
            response = await call(cluster, LeaveGroupRequest(group_id=group, member_id=member_id), leave_version)
            assert response.error_code == 0
            response = await call(cluster, LeaveGroupRequest(group_id=group, member_id=member_id), leave_version)
            assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        listed = await call(cluster, ListGroupsRequest(states_filter=["empty"]), min(version, 5))
        assert group in [g.group_id for g in listed.groups]

    run(scenario())


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_and_fetch_at_every_version(cluster: Cluster, version: int) -> None:
    group = f"offsets-v{version}"

    async def scenario() -> None:
        commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                     topics=[OffsetCommitRequestTopic("t", [
                                         OffsetCommitRequestPartition(0, 42, 5, -1, "meta"),
                                         OffsetCommitRequestPartition(7, 1, -1, -1, "")])])
        response = await call(cluster, commit, version)
        assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
            (0, 0), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        if version < 8:
            request = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0, 1])])
            response = await call(cluster, request, version)
            partitions = response.topics[0].partitions
        else:
            request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group, topics=[
                OffsetFetchRequestTopics("t", [0, 1])]), OffsetFetchRequestGroup("other-group", topics=None)])
            response = await call(cluster, request, version)
            assert [g.group_id for g in response.groups] == [group, "other-group"] and response.groups[1].topics == []
            partitions = response.groups[0].topics[0].partitions
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in partitions] == [(0, 42, "meta"),
                                                                                           (1, -1, "")]
        if 5 <= version:
            assert partitions[0].committed_leader_epoch == (5 if version >= 6 else -1)
        if 2 <= version < 8:
            response = await call(cluster, OffsetFetchRequest(group_id=group, topics=None), version)
            assert [(t.name, [p.committed_offset for p in t.partitions]) for t in response.topics] == [("t", [42])]

    run(scenario())


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("retention_ms", [2**63 - 1, 2**62, -2, -(2**63)])
def test_an_extreme_retention_time_is_stored_and_never_overflows(cluster: Cluster, version: int,
                                                                  retention_ms: int) -> None:
    """OffsetCommit v2-4 retention_time_ms: an expiry past the largest timestamp never expires; a
    negative time other than -1 means the broker's default, as before."""
    async def scenario() -> None:
        commit = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                     retention_time_ms=retention_ms,
                                     topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 9)])])
        response = await call(cluster, commit, version)
        assert response.topics[0].partitions[0].error_code == 0
        response = await call(cluster, OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic("t", [0])]),
                              version)
        assert response.topics[0].partitions[0].committed_offset == 9
        assert cluster.group_coordinator.expire_offsets() == 0

    run(scenario())


def test_offset_delete_and_delete_groups(cluster: Cluster) -> None:
    async def scenario() -> None:
        commit = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                     topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, 1),
                                                                           OffsetCommitRequestPartition(1, 2)])])
        await call(cluster, commit, 8)
        delete = OffsetDeleteRequest(group_id="g", topics=[OffsetDeleteRequestTopic("t", [
            OffsetDeleteRequestPartition(0)])])
        response = await call(cluster, delete, 0)
        assert response.error_code == 0 and response.topics[0].partitions[0].error_code == 0
        delete.group_id = "ghost"
        assert (await call(cluster, delete, 0)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        for version in range(3):
            response = await call(cluster, DeleteGroupsRequest(groups_names=["g", "ghost"]), version)
            expected = [("g", 0), ("ghost", ErrorCode.GROUP_ID_NOT_FOUND)] if version == 0 else [
                ("g", ErrorCode.GROUP_ID_NOT_FOUND), ("ghost", ErrorCode.GROUP_ID_NOT_FOUND)]
            assert [(r.group_id, r.error_code) for r in response.results] == expected

    run(scenario())


@pytest.mark.parametrize("version", range(2))
def test_consumer_group_heartbeat_and_describe(cluster: Cluster, version: int) -> None:
    async def scenario() -> None:
        member_id = str(uuid.uuid4())
        join = ConsumerGroupHeartbeatRequest(group_id="cg", member_id=member_id, member_epoch=0,
                                             rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
                                             topic_partitions=[])
        response = await call(cluster, join, version)
        assert response.error_code == 0 and response.member_id == member_id and response.member_epoch == 1
        topic_id = cluster.topics.get("t").topic_id  # type: ignore[union-attr]
        assert [(tp.topic_id, tp.partitions) for tp in response.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
        beat = ConsumerGroupHeartbeatRequest(group_id="cg", member_id=member_id, member_epoch=1,
                                             rebalance_timeout_ms=-1, subscribed_topic_names=None,
                                             topic_partitions=None)
        response = await call(cluster, beat, version)
        assert response.error_code == 0 and response.assignment is None
        described = await call(cluster, ConsumerGroupDescribeRequest(group_ids=["cg", "nope"]), 0)
        group, missing = described.groups
        assert (group.group_state, group.group_epoch, group.assignor_name) == ("Stable", 1, "uniform")
        assert group.members[0].assignment.topic_partitions[0].topic_name == "t"
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = await call(cluster, ListGroupsRequest(types_filter=["consumer"]), 5)
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [("cg", "consumer", "consumer")]
        leave = ConsumerGroupHeartbeatRequest(group_id="cg", member_id=member_id, member_epoch=-1,
                                              rebalance_timeout_ms=-1, subscribed_topic_names=None,
                                              topic_partitions=None)
        response = await call(cluster, leave, version)
        assert response.error_code == 0 and response.member_epoch == -1

    run(scenario())


def test_join_group_waits_for_the_rebalance_and_sync_waits_for_the_leader(cluster: Cluster) -> None:
    async def scenario() -> None:
        def join(member_id: str) -> JoinGroupRequest:
            return JoinGroupRequest(group_id="waiting", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                    member_id=member_id, protocol_type="consumer",
                                    protocols=[JoinGroupRequestProtocol("range", b"")])

        first = await call(cluster, join(""), 3)
        await call(cluster, SyncGroupRequest(group_id="waiting", generation_id=first.generation_id,
                                             member_id=first.member_id), 3)
        # A second member joins the Stable group: its JoinGroup waits until the leader rejoins too.
        second_join = asyncio.ensure_future(call(cluster, join(""), 3))
        await asyncio.sleep(0.01)
        assert not second_join.done()
        leader = await call(cluster, join(first.member_id), 3)
        second = await second_join
        generation = leader.generation_id
        assert second.generation_id == generation == first.generation_id + 1 and len(leader.members) == 2
        # The follower's SyncGroup waits for the leader's assignment.
        follower_sync = asyncio.ensure_future(call(cluster, SyncGroupRequest(
            group_id="waiting", generation_id=generation, member_id=second.member_id), 3))
        await asyncio.sleep(0.01)
        assert not follower_sync.done()
        await call(cluster, SyncGroupRequest(group_id="waiting", generation_id=generation, member_id=first.member_id,
                                             assignments=[SyncGroupRequestAssignment(second.member_id, b"yours")]), 3)
        assert (await follower_sync).assignment == b"yours"

    run(scenario())
