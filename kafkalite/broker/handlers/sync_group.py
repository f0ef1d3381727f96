"""SyncGroup (API key 14), v0-5: the leader hands in the assignment; every member gets its own.

Followers wait (a future parked on the member) until the leader's SyncGroup arrives; one arriving
after the leader's gets its assignment at once. The assignment is written to ``__consumer_offsets``
before anyone is answered. Errors: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (v3+ static members),
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the group is rebalancing again; parked SyncGroups get it
too), INCONSISTENT_GROUP_PROTOCOL (v5+ protocol type or name not the group's).
"""

from __future__ import annotations

from collections.abc import Awaitable

from kafkalite.broker.core.group.classic_group import SyncResult
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import SyncGroupRequest, SyncGroupResponse

__all__ = ["handle_sync_group"]


@handles(api_key=14, min_version=0, max_version=5)
def handle_sync_group(context: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse | Awaitable[
        SyncGroupResponse]:
    version = context.api_version
    future = context.cluster.group_coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {item.member_id: bytes(item.assignment) for item in request.assignments})
    if future.done():
        return _response(future.result())
    return _wait(future)


async def _wait(future: Awaitable[SyncResult]) -> SyncGroupResponse:
    return _response(await future)


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
