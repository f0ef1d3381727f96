"""ShareGroupHeartbeat (API key 76), v1: share group membership (KIP-932).

Join (epoch 0, with the subscribed topics), heartbeat (the member's epoch) and leave (-1), with the
member id the client chose. The coordinator assigns partitions with the ``simple`` assignor: each
partition to one member while there are no more members than partitions, else every member one
partition, so that several members share it. There is no revocation: a member takes its new
assignment on its next heartbeat, and the share partitions it is given are initialized first
(``share.auto.offset.reset``). The answer carries the assignment when the member joins or its
assignment changes, and the group's heartbeat interval (``share.heartbeat.interval.ms``); a member
that misses ``share.session.timeout.ms`` is fenced and its acquired records are released. Errors:
INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND
(the id names a classic or consumer group). Version 0 (Kafka 4.0's early access) is not served, as in
Kafka 4.1. Not implemented: rack-aware assignment.
"""

from __future__ import annotations

from kafkalite.broker.core.group.coordinator import client_host
from kafkalite.broker.core.group.share_rebalance import ShareHeartbeat
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from kafkalite.protocol.messages.share_group_heartbeat_response import Assignment, TopicPartitions

__all__ = ["handle_share_group_heartbeat"]


@handles(api_key=76, min_version=1, max_version=1)
def handle_share_group_heartbeat(context: RequestContext,
                                 request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    result = context.cluster.group_coordinator.share_heartbeat(ShareHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=request.subscribed_topic_names,
        client_id=context.client_id or "",
        client_host=client_host(context.peer),
    ))
    if result.error is not ErrorCode.NONE:
        return ShareGroupHeartbeatResponse(error_code=result.error, error_message=result.error_message,
                                           member_epoch=request.member_epoch)
    return ShareGroupHeartbeatResponse(
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, partitions=partitions) for topic_id, partitions in result.assignment]),
    )
