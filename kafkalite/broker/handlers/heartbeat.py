"""Heartbeat (API key 12), v0-4: a classic group member is alive; is the group rebalancing?

Resets the member's session timer. Answers REBALANCE_IN_PROGRESS while the group prepares a
rebalance (the member must rejoin), ILLEGAL_GENERATION for a stale generation, UNKNOWN_MEMBER_ID for a
member (or group) the coordinator does not know, FENCED_INSTANCE_ID (v3+) for a replaced static member.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import HeartbeatRequest, HeartbeatResponse

__all__ = ["handle_heartbeat"]


@handles(api_key=12, min_version=0, max_version=4)
def handle_heartbeat(context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    error = context.cluster.group_coordinator.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if context.api_version >= 3 else None)
    return HeartbeatResponse(error_code=error)
