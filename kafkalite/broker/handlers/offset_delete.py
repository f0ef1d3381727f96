"""OffsetDelete (API key 47), v0: delete a group's committed offsets for some partitions.

GROUP_ID_NOT_FOUND for an unknown group; NON_EMPTY_GROUP for a classic group with members that does
not use the consumer protocol. Per partition: GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to
the topic, UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist; deleting an offset that was
never committed succeeds.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from kafkalite.protocol.messages.offset_delete_response import OffsetDeleteResponsePartition, OffsetDeleteResponseTopic

__all__ = ["handle_offset_delete"]


@handles(api_key=47, min_version=0, max_version=0)
def handle_offset_delete(context: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    topics = [(topic.name, [partition.partition_index for partition in topic.partitions]) for topic in request.topics]
    error, errors = context.cluster.group_coordinator.delete_offsets(request.group_id, topics)
    if error is not ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=error)
    return OffsetDeleteResponse(topics=[
        OffsetDeleteResponseTopic(name=name, partitions=[
            OffsetDeleteResponsePartition(partition_index=index, error_code=errors[(name, index)])
            for index in indexes])
        for name, indexes in topics])
