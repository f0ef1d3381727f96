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

from kafkalite.broker.core.topics import Topic
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import MetadataRequest, MetadataResponse
from kafkalite.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkalite.protocol.primitives import ZERO_UUID

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
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[
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
        ],
        topic_authorized_operations=TOPIC_OPERATIONS if with_operations else NOT_REQUESTED,
    )
