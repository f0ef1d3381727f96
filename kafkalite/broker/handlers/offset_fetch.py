"""OffsetFetch (API key 9), v0-9: a group's committed offsets, for given partitions or all of them.

Partitions without a committed offset get offset -1; so do all partitions of an unknown group. Null
topics (v2+) return every committed offset of the group. v7+ ``require_stable``: partitions with
offsets staged by an open transaction get UNSTABLE_OFFSET_COMMIT (the client retries). v8+ fetch for
several groups at once (the groups[] layout). v9 ``member_id``/``member_epoch`` are checked for KIP-848
groups (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). Group-level errors are top-level from v2 and on every
partition before.
"""

from __future__ import annotations

from kafkalite.broker.core.group.coordinator import PartitionOffset
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from kafkalite.protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

__all__ = ["handle_offset_fetch"]


@handles(api_key=9, min_version=0, max_version=9)
def handle_offset_fetch(context: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    coordinator = context.cluster.group_coordinator
    version = context.api_version
    require_stable = request.require_stable if version >= 7 else False
    if version < 8:
        topics = None if request.topics is None else [(topic.name, topic.partition_indexes) for topic in request.topics]
        error, partitions = coordinator.fetch_offsets(request.group_id, topics, require_stable)
        response = OffsetFetchResponse(error_code=error)
        for topic, items in _by_topic(partitions).items():
            response.topics.append(OffsetFetchResponseTopic(name=topic, partitions=[
                OffsetFetchResponsePartition(partition_index=item.partition, committed_offset=item.offset,
                                             committed_leader_epoch=item.leader_epoch, metadata=item.metadata,
                                             error_code=item.error if error is ErrorCode.NONE or version >= 2
                                             else error)
                for item in items]))
        return response
    response = OffsetFetchResponse()
    for group in request.groups:
        topics = None if group.topics is None else [(topic.name, topic.partition_indexes) for topic in group.topics]
        error, partitions = coordinator.fetch_offsets(group.group_id, topics, require_stable,
                                                      group.member_id if version >= 9 else None,
                                                      group.member_epoch if version >= 9 else -1)
        response.groups.append(OffsetFetchResponseGroup(group_id=group.group_id, error_code=error, topics=[
            OffsetFetchResponseTopics(name=topic, partitions=[
                OffsetFetchResponsePartitions(partition_index=item.partition, committed_offset=item.offset,
                                              committed_leader_epoch=item.leader_epoch, metadata=item.metadata,
                                              error_code=item.error)
                for item in items])
            for topic, items in _by_topic(partitions).items()]))
    return response


def _by_topic(partitions: list[PartitionOffset]) -> dict[str, list[PartitionOffset]]:
    topics: dict[str, list[PartitionOffset]] = {}
    for item in partitions:
        topics.setdefault(item.topic, []).append(item)
    return topics
