"""ShareGroupDescribe (API key 77), v1: share groups with their epochs, members and assignments.

Each member is described with its epoch, rack, client id and host, subscribed topics and assigned
partitions (topic ids and names); the group's state is Empty or Stable and its assignor ``simple``.
An unknown group, or one of another kind, is GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID.
Authorized operations, when asked, are "all allowed" (READ, DELETE, DESCRIBE). Version 0 (Kafka
4.0's early access) is not served, as in Kafka 4.1.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from kafkalite.protocol.messages.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    TopicPartitions,
)

__all__ = ["handle_share_group_describe"]

GROUP_OPERATIONS = sum(1 << operation for operation in (3, 6, 8))  # READ, DELETE, DESCRIBE
NOT_REQUESTED = -(2**31)


@handles(api_key=77, min_version=1, max_version=1)
def handle_share_group_describe(context: RequestContext,
                                request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    coordinator = context.cluster.group_coordinator
    topics = context.cluster.topics
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    response = ShareGroupDescribeResponse()
    for group_id in request.group_ids:
        if not group_id:
            response.groups.append(DescribedGroup(error_code=ErrorCode.INVALID_GROUP_ID, group_id=group_id,
                                                  authorized_operations=operations))
            continue
        group = coordinator.describe_share_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if group_id in coordinator.groups
                       else f"Group {group_id} not found.")
            response.groups.append(DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message,
                                                  group_id=group_id, authorized_operations=operations))
            continue
        response.groups.append(DescribedGroup(
            group_id=group_id,
            group_state=group.state_name,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name="simple",
            members=[Member(member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                            client_id=member.client_id, client_host=member.client_host,
                            subscribed_topic_names=list(member.subscribed_topic_names),
                            assignment=Assignment(topic_partitions=[
                                TopicPartitions(topic_id=topic_id, topic_name=topics.name_of(topic_id),
                                                partitions=sorted(indexes))
                                for topic_id, indexes in sorted(member.assigned.items(), key=lambda item: str(item[0]))
                                if indexes]))
                     for member in group.members.values()],
            authorized_operations=operations,
        ))
    return response
