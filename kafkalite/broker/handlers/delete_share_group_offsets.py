"""DeleteShareGroupOffsets (API key 92), v0: forget an empty share group's state for whole topics.

The group's share partitions of each named topic are removed (tombstones in ``__share_group_state``);
the next member to be assigned one starts it again at ``share.auto.offset.reset``. Top-level errors:
GROUP_ID_NOT_FOUND for an unknown group or one of another kind, NON_EMPTY_GROUP while it has members,
INVALID_GROUP_ID for an empty id. Per topic: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from kafkalite.protocol.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponseTopic

__all__ = ["handle_delete_share_group_offsets"]


@handles(api_key=92, min_version=0, max_version=0)
def handle_delete_share_group_offsets(context: RequestContext,
                                      request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    cluster = context.cluster
    try:
        if not request.group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
        cluster.group_coordinator.share_group_for_offsets(request.group_id, create=False)
    except KafkaError as refused:
        return DeleteShareGroupOffsetsResponse(error_code=refused.error_code, error_message=refused.message)
    deleted = cluster.share_partitions.delete_offsets(request.group_id,
                                                      list(dict.fromkeys(topic.topic_name for topic in request.topics)))
    return DeleteShareGroupOffsetsResponse(responses=[
        DeleteShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, error_code=error,
                                             error_message=None if error is ErrorCode.NONE else error.message)
        for name, topic_id, error in deleted])
