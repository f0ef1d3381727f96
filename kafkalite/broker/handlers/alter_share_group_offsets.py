"""AlterShareGroupOffsets (API key 91), v0: set the share-partition start offsets of an empty share group.

Each named partition starts over at the given offset with nothing in flight (its state epoch goes
up), as ``kafka-share-groups.sh --reset-offsets`` does; the change is written to
``__share_group_state``. A group id that names no group creates an empty share group, as Kafka does.
Top-level errors: NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND for a group of
another kind, INVALID_GROUP_ID for an empty id. Per partition: UNKNOWN_TOPIC_OR_PARTITION, and
INVALID_REQUEST for a negative offset.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from kafkalite.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)

__all__ = ["handle_alter_share_group_offsets"]


@handles(api_key=91, min_version=0, max_version=0)
def handle_alter_share_group_offsets(context: RequestContext,
                                     request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    cluster = context.cluster
    try:
        if not request.group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        cluster.group_coordinator.share_group_for_offsets(request.group_id, create=True)
    except KafkaError as refused:
        return AlterShareGroupOffsetsResponse(error_code=refused.error_code, error_message=refused.message)
    altered = cluster.share_partitions.alter_offsets(request.group_id, [
        (topic.topic_name, [(partition.partition_index, partition.start_offset) for partition in topic.partitions])
        for topic in request.topics])
    return AlterShareGroupOffsetsResponse(responses=[
        AlterShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, partitions=[
            AlterShareGroupOffsetsResponsePartition(partition_index=index, error_code=error,
                                                    error_message=None if error is ErrorCode.NONE else error.message)
            for index, error in errors])
        for name, topic_id, errors in altered])
