"""Fetch (API key 1), v4-17: stored batches, long polls, fetch sessions, topic ids from v13.

Stored batches go out as they are in the log, without decoding. Byte limits follow Kafka:
``max_bytes`` bounds the response and ``partition_max_bytes`` each partition, except that the
first partition with data returns at least its first batch whole ("the first batch is always
returned", KIP-74), so a consumer can never get stuck behind a batch larger than its limits.
When fewer than ``min_bytes`` are available the request waits up to ``max_wait_ms`` and is
answered as soon as appends to its partitions bring enough bytes. Sessions (KIP-227) are in
``broker.core.fetch_sessions``. An empty partition carries empty records, never null.
With isolation level 1 (read_committed) a partition returns only batches below its last stable
offset, and lists the aborted transactions (producer id, first offset) overlapping the returned
range so the client drops their records; a long poll waits until the last stable offset passes
the fetch position. With read_uncommitted ``aborted_transactions`` is null.
Not implemented: follower fetching (``replica_id >= 0`` is served like a consumer), preferred
read replicas (always -1), diverging epochs (one leader epoch only).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass

from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSession, SessionError
from kafkalite.broker.core.log import OffsetOutOfRange
from kafkalite.broker.core.partition import Partition, ReadInfo
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import FetchRequest, FetchResponse
from kafkalite.protocol.messages.fetch_response import AbortedTransaction, FetchableTopicResponse, PartitionData

_READ_COMMITTED = 1
_EMPTY = b""


@dataclass(slots=True)
class _Wanted:
    """One partition a fetch asks for, resolved against the topics."""

    topic: object  # the name (v4-12) or id (v13+) the client used
    name: str | None
    topic_id: uuid.UUID
    partition_index: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    partition: Partition | None
    error: ErrorCode
    cached: CachedPartition | None = None


@dataclass(slots=True)
class _Result:
    wanted: _Wanted
    error: ErrorCode
    read: ReadInfo | None


@handles(api_key=1, min_version=4, max_version=17)
def handle_fetch(context: RequestContext, request: FetchRequest) -> FetchResponse | Awaitable[FetchResponse]:
    cluster = context.cluster
    version = context.api_version
    now_ms = int(time.time() * 1000)
    by_id = version >= 13
    sessions = cluster.fetch_sessions
    session: FetchSession | None = None
    incremental = False
    response_session_id = 0

    if version >= 7:
        session_id, epoch = request.session_id, request.session_epoch
        try:
            if epoch == INITIAL_EPOCH:
                if session_id:
                    sessions.close(session_id)
                session = sessions.open(now_ms)
            elif epoch == FINAL_EPOCH:
                if session_id:
                    sessions.close(session_id)
            else:
                session = sessions.resume(session_id, epoch, now_ms)
                incremental = True
        except SessionError as exc:
            return FetchResponse(error_code=exc.error_code, session_id=0)
        if session is not None:
            response_session_id = session.session_id

    wanted = _resolve(cluster, request, by_id, session, incremental)
    read_committed = request.isolation_level == _READ_COMMITTED
    max_bytes = min(request.max_bytes, cluster.config.get_int("fetch.max.bytes"))
    results = _read_all(wanted, max_bytes, read_committed)
    available = sum(r.read.size for r in results if r.read is not None)
    errors = any(r.error for r in results)
    if request.max_wait_ms <= 0 or not wanted or available >= request.min_bytes or errors:
        return _respond(results, version, read_committed, response_session_id, incremental)
    return _wait_then_respond(wanted, request, max_bytes, read_committed, version, response_session_id,
                              incremental, available)


async def _wait_then_respond(wanted: list[_Wanted], request: FetchRequest, max_bytes: int, read_committed: bool,
                             version: int, session_id: int, incremental: bool, available: int) -> FetchResponse:
    """Park on the partitions until ``min_bytes`` arrive or ``max_wait_ms`` passes, then read again."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    arrived = available
    positions = {id(w.partition): w.fetch_offset for w in wanted if w.partition is not None}

    def on_append(partition: Partition, size: int) -> None:
        nonlocal arrived
        if read_committed and size and partition.last_stable_offset <= positions.get(id(partition), 0):
            return  # nothing a read_committed fetch may see yet (the data is in an open transaction)
        arrived += size
        if (arrived >= request.min_bytes or size == 0) and not done.done():
            done.set_result(None)

    partitions = {id(w.partition): w.partition for w in wanted if w.partition is not None}
    for partition in partitions.values():
        partition.add_listener(on_append)
    timer = loop.call_later(request.max_wait_ms / 1000, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        timer.cancel()
        for partition in partitions.values():
            partition.remove_listener(on_append)
    results = _read_all(wanted, max_bytes, read_committed)
    return _respond(results, version, read_committed, session_id, incremental)


def _resolve(cluster: Cluster, request: FetchRequest, by_id: bool, session: FetchSession | None,
             incremental: bool) -> list[_Wanted]:
    """The partitions this fetch reads, in order: the request's, or the session's."""
    topics = cluster.topics
    requested: list[_Wanted] = []
    for fetch_topic in request.topics:
        if by_id:
            topic = topics.by_id(fetch_topic.topic_id)
            key: object = fetch_topic.topic_id
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = topics.get(fetch_topic.topic)
            key = fetch_topic.topic
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for fetch_partition in fetch_topic.partitions:
            partition = None
            error = ErrorCode.NONE
            if topic is None:
                error = missing
            elif 0 <= fetch_partition.partition < len(topic.partitions):
                partition = topic.partitions[fetch_partition.partition]
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            requested.append(_Wanted(
                topic=key,
                name=topic.name if topic is not None else (None if by_id else fetch_topic.topic),
                topic_id=topic.topic_id if topic is not None else fetch_topic.topic_id,
                partition_index=fetch_partition.partition,
                fetch_offset=fetch_partition.fetch_offset,
                partition_max_bytes=fetch_partition.partition_max_bytes,
                current_leader_epoch=fetch_partition.current_leader_epoch,
                partition=partition,
                error=error,
            ))
    if session is None:
        return requested
    if incremental:
        for forgotten in request.forgotten_topics_data:
            forgotten_key = forgotten.topic_id if by_id else forgotten.topic
            for index in forgotten.partitions:
                session.partitions.pop((forgotten_key, index), None)
    for item in requested:
        cached = session.partitions.get((item.topic, item.partition_index))
        if cached is None:
            cached = CachedPartition(item.topic, item.partition_index, item.fetch_offset, item.partition_max_bytes,
                                     item.current_leader_epoch)
            session.partitions[(item.topic, item.partition_index)] = cached
        else:
            cached.fetch_offset = item.fetch_offset
            cached.partition_max_bytes = item.partition_max_bytes
            cached.current_leader_epoch = item.current_leader_epoch
    if not incremental:
        for item in requested:
            item.cached = session.partitions[(item.topic, item.partition_index)]
        return requested
    # An incremental fetch reads every partition of the session, at the positions it remembers.
    wanted: list[_Wanted] = []
    for (key, index), cached in session.partitions.items():
        topic = topics.by_id(key) if isinstance(key, uuid.UUID) else topics.get(str(key))
        partition = topic.partitions[index] if topic is not None and index < len(topic.partitions) else None
        error = ErrorCode.NONE
        if partition is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if by_id and topic is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        wanted.append(_Wanted(
            topic=key,
            name=topic.name if topic is not None else (None if by_id else str(key)),
            topic_id=topic.topic_id if topic is not None else (key if isinstance(key, uuid.UUID) else uuid.UUID(int=0)),
            partition_index=index,
            fetch_offset=cached.fetch_offset,
            partition_max_bytes=cached.partition_max_bytes,
            current_leader_epoch=cached.current_leader_epoch,
            partition=partition,
            error=error,
            cached=cached,
        ))
    return wanted


def _read_all(wanted: list[_Wanted], max_bytes: int, read_committed: bool) -> list[_Result]:
    results = []
    remaining = max_bytes
    min_one_batch = True
    for item in wanted:
        partition = item.partition
        if partition is None:
            results.append(_Result(item, item.error, None))
            continue
        epoch_error = partition.check_leader_epoch(item.current_leader_epoch)
        if epoch_error:
            results.append(_Result(item, epoch_error, None))
            continue
        try:
            read = partition.read(item.fetch_offset, min(item.partition_max_bytes, remaining),
                                  min_one_batch=min_one_batch, read_committed=read_committed)
        except OffsetOutOfRange:
            results.append(_Result(item, ErrorCode.OFFSET_OUT_OF_RANGE, None))
            continue
        if read.size:
            min_one_batch = False
            remaining = max(0, remaining - read.size)
        results.append(_Result(item, ErrorCode.NONE, read))
    return results


def _aborted(read: ReadInfo | None) -> list[AbortedTransaction]:
    if read is None or not read.aborted_transactions:
        return []
    return [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
            for txn in read.aborted_transactions]


def _respond(results: list[_Result], version: int, read_committed: bool, session_id: int,
             incremental: bool) -> FetchResponse:
    response = FetchResponse(session_id=session_id)
    current: FetchableTopicResponse | None = None
    for result in results:
        item = result.wanted
        partition = item.partition
        read = result.read
        if read is not None:
            high_watermark, last_stable, log_start = read.high_watermark, read.last_stable_offset, read.log_start_offset
        elif partition is not None:
            high_watermark, last_stable = partition.high_watermark, partition.last_stable_offset
            log_start = partition.log_start_offset
        else:
            high_watermark = last_stable = log_start = -1
        if incremental and item.cached is not None and not item.cached.must_send(
                high_watermark, last_stable, log_start, bool(read and read.size), bool(result.error)):
            continue
        if not incremental and item.cached is not None:
            item.cached.must_send(high_watermark, last_stable, log_start, False, False)
        if current is None or current.topic_id != item.topic_id or current.topic != (item.name or ""):
            current = FetchableTopicResponse(topic=item.name or "", topic_id=item.topic_id)
            response.responses.append(current)
        current.partitions.append(PartitionData(
            partition_index=item.partition_index,
            error_code=result.error,
            high_watermark=high_watermark,
            last_stable_offset=last_stable,
            log_start_offset=log_start,
            aborted_transactions=_aborted(read) if read_committed else None,
            records=read.records if read is not None and read.size else _EMPTY,
        ))
    return response
