"""Metadata (API key 3), v0-12: brokers, the controller, topics and their partitions.

This node is the only broker, the controller and the leader of every partition (epoch 0, one
replica, in sync). Topics are returned for a null topic list (or an empty one at v0), by name,
or by topic id (v10+). Unknown topics are created when ``auto.create.topics.enable`` is on and
the request allows it (always for v0-3). Authorized operations (v8+) are reported as "all
allowed", which is what Kafka answers when no authorizer is configured; with an authorizer,
``kafkalite.broker.security.enforce`` hides the topics a principal may not describe, refuses
creating those it may not create, and fills the authorized operations.
"""

from __future__ import annotations

from typing import Any

from kafkalite.broker.core.topics import Topic
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import MetadataRequest, MetadataResponse
from kafkalite.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkalite.protocol.primitives import ZERO_UUID, Writer

# Kafka's AclOperation codes: bit n set means operation n is allowed.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12, 13, 14))  # CREATE..DESCRIBE_TOKENS
NOT_REQUESTED = -(2**31)


@handles(api_key=3, min_version=0, max_version=12)
def handle_metadata(context: RequestContext, request: MetadataRequest) -> MetadataResponse:
    cluster = context.cluster
    version = context.api_version
    endpoint = cluster.endpoint_for(context.listener_name)
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=cluster.node_id, host=endpoint.host, port=endpoint.port, rack=None)],
        cluster_id=cluster.cluster_id,
        controller_id=cluster.node_id,
    )
    if version >= 8 and version <= 10 and request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = _CLUSTER_OPERATIONS
    topic_operations = version >= 8 and request.include_topic_authorized_operations

    requested = request.topics
    if requested is None or (version == 0 and not requested):
        for each in cluster.topics:
            response.topics.append(_describe(each, cluster.node_id, topic_operations))
        return response

    allow_create = (request.allow_auto_topic_creation if version >= 4 else True) and cluster.config.get_bool(
        "auto.create.topics.enable")
    for entry in requested:
        topic: Topic | None
        if entry.name is None:
            topic = cluster.topics.by_id(entry.topic_id) if entry.topic_id != ZERO_UUID else None
            if topic is None:
                response.topics.append(MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=entry.topic_id))
            else:
                response.topics.append(_describe(topic, cluster.node_id, topic_operations))
            continue
        topic = cluster.topics.get(entry.name)
        if topic is None and allow_create:
            try:
                topic = cluster.topics.auto_create(entry.name)
            except KafkaError as exc:
                response.topics.append(MetadataResponseTopic(error_code=exc.error_code, name=entry.name))
                continue
        if topic is None:
            response.topics.append(MetadataResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=entry.name,
                topic_authorized_operations=NOT_REQUESTED))
            continue
        response.topics.append(_describe(topic, cluster.node_id, topic_operations))
    return response


def _describe(topic: Topic, node: int, with_operations: bool) -> MetadataResponseTopic:
    return _TopicAnswer(topic, node, TOPIC_OPERATIONS if with_operations else NOT_REQUESTED)


def _partitions(topic: Topic, node: int) -> list[MetadataResponsePartition]:
    return [
        MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=partition.index,
            leader_id=node,
            leader_epoch=partition.leader_epoch,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for partition in topic.partitions
    ]


_PARTITIONS_SLOT: Any = MetadataResponseTopic.__dict__["partitions"]
_KEPT_ANSWERS = 64  # encodings kept per topic (versions x authorized-operations values)


class _TopicAnswer(MetadataResponseTopic):
    """A topic of a Metadata answer, written from the topic's kept encoding while it still says what
    that encoding says; ``partitions`` is built on first read (from then on it is written as is).

    A topic's part of the answer is encoded once per version and authorized-operations value and kept
    on the topic (``Topic.answers``, dropped when partitions are added), so an answer costs per topic,
    not per partition. Whoever reads the partitions of an answer (fault injection, the request
    statistics) gets them built, and the answer is then written field by field."""

    __slots__ = ("_topic", "_node")

    def __init__(self, topic: Topic, node: int, operations: int) -> None:
        # Not the generated __init__: it would build the partition list this class avoids.
        self.error_code = ErrorCode.NONE
        self.name = topic.name
        self.topic_id = topic.topic_id
        self.is_internal = topic.internal
        self.topic_authorized_operations = operations
        self.unknown_tagged_fields = None
        self._topic: Topic | None = topic
        self._node = node

    @property
    def partitions(self) -> list[MetadataResponsePartition]:
        topic = self._topic
        if topic is not None:
            _PARTITIONS_SLOT.__set__(self, _partitions(topic, self._node))
            self._topic = None
        return _PARTITIONS_SLOT.__get__(self)  # type: ignore[no-any-return]

    @partitions.setter
    def partitions(self, value: list[MetadataResponsePartition]) -> None:
        _PARTITIONS_SLOT.__set__(self, value)
        self._topic = None

    def write(self, writer: Writer, version: int) -> None:
        topic = self._topic
        if (topic is None or self.error_code or self.unknown_tagged_fields is not None or self.name != topic.name
                or self.topic_id != topic.topic_id or self.is_internal != topic.internal):
            super().write(writer, version)
            return
        key = ("metadata", version, self.topic_authorized_operations, self._node, len(topic.partitions))
        encoded = topic.answers.get(key)
        if not isinstance(encoded, bytes):
            whole = MetadataResponseTopic(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
                                          is_internal=topic.internal, partitions=_partitions(topic, self._node),
                                          topic_authorized_operations=self.topic_authorized_operations)
            encoder = Writer()
            whole.write(encoder, version)
            encoded = encoder.getvalue()
            if len(topic.answers) >= _KEPT_ANSWERS:
                topic.answers.clear()
            topic.answers[key] = encoded
        writer.raw(encoded)
