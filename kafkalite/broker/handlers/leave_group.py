"""LeaveGroup (API key 13), v0-5: members leave a classic group, which then rebalances.

v0-2 name one member; v3+ a batch of members, each by member id or (admin removal, KIP-345) by
group instance id alone, each with its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Before v3 the
member's error is the response's error. A member parked in JoinGroup is answered UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from kafkalite.protocol.messages.leave_group_response import MemberResponse

__all__ = ["handle_leave_group"]


@handles(api_key=13, min_version=0, max_version=5)
def handle_leave_group(context: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = context.api_version
    if version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(member.member_id, member.group_instance_id) for member in request.members]
    error, member_errors = context.cluster.group_coordinator.leave_group(request.group_id, members)
    if version < 3:
        if error is ErrorCode.NONE and member_errors:
            error = member_errors[0]
        return LeaveGroupResponse(error_code=error)
    return LeaveGroupResponse(error_code=error, members=[
        MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=member_error)
        # no member errors come with a group-level error
        for (member_id, instance_id), member_error in zip(members, member_errors, strict=False)])
