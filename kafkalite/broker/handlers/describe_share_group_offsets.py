"""DescribeShareGroupOffsets (API key 90), v0-1: the share-partition start offsets of share groups.

For each group: its topics, or with null topics every partition it has state for, each with its
share-partition start offset (-1 when the group has no state for the partition yet), the leader
epoch (0) and, from v1, the lag: the records from the start offset to the high watermark that are
not yet acknowledged or archived (-1 without state). An unknown group, or one of another kind, is a
group-level GROUP_ID_NOT_FOUND; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from kafkalite.broker.core.partition import LEADER_EPOCH
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
from kafkalite.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)

__all__ = ["handle_describe_share_group_offsets"]


@handles(api_key=90, min_version=0, max_version=1)
def handle_describe_share_group_offsets(context: RequestContext, request: DescribeShareGroupOffsetsRequest
                                        ) -> DescribeShareGroupOffsetsResponse:
    cluster = context.cluster
    response = DescribeShareGroupOffsetsResponse()
    for group in request.groups:
        if cluster.group_coordinator.describe_share_group(group.group_id) is None:
            response.groups.append(DescribeShareGroupOffsetsResponseGroup(
                group_id=group.group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Share group {group.group_id} not found."))
            continue
        topics = None if group.topics is None else [(topic.topic_name, topic.partitions) for topic in group.topics]
        described = DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id)
        for name, topic_id, offsets in cluster.share_partitions.describe_offsets(group.group_id, topics):
            described.topics.append(DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic_id, partitions=[
                DescribeShareGroupOffsetsResponsePartition(
                    partition_index=offset.partition, start_offset=offset.start_offset,
                    leader_epoch=LEADER_EPOCH if offset.error is ErrorCode.NONE else -1, lag=offset.lag,
                    error_code=offset.error,
                    error_message=None if offset.error is ErrorCode.NONE else offset.error.message)
                for offset in offsets]))
        response.groups.append(described)
    return response
