"""ShareFetch (API key 78), v1-2: acquire records of share partitions, acknowledging earlier ones (KIP-932).

A share session (keyed by group and member) holds the partitions a member fetches: epoch 0 opens it
with the request's partitions (acknowledgements are INVALID_REQUEST then), each later request
carries the next epoch, adds the partitions it names and removes its forgotten ones (whose records
the member held are released); epoch -1 applies the acknowledgements, closes the session, releases
what the member still holds and fetches nothing. SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH
and SHARE_SESSION_LIMIT_REACHED are top-level errors; so is GROUP_ID_NOT_FOUND for a group that is
not a share group.

Acknowledgements (one type per range or one per offset: gap, accept, release, reject; renew with
v2's IsRenewAck, which fetches nothing) are applied per partition, all or nothing, before anything
is acquired; each record must be acquired by this member (INVALID_RECORD_STATE otherwise). Then the
session's partitions are read in turn from a rotating start: released records first, then new
ones, whole stored batches, up to ``max_records`` (v2 ShareAcquireMode 1: exactly) and ``max_bytes``,
within ``share.partition.max.record.locks`` in-flight records per partition, to the high watermark
or, with ``share.isolation.level=read_committed``, the last stable offset (aborted records and
control batches are never delivered). Each partition answers its stored batches and the acquired
ranges with their delivery counts, locked for ``AcquisitionLockTimeoutMs``
(``share.record.lock.duration.ms``). Partitions appear in the answer when they carry records, an
error or acknowledgement results, and all of them when a session opens. When nothing is acquired
the request waits up to ``max_wait_ms`` for appends or released records (``min_bytes`` counts as
one). ``batch_size`` is not used to split acquired ranges. Version 0 (Kafka 4.0's early access) is
not served, as in Kafka 4.1.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable

from kafkalite.broker.core.share.manager import (
    PartitionAcknowledgements,
    ShareFetch,
    ShareFetchResult,
)
from kafkalite.broker.core.share.partition import AcknowledgementBatch
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ShareFetchRequest, ShareFetchResponse
from kafkalite.protocol.messages.share_fetch_response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    PartitionData,
    ShareFetchableTopicResponse,
)

__all__ = ["handle_share_fetch", "merge_partitions"]

_RECORD_LIMIT = 1  # ShareAcquireMode: 0 batch-optimized, 1 record-limit
_EMPTY = b""


def merge_partitions(entries: Iterable[tuple[uuid.UUID, int, Iterable[tuple[int, int, list[int]]]]]
                     ) -> tuple[PartitionAcknowledgements, ...]:
    """The request's partitions, each once, with their acknowledgement ranges in offset order (a client
    may name a topic, or even a partition, more than once)."""
    merged: dict[tuple[uuid.UUID, int], list[AcknowledgementBatch]] = {}
    for topic_id, index, batches in entries:
        merged.setdefault((topic_id, index), []).extend(
            AcknowledgementBatch(first, last, tuple(types)) for first, last, types in batches)
    return tuple(PartitionAcknowledgements(topic_id, index, tuple(sorted(batches, key=lambda b: b.first_offset)))
                 for (topic_id, index), batches in merged.items())


@handles(api_key=78, min_version=1, max_version=2)
def handle_share_fetch(context: RequestContext,
                       request: ShareFetchRequest) -> ShareFetchResponse | Awaitable[ShareFetchResponse]:
    cluster = context.cluster
    version = context.api_version
    group_id = request.group_id or ""
    renew = version >= 2 and request.is_renew_ack
    if group_id and cluster.group_coordinator.describe_share_group(group_id) is None:
        return ShareFetchResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                  error_message=f"Share group {group_id} not found.")
    if renew and (request.max_bytes or request.min_bytes or request.max_records or request.max_wait_ms):
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="A renewing share fetch must not ask for records.")
    result = cluster.share_partitions.fetch(ShareFetch(
        group_id=group_id,
        member_id=request.member_id or "",
        session_epoch=request.share_session_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=min(request.max_bytes, cluster.fetch_max_bytes),
        max_records=request.max_records,
        record_limit=version >= 2 and request.share_acquire_mode == _RECORD_LIMIT,
        renew=renew,
        partitions=merge_partitions(
            (topic.topic_id, partition.partition_index,
             [(batch.first_offset, batch.last_offset, batch.acknowledge_types)
              for batch in partition.acknowledgement_batches])
            for topic in request.topics for partition in topic.partitions),
        forgotten=tuple((topic.topic_id, index) for topic in request.forgotten_topics_data
                        for index in topic.partitions),
    ))
    if isinstance(result, ShareFetchResult):
        return _response(result)
    return _respond_later(result)


async def _respond_later(result: Awaitable[ShareFetchResult]) -> ShareFetchResponse:
    return _response(await result)


def _response(result: ShareFetchResult) -> ShareFetchResponse:
    response = ShareFetchResponse(error_code=result.error, error_message=result.error_message,
                                  acquisition_lock_timeout_ms=result.lock_timeout_ms)
    current: ShareFetchableTopicResponse | None = None
    for item in result.partitions:
        if current is None or current.topic_id != item.topic_id:
            current = ShareFetchableTopicResponse(topic_id=item.topic_id)
            response.responses.append(current)
        current.partitions.append(PartitionData(
            partition_index=item.partition,
            error_code=item.error,
            error_message=item.error_message,
            acknowledge_error_code=item.acknowledge_error,
            acknowledge_error_message=item.acknowledge_message,
            current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
            records=item.records or _EMPTY,  # never null: librdkafka reads a null as a corrupt response
            acquired_records=[AcquiredRecords(first_offset=first, last_offset=last, delivery_count=count)
                              for first, last, count in item.acquired],
        ))
    return response
