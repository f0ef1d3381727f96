"""AlterPartitionReassignments (API key 45), v0: Kafka's answer on a cluster of one broker.

Every partition has one replica, on this node. As Kafka's controller answers, per partition: a
reassignment onto this broker alone is accepted (NONE, with nothing to move); a replica list that
is empty, names another broker ("The manual partition assignment includes broker 2, but no such
broker is registered.") or names this one twice is INVALID_REPLICA_ASSIGNMENT; cancelling
(replicas null) is NO_REASSIGNMENT_IN_PROGRESS, since none ever is; an unknown topic or partition
is UNKNOWN_TOPIC_OR_PARTITION. ``timeout_ms`` is not needed: the answer is immediate.
"""

from __future__ import annotations

from kafkalite.broker.core.topics import Topic
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
from kafkalite.protocol.messages.alter_partition_reassignments_request import ReassignablePartition
from kafkalite.protocol.messages.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

__all__ = ["handle_alter_partition_reassignments"]


@handles(api_key=45, min_version=0, max_version=0)
def handle_alter_partition_reassignments(context: RequestContext, request: AlterPartitionReassignmentsRequest
                                         ) -> AlterPartitionReassignmentsResponse:
    cluster = context.cluster
    responses = []
    for requested in request.topics:
        response = ReassignableTopicResponse(name=requested.name, partitions=[])
        for partition in requested.partitions:
            result = ReassignablePartitionResponse(partition_index=partition.partition_index,
                                                   error_code=ErrorCode.NONE, error_message=None)
            try:
                _check(cluster.topics.get(requested.name), requested.name, partition, cluster.node_id)
            except KafkaError as exc:
                result.error_code, result.error_message = exc.error_code, exc.message
            response.partitions.append(result)
        responses.append(response)
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, responses=responses)


def _check(topic: Topic | None, name: str, partition: ReassignablePartition, node_id: int) -> None:
    """Kafka's checks of one reassignment; on a single broker the only valid one changes nothing."""
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    if not 0 <= partition.partition_index < len(topic.partitions):
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"Unable to find partition {name}:{partition.partition_index}.")
    if partition.replicas is None:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    if not partition.replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(partition.replicas):
        if broker_id != node_id:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, but no such broker is "
                             "registered.")
        if broker_id == previous:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
