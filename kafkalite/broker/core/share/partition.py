"""One share partition: a share group's delivery state of one topic partition.

See the ``kafkalite.broker.core.share`` package docstring for the states and their transitions.
This module holds the state machine only: it reads batches from the topic partition, but it keeps
no clock, arms no timer and writes nothing. The caller (``SharePartitionManager``) passes the time
in, arms a lock timer per acquisition (``Acquired.lock_id``), writes ``snapshot()`` to
``__share_group_state`` after every call that says the durable state changed, and wakes waiting
fetches when records become available again.

The in-flight window holds one entry per offset from the share-partition start offset (SPSO) up to
``end_offset`` (exclusive), the next offset never yet read from the log: a state, a delivery count
and, while acquired, the id of the acquisition holding the lock. Three parallel sequences keep it
(``bytearray`` of states, lists of counts and lock ids), so that a whole range changes with a slice.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from kafkalite.broker.core.log.partition_log import OffsetOutOfRange
from kafkalite.broker.core.partition import Partition
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import RecordBatch, iter_batches

__all__ = [
    "AcknowledgeType",
    "Acquired",
    "AcknowledgementBatch",
    "RecordState",
    "SharePartition",
    "StateBatch",
]


class RecordState(IntEnum):
    """Kafka's record states (the persisted ones are AVAILABLE, ACKNOWLEDGED and ARCHIVED)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledgement types of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_AVAILABLE: Final = RecordState.AVAILABLE.value
_ACQUIRED: Final = RecordState.ACQUIRED.value
_ACKNOWLEDGED: Final = RecordState.ACKNOWLEDGED.value
_ARCHIVED: Final = RecordState.ARCHIVED.value
_DONE: Final = bytes((_ACKNOWLEDGED, _ARCHIVED))  # delivery complete: the SPSO may move past these
_NO_LOCK: Final = 0
_ACKNOWLEDGE_TYPES: Final = frozenset(int(kind) for kind in AcknowledgeType)


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one persisted state and delivery count (Kafka's state batch)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One range of a ShareFetch or ShareAcknowledge: one type for all, or one type per offset."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


@dataclass(slots=True)
class Acquired:
    """What one ``acquire`` call handed out: stored batches to send, the offset ranges acquired with their
    delivery counts, and the lock that holds them (``lock_id`` 0 when nothing was acquired)."""

    batches: list[memoryview] = field(default_factory=list)
    ranges: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count)
    size: int = 0
    records: int = 0
    lock_id: int = _NO_LOCK
    batch_offsets: set[int] = field(default_factory=set)  # base offsets of the batches in ``batches``


_lock_ids = itertools.count(1)


class SharePartition:
    """The delivery state of one topic partition for one share group. Touch only from the event loop."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: Partition, start_offset: int,
                 state_epoch: int = 0, batches: Sequence[StateBatch] = ()) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        self._states = bytearray()
        self._counts: list[int] = []
        self._locks: list[int] = []
        self._lock_owner: dict[int, str] = {}  # lock id -> member id
        self._lock_deadline: dict[int, int] = {}  # lock id -> when it expires (ms)
        self._restore(batches)

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id}, {self.partition.topic_name}-{self.partition.index})"

    # the window ------------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        """One past the last offset read from the log (Kafka's share-partition end offset plus one)."""
        return self.start_offset + len(self._states)

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None]:
        """An offset's state, delivery count and (while acquired) owner; below the SPSO it is archived."""
        if offset < self.start_offset:
            return RecordState.ARCHIVED, 0, None
        index = offset - self.start_offset
        if index >= len(self._states):
            return RecordState.AVAILABLE, 0, None
        lock = self._locks[index]
        return RecordState(self._states[index]), self._counts[index], self._lock_owner.get(lock)

    def in_flight(self) -> int:
        return len(self._states)

    def delivery_complete(self) -> int:
        """In-flight offsets that will never be delivered again (acknowledged or archived)."""
        return self._states.count(_ACKNOWLEDGED) + self._states.count(_ARCHIVED)

    def lag(self) -> int:
        """Records from the SPSO to the high watermark that are not yet delivery complete."""
        return max(0, self.partition.high_watermark - self.start_offset - self.delivery_complete())

    def lock_deadline(self, lock_id: int) -> int | None:
        return self._lock_deadline.get(lock_id)

    def has_available(self) -> bool:
        return _AVAILABLE in self._states

    def _restore(self, batches: Sequence[StateBatch]) -> None:
        for batch in sorted(batches, key=lambda item: item.first_offset):
            first = max(batch.first_offset, self.start_offset)
            if batch.last_offset < first:
                continue
            self._extend(first, _AVAILABLE)
            self._extend(batch.last_offset + 1, int(batch.state))
            start, end = first - self.start_offset, batch.last_offset + 1 - self.start_offset
            self._states[start:end] = bytes((int(batch.state),)) * (end - start)
            self._counts[start:end] = [batch.delivery_count] * (end - start)
        self._advance()

    def _extend(self, offset: int, state: int) -> None:
        """Grow the window up to ``offset`` (exclusive) with entries in ``state`` and no deliveries."""
        grow = offset - self.end_offset
        if grow > 0:
            self._states.extend(bytes((state,)) * grow)
            self._counts.extend([0] * grow)
            self._locks.extend([_NO_LOCK] * grow)

    def _advance(self) -> bool:
        """Move the SPSO past delivery-complete offsets; True if it moved."""
        done = len(self._states) - len(self._states.lstrip(_DONE))
        if not done:
            return False
        del self._states[:done]
        del self._counts[:done]
        del self._locks[:done]
        self.start_offset += done
        return True

    def trim_to_log_start(self) -> bool:
        """Archive what retention or DeleteRecords removed from the log; True if the SPSO moved."""
        log_start = self.partition.log_start_offset
        if log_start <= self.start_offset:
            return False
        drop = min(log_start - self.start_offset, len(self._states))
        for lock in set(self._locks[:drop]) - {_NO_LOCK}:
            if lock not in self._locks[drop:]:
                self._forget_lock(lock)
        del self._states[:drop]
        del self._counts[:drop]
        del self._locks[:drop]
        self.start_offset = log_start
        self._advance()
        return True

    def reset(self, start_offset: int) -> None:
        """Start over at ``start_offset`` with nothing in flight (AlterShareGroupOffsets)."""
        self._states.clear()
        self._counts.clear()
        self._locks.clear()
        self._lock_owner.clear()
        self._lock_deadline.clear()
        self.start_offset = start_offset
        self.state_epoch += 1

    # acquiring -------------------------------------------------------------------------------
    def acquire(self, member_id: str, *, max_records: int, max_bytes: int, max_in_flight: int,
                read_committed: bool, lock_deadline_ms: int, min_one_batch: bool = True,
                record_limit: bool = False) -> Acquired:
        """Acquire available records for ``member_id``: released ones in the window first, then records
        never read, whole batches at a time (``record_limit``: never more than ``max_records``), while
        the window holds fewer than ``max_in_flight`` offsets. Each acquired offset's delivery count
        goes up by one; all of them share one lock that expires at ``lock_deadline_ms``."""
        acquired = Acquired(lock_id=next(_lock_ids))
        self.trim_to_log_start()
        remaining_bytes = max_bytes
        upper = self.partition.last_stable_offset if read_committed else self.partition.high_watermark
        for first, last in list(self._available_runs()):
            if acquired.records >= max_records:
                break
            remaining_bytes = self._acquire_from_log(acquired, member_id, first, last + 1, max_records,
                                                     remaining_bytes, min_one_batch and not acquired.size,
                                                     read_committed, record_limit, fresh=False)
            if remaining_bytes <= 0:
                break
        while (acquired.records < max_records and remaining_bytes > 0 and self.end_offset < upper
               and len(self._states) < max_in_flight):
            before = self.end_offset
            remaining_bytes = self._acquire_from_log(acquired, member_id, before, upper, max_records,
                                                     remaining_bytes, min_one_batch and not acquired.size,
                                                     read_committed, record_limit, fresh=True,
                                                     max_in_flight=max_in_flight)
            if self.end_offset == before:
                break
        if acquired.records:
            self._lock_owner[acquired.lock_id] = member_id
            self._lock_deadline[acquired.lock_id] = lock_deadline_ms
        else:
            acquired.lock_id = _NO_LOCK
        self._advance()  # control batches and aborted records at the front are archived already
        return acquired

    def _available_runs(self) -> Iterator[tuple[int, int]]:
        """Contiguous runs of AVAILABLE offsets in the window, as (first, last)."""
        states = self._states
        index = states.find(_AVAILABLE)
        while index >= 0:
            end = index
            while end < len(states) and states[end] == _AVAILABLE:
                end += 1
            yield self.start_offset + index, self.start_offset + end - 1
            index = states.find(_AVAILABLE, end)

    def _acquire_from_log(self, acquired: Acquired, member_id: str, offset: int, stop: int, max_records: int,
                          max_bytes: int, min_one_batch: bool, read_committed: bool, record_limit: bool, *,
                          fresh: bool, max_in_flight: int = 0) -> int:
        """Acquire from the stored batches covering ``[offset, stop)``; the bytes left afterwards."""
        try:
            read = self.partition.read(offset, max(max_bytes, 0), min_one_batch=min_one_batch,
                                       read_committed=read_committed)
        except OffsetOutOfRange:
            return max_bytes
        aborted = sorted(read.aborted_transactions or (), key=lambda txn: txn.first_offset)
        aborting: set[int] = set()
        for chunk in read.buffers():
            for batch in iter_batches(chunk):
                if not isinstance(batch, RecordBatch):
                    continue
                if batch.last_offset < offset:
                    continue
                if batch.base_offset >= stop or acquired.records >= max_records:
                    return max_bytes
                if fresh and len(self._states) >= max_in_flight:
                    return max_bytes
                while aborted and aborted[0].first_offset <= batch.base_offset:
                    aborting.add(aborted.pop(0).producer_id)
                first = max(batch.base_offset, offset)
                last = min(batch.last_offset, stop - 1)
                if fresh:
                    self._extend(first, _ARCHIVED)  # offsets no batch holds (compacted away)
                    self._extend(last + 1, _AVAILABLE)
                if batch.is_control:
                    aborting.discard(batch.producer_id)
                    self._set(first, last, _ARCHIVED)
                    continue
                if read_committed and batch.is_transactional and batch.producer_id in aborting:
                    self._set(first, last, _ARCHIVED)
                    continue
                if record_limit:
                    last = min(last, first + max_records - acquired.records - 1)
                taken = self._take(acquired, member_id, first, last)
                if taken and batch.base_offset not in acquired.batch_offsets:  # two runs may share a batch
                    acquired.batch_offsets.add(batch.base_offset)
                    acquired.batches.append(batch.buffer)
                    acquired.size += batch.size
                    max_bytes -= batch.size
                    if max_bytes <= 0:
                        return max_bytes
        return max_bytes

    def _set(self, first: int, last: int, state: int) -> None:
        start, end = first - self.start_offset, last + 1 - self.start_offset
        self._states[start:end] = bytes((state,)) * (end - start)

    def _take(self, acquired: Acquired, member_id: str, first: int, last: int) -> int:
        """Acquire the AVAILABLE offsets of ``[first, last]``; how many were taken."""
        base = self.start_offset
        taken = 0
        run_first = -1
        run_count = -1
        for offset in range(first, last + 1):
            index = offset - base
            if self._states[index] != _AVAILABLE:
                continue
            self._states[index] = _ACQUIRED
            count = self._counts[index] + 1
            self._counts[index] = count
            self._locks[index] = acquired.lock_id
            taken += 1
            if acquired.ranges and run_first >= 0 and acquired.ranges[-1][1] == offset - 1 and run_count == count:
                acquired.ranges[-1] = (run_first, offset, count)
            else:
                run_first, run_count = offset, count
                acquired.ranges.append((offset, offset, count))
        acquired.records += taken
        return taken

    # acknowledging ---------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], *, delivery_count_limit: int,
                    renew_allowed: bool = False, renew_deadline_ms: int = 0) -> tuple[bool, int]:
        """Apply a member's acknowledgements, all or none: (whether the durable state changed, the lock id
        renewed records now hold, or 0). KafkaError INVALID_REQUEST for malformed batches,
        INVALID_RECORD_STATE when a record is not acquired by ``member_id``."""
        plan: list[tuple[int, int]] = []  # (offset, type)
        previous_last = -1
        for batch in batches:
            first, last, types = batch.first_offset, batch.last_offset, batch.types
            if first < 0 or last < first or first <= previous_last:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Acknowledgement batches must be ascending and "
                                                            f"must not overlap (offsets {first}-{last}).")
            previous_last = last
            size = last - first + 1
            if len(types) not in (1, size):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Acknowledgement batch {first}-{last} has "
                                                            f"{len(types)} types for {size} offsets.")
            for kind in types:
                if kind not in _ACKNOWLEDGE_TYPES or (kind == AcknowledgeType.RENEW and not renew_allowed):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type {kind}.")
            for offset in range(max(first, self.start_offset), last + 1):  # below the SPSO: archived already
                plan.append((offset, types[0] if len(types) == 1 else types[offset - first]))
        base, end = self.start_offset, self.end_offset
        for offset, _ in plan:
            index = offset - base
            if offset >= end or self._states[index] != _ACQUIRED or \
                    self._lock_owner.get(self._locks[index]) != member_id:
                raise KafkaError(ErrorCode.INVALID_RECORD_STATE,
                                 f"The record at offset {offset} is not acquired by member {member_id}.")
        renewed = _NO_LOCK
        changed = False
        released_locks: set[int] = set()
        for offset, kind in plan:
            index = offset - base
            if kind == AcknowledgeType.RENEW:
                if renewed == _NO_LOCK:
                    renewed = next(_lock_ids)
                    self._lock_owner[renewed] = member_id
                    self._lock_deadline[renewed] = renew_deadline_ms
                released_locks.add(self._locks[index])
                self._locks[index] = renewed
                continue
            released_locks.add(self._locks[index])
            self._locks[index] = _NO_LOCK
            changed = True
            if kind == AcknowledgeType.ACCEPT:
                self._states[index] = _ACKNOWLEDGED
            elif kind == AcknowledgeType.RELEASE:
                self._states[index] = _ARCHIVED if self._counts[index] >= delivery_count_limit else _AVAILABLE
            else:  # REJECT, GAP
                self._states[index] = _ARCHIVED
        self._forget_unused(released_locks)
        self._advance()
        return changed, renewed

    # releasing -------------------------------------------------------------------------------
    def release_lock(self, lock_id: int, delivery_count_limit: int) -> int:
        """The lock expired: its records still acquired become available again (archived once they reached
        the delivery count limit). How many were released."""
        released = self._release(lambda lock: lock == lock_id, delivery_count_limit)
        self._forget_lock(lock_id)
        return released

    def release_member(self, member_id: str, delivery_count_limit: int) -> int:
        """Release every record ``member_id`` holds (it left the group or closed its share session)."""
        locks = {lock for lock, owner in self._lock_owner.items() if owner == member_id}
        if not locks:
            return 0
        released = self._release(locks.__contains__, delivery_count_limit)
        for lock in locks:
            self._forget_lock(lock)
        return released

    def locks_of(self, member_id: str) -> list[int]:
        return [lock for lock, owner in self._lock_owner.items() if owner == member_id]

    def _release(self, matches: Callable[[int], bool], delivery_count_limit: int) -> int:
        released = 0
        for index, lock in enumerate(self._locks):
            if lock != _NO_LOCK and matches(lock) and self._states[index] == _ACQUIRED:
                self._states[index] = _ARCHIVED if self._counts[index] >= delivery_count_limit else _AVAILABLE
                self._locks[index] = _NO_LOCK
                released += 1
        if released:
            self._advance()
        return released

    def _forget_unused(self, locks: set[int]) -> None:
        for lock in locks:
            if lock != _NO_LOCK and lock not in self._locks:
                self._forget_lock(lock)

    def _forget_lock(self, lock_id: int) -> None:
        self._lock_owner.pop(lock_id, None)
        self._lock_deadline.pop(lock_id, None)

    def live_locks(self) -> list[tuple[int, int]]:
        """(lock id, deadline) of every lock that still holds records."""
        return list(self._lock_deadline.items())

    # the durable state -----------------------------------------------------------------------
    def snapshot(self) -> list[StateBatch]:
        """The window as persisted runs. An acquired record is written as available with the delivery count
        it had before this delivery, as Kafka does: acquisitions are not made durable."""
        batches: list[StateBatch] = []
        run: list[int] | None = None  # [first, last, state, count]
        for index, state in enumerate(self._states):
            count = self._counts[index]
            if state == _ACQUIRED:
                state, count = _AVAILABLE, count - 1
            if state == _AVAILABLE and count == 0:
                if run is not None:
                    batches.append(StateBatch(run[0], run[1], RecordState(run[2]), run[3]))
                    run = None
                continue
            offset = self.start_offset + index
            if run is not None and run[1] == offset - 1 and run[2] == state and run[3] == count:
                run[1] = offset
            else:
                if run is not None:
                    batches.append(StateBatch(run[0], run[1], RecordState(run[2]), run[3]))
                run = [offset, offset, state, count]
        if run is not None:
            batches.append(StateBatch(run[0], run[1], RecordState(run[2]), run[3]))
        return batches
