"""JoinGroup (API key 11), v0-9: join a classic group, wait for the rebalance, learn the generation.

The answer waits (a future parked on the member) until the join phase completes: every member has
rejoined, or the rebalance timeout expired, or (a new group) ``group.initial.rebalance.delay.ms``
passed. v4+ unknown dynamic members get MEMBER_ID_REQUIRED with their new member id first (KIP-394);
v5+ ``group_instance_id`` makes a static member (KIP-345; FENCED_INSTANCE_ID for a stale member id);
v9 ``skip_assignment`` is set for a static leader rejoining a Stable group. The protocol is chosen by
vote among those every member supports (INCONSISTENT_GROUP_PROTOCOL if none); session timeouts
outside ``group.min/max.session.timeout.ms`` get INVALID_SESSION_TIMEOUT; ``group.max.size`` gives
GROUP_MAX_SIZE_REACHED. v0 has no rebalance timeout: the session timeout is used, as in Kafka.
Not implemented: classic members joining a non-empty KIP-848 group (INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

from collections.abc import Awaitable

from kafkalite.broker.core.group.classic_group import JoinRequest, JoinResult
from kafkalite.broker.core.group.coordinator import client_host
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import JoinGroupRequest, JoinGroupResponse
from kafkalite.protocol.messages.join_group_response import JoinGroupResponseMember

__all__ = ["handle_join_group"]


@handles(api_key=11, min_version=0, max_version=9)
def handle_join_group(context: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse | Awaitable[
        JoinGroupResponse]:
    version = context.api_version
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols],
        client_id=context.client_id or "",
        client_host=client_host(context.peer),
        api_version=version,
        reason=request.reason if version >= 8 else None,
    )
    future = context.cluster.group_coordinator.join_group(join)
    if future.done():
        return _response(future.result(), version)
    return _wait(future, version)


async def _wait(future: Awaitable[JoinResult], version: int) -> JoinGroupResponse:
    return _response(await future, version)


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[JoinGroupResponseMember(member_id=member_id, group_instance_id=instance_id, metadata=metadata)
                 for member_id, instance_id, metadata in result.members],
    )
