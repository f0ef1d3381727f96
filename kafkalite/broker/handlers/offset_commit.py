"""OffsetCommit (API key 8), v0-9: store a group's consumed positions (with metadata and leader epoch).

Commits are checked as Kafka checks them: a classic member needs its member id and the current
generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID; REBALANCE_IN_PROGRESS while
the group awaits its assignment); generation -1 with no member id commits to an Empty group, and to an
unknown group, which it creates (admin tools and manual-assignment consumers do this); a KIP-848
member needs v9 and its current member epoch (STALE_MEMBER_EPOCH). Committing to an unknown group with
a generation gets ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9). Per partition: unknown topics or
partitions get UNKNOWN_TOPIC_OR_PARTITION, metadata over ``offset.metadata.max.bytes`` gets
OFFSET_METADATA_TOO_LARGE. v2-4 ``retention_time_ms`` sets an expiry time for these offsets. A commit
keeps a classic member's session alive. Not implemented: v1 ``commit_timestamp`` (the broker's time
is stored, as Kafka 4 does).
"""

from __future__ import annotations

from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from kafkalite.protocol.messages.offset_commit_response import OffsetCommitResponsePartition, OffsetCommitResponseTopic

__all__ = ["handle_offset_commit"]


@handles(api_key=8, min_version=0, max_version=9)
def handle_offset_commit(context: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    version = context.api_version
    offsets = [OffsetToCommit(topic.name, partition.partition_index, partition.committed_offset,
                              partition.committed_leader_epoch if version >= 6 else -1, partition.committed_metadata)
               for topic in request.topics for partition in topic.partitions]
    errors = context.cluster.group_coordinator.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch if version >= 1 else -1,
        request.member_id if version >= 1 else "",
        request.group_instance_id if version >= 7 else None,
        offsets,
        api_version=version,
        retention_ms=request.retention_time_ms if 2 <= version <= 4 else -1,
    )
    return OffsetCommitResponse(topics=[
        OffsetCommitResponseTopic(name=topic.name, partitions=[
            OffsetCommitResponsePartition(partition_index=partition.partition_index,
                                          error_code=errors[(topic.name, partition.partition_index)])
            for partition in topic.partitions])
        for topic in request.topics])
