"""DescribeTopicPartitions (API key 75), v0: topics and their partitions, a page at a time (KIP-966).

The answer lists the topics named (or, with none named, every topic) in name order, from the
request's cursor on: the cursor's topic starts at its partition, later topics at partition 0, and
earlier topics are left out. At most ``response_partition_limit`` partitions are listed, capped by
``max.request.partition.size.limit`` (and at least 1); when a topic's partitions do not all fit,
``next_cursor`` names the first one left out, and when the limit is reached at a topic boundary it
names the next topic at partition 0, exactly as Kafka pages. Each partition is led by this node,
its only replica and in-sync replica, with no eligible leader replicas and none offline. A named
topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
name), listed without using the limit; with no topics named, nothing is an error. A cursor whose
topic is not among the topics named, or whose partition is negative, makes every named topic
INVALID_REQUEST, as Kafka answers. Authorized operations are "all allowed", Kafka's answer without
an authorizer.
"""

from __future__ import annotations

from kafkalite.broker.core.topics import INTERNAL_TOPICS, Topic, validate_topic_name
from kafkalite.broker.handlers.metadata import TOPIC_OPERATIONS
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafkalite.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kafkalite.protocol.primitives import ZERO_UUID

__all__ = ["handle_describe_topic_partitions"]


@handles(api_key=75, min_version=0, max_version=0)
def handle_describe_topic_partitions(context: RequestContext, request: DescribeTopicPartitionsRequest
                                     ) -> DescribeTopicPartitionsResponse:
    cluster = context.cluster
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    names = {topic.name for topic in cluster.topics} if fetch_all else {topic.name for topic in request.topics}
    names = {name for name in names if name >= cursor_topic}
    if cursor is not None and ((not fetch_all and cursor.topic_name not in names) or cursor.partition_index < 0):
        return DescribeTopicPartitionsResponse(topics=[
            DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=topic.name,
                                                 is_internal=False, partitions=[])
            for topic in request.topics])
    limit = max(min(cluster.config.get_int("max.request.partition.size.limit"), request.response_partition_limit), 1)
    response = DescribeTopicPartitionsResponse(topics=[], next_cursor=None)
    remaining = limit
    for name in sorted(names):
        if remaining == 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = cluster.topics.get(name)
        if topic is None:
            if not fetch_all:
                response.topics.append(_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(len(topic.partitions), start + remaining)
        response.topics.append(_described(topic, range(start, upper), cluster.node_id))
        if upper < len(topic.partitions):
            response.next_cursor = Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= max(upper - start, 0)
    return response


def _described(topic: Topic, indexes: range, node_id: int) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
        topic_authorized_operations=TOPIC_OPERATIONS,
        partitions=[DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.NONE, partition_index=index, leader_id=node_id,
            leader_epoch=topic.partitions[index].leader_epoch, replica_nodes=[node_id], isr_nodes=[node_id],
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[]) for index in indexes])


def _missing(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    return DescribeTopicPartitionsResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                                                is_internal=name in INTERNAL_TOPICS, partitions=[])
