"""DescribeGroups (API key 15), v0-5: state, protocol and members of classic groups.

Members carry their metadata and assignment only when the group is Stable, as in Kafka. An unknown
group (or a KIP-848 group, which ConsumerGroupDescribe describes) is reported in state Dead without
an error, as Kafka does. Authorized operations (v3+, when asked) are "all allowed": READ, DELETE and
DESCRIBE, Kafka's answer without an authorizer; otherwise the field keeps -2147483648.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from kafkalite.protocol.messages.describe_groups_response import DescribedGroup, DescribedGroupMember

__all__ = ["handle_describe_groups"]

GROUP_OPERATIONS = sum(1 << operation for operation in (3, 6, 8))  # READ, DELETE, DESCRIBE
NOT_REQUESTED = -(2**31)


@handles(api_key=15, min_version=0, max_version=5)
def handle_describe_groups(context: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = context.cluster.group_coordinator
    operations = GROUP_OPERATIONS if context.api_version >= 3 and request.include_authorized_operations \
        else NOT_REQUESTED
    response = DescribeGroupsResponse()
    for group_id in request.groups:
        description = coordinator.describe_group(group_id)
        response.groups.append(DescribedGroup(
            error_code=description.error,
            group_id=group_id,
            group_state=description.state,
            protocol_type=description.protocol_type,
            protocol_data=description.protocol_data,
            members=[DescribedGroupMember(member_id=member.member_id, group_instance_id=member.group_instance_id,
                                          client_id=member.client_id, client_host=member.client_host,
                                          member_metadata=member.metadata, member_assignment=member.assignment)
                     for member in description.members],
            authorized_operations=operations,
        ))
    return response
