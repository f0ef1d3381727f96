"""CreatePartitions (API key 37), v0-3: raise the partition count of topics (or, validate_only, check it).

Per topic, as Kafka's controller answers: a name given twice is INVALID_REQUEST, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, a count that is not an increase INVALID_PARTITIONS. Manual
``assignments`` must give one replica list per new partition and each list must be exactly this
broker (INVALID_REPLICA_ASSIGNMENT otherwise): this is a single-broker cluster.

Deviation: the internal topics are refused with INVALID_TOPIC_EXCEPTION. Kafka allows it, but
groups and transactional ids are mapped to coordinator partitions by the partition count, so a
change would orphan their state. Not implemented: ``timeout_ms`` (the change is immediate) and quotas.
"""

from __future__ import annotations

from collections import Counter

from kafkalite.broker.handlers.create_topics import check_replicas
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from kafkalite.protocol.messages.create_partitions_request import CreatePartitionsTopic
from kafkalite.protocol.messages.create_partitions_response import CreatePartitionsTopicResult

__all__ = ["handle_create_partitions"]


@handles(api_key=37, min_version=0, max_version=3)
def handle_create_partitions(context: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(topic.name for topic in request.topics)
    response = CreatePartitionsResponse()
    reported: set[str] = set()
    for topic in request.topics:
        if topic.name in reported:
            continue
        result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.NONE, error_message=None)
        if counts[topic.name] > 1:
            reported.add(topic.name)
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        else:
            try:
                _create_partitions(context, topic, request.validate_only)
            except KafkaError as exc:
                result.error_code, result.error_message = exc.error_code, exc.message
        response.results.append(result)
    return response


def _create_partitions(context: RequestContext, request: CreatePartitionsTopic, validate_only: bool) -> None:
    topics = context.cluster.topics
    topic = topics.create_partitions(request.name, request.count, validate_only=True)  # existence and count
    if topic.internal:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"The partition count of internal topic {topic.name} cannot change: "
                         "coordinator state is placed by it.")
    if request.assignments is not None:
        additional = request.count - len(topic.partitions)
        if len(request.assignments) != additional:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(request.assignments)} assignment(s) were specified.")
        for assignment in request.assignments:
            check_replicas(assignment.broker_ids, context.cluster.node_id)
    if not validate_only:
        topics.create_partitions(request.name, request.count)
