"""ShareAcknowledge (API key 79), v1-2: acknowledge records of share partitions without fetching (KIP-932).

The request continues the member's share session (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH;
epoch 0 cannot open one here) and applies each partition's acknowledgements all or nothing, as
ShareFetch does: gap, accept, release, reject, and with v2's IsRenewAck renew (a fresh lock).
Records released become available to the group's members at once; records released or timed out
at ``share.delivery.count.limit`` deliveries are archived. Epoch -1 closes the session afterwards and
releases what the member still holds. v2 answers ``AcquisitionLockTimeoutMs``. A group that is not a
share group is GROUP_ID_NOT_FOUND. Version 0 (Kafka 4.0's early access) is not served, as in Kafka 4.1.
"""

from __future__ import annotations

from kafkalite.broker.core.share.manager import ShareAcknowledge
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.broker.handlers.share_fetch import merge_partitions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from kafkalite.protocol.messages.share_acknowledge_response import (
    LeaderIdAndEpoch,
    PartitionData,
    ShareAcknowledgeTopicResponse,
)

__all__ = ["handle_share_acknowledge"]


@handles(api_key=79, min_version=1, max_version=2)
def handle_share_acknowledge(context: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    cluster = context.cluster
    group_id = request.group_id or ""
    if group_id and cluster.group_coordinator.describe_share_group(group_id) is None:
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                        error_message=f"Share group {group_id} not found.")
    result = cluster.share_partitions.acknowledge(ShareAcknowledge(
        group_id=group_id,
        member_id=request.member_id or "",
        session_epoch=request.share_session_epoch,
        renew=context.api_version >= 2 and request.is_renew_ack,
        partitions=merge_partitions(
            (topic.topic_id, partition.partition_index,
             [(batch.first_offset, batch.last_offset, batch.acknowledge_types)
              for batch in partition.acknowledgement_batches])
            for topic in request.topics for partition in topic.partitions),
    ))
    response = ShareAcknowledgeResponse(error_code=result.error, error_message=result.error_message,
                                        acquisition_lock_timeout_ms=result.lock_timeout_ms)
    current: ShareAcknowledgeTopicResponse | None = None
    for item in result.partitions:
        if current is None or current.topic_id != item.topic_id:
            current = ShareAcknowledgeTopicResponse(topic_id=item.topic_id)
            response.responses.append(current)
        current.partitions.append(PartitionData(
            partition_index=item.partition,
            error_code=item.acknowledge_error,
            error_message=item.acknowledge_message,
            current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
        ))
    return response
