"""Fetch (API key 1), v4-17: stored batches, long polls, fetch sessions, topic ids from v13.

Stored batches go out as they are in the log, without decoding. Byte limits follow Kafka:
``max_bytes`` bounds the response and ``partition_max_bytes`` each partition, except that the
first partition with data returns at least its first batch whole ("the first batch is always
returned", KIP-74), so a consumer can never get stuck behind a batch larger than its limits.
When fewer than ``min_bytes`` are available the request waits up to ``max_wait_ms`` and is
answered as soon as appends to its partitions bring enough bytes. Sessions (KIP-227) are in
``kafkalite.broker.core.fetch_sessions``, which also resolves a request's partitions.
An empty partition carries empty records, never null.
With isolation level 1 (read_committed) a partition returns only batches below its last stable
offset, and lists the aborted transactions (producer id, first offset) overlapping the returned
range so the client drops their records; a long poll waits until the last stable offset passes
the fetch position. With read_uncommitted ``aborted_transactions`` is null.
A topic deleted while a fetch waits on it wakes the fetch, which answers that topic's partitions
as it would a topic it never found: UNKNOWN_TOPIC_ID by id (v13+), UNKNOWN_TOPIC_OR_PARTITION by name.
Not implemented: follower fetching (``replica_id >= 0`` is served like a consumer), preferred
read replicas (always -1), diverging epochs (one leader epoch only).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import cast

from kafkalite.broker.core.fetch_sessions import CachedPartition, FetchPlan, SessionWaiter, WantedPartition, plan_fetch
from kafkalite.broker.core.log.partition_log import OffsetOutOfRange
from kafkalite.broker.core.partition import AppendedBatch, Listener, Partition, ReadInfo
from kafkalite.broker.handlers.delayed import DelayedAnswer, after_dispatch
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.fetch_codec import NO_CURRENT_LEADER, NO_DIVERGING_EPOCH, NO_SNAPSHOT_ID
from kafkalite.protocol.messages import FetchRequest, FetchResponse
from kafkalite.protocol.messages.fetch_response import AbortedTransaction, FetchableTopicResponse, PartitionData
from kafkalite.protocol.primitives import Records

_READ_COMMITTED = 1
_EMPTY = b""
_NONE = ErrorCode.NONE


class _Result:
    """One partition's outcome: the error, or what was read."""

    __slots__ = ("wanted", "error", "read")

    def __init__(self, wanted: WantedPartition, error: ErrorCode, read: ReadInfo | None) -> None:
        self.wanted = wanted
        self.error = error
        self.read = read


@handles(api_key=1, min_version=4, max_version=17)
def handle_fetch(context: RequestContext, request: FetchRequest) -> FetchResponse | DelayedAnswer:
    cluster = context.cluster
    version = context.api_version
    plan = plan_fetch(cluster.fetch_sessions, cluster.topics, request, version, int(time.time() * 1000))
    if plan.error:
        return FetchResponse(error_code=plan.error, session_id=0)
    wanted = plan.partitions
    read_committed = request.isolation_level == _READ_COMMITTED
    max_bytes = min(request.max_bytes, cluster.fetch_max_bytes)
    results = _read_all(wanted, max_bytes, read_committed, context.file_regions)
    available = 0
    errors = False
    for result in results:
        if result.error:
            errors = True
        elif result.read is not None:
            available += result.read.size
    nothing_to_wait_on = not wanted and (plan.session is None or not plan.session.partitions)
    if request.max_wait_ms <= 0 or nothing_to_wait_on or available >= request.min_bytes or errors:
        return _answer(plan, results, version, read_committed)
    return _ParkedFetch(plan, request.min_bytes, request.max_wait_ms, max_bytes, read_committed, version, available,
                        context.file_regions)


class _ParkedFetch(DelayedAnswer):
    """A Fetch waiting for ``min_bytes`` or ``max_wait_ms``: the answer itself, parked on its session
    when there is one (its watchers see every partition of it), else on each partition read, and on
    its timer. Once enough bytes arrive it reads again and answers when the requests dispatched with
    the append are done, or from the timer: in the same loop iteration, no task. The append that
    completes the wait hands over the batch it stored when that batch starts at the partition's fetch
    position: the read after the wake answers from it, without reading the log, when it is still
    exactly what the log would return (``Partition.read_appended``). Its listeners and timer are taken
    back as it stops waiting (answered or cancelled), so nothing refers to it in a cycle afterwards:
    no work for the cyclic collector per long poll."""

    __slots__ = ("_plan", "_session", "_min_bytes", "_max_bytes", "_read_committed", "_version", "_file_regions",
                 "_arrived", "_appended", "_positions", "_partitions", "_timer", "_on_append", "_on_session_change")

    def __init__(self, plan: FetchPlan, min_bytes: int, max_wait_ms: int, max_bytes: int, read_committed: bool,
                 version: int, available: int, file_regions: bool) -> None:
        super().__init__()
        self._plan, self._min_bytes, self._max_bytes = plan, min_bytes, max_bytes
        self._read_committed, self._version, self._file_regions = read_committed, version, file_regions
        self._arrived = available
        self._appended: dict[int, AppendedBatch] | None = None
        self._positions: dict[int, int] = {}  # (sessionless) each partition's fetch offset, by id
        self._partitions: list[Partition] = []  # (sessionless) the partitions listened to
        self._on_append: Listener | None = None
        self._on_session_change: SessionWaiter | None = None
        self._session = session = plan.session
        if session is not None:
            self._on_session_change = self._session_changed
            session.waiters.append(self._on_session_change)
        else:
            self._on_append = on_append = self._appended_to
            positions, partitions = self._positions, self._partitions
            for wanted in plan.partitions:
                partition = wanted.partition
                if partition is not None:
                    if id(partition) not in positions:
                        partitions.append(partition)
                        partition.add_listener(on_append)
                    positions[id(partition)] = wanted.fetch_offset
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(max_wait_ms / 1000,
                                                                                        self._finish)

    def stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._on_session_change is not None and self._session is not None:
            waiters = self._session.waiters
            if self._on_session_change in waiters:
                waiters.remove(self._on_session_change)
            self._on_session_change = None
        if self._on_append is not None:
            for partition in self._partitions:
                partition.remove_listener(self._on_append)
            self._on_append = None

    def _finish(self) -> None:
        if self.done:
            return
        self.stop_waiting()
        plan = self._plan
        try:
            results = _read_all(plan.revisit(), self._max_bytes, self._read_committed, self._file_regions,
                                self._appended)
            self.complete(_answer(plan, results, self._version, self._read_committed))
        except Exception as exc:
            self.fail(exc)

    def _arrive(self, partition: Partition, size: int, position: int) -> None:
        if self.done or size < 0:  # size < 0: offsets moved without an append, nothing arrived
            return
        if size == 0:  # the topic is being deleted: answer once the deletion is over
            return after_dispatch(self._finish)
        if self._read_committed and partition.last_stable_offset <= position:
            return  # nothing a read_committed fetch may see yet (the data is in an open transaction)
        self._arrived += size
        if self._arrived >= self._min_bytes:
            batch = partition.appended
            if batch is not None and batch.base_offset == position and (handed := AppendedBatch.of(batch)):
                if self._appended is None:
                    self._appended = {}
                self._appended[id(partition)] = handed
            after_dispatch(self._finish)  # once the request that appended (and those read with it) are done

    def _session_changed(self, cached: CachedPartition, partition: Partition, size: int) -> None:
        self._arrive(partition, size, cached.fetch_offset)

    def _appended_to(self, partition: Partition, size: int) -> None:
        self._arrive(partition, size, self._positions.get(id(partition), 0))


def _answer(plan: FetchPlan, results: list[_Result], version: int, read_committed: bool) -> FetchResponse:
    """The response; then the session learns which of the partitions read are settled."""
    response = _respond(results, version, read_committed, plan.session_id, plan.incremental)
    if plan.session is not None:
        plan.settle((result.wanted, _settled(result, read_committed)) for result in results)
    return response


def _settled(result: _Result, read_committed: bool) -> bool:
    """Nothing more to read at the partition's position and no error: until the partition changes,
    an incremental fetch would leave it out."""
    read = result.read
    if result.error or read is None or read.size:
        return False
    return result.wanted.fetch_offset >= (read.last_stable_offset if read_committed else read.high_watermark)


def _read_all(wanted: list[WantedPartition], max_bytes: int, read_committed: bool, file_regions: bool,
              appended: dict[int, AppendedBatch] | None = None) -> list[_Result]:
    """Read each partition in turn within ``max_bytes``; with ``file_regions``, large runs on disk stay
    ``FileRegion`` objects (the connection sends them with ``os.sendfile`` or reads them as it writes).
    ``appended``: batches appends handed over, by ``id`` of their partition, answered from when they
    are exactly what the read would return."""
    results = []
    remaining = max_bytes
    min_one_batch = True
    for item in wanted:
        result = _read(item, min(item.partition_max_bytes, remaining), min_one_batch, read_committed, file_regions,
                       appended)
        read = result.read
        if read is not None and read.size:
            min_one_batch = False
            remaining = max(0, remaining - read.size)
        results.append(result)
    return results


def _read(item: WantedPartition, limit: int, min_one_batch: bool, read_committed: bool, file_regions: bool,
          appended: dict[int, AppendedBatch] | None) -> _Result:
    """One partition read within ``limit`` (at least its first batch with ``min_one_batch``), or its error."""
    partition = item.partition
    if partition is None:
        return _Result(item, item.error, None)
    if partition.deleted:  # deleted while this fetch waited: as if it had never been found
        by_id = isinstance(item.topic, uuid.UUID)
        return _Result(item, ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
    epoch_error = partition.check_leader_epoch(item.current_leader_epoch)
    if epoch_error:
        return _Result(item, epoch_error, None)
    handed = appended.get(id(partition)) if appended else None
    read = None if handed is None else partition.read_appended(
        handed, item.fetch_offset, limit, min_one_batch=min_one_batch, read_committed=read_committed)
    if read is None:
        try:
            read = partition.read(item.fetch_offset, limit, min_one_batch=min_one_batch,
                                  read_committed=read_committed, file_regions=file_regions)
        except OffsetOutOfRange:
            return _Result(item, ErrorCode.OFFSET_OUT_OF_RANGE, None)
        except OSError:  # a segment file that cannot be read (or reopened)
            return _Result(item, ErrorCode.KAFKA_STORAGE_ERROR, None)
    return _Result(item, _NONE, read)


def _aborted(read: ReadInfo | None) -> list[AbortedTransaction]:
    if read is None or not read.aborted_transactions:
        return []
    return [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
            for txn in read.aborted_transactions]


def _respond(results: list[_Result], version: int, read_committed: bool, session_id: int,
             incremental: bool) -> FetchResponse:
    responses: list[FetchableTopicResponse] = []
    current: FetchableTopicResponse | None = None
    for result in results:
        item = result.wanted
        partition = item.partition
        read = result.read
        if read is not None:
            high_watermark, last_stable, log_start = read.high_watermark, read.last_stable_offset, read.log_start_offset
        elif partition is not None and not partition.deleted:
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
            current = FetchableTopicResponse(item.name or "", item.topic_id, [])
            responses.append(current)
        # (positional: partition index, error code, high watermark, last stable offset, log start offset,
        # diverging epoch, current leader, snapshot id (their shared defaults: to set one, assign a struct
        # of its own, never change these in place), aborted transactions, preferred read replica, records;
        # file regions among the records are pieces fetch_codec passes through)
        current.partitions.append(PartitionData(
            item.partition_index, result.error, high_watermark, last_stable, log_start, NO_DIVERGING_EPOCH,
            NO_CURRENT_LEADER, NO_SNAPSHOT_ID,
            _aborted(read) if read_committed else None, -1,
            cast(Records, read.records) if read is not None and read.size else _EMPTY))
    return FetchResponse(0, 0, session_id, responses)
