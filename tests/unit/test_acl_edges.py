"""The ACL rules' edges, called directly on an in-memory cluster: topics by id, per-partition refusals
where Kafka keeps them, silent filtering where Kafka filters, and the share-group APIs' own rules."""

from __future__ import annotations

import uuid
from typing import Any

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.broker.security.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from kafkalite.broker.security.authorizer import Authorizer
from kafkalite.broker.security.enforce import authorizing_handlers
from kafkalite.broker.security.principal import KafkaPrincipal
from kafkalite.broker.security.session import Session
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DeleteTopicsRequest,
    DescribeProducersRequest,
    DescribeShareGroupOffsetsRequest,
    FetchRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
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
from kafkalite.protocol.messages.delete_topics_request import DeleteTopicState
from kafkalite.protocol.messages.describe_producers_request import TopicRequest
from kafkalite.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkalite.protocol.messages.offset_delete_request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from kafkalite.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkalite.protocol.messages.share_acknowledge_request import AcknowledgePartition, AcknowledgeTopic
from kafkalite.protocol.messages.share_fetch_request import FetchPartition as ShareFetchPartition
from kafkalite.protocol.messages.share_fetch_request import FetchTopic as ShareFetchTopic

READ, WRITE, DESCRIBE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE
TOPIC_FAILED, GROUP_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED


def _allow(cluster: Cluster, resource_type: ResourceType, name: str, operation: AclOperation,
           principal: str = "User:alice") -> None:
    cluster.acls.add([AclBinding(resource_type, name, PatternType.LITERAL, principal, "*", operation,
                                 AclPermissionType.ALLOW)])


def _setup() -> tuple[Cluster, Authorizer, dict[int, Any]]:
    cluster = Cluster(BrokerConfig({"log.storage": "memory"}))
    cluster.open()
    cluster.endpoints[:] = [Endpoint("SASL_PLAINTEXT", "127.0.0.1", 9092)]
    for name in ("orders", "payments", "secret"):
        cluster.topics.create(name, 2)
    _allow(cluster, ResourceType.TOPIC, "orders", READ)
    _allow(cluster, ResourceType.TOPIC, "payments", DESCRIBE)
    _allow(cluster, ResourceType.GROUP, "g", READ)
    authorizer = Authorizer(cluster.acls, ["User:admin"])
    return cluster, authorizer, authorizing_handlers(HANDLERS, authorizer)


def _call(setup: tuple[Cluster, Authorizer, dict[int, Any]], user: str, request: Any, version: int) -> Any:
    cluster, authorizer, handlers = setup
    session = Session("SASL_PLAINTEXT", "10.0.0.1", KafkaPrincipal.user(user), authorizer=authorizer)
    context = RequestContext(cluster, request.API_KEY, version, 1, "test", "10.0.0.1:1", 1, "SASL_PLAINTEXT",
                             session)
    result = handlers[request.API_KEY].handle(context, request)
    assert not hasattr(result, "__await__"), "these requests are answered at once"
    return result


def _id(setup: tuple[Cluster, Authorizer, dict[int, Any]], name: str) -> uuid.UUID:
    topic = setup[0].topics.get(name)
    assert topic is not None
    return topic.topic_id


def test_delete_topics_by_id_resolves_the_id_and_names_only_what_may_be_described() -> None:
    setup = _setup()
    unknown = uuid.uuid4()
    ids = {name: _id(setup, name) for name in ("orders", "secret")}
    answer = _call(setup, "alice", DeleteTopicsRequest(topics=[
        DeleteTopicState(name=None, topic_id=ids["orders"]), DeleteTopicState(name=None, topic_id=ids["secret"]),
        DeleteTopicState(name=None, topic_id=unknown), DeleteTopicState(name="secret", topic_id=uuid.UUID(int=0)),
        DeleteTopicState(name="nowhere", topic_id=uuid.UUID(int=0)),
    ], timeout_ms=1000), 6)
    results = {(result.name, result.topic_id): result.error_code for result in answer.responses}
    assert results == {
        ("orders", ids["orders"]): TOPIC_FAILED,  # may DESCRIBE (READ implies it): named
        (None, ids["secret"]): TOPIC_FAILED,  # may not: not named
        (None, unknown): ErrorCode.UNKNOWN_TOPIC_ID,
        ("secret", uuid.UUID(int=0)): TOPIC_FAILED,
        ("nowhere", uuid.UUID(int=0)): TOPIC_FAILED,  # whether it exists is not told
    }
    _allow(setup[0], ResourceType.TOPIC, "orders", DELETE)
    deleted = _call(setup, "alice", DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=ids["orders"])],
                                                        timeout_ms=1000), 6)
    assert [(result.name, result.error_code) for result in deleted.responses] == [("orders", ErrorCode.NONE)]
    assert setup[0].topics.get("orders") is None


def _commit(setup: tuple[Cluster, Authorizer, dict[int, Any]], group: str) -> None:
    answer = _call(setup, "admin", OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                       topics=[OffsetCommitRequestTopic(name=name, partitions=[
                                                           OffsetCommitRequestPartition(partition_index=0,
                                                                                        committed_offset=5)])
                                                               for name in ("orders", "secret")]), 8)
    assert all(partition.error_code == ErrorCode.NONE for topic in answer.topics for partition in topic.partitions)


def test_offset_fetch_refuses_named_topics_per_partition_and_filters_all_offsets() -> None:
    setup = _setup()
    _commit(setup, "g")
    named = _call(setup, "alice", OffsetFetchRequest(group_id="g", topics=[
        OffsetFetchRequestTopic(name="orders", partition_indexes=[0]),
        OffsetFetchRequestTopic(name="secret", partition_indexes=[0, 1])]), 7)
    by_topic = {topic.name: [(p.partition_index, p.committed_offset, p.error_code) for p in topic.partitions]
                for topic in named.topics}
    assert by_topic == {"orders": [(0, 5, ErrorCode.NONE)], "secret": [(0, -1, TOPIC_FAILED), (1, -1, TOPIC_FAILED)]}
    everything = _call(setup, "alice", OffsetFetchRequest(group_id="g", topics=None), 7)
    assert [topic.name for topic in everything.topics] == ["orders"]
    many = _call(setup, "alice", OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id="g", topics=[OffsetFetchRequestTopics(name="secret", partition_indexes=[0])]),
        OffsetFetchRequestGroup(group_id="other", topics=None)]), 8)
    groups = {group.group_id: group for group in many.groups}
    assert groups["other"].error_code == GROUP_FAILED
    assert [(topic.name, topic.partitions[0].error_code) for topic in groups["g"].topics] == [("secret", TOPIC_FAILED)]
    all_of_g = _call(setup, "alice", OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="g", topics=None)]), 8)
    assert [topic.name for topic in all_of_g.groups[0].topics] == ["orders"]


def test_describe_producers_needs_read_and_answers_per_partition() -> None:
    setup = _setup()
    answer = _call(setup, "alice", DescribeProducersRequest(topics=[
        TopicRequest(name="orders", partition_indexes=[0]), TopicRequest(name="payments", partition_indexes=[0, 1])]),
        0)
    errors = {(topic.name, p.partition_index): p.error_code for topic in answer.topics for p in topic.partitions}
    assert errors == {("orders", 0): ErrorCode.NONE, ("payments", 0): TOPIC_FAILED, ("payments", 1): TOPIC_FAILED}


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic() -> None:
    setup = _setup()
    _commit(setup, "g")
    request = OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequestTopic(name=name, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for name in ("orders", "secret")])
    assert _call(setup, "alice", request, 0).error_code == GROUP_FAILED
    _allow(setup[0], ResourceType.GROUP, "g", DELETE)
    answer = _call(setup, "alice", request, 0)
    assert answer.error_code == ErrorCode.NONE
    assert {topic.name: topic.partitions[0].error_code for topic in answer.topics} == {
        "orders": ErrorCode.NONE, "secret": TOPIC_FAILED}


def test_fetch_by_unknown_topic_id_is_unknown_not_refused() -> None:
    setup = _setup()
    unknown, secret = uuid.uuid4(), _id(setup, "secret")
    answer = _call(setup, "alice", FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
        FetchTopic(topic_id=topic_id, partitions=[
            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])
        for topic_id in (unknown, secret, _id(setup, "orders"))]), 13)
    errors = {topic.topic_id: topic.partitions[0].error_code for topic in answer.responses}
    assert errors == {unknown: ErrorCode.UNKNOWN_TOPIC_ID, secret: TOPIC_FAILED, _id(setup, "orders"): ErrorCode.NONE}


def test_share_group_heartbeat_and_describe() -> None:
    setup = _setup()
    refused = _call(setup, "alice", ShareGroupHeartbeatRequest(group_id="other", member_id=str(uuid.uuid4()),
                                                               member_epoch=0, subscribed_topic_names=["orders"]), 1)
    assert refused.error_code == GROUP_FAILED
    hidden = _call(setup, "alice", ShareGroupHeartbeatRequest(group_id="g", member_id=str(uuid.uuid4()),
                                                              member_epoch=0, subscribed_topic_names=["secret"]), 1)
    assert hidden.error_code == TOPIC_FAILED
    joined = _call(setup, "bob", ShareGroupHeartbeatRequest(group_id="s", member_id=str(uuid.uuid4()), member_epoch=0,
                                                            subscribed_topic_names=["secret"]), 1)
    assert joined.error_code == GROUP_FAILED  # bob has no ACL at all
    admin_join = _call(setup, "admin", ShareGroupHeartbeatRequest(group_id="g", member_id=str(uuid.uuid4()),
                                                                  member_epoch=0, subscribed_topic_names=["secret"]), 1)
    assert admin_join.error_code == ErrorCode.NONE
    _allow(setup[0], ResourceType.GROUP, "g", DESCRIBE)
    described = _call(setup, "alice", ShareGroupDescribeRequest(group_ids=["g", "other"],
                                                                include_authorized_operations=True), 1)
    errors = {group.group_id: group.error_code for group in described.groups}
    assert errors == {"g": TOPIC_FAILED, "other": GROUP_FAILED}  # g's member subscribes to secret
    assert described.groups[0].members == []


def test_share_fetch_and_acknowledge_need_read_on_group_and_topics() -> None:
    setup = _setup()
    member = str(uuid.uuid4())
    assert _call(setup, "alice", ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=0,
                                                            subscribed_topic_names=["orders"]), 1).error_code == 0
    refused = _call(setup, "alice", ShareFetchRequest(group_id="other", member_id=member, share_session_epoch=0,
                                                      max_wait_ms=0, min_bytes=0, max_bytes=1024, max_records=10,
                                                      batch_size=10, topics=[]), 1)
    assert refused.error_code == GROUP_FAILED
    secret = _id(setup, "secret")
    fetched = _call(setup, "alice", ShareFetchRequest(
        group_id="g", member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=0, max_bytes=1024,
        max_records=10, batch_size=10,
        topics=[ShareFetchTopic(topic_id=secret, partitions=[ShareFetchPartition(partition_index=0)])]), 1)
    assert [(topic.topic_id, topic.partitions[0].error_code) for topic in fetched.responses
            if topic.topic_id == secret] == [(secret, TOPIC_FAILED)]
    acknowledged = _call(setup, "alice", ShareAcknowledgeRequest(
        group_id="g", member_id=member, share_session_epoch=1,
        topics=[AcknowledgeTopic(topic_id=secret, partitions=[AcknowledgePartition(partition_index=1)])]), 1)
    assert [(topic.topic_id, topic.partitions[0].error_code) for topic in acknowledged.responses
            if topic.topic_id == secret] == [(secret, TOPIC_FAILED)]


def test_share_group_offsets_apis() -> None:
    setup = _setup()
    member = str(uuid.uuid4())
    assert _call(setup, "admin", ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=0,
                                                            subscribed_topic_names=["orders"]), 1).error_code == 0
    assert _call(setup, "admin", ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=-1),
                 1).error_code == 0  # an empty group: its offsets may be altered
    described = _call(setup, "alice", DescribeShareGroupOffsetsRequest(groups=[
        DescribeShareGroupOffsetsRequestGroup(group_id="other", topics=None),
        DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=[
            DescribeShareGroupOffsetsRequestTopic(topic_name="secret", partitions=[0])])]), 1)
    groups = {group.group_id: group for group in described.groups}
    assert groups["other"].error_code == GROUP_FAILED
    assert [(topic.topic_name, topic.partitions[0].error_code) for topic in groups["g"].topics] == [
        ("secret", TOPIC_FAILED)]
    altered = _call(setup, "alice", AlterShareGroupOffsetsRequest(group_id="g", topics=[
        AlterShareGroupOffsetsRequestTopic(topic_name="secret", partitions=[
            AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]), 0)
    assert [(topic.topic_name, topic.partitions[0].error_code) for topic in altered.responses] == [
        ("secret", TOPIC_FAILED)]
    assert _call(setup, "alice", DeleteShareGroupOffsetsRequest(group_id="g", topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name="orders")]), 0).error_code == GROUP_FAILED
    _allow(setup[0], ResourceType.GROUP, "g", DELETE)
    deleted = _call(setup, "alice", DeleteShareGroupOffsetsRequest(group_id="g", topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name="secret")]), 0)
    assert [(topic.topic_name, topic.error_code) for topic in deleted.responses] == [("secret", TOPIC_FAILED)]
