"""The handler registry wrapped in ACL checks (``security.enforce``), called directly on an in-memory
cluster: what each principal sees and what is refused, with Kafka's error codes."""

from __future__ import annotations

from typing import Any

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
    CreateAclsRequest,
    CreateTopicsRequest,
    DescribeAclsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    MetadataRequest,
    OffsetCommitRequest,
)
from kafkalite.protocol.messages.create_acls_request import AclCreation
from kafkalite.protocol.messages.create_topics_request import CreatableTopic
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic
from kafkalite.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic


def _setup() -> tuple[Cluster, Authorizer, dict[int, Any]]:
    cluster = Cluster(BrokerConfig({"log.storage": "memory", "auto.create.topics.enable": "true"}))
    cluster.open()
    cluster.endpoints[:] = [Endpoint("SASL_PLAINTEXT", "127.0.0.1", 9092)]
    for name in ("orders", "payments", "secret"):
        cluster.topics.create(name, 2)
    authorizer = Authorizer(cluster.acls, ["User:admin"])
    cluster.acls.add([
        AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "pay", PatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
    ])
    return cluster, authorizer, authorizing_handlers(HANDLERS, authorizer)


def _call(cluster: Cluster, handlers: dict[int, Any], authorizer: Authorizer, user: str, request: Any,
          version: int) -> Any:
    session = Session("SASL_PLAINTEXT", "10.0.0.1", KafkaPrincipal.user(user), authorizer=authorizer)
    context = RequestContext(cluster, request.API_KEY, version, 1, "test", "10.0.0.1:1", 1, "SASL_PLAINTEXT",
                             session)
    result = handlers[request.API_KEY].handle(context, request)
    assert not hasattr(result, "__await__"), "these requests are answered at once"
    return result


def test_metadata_hides_what_may_not_be_described_and_fills_authorized_operations() -> None:
    cluster, authorizer, handlers = _setup()
    everything = _call(cluster, handlers, authorizer, "alice",
                       MetadataRequest(topics=None, include_topic_authorized_operations=True), 12)
    assert sorted(topic.name for topic in everything.topics) == ["orders", "payments"]
    operations = {topic.name: topic.topic_authorized_operations for topic in everything.topics}
    assert operations["orders"] == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    assert operations["payments"] == (1 << AclOperation.WRITE) | (1 << AclOperation.DESCRIBE)
    named = _call(cluster, handlers, authorizer, "alice",
                  MetadataRequest(topics=[MetadataRequestTopic(name="secret"), MetadataRequestTopic(name="orders"),
                                          MetadataRequestTopic(name="new-one")], allow_auto_topic_creation=True),
                  12)
    errors = {topic.name: topic.error_code for topic in named.topics}
    assert errors == {"orders": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      "new-one": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert cluster.topics.get("new-one") is None  # not auto-created for a principal without CREATE
    admin = _call(cluster, handlers, authorizer, "admin", MetadataRequest(topics=None), 12)
    assert len(admin.topics) == 3


def test_topic_group_and_cluster_refusals() -> None:
    cluster, authorizer, handlers = _setup()
    created = _call(cluster, handlers, authorizer, "alice", CreateTopicsRequest(
        topics=[CreatableTopic(name="mine", num_partitions=1, replication_factor=1)], timeout_ms=1000), 7)
    assert [(topic.name, topic.error_code) for topic in created.topics] == [
        ("mine", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert cluster.topics.get("mine") is None
    join = _call(cluster, handlers, authorizer, "alice", JoinGroupRequest(
        group_id="other", session_timeout_ms=10_000, member_id="", protocol_type="consumer", protocols=[]), 9)
    assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    commit = _call(cluster, handlers, authorizer, "alice", OffsetCommitRequest(
        group_id="g-1", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequestTopic(name="secret", partitions=[OffsetCommitRequestPartition(partition_index=0)]),
        ]), 8)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    idempotent = _call(cluster, handlers, authorizer, "bob", InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000), 4)
    assert idempotent.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    transactional = _call(cluster, handlers, authorizer, "alice", InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000), 4)
    assert transactional.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acl_apis_need_the_cluster_and_store_bindings() -> None:
    cluster, authorizer, handlers = _setup()
    creation = AclCreation(resource_type=ResourceType.TOPIC, resource_name="secret",
                           resource_pattern_type=PatternType.LITERAL, principal="User:bob", host="*",
                           operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)
    refused = _call(cluster, handlers, authorizer, "alice", CreateAclsRequest(creations=[creation]), 3)
    assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    created = _call(cluster, handlers, authorizer, "admin", CreateAclsRequest(creations=[creation]), 3)
    assert created.results[0].error_code == ErrorCode.NONE
    described = _call(cluster, handlers, authorizer, "admin", DescribeAclsRequest(
        resource_type_filter=ResourceType.TOPIC, resource_name_filter="secret", pattern_type_filter=PatternType.MATCH,
        principal_filter=None, host_filter=None, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY), 3)
    assert [(resource.resource_name, [acl.principal for acl in resource.acls]) for resource in described.resources] \
        == [("secret", ["User:bob"])]
