"""ConsumerGroupDescribe (API key 69), v0: KIP-848 groups with their epochs, members and assignments.

Each member is described with its epoch, subscription, current assignment and target assignment
(topic ids and names). A group that does not exist or is a classic group gets GROUP_ID_NOT_FOUND, as
in Kafka (admin clients then fall back to DescribeGroups). Authorized operations, when asked, are
"all allowed" (READ, DELETE, DESCRIBE).
"""

from __future__ import annotations

from kafkalite.broker.core.group.assignors import Assignment as PartitionsByTopic
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from kafkalite.protocol.messages.consumer_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    TopicPartitions,
)

__all__ = ["handle_consumer_group_describe"]

GROUP_OPERATIONS = sum(1 << operation for operation in (3, 6, 8))  # READ, DELETE, DESCRIBE
NOT_REQUESTED = -(2**31)


@handles(api_key=69, min_version=0, max_version=0)
def handle_consumer_group_describe(context: RequestContext,
                                   request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    coordinator = context.cluster.group_coordinator
    topics = context.cluster.topics
    operations = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED

    def assignment(partitions: PartitionsByTopic) -> Assignment:
        return Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, topic_name=topics.name_of(topic_id), partitions=sorted(indexes))
            for topic_id, indexes in sorted(partitions.items(), key=lambda item: str(item[0])) if indexes])

    response = ConsumerGroupDescribeResponse()
    for group_id in request.group_ids:
        if not group_id:
            response.groups.append(DescribedGroup(error_code=ErrorCode.INVALID_GROUP_ID, group_id=group_id,
                                                  authorized_operations=operations))
            continue
        group = coordinator.describe_consumer_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group." if group_id in coordinator.groups
                       else f"Group {group_id} not found.")
            response.groups.append(DescribedGroup(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message,
                                                  group_id=group_id, authorized_operations=operations))
            continue
        response.groups.append(DescribedGroup(
            group_id=group_id,
            group_state=group.state_name,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.preferred_assignor(coordinator.default_assignor()),
            members=[Member(member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
                            member_epoch=member.member_epoch, client_id=member.client_id,
                            client_host=member.client_host,
                            subscribed_topic_names=list(member.subscribed_topic_names),
                            subscribed_topic_regex=member.subscribed_topic_regex,
                            assignment=assignment(member.assigned),
                            target_assignment=assignment(group.target.get(member.member_id, {})))
                     for member in group.members.values()],
            authorized_operations=operations,
        ))
    return response
