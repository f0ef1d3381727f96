"""ConsumerGroupHeartbeat (API key 68), v0-1: the KIP-848 consumer group protocol.

Join (epoch 0), heartbeat, leave (-1) and static leave (-2) in one API; the coordinator assigns
partitions server-side (``uniform``, the default, or ``range``, chosen by ``server_assignor``) and
reconciles each member towards its target one heartbeat at a time: partitions are revoked before they
are given to another member. v1 adds ``subscribed_topic_regex`` (matched in full against topic names
with Python's ``re``, not RE2/J). The assignment is sent on joins, full requests and whenever it
changed. Errors: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, GROUP_ID_NOT_FOUND (a non-empty classic
group of that id). Not implemented: classic members in KIP-848 groups (online migration) and rack-aware
assignment.
"""

from __future__ import annotations

from kafkalite.broker.core.group.consumer_rebalance import ConsumerHeartbeat
from kafkalite.broker.core.group.coordinator import client_host
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kafkalite.protocol.messages.consumer_group_heartbeat_response import Assignment, TopicPartitions

__all__ = ["handle_consumer_group_heartbeat"]


@handles(api_key=68, min_version=0, max_version=1)
def handle_consumer_group_heartbeat(context: RequestContext,
                                    request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    owned = None if request.topic_partitions is None else [
        (item.topic_id, list(item.partitions)) for item in request.topic_partitions]
    result = context.cluster.group_coordinator.consumer_heartbeat(ConsumerHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=request.subscribed_topic_names,
        subscribed_topic_regex=request.subscribed_topic_regex if context.api_version >= 1 else None,
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=context.client_id or "",
        client_host=client_host(context.peer),
    ))
    if result.error is not ErrorCode.NONE:
        return ConsumerGroupHeartbeatResponse(error_code=result.error, error_message=result.error_message)
    return ConsumerGroupHeartbeatResponse(
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, partitions=partitions) for topic_id, partitions in result.assignment]),
    )
