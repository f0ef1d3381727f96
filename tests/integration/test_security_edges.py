"""The authorizer's edges and the failed-login delay, against a secured broker over real sockets.

With confluent-kafka and kafka-python where they send the request (OffsetFetch, OffsetDelete, a wrong
password), the bundled admin client where it has the call (DescribeProducers), and a raw request
through the protocol classes where no client sends it (DeleteTopics by topic id, Fetch v13 by an
unknown topic id, the share-group APIs).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType as AdminResourceType

from kafkalite.client import Admin as AsyncAdmin
from kafkalite.client.admin_types import TopicPartition
from kafkalite.client.sync import Admin
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.messages import (
    DeleteTopicsRequest,
    FetchRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from kafkalite.protocol.messages.delete_topics_request import DeleteTopicState
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.messages.share_fetch_request import FetchPartition as ShareFetchPartition
from kafkalite.protocol.messages.share_fetch_request import FetchTopic as ShareFetchTopic
from kafkalite.testing.embedded import EmbeddedBroker

pytest.importorskip("cryptography")
kafka = pytest.importorskip("kafka")

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
TIMEOUT_S = 20.0
ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(AUTHORIZER, security="SASL_PLAINTEXT:PLAIN") as secured:
        yield secured


def _name() -> str:
    return f"edge-{uuid.uuid4().hex[:8]}"


def _allow(broker: EmbeddedBroker, resource_type: AdminResourceType, name: str, *operations: AclOperation) -> None:
    admin = AdminClient(broker.confluent_config("admin"))
    bindings = [AclBinding(resource_type, name, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                           AclPermissionType.ALLOW) for operation in operations]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)


def _as_alice(broker: EmbeddedBroker, request: Any, max_version: int | None = None) -> Any:
    """One raw request from alice, through the bundled client's connection."""
    async def send() -> Any:
        admin = AsyncAdmin(broker.client_config("alice"))
        await admin.start()
        try:
            return await admin.client.send_any(request, max_version=max_version)
        finally:
            await admin.close()

    return asyncio.run(send())


def _topic_ids(broker: EmbeddedBroker, *names: str) -> dict[str, uuid.UUID]:
    with Admin(broker.client_config("admin")) as admin:
        described = admin.describe_topics(list(names))
    return {name: described[name].topic_id for name in names}


def test_delete_topics_by_id(broker: EmbeddedBroker) -> None:
    visible, hidden, unknown = _name(), _name(), uuid.uuid4()
    broker.create_topic(visible)
    broker.create_topic(hidden)
    _allow(broker, AdminResourceType.TOPIC, visible, AclOperation.DESCRIBE)
    ids = _topic_ids(broker, visible, hidden)

    def delete(*topic_ids: uuid.UUID) -> dict[tuple[str | None, uuid.UUID], ErrorCode]:
        response = _as_alice(broker, DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=topic_id)
                                                                 for topic_id in topic_ids], timeout_ms=5000))
        return {(result.name, result.topic_id): result.error_code for result in response.responses}

    assert delete(ids[visible], ids[hidden], unknown) == {
        (visible, ids[visible]): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        (None, ids[hidden]): ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # not describable: not named
        (None, unknown): ErrorCode.UNKNOWN_TOPIC_ID,
    }
    _allow(broker, AdminResourceType.TOPIC, visible, AclOperation.DELETE)
    assert delete(ids[visible]) == {(visible, ids[visible]): ErrorCode.NONE}
    assert visible not in AdminClient(broker.confluent_config("admin")).list_topics(timeout=TIMEOUT_S).topics


def test_offset_fetch_refuses_per_partition_and_filters_all_offsets(broker: EmbeddedBroker) -> None:
    readable, hidden, group = _name(), _name(), _name()
    for name in (readable, hidden):
        broker.create_topic(name)
    _allow(broker, AdminResourceType.TOPIC, readable, AclOperation.READ)
    _allow(broker, AdminResourceType.GROUP, group, AclOperation.READ)
    with Admin(broker.client_config("admin")) as admin:
        admin.alter_consumer_group_offsets(group, {TopicPartition(readable, 0): 3, TopicPartition(hidden, 0): 4})
    alice = AdminClient(broker.confluent_config("alice"))
    named = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [
        confluent_kafka.TopicPartition(readable, 0), confluent_kafka.TopicPartition(hidden, 0)])])
    partitions = {partition.topic: partition for partition in named[group].result(TIMEOUT_S).topic_partitions}
    assert partitions[readable].offset == 3 and partitions[readable].error is None
    assert partitions[hidden].error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    everything = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    assert [(partition.topic, partition.offset) for partition in everything[group].result(TIMEOUT_S).topic_partitions
            ] == [(readable, 3)]
    kafka_admin = kafka.KafkaAdminClient(**broker.kafka_python_config("alice"))
    try:
        offsets = kafka_admin.list_group_offsets({group: None})[group]  # OffsetFetch v8+, all of the group's
        assert {tp.topic: meta.offset for tp, meta in offsets.items()} == {readable: 3}
    finally:
        kafka_admin.close()


def test_describe_producers_and_offset_delete(broker: EmbeddedBroker) -> None:
    readable, described, group = _name(), _name(), _name()
    for name in (readable, described):
        broker.create_topic(name)
    _allow(broker, AdminResourceType.TOPIC, readable, AclOperation.READ)
    _allow(broker, AdminResourceType.TOPIC, described, AclOperation.DESCRIBE)
    _allow(broker, AdminResourceType.GROUP, group, AclOperation.READ)
    with Admin(broker.client_config("admin")) as admin:
        admin.alter_consumer_group_offsets(group, {TopicPartition(readable, 0): 1, TopicPartition(described, 0): 2})
    with Admin(broker.client_config("alice")) as alice:
        producers = alice.describe_producers([TopicPartition(readable, 0), TopicPartition(described, 0)])
        assert producers[TopicPartition(readable, 0)].error is None
        refused = producers[TopicPartition(described, 0)].error
        assert refused is not None and refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # READ, not DESCRIBE
    both = [kafka.TopicPartition(readable, 0), kafka.TopicPartition(described, 0)]
    kafka_admin = kafka.KafkaAdminClient(**broker.kafka_python_config("alice"))
    try:
        with pytest.raises(kafka.errors.GroupAuthorizationFailedError):
            kafka_admin.delete_group_offsets(group, both)  # OffsetDelete needs DELETE on the group
        _allow(broker, AdminResourceType.GROUP, group, AclOperation.DELETE)
        deleted = kafka_admin.delete_group_offsets(group, both)
        assert {tp.topic: error for tp, error in deleted.items()} == {
            readable: kafka.errors.NoError, described: kafka.errors.TopicAuthorizationFailedError}  # and READ
    finally:
        kafka_admin.close()


def test_fetch_by_an_unknown_topic_id_and_share_fetch(broker: EmbeddedBroker) -> None:
    readable, hidden, group = _name(), _name(), _name()
    for name in (readable, hidden):
        broker.create_topic(name)
    _allow(broker, AdminResourceType.TOPIC, readable, AclOperation.READ)
    _allow(broker, AdminResourceType.GROUP, group, AclOperation.READ)
    ids = _topic_ids(broker, readable, hidden)
    unknown = uuid.uuid4()
    fetched = _as_alice(broker, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
        FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                 partition_max_bytes=1024)])
        for topic_id in (unknown, ids[hidden], ids[readable])]))
    assert {topic.topic_id: topic.partitions[0].error_code for topic in fetched.responses} == {
        unknown: ErrorCode.UNKNOWN_TOPIC_ID, ids[hidden]: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ids[readable]: ErrorCode.NONE}
    member = str(uuid.uuid4())
    subscribed = _as_alice(broker, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                              subscribed_topic_names=[hidden]))
    assert subscribed.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    joined = _as_alice(broker, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                          subscribed_topic_names=[readable]))
    assert joined.error_code == ErrorCode.NONE
    share_fetched = _as_alice(broker, ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        max_records=10, batch_size=10, topics=[ShareFetchTopic(topic_id=ids[hidden], partitions=[
            ShareFetchPartition(partition_index=0)])]))
    assert [(topic.topic_id, topic.partitions[0].error_code) for topic in share_fetched.responses] == [
        (ids[hidden], ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    other_group = _as_alice(broker, ShareFetchRequest(
        group_id=_name(), member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        max_records=10, batch_size=10, topics=[]))
    assert other_group.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


# the failed-login delay ----------------------------------------------------------------------------
def _request(message: Any, api_key: int, version: int, correlation_id: int) -> bytes:
    return bytes(encode_request(message, version, correlation_id, "delay-test"))


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, or None at the connection's end."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4:]


def test_a_failed_login_is_answered_then_closed_after_the_delay_while_others_are_served() -> None:
    with EmbeddedBroker({"connection.failed.authentication.delay.ms": 1500}, security="SASL_PLAINTEXT:PLAIN") as broker:
        with socket.create_connection((broker.host, broker.port), timeout=TIMEOUT_S) as sock:
            sock.sendall(_request(SaslHandshakeRequest(mechanism="PLAIN"), 17, 1, 1)
                         + _request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 36, 2, 2))
            handshake = _read_frame(sock)
            assert handshake is not None
            assert SaslHandshakeResponse.decode_from(parse_response_header(handshake, 17, 1), 1).error_code == 0
            # while the failed login waits, the broker serves another client
            with Admin(broker.client_config("alice")) as admin:
                assert admin.describe_cluster().brokers
            refused = _read_frame(sock)
            assert refused is not None
            answer = SaslAuthenticateResponse.decode_from(parse_response_header(refused, 36, 2), 2)
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert _read_frame(sock) is None  # then the close, and nothing else
