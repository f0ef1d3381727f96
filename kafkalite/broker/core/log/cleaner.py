"""Log compaction: one log's cleaning, done in slices so the event loop keeps serving.

Theory of operation (Kafka's cleaner, ``LogCleaner.Cleaner``)
--------------------------------------------------------------
A compacted log keeps, for every key, at least its latest record. Its *clean* part (from the log
start offset to the *first dirty offset*, kept in ``cleaner-offset-checkpoint``) has been compacted
before; its *dirty* part (from there to the *first uncleanable offset*: the active segment's base,
the last stable offset, or the first segment newer than ``min.compaction.lag.ms``, whichever comes
first) has not. A cleaning runs in three phases:

1. **Offset map.** Every record with a key in the dirty part is read, and the map keeps the last
   offset of each key (a key longer than 32 bytes is kept as a 16-byte BLAKE2b digest, as Kafka
   keeps an MD5). Batches of aborted transactions and control batches do not count. The map holds at
   most ``capacity`` keys (``log.cleaner.dedupe.buffer.size`` divided by what an entry costs here);
   when it is full the cleaning stops at the end of the segment it was reading, and the rest waits
   for the next cleaning. The map's end (one past the last offset it read) is the cleaning's end.
2. **Rewrite.** The segments below that end are cleaned in groups (consecutive segments whose total
   size fits ``segment.bytes``), each group into one new segment with the base offset of its first.
   A record is kept when its offset is past the map's end, or it is the latest of its key; a keyless
   record is dropped (Kafka refuses them on compacted topics). A tombstone (a null value) stays
   until the *delete horizon* of its batch has passed: the first cleaning that keeps it writes the
   horizon (now + ``delete.retention.ms``) into the batch (KIP-534: the delete-horizon attribute, the
   horizon as base timestamp), a later cleaning after it removes it. Transactions: the batches of an
   aborted transaction are dropped (the aborted-transaction index says which); a COMMIT marker whose
   transaction has no batch left, or an ABORT marker whose transaction's batches were all removed by
   an earlier cleaning, is *safe to remove*: it gets a delete horizon, and goes once it has passed.
   The last batch of each active producer is kept, emptied of its records if they go (Kafka's
   RETAIN_EMPTY), so its sequence and epoch survive for idempotence. A batch keeps its offsets: a
   batch with records removed is rebuilt with its base offset, last offset delta, producer fields
   and codec; a batch that loses nothing is copied byte for byte.
3. **Swap**, per group: the new segment is written to ``<base>.log.cleaned`` (and ``.index.cleaned``,
   ``.timeindex.cleaned``), fsynced (off the loop), then swapped in crash-safely by the log's engine
   (``SegmentedLog.replace_segments``: renamed to ``<base>.<end>.swap``, which is the commit point;
   the old segments' files removed; the new ones renamed into place; a restart completes or discards
   a swap interrupted by a crash). A group whose segments changed meanwhile (retention, DeleteRecords)
   is dropped, not swapped.

``Cleaner.step(deadline)`` does at most what fits before ``deadline`` (a ``time.perf_counter`` value)
and says whether it is done, must wait for its fsync, or has more to do; the log cleaner
(``kafkalite.broker.core.log_cleaner``) calls it in slices of a few milliseconds between the event
loop's other work. Reads and appends go on meanwhile: the active segment is never cleaned, and a
cleaned group replaces the old one in one step on the loop.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kafkalite.broker.core.log.aborted import AbortedTxn
from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.partition_log import PendingFlush, SegmentedLog
from kafkalite.broker.core.log.segment import INT32_MAX, LogSegment
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import (
    ControlRecordType,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_empty_batch,
)

log = logging.getLogger("kafkalite.log_cleaner")

__all__ = ["CleanerStats", "Cleaner", "OffsetMap", "Step", "TransactionTracker", "MAP_ENTRY_BYTES"]

MAP_ENTRY_BYTES = 96  # what one key costs in the offset map here (a dict entry, a small bytes, an int)
_DIGEST_ABOVE = 32  # keys longer than this are kept as a digest


class Step(enum.Enum):
    MORE = "more"  # call step() again
    WAITING = "waiting"  # an fsync runs in the background; call step() again once it is done
    DONE = "done"


class OffsetMap:
    """The last offset of each key of the dirty part of a log, up to ``capacity`` keys."""

    __slots__ = ("capacity", "_offsets", "latest_offset")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset read into the map (records past it are kept as they are)

    @staticmethod
    def _slot(key: bytes) -> bytes:
        if len(key) <= _DIGEST_ABOVE:
            return key
        return b"\x00" * (_DIGEST_ABOVE + 1) + hashlib.blake2b(key, digest_size=16).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[self._slot(key)] = offset

    def get(self, key: bytes) -> int:
        return self._offsets.get(self._slot(key), -1)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.capacity

    def __len__(self) -> int:
        return len(self._offsets)


@dataclass
class _OngoingAbort:
    txn: AbortedTxn
    observed: bool = False  # a batch of it was seen in this cleaning


class TransactionTracker:
    """Which batches belong to aborted transactions, and which markers are safe to remove, as the
    batches of a cleaning are read in offset order (Kafka's ``CleanedTransactionMetadata``)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda txn: txn.first_offset)
        self._next = 0
        self._ongoing_aborts: dict[int, _OngoingAbort] = {}
        self._ongoing_commits: set[int] = set()
        self.forgettable: list[AbortedTxn] = []  # aborts with no batch left: their index entries can go

    def _start_aborts_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._ongoing_aborts.setdefault(txn.producer_id, _OngoingAbort(txn))
            self._next += 1

    def on_data_batch(self, batch: RecordBatch) -> bool:
        """Whether the batch belongs to an aborted transaction (and may be discarded)."""
        self._start_aborts_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._ongoing_aborts.get(batch.producer_id)
        if ongoing is not None:
            ongoing.observed = True
            return True
        self._ongoing_commits.add(batch.producer_id)
        return False

    def on_control_batch(self, batch: RecordBatch, marker: ControlRecordType | None) -> bool:
        """Whether the marker is safe to remove (its transaction has no batch left)."""
        self._start_aborts_up_to(batch.last_offset)
        if marker is None:  # an empty control batch was cleaned before
            return True
        if marker is ControlRecordType.ABORT:
            ongoing = self._ongoing_aborts.pop(batch.producer_id, None)
            if ongoing is not None and ongoing.observed:
                return False  # keep the marker until the batches removed now are gone for good
            if ongoing is not None:
                self.forgettable.append(ongoing.txn)
            return True
        if marker is ControlRecordType.COMMIT:
            observed = batch.producer_id in self._ongoing_commits
            self._ongoing_commits.discard(batch.producer_id)
            return not observed  # no batch of its transaction was read: nothing left to commit
        return False


@dataclass
class CleanerStats:
    """What a cleaning read and wrote."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    keys: int = 0
    groups: int = 0
    discarded_groups: int = 0
    started: float = field(default_factory=time.perf_counter)


@dataclass
class _Group:
    segments: list[LogSegment]
    cleaned: LogSegment | None = None
    batches: Iterator[RecordBatch] | None = None
    segment_index: int = 0


class Cleaner:
    """The cleaning of one log, from ``first_dirty_offset`` up to ``upper_bound`` (exclusive).

    ``aborted`` gives the aborted transactions overlapping a range of offsets; ``last_batches`` maps
    each active producer id to (epoch, last offset of its last data batch, or -1). ``background``
    runs the fsync of each cleaned group.
    """

    def __init__(self, log: SegmentedLog, *, first_dirty_offset: int, upper_bound: int, now_ms: int,
                 aborted: Callable[[int, int], list[AbortedTxn]], last_batches: dict[int, tuple[int, int]],
                 map_capacity: int, background: Background) -> None:
        self.log = log
        self.first_dirty_offset = first_dirty_offset
        self.upper_bound = upper_bound
        self.now_ms = now_ms
        self._aborted = aborted
        self._last_batches = last_batches
        self._background = background
        self.map = OffsetMap(map_capacity)
        self.stats = CleanerStats()
        self.end_offset = first_dirty_offset  # where the map ended: what the checkpoint moves to when done
        self.earliest_horizon: int | None = None  # the earliest delete horizon written or kept (for the next cleaning)
        self.failure: str | None = None  # why the cleaning gave up (segments changed under it, a read failed)
        self._phase = "map"
        self._map_segments = log.segments_between(first_dirty_offset, upper_bound)
        self._map_position = 0
        self._map_batches: Iterator[RecordBatch] | None = None
        self._map_tracker: TransactionTracker | None = None
        self._tracker: TransactionTracker | None = None
        self._groups: list[_Group] = []
        self._group_index = 0
        self._waiting = False

    @property
    def done(self) -> bool:
        return self._phase == "done"

    # --- driving --------------------------------------------------------------------------------

    def step(self, deadline: float) -> Step:
        """Work until ``deadline`` (``time.perf_counter``), the end, or an fsync to wait for."""
        try:
            while True:  # at least one batch, however short the slice
                if self._phase == "map":
                    self._map_some(deadline)
                elif self._phase == "rewrite":
                    if self._waiting:
                        return Step.WAITING
                    self._rewrite_some(deadline)
                else:
                    return Step.DONE
                if time.perf_counter() >= deadline:
                    break
            return Step.DONE if self._phase == "done" else Step.WAITING if self._waiting else Step.MORE
        except (OSError, CorruptRecordError) as exc:
            self.abandon(f"{type(exc).__name__}: {exc}")
            return Step.DONE

    def abandon(self, reason: str) -> None:
        """Stop: drop what was written for the group in progress; nothing else changed."""
        if self._phase == "done":
            return
        self.failure = reason
        self._phase = "done"
        if self._group_index < len(self._groups):
            group = self._groups[self._group_index]
            if group.cleaned is not None:
                self.log.discard_cleaned_segment(group.cleaned)
                group.cleaned = None

    # --- phase 1: the offset map ------------------------------------------------------------------

    def _map_some(self, deadline: float) -> None:
        if self._map_tracker is None:
            self._map_tracker = TransactionTracker(self._aborted(self.first_dirty_offset, self.upper_bound))
        while True:
            batch = self._next_map_batch()
            if batch is None:
                self._start_rewrite()
                return
            self.stats.bytes_read += batch.size
            if batch.is_control:
                self._map_tracker.on_control_batch(batch, _marker_of(batch))
            elif not self._map_tracker.on_data_batch(batch):
                for record in batch.records():
                    self.stats.records_read += 1
                    if record.key is not None:
                        self.map.put(record.key, record.offset)
            self.map.latest_offset = batch.last_offset
            if time.perf_counter() >= deadline:
                return

    def _next_map_batch(self) -> RecordBatch | None:
        while True:
            if self._map_batches is None:
                if self._map_position >= len(self._map_segments):
                    return None
                if self.map.full and self._map_position > 0:
                    return None  # the map is full: stop at a segment boundary, the rest waits
                segment = self._map_segments[self._map_position]
                self._map_batches = segment.batches_from(max(segment.base_offset, self.first_dirty_offset))
            batch = next(self._map_batches, None)
            if batch is not None and batch.last_offset < self.upper_bound:
                return batch
            self._map_batches = None
            self._map_position += 1

    # --- phase 2: rewriting groups -----------------------------------------------------------------

    def _start_rewrite(self) -> None:
        self.end_offset = self.map.latest_offset + 1 if self.map.latest_offset >= 0 else self.first_dirty_offset
        self.stats.keys = len(self.map)
        segments = self.log.segments_between(self.log.log_start_offset, self.end_offset)
        self._groups = _group_by_size(segments, self.log.config.segment_bytes)
        self._tracker = TransactionTracker(self._aborted(self.log.log_start_offset, self.end_offset))
        self._phase = "rewrite" if self._groups else "done"

    def _rewrite_some(self, deadline: float) -> None:
        group = self._groups[self._group_index]
        if group.cleaned is None:
            group.cleaned = self.log.new_cleaned_segment(group.segments[0].base_offset, self.now_ms)
        while True:
            batch = self._next_group_batch(group)
            if batch is None:
                self._sync_group(group)
                return
            self.stats.bytes_read += batch.size
            kept = self._filter(batch)
            if kept is not None:
                group.cleaned.append(kept, self.now_ms, self.log.config.index_interval_bytes)
                self.stats.bytes_written += kept.size
            if time.perf_counter() >= deadline:
                return

    def _next_group_batch(self, group: _Group) -> RecordBatch | None:
        while group.segment_index < len(group.segments):
            if group.batches is None:
                segment = group.segments[group.segment_index]
                group.batches = segment.batches_from(segment.base_offset)
            batch = next(group.batches, None)
            if batch is not None:
                return batch
            group.batches = None
            group.segment_index += 1
        return None

    def _sync_group(self, group: _Group) -> None:
        """The group is written: fsync its files off the loop, then swap it in (on the loop)."""
        assert group.cleaned is not None
        cleaned = group.cleaned
        cleaned.last_modified_ms = group.segments[-1].last_modified_ms
        cleaned.on_roll()  # never active: its final time index entry, and its index files closed
        handles, _ = cleaned.prepare_sync()
        pending = PendingFlush(-1, 0, handles)
        self._waiting = True

        def synced(exc: BaseException | None) -> None:
            self._waiting = False
            if self._phase == "done":  # abandoned meanwhile (the log went away)
                return
            if exc is not None:
                self.abandon(f"fsync of the cleaned segment failed: {exc}")
                return
            self._swap_group(group)

        self._background.submit(pending.run, synced)

    def _swap_group(self, group: _Group) -> None:
        assert group.cleaned is not None and self._tracker is not None
        if self.log.replace_segments(group.segments, group.cleaned):
            self.stats.groups += 1
        else:
            self.stats.discarded_groups += 1
            self.log.discard_cleaned_segment(group.cleaned)
        group.cleaned = None
        self._group_index += 1
        if self._group_index >= len(self._groups):
            self._phase = "done"

    def forgettable_aborts(self) -> list[AbortedTxn]:
        """Aborted transactions with no batch left (their markers are safe to remove): their entries
        in the aborted-transaction index are no longer needed by read_committed fetches."""
        return [] if self._tracker is None else list(self._tracker.forgettable)

    # --- what a batch keeps ------------------------------------------------------------------------

    def _filter(self, batch: RecordBatch) -> RecordBatch | None:
        """The batch as the cleaned log keeps it: the same bytes, rebuilt with fewer records (or a
        delete horizon), emptied (the last batch of an active producer) or None (dropped)."""
        assert self._tracker is not None
        now = self.now_ms
        marker: ControlRecordType | None = None
        if batch.is_control:
            marker = _marker_of(batch)
            safe = self._tracker.on_control_batch(batch, marker)
            discard = safe and batch.has_delete_horizon and batch.base_timestamp <= now
        else:
            safe = discard = self._tracker.on_data_batch(batch)
        records = [] if discard else list(batch.records())
        self.stats.records_read += len(records)
        if batch.is_control:
            kept = records
        else:
            kept = [record for record in records if self._keep(batch, record)]
        self.stats.records_kept += len(kept)
        tombstones = not batch.is_control and any(record.value is None for record in kept)
        needs_horizon = (tombstones or (batch.is_control and safe)) and not batch.has_delete_horizon
        if kept and len(kept) == len(records) and not needs_horizon:
            if batch.has_delete_horizon:
                self._note_horizon(batch.base_timestamp)
            return batch
        if kept:
            horizon = now + self.log.config.delete_retention_ms if needs_horizon else (
                batch.base_timestamp if batch.has_delete_horizon else None)
            if horizon is not None:
                self._note_horizon(horizon)
            return RecordBatch(_rebuild(batch, kept, horizon))
        if batch.producer_id >= 0 and self._is_last_of_producer(batch):
            return RecordBatch(build_empty_batch(batch))
        return None

    def _keep(self, batch: RecordBatch, record: Record) -> bool:
        if record.offset > self.map.latest_offset:
            return True
        if record.key is None:
            return False  # Kafka refuses keyless records on compacted topics, and its cleaner drops them
        if record.offset < self.map.get(record.key):
            return False
        if record.value is not None:
            return True
        return not batch.has_delete_horizon or self.now_ms < batch.base_timestamp

    def _note_horizon(self, horizon: int) -> None:
        """A delete horizon still ahead: the next cleaning after it may remove what it guards."""
        if horizon > self.now_ms:
            self.earliest_horizon = horizon if self.earliest_horizon is None else min(self.earliest_horizon, horizon)

    def _is_last_of_producer(self, batch: RecordBatch) -> bool:
        last = self._last_batches.get(batch.producer_id)
        if last is None:
            return False
        epoch, last_offset = last
        if last_offset >= 0 and not batch.is_control:
            return batch.last_offset == last_offset
        return batch.is_control and batch.producer_epoch == epoch and batch.last_offset > last_offset


def _marker_of(batch: RecordBatch) -> ControlRecordType | None:
    """The type of a control batch's record, or None for an empty control batch (cleaned before)."""
    first = next(batch.records(), None)
    return None if first is None else ControlRecordType.from_key(first.key)


def _rebuild(batch: RecordBatch, records: list[Record], delete_horizon_ms: int | None) -> bytearray:
    """``batch`` with only ``records``: the same offsets, producer fields, codec and timestamp type."""
    log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    builder = RecordBatchBuilder(
        compression=batch.compression,
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=batch.max_timestamp if log_append else None,
        delete_horizon_ms=delete_horizon_ms,
    )
    for record in records:
        builder.append(timestamp=record.timestamp, key=record.key, value=record.value, headers=record.headers,
                       offset_delta=record.offset - batch.base_offset)
    return builder.build(last_offset_delta=batch.last_offset_delta)


def _group_by_size(segments: Sequence[LogSegment], segment_bytes: int) -> list[_Group]:
    """Consecutive segments whose sizes add up to at most ``segment_bytes`` and whose offsets fit one
    segment's relative offsets, as Kafka groups them (``groupSegmentsBySize``)."""
    groups: list[_Group] = []
    current: list[LogSegment] = []
    size = 0
    for segment in segments:
        fits = (size + segment.size <= segment_bytes
                and segment.next_offset - 1 - (current[0].base_offset if current else 0) <= INT32_MAX)
        if current and not fits:
            groups.append(_Group(current))
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(_Group(current))
    return groups
