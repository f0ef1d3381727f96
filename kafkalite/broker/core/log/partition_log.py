"""A partition log's settings, results and interface, and the logic both storage engines share.

The theory of operation (offsets, segments, rolls, reads, durability, recovery, retention) is the
``kafkalite.broker.core.log`` package docstring; ``disk.DiskLog`` and ``memory.MemoryLog`` are the two
subclasses of :class:`SegmentedLog`.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from kafkalite.broker.core.log.region import FileRegion
from kafkalite.broker.core.log.segment import (
    INT32_MAX,
    LogSegment,
    Piece,
)
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import RecordBatch

if TYPE_CHECKING:
    from kafkalite.protocol.records import Record

log = logging.getLogger("kafkalite.log")

__all__ = [
    "AppendResult",
    "LogConfig",
    "LogError",
    "OffsetOutOfRange",
    "PartitionLog",
    "PendingFlush",
    "ReadResult",
    "RecordBatchTooLarge",
    "SegmentedLog",
    "wall_clock_ms",
]

Buffer = bytes | bytearray | memoryview
LONG_MAX: Final = 2**63 - 1
_DAY_MS: Final = 24 * 60 * 60 * 1000


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------------
# Configuration

@dataclass(frozen=True, slots=True)
class LogConfig:
    """A partition log's settings, named after Kafka's topic-level configs (``segment.bytes`` ...).

    ``retention_ms`` / ``retention_bytes`` of -1 mean unlimited; ``flush_messages`` / ``flush_ms`` of
    None mean never (Kafka's Long.MAX_VALUE). Retention applies only when ``cleanup_policy`` includes
    ``delete``; log compaction (``kafkalite.broker.core.log.cleaner``) only when it includes
    ``compact``, with ``delete_retention_ms``, ``min_compaction_lag_ms``, ``max_compaction_lag_ms``
    and ``min_cleanable_dirty_ratio``. ``file_delete_delay_ms`` is accepted and ignored (files go at once).
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int | None = None
    flush_ms: int | None = None
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60_000
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    # derived once from the fields above (read on every append)
    deletes: bool = field(init=False, repr=False, compare=False)
    compacts: bool = field(init=False, repr=False, compare=False)
    max_segment_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 14 <= self.segment_bytes <= INT32_MAX:
            raise ValueError(f"segment.bytes must be between 14 and {INT32_MAX}, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention.ms and retention.bytes must be -1 (unlimited) or >= 0")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.segment_index_bytes < 4:
            raise ValueError(f"segment.index.bytes must be at least 4, got {self.segment_index_bytes}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError(f"flush.messages must be at least 1, got {self.flush_messages}")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError(f"flush.ms must be >= 0, got {self.flush_ms}")
        policies = {part.strip() for part in self.cleanup_policy.split(",")}
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"cleanup.policy must be delete, compact or both, got {self.cleanup_policy!r}")
        # deletes: retention may delete segments; compacts: the log cleaner compacts the log;
        # max_segment_ms: how long a segment stays active: segment.ms, or max.compaction.lag.ms if
        # shorter on a compacted log (Kafka's LogConfig.maxSegmentMs: the active segment is never cleaned)
        compacts = "compact" in policies
        object.__setattr__(self, "deletes", "delete" in policies)
        object.__setattr__(self, "compacts", compacts)
        object.__setattr__(self, "max_segment_ms", min(self.segment_ms, self.max_compaction_lag_ms)
                           if compacts and self.max_compaction_lag_ms > 0 else self.segment_ms)



# --------------------------------------------------------------------------------------------------
# Results and errors


class LogError(Exception):
    """A broken expectation of the log manager (a topic id that does not match, a directory it did
    not load); not something a client caused."""


class OffsetOutOfRange(KafkaError):
    """The offset is below the log start offset or above the log end offset."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLarge(KafkaError):
    """The batch is larger than ``segment.bytes``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.RECORD_LIST_TOO_LARGE, message)


class AppendResult:
    """Where an appended batch went: its offsets, and its segment and byte position in that segment."""

    __slots__ = ("base_offset", "last_offset", "segment_base_offset", "position")

    base_offset: Final[int]
    last_offset: Final[int]
    segment_base_offset: Final[int]
    position: Final[int]

    def __init__(self, base_offset: int, last_offset: int, segment_base_offset: int, position: int) -> None:
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.segment_base_offset = segment_base_offset
        self.position = position


class ReadResult:
    """Stored batches, as buffers to send without re-encoding (``transport.writelines(chunks)``).

    ``chunks`` are ``bytes`` or ``memoryview`` slices, one per contiguous run of stored bytes, or, for a
    read that asked for ``file_regions``, ``FileRegion`` objects for runs read from disk;
    ``size`` is their total length. ``first_offset`` is the base offset of the first batch (-1 when
    empty), ``next_offset`` one past the last batch's last offset (the requested offset when empty).
    """

    __slots__ = ("chunks", "size", "first_offset", "next_offset")

    chunks: Final[list[Piece]]
    size: Final[int]
    first_offset: Final[int]
    next_offset: Final[int]

    def __init__(self, chunks: list[Piece], size: int, first_offset: int, next_offset: int) -> None:
        self.chunks = chunks
        self.size = size
        self.first_offset = first_offset
        self.next_offset = next_offset

    @property
    def empty(self) -> bool:
        return self.size == 0

    def to_bytes(self) -> bytes:
        return b"".join(chunk.read() if isinstance(chunk, FileRegion) else chunk for chunk in self.chunks)


class PendingFlush:
    """Fsyncs decided on the event loop, to run anywhere: it owns duplicate file descriptors only.

    ``synced`` is called back on the loop (by ``complete_flush``) once ``run`` returned: it tells each
    segment which of its writes are now durable. A ``records_only`` flush (``log.flush.on.ack``) holds
    the ``.log`` files alone (and the directory after a roll) and syncs their data with ``fdatasync``:
    the records and the file lengths become durable, the indexes do not, so it moves the log's durable
    offset but never its recovery point."""

    __slots__ = ("active", "handles", "messages", "records_only", "synced", "target")

    def __init__(self, target: int, messages: int, handles: list[int],
                 synced: list[Callable[[], None]] | None = None, *, records_only: bool = False,
                 active: LogSegment | None = None) -> None:
        self.target = target  # the recovery point (records_only: the durable offset) once these are synced
        self.messages = messages  # appended records this flush covers (for flush.messages)
        self.handles = handles
        self.synced = synced or []
        self.records_only = records_only
        self.active = active  # records_only: the active segment, when its .log is among the handles

    def discard(self) -> None:
        """Close the descriptors without an fsync: this flush will not run (one decided later replaces it)."""
        handles, self.handles = self.handles, []
        for handle in handles:
            os.close(handle)

    def run(self) -> None:
        """Fsync (``records_only``: fdatasync) and close every descriptor. Thread-safe; call once."""
        handles, self.handles = self.handles, []
        sync = _fdatasync if self.records_only else os.fsync
        try:
            for handle in handles:
                sync(handle)
        finally:
            for handle in handles:
                os.close(handle)


def _fdatasync(handle: int) -> None:
    """The file's data and what reading it back needs (its length), not its times: fdatasync where the
    platform has it (macOS has not), else fsync. Looked up on each call, so tests may replace either."""
    sync = getattr(os, "fdatasync", None)
    (os.fsync if sync is None else sync)(handle)


class PartitionLog(Protocol):
    """What the broker needs from one partition's log, whatever stores it. Call it from the event loop only."""

    config: LogConfig
    on_change: Callable[[], None] | None  # told of every append, roll, flush and deletion (the log manager)
    on_flush_due: Callable[[], None] | None  # told when flush.messages asks for a flush (the log manager)
    on_log_start_moved: Callable[[], None] | None  # told when the log start offset moves (the partition)

    @property
    def directory(self) -> Path | None:
        """Where the log's files are; None in memory."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def active_segment_base_offset(self) -> int: ...
    @property
    def last_flush_ms(self) -> int: ...

    def append(self, batch: RecordBatch | bytearray | memoryview, now_ms: int) -> AppendResult: ...
    def read(
        self, offset: int, max_bytes: int, *, min_one_batch: bool, upper_bound: int | None = None,
        file_regions: bool = False,
    ) -> ReadResult: ...
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...
    def max_timestamp(self) -> tuple[int, int] | None: ...
    def delete_records_before(self, offset: int, now_ms: int | None = None) -> None: ...
    def enforce_retention(self, now_ms: int, high_watermark: int | None = None) -> int: ...
    def maybe_roll(self, now_ms: int) -> bool: ...
    def flush(self, now_ms: int | None = None, *, up_to_offset: int | None = None) -> None: ...
    @property
    def durable_offset(self) -> int: ...
    def prepare_flush(self, up_to_offset: int | None = None, *, records_only: bool = False,
                      ) -> PendingFlush | None: ...
    def extend_flush(self, pending: PendingFlush) -> bool: ...
    def complete_flush(self, pending: PendingFlush, now_ms: int | None = None) -> None: ...
    def update_config(self, config: LogConfig) -> None: ...
    def size_bytes(self) -> int: ...
    def segment_count(self) -> int: ...
    def segment_base_offsets(self) -> list[int]: ...
    def roll_deadline_ms(self) -> int | None: ...
    def prepare_close(self) -> PendingFlush: ...
    def close(self, *, flush: bool = False) -> None: ...
    def delete(self) -> None: ...


def _stored_records(batch: RecordBatch, name: str) -> Iterator[Record]:
    """The records of a stored batch. A batch is stored without decoding its records, so a client
    may have stored one whose compressed records do not decode: that is CORRUPT_MESSAGE for whoever
    asks, not a broker failure."""
    try:
        yield from batch.records()
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                         f"the batch at offset {batch.base_offset} of {name} does not decode: {exc}") from None


# --------------------------------------------------------------------------------------------------
# The logic both engines share


class SegmentedLog(ABC):
    """A partition log over a list of :class:`LogSegment`; subclasses say how segments are made and kept.

    Implements :class:`PartitionLog`. ``name`` (``topic-partition``) is only for log messages.
    """

    def __init__(self, name: str, config: LogConfig, now_ms: int) -> None:
        self.name = name
        self.config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self._log_start_offset = 0
        self._recovery_point = 0
        self._durable_offset = 0  # records below it are synced (records_only flushes), indexes maybe not
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self.on_change: Callable[[], None] | None = None
        self.on_flush_due: Callable[[], None] | None = None
        self.on_log_start_moved: Callable[[], None] | None = None
        self._failing = False  # the last append failed (logged once)
        self._offline: str | None = None  # why appends are refused until a restart (a write not undone)

    # --- subclass hooks ----------------------------------------------------------------------------

    @abstractmethod
    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """Create an empty segment at ``base_offset``."""

    def new_cleaned_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        """An empty segment to write a cleaned group into, not yet part of the log (log compaction)."""
        return self._new_segment(base_offset, now_ms)

    def discard_cleaned_segment(self, segment: LogSegment) -> None:
        """Drop a cleaned segment that will not be swapped in."""
        segment.delete()

    def _commit_cleaned(self, old: Sequence[LogSegment], new: LogSegment, end_offset: int) -> None:
        """Put ``new`` in place of ``old`` in the engine's storage (offsets ``[old[0].base, end_offset)``)."""
        for segment in old:
            segment.delete()

    def _sync_handles(self, segments: list[LogSegment], *, records_only: bool = False,
                      ) -> tuple[list[int], list[Callable[[], None]]]:
        """Descriptors to fsync so that ``segments`` are durable (``records_only``: their records), and
        what to call once they are (see :meth:`LogSegment.prepare_sync`)."""
        handles: list[int] = []
        synced: list[Callable[[], None]] = []
        for segment in segments:
            more, done = segment.prepare_sync(records_only=records_only)
            handles += more
            if done is not None:
                synced.append(done)
        return handles, synced

    # --- state -------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def durable_offset(self) -> int:
        """Records below this offset are synced to disk: the recovery point, or beyond it where a
        ``records_only`` flush (``log.flush.on.ack``) synced the records but not the indexes."""
        return max(self._durable_offset, self._recovery_point)

    @property
    def active_segment_base_offset(self) -> int:
        return self._segments[-1].base_offset

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def segment_count(self) -> int:
        return len(self._segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def segments_between(self, start_offset: int, end_offset: int) -> list[LogSegment]:
        """The segments holding offsets in ``[start_offset, end_offset)``, never the active one."""
        found = []
        for index in range(len(self._segments) - 1):
            segment = self._segments[index]
            if self._segments[index + 1].base_offset <= start_offset:
                continue
            if segment.base_offset >= end_offset:
                break
            found.append(segment)
        return found

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> bool:
        """Swap the cleaned segment ``new`` in for the consecutive segments ``old`` (log compaction);
        False, and nothing changed, when ``old`` are no longer consecutive segments of the log below
        the active one (retention or DeleteRecords removed some meanwhile)."""
        if not old:
            return False
        first = next((index for index, segment in enumerate(self._segments) if segment is old[0]), None)
        if first is None or first + len(old) >= len(self._segments):
            return False
        if any(self._segments[first + index] is not segment for index, segment in enumerate(old)):
            return False
        self._commit_cleaned(old, new, self._segments[first + len(old)].base_offset)
        self._segments[first:first + len(old)] = [new]
        self._bases[first:first + len(old)] = [new.base_offset]
        if self.on_change is not None:
            self.on_change()
        return True

    def _segment_index_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (the last with base <= offset), at least 0."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    # --- append and roll ---------------------------------------------------------------------------

    def append(self, batch: RecordBatch | bytearray | memoryview, now_ms: int) -> AppendResult:
        """Assign offsets (rewriting the base offset in place), roll if needed, store the batch."""
        record_batch = batch if isinstance(batch, RecordBatch) else RecordBatch(batch)
        if record_batch.size > self.config.segment_bytes:
            raise RecordBatchTooLarge(
                f"batch of {record_batch.size} bytes is larger than segment.bytes={self.config.segment_bytes}"
            )
        if self._offline is not None:
            raise OSError(errno.EIO, f"{self.name} takes no appends until the broker restarts: {self._offline}")
        base_offset = self._segments[-1].next_offset  # the log end offset
        record_batch.set_base_offset(base_offset)
        try:
            self._roll_before_append(record_batch, now_ms)
            active = self._segments[-1]
            position = active.append(record_batch, now_ms, self.config.index_interval_bytes)
        except OSError as exc:
            self._append_failed(exc)
            raise
        if self._failing:
            self._failing = False
            log.info("%s: appends work again", self.name)
        self._unflushed_messages += max(record_batch.records_count, 1)
        flush_messages = self.config.flush_messages
        if flush_messages is not None and self._unflushed_messages >= flush_messages:
            if self.on_flush_due is not None:
                self.on_flush_due()  # the log manager fsyncs off the loop, at once
            else:
                self.flush(now_ms)
        if self.on_change is not None:
            self.on_change()
        return AppendResult(base_offset, record_batch.last_offset, active.base_offset, position)

    def _append_failed(self, exc: OSError) -> None:
        """An append failed and left the log as it was (or, if the segment could not be cut back,
        ``torn``: then the log goes offline for appends). Logged once until appends work again."""
        if self._segments[-1].torn:
            self._offline = f"a failed write could not be undone ({exc})"
            log.error("%s: %s; appends are refused until a restart recovers the log", self.name, self._offline)
            return
        if not self._failing:
            self._failing = True
            log.warning("%s: cannot append (answering KAFKA_STORAGE_ERROR until it can): %s", self.name, exc)

    def _roll_before_append(self, batch: RecordBatch, now_ms: int) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        config = self.config
        rolling_base = active.first_batch_timestamp()
        if rolling_base >= 0 and batch.max_timestamp >= 0:
            waited = batch.max_timestamp - rolling_base
        else:
            waited = now_ms - (active.first_append_ms if active.first_append_ms is not None else now_ms)
        if (
            active.size + batch.size > config.segment_bytes
            or waited > config.max_segment_ms
            or active.is_index_full(config.segment_index_bytes)
            or batch.last_offset - active.base_offset > INT32_MAX
        ):
            self._roll(now_ms)

    def maybe_roll(self, now_ms: int) -> bool:
        """Roll a non-empty active segment first appended to over ``segment.ms`` ago, or whose index is full."""
        active = self._segments[-1]
        if active.size == 0:
            return False
        first_append_ms = active.first_append_ms if active.first_append_ms is not None else now_ms
        if now_ms - first_append_ms > self.config.max_segment_ms or active.is_index_full(
                self.config.segment_index_bytes):
            self._roll(now_ms)
            return True
        return False

    def roll_deadline_ms(self) -> int | None:
        """When ``maybe_roll`` will roll the active segment for its age (None while it is empty)."""
        active = self._segments[-1]
        if active.size == 0 or active.first_append_ms is None:
            return None
        return active.first_append_ms + self.config.max_segment_ms + 1

    def _roll(self, now_ms: int) -> None:
        active = self._segments[-1]
        if active.size == 0:
            return
        new_segment = self._new_segment(active.next_offset, now_ms)  # first: if it fails, nothing changed
        active.on_roll()
        self._add_segment(new_segment)
        log.debug("Rolled %s at offset %d", self.name, active.next_offset)
        if self.on_change is not None:
            self.on_change()

    # --- reading -----------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool, upper_bound: int | None = None,
             file_regions: bool = False) -> ReadResult:
        """Whole stored batches from the one containing ``offset``; see the module docstring. With
        ``file_regions``, large runs on disk come as ``FileRegion`` objects instead of bytes."""
        log_end_offset = self.log_end_offset
        if offset < self._log_start_offset or offset > log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, log_end_offset)
        limit = log_end_offset if upper_bound is None else min(upper_bound, log_end_offset)
        buffers: list[Piece] = []
        size = 0
        first_offset = -1
        next_offset = offset
        if offset >= limit:
            return ReadResult(buffers, 0, -1, offset)
        for segment in self._segments[self._segment_index_for(offset) :]:
            if segment.next_offset <= next_offset:
                continue
            part = segment.read(next_offset, max_bytes - size, min_one_batch and size == 0, limit, file_regions)
            if part.size:
                buffers.extend(part.buffers)
                size += part.size
                if first_offset < 0:
                    first_offset = part.first_offset
                next_offset = part.next_offset
            if part.stopped or size >= max_bytes:
                break
        return ReadResult(buffers, size, first_offset, next_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The earliest ``(offset, timestamp)`` at or after the log start offset with timestamp >= target."""
        start_offset = self._log_start_offset
        for segment in self._segments[self._segment_index_for(start_offset) :]:
            if segment.size == 0 or segment.max_timestamp < timestamp_ms:
                continue
            for batch in segment.batches_near_timestamp(timestamp_ms, start_offset):
                if batch.max_timestamp < timestamp_ms or batch.last_offset < start_offset:
                    continue
                for record in _stored_records(batch, self.name):
                    if record.offset >= start_offset and record.timestamp >= timestamp_ms:
                        return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the largest timestamp (ListOffsets -3)."""
        best: LogSegment | None = None
        for segment in self._segments:
            has_timestamp = segment.size > 0 and segment.max_timestamp >= 0
            if has_timestamp and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        batch = next(best.batches_from(best.offset_of_max_timestamp), None)
        if batch is not None:
            for record in _stored_records(batch, self.name):
                if record.timestamp == best.max_timestamp:
                    return record.offset, record.timestamp
        return best.offset_of_max_timestamp, best.max_timestamp

    # --- deleting ----------------------------------------------------------------------------------

    def delete_records_before(self, offset: int, now_ms: int | None = None) -> None:
        """DeleteRecords: raise the log start offset to ``offset`` (at most the log end offset).

        Segments entirely below the new log start offset are deleted; if that is all of them, the log
        rolls first so the active segment survives, empty, at the log end offset.
        """
        new_start = min(offset, self.log_end_offset)
        if new_start <= self._log_start_offset:
            return
        self._log_start_offset = new_start
        count = 0
        while count < len(self._segments) and self._segments[count].next_offset <= new_start:
            if self._segments[count].size == 0:
                break
            count += 1
        self._delete_oldest(count, wall_clock_ms() if now_ms is None else now_ms)
        if self.on_change is not None:
            self.on_change()
        if self.on_log_start_moved is not None:
            self.on_log_start_moved()

    def enforce_retention(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Delete whole segments past ``retention.ms`` or ``retention.bytes``; return how many went.

        Only segments whose offsets are all below ``high_watermark`` (default: the log end offset) may
        go, and only a prefix of the log. Nothing happens unless cleanup.policy includes delete.
        """
        config = self.config
        if not config.deletes:
            return 0
        deleted = 0
        if config.retention_ms >= 0:
            deleted += self._delete_prefix(
                lambda segment: now_ms - segment.largest_timestamp > config.retention_ms, high_watermark, now_ms
            )
        if config.retention_bytes >= 0:
            excess = self.size_bytes() - config.retention_bytes

            def over_size(segment: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size >= 0:
                    excess -= segment.size
                    return True
                return False

            deleted += self._delete_prefix(over_size, high_watermark, now_ms)
        return deleted

    def _delete_prefix(self, predicate: Callable[[LogSegment], bool], high_watermark: int | None, now_ms: int) -> int:
        bound = self.log_end_offset if high_watermark is None else min(high_watermark, self.log_end_offset)
        count = 0
        for index, segment in enumerate(self._segments):
            is_last = index == len(self._segments) - 1
            upper = segment.next_offset if is_last else self._segments[index + 1].base_offset
            if segment.size == 0 or bound < upper or not predicate(segment):
                break
            count += 1
        if count:
            self._delete_oldest(count, now_ms)
            log.info(
                "%s: retention deleted %d segment(s); log start offset is now %d",
                self.name,
                count,
                self._log_start_offset,
            )
        return count

    def _delete_oldest(self, count: int, now_ms: int) -> None:
        """Delete the first ``count`` segments, rolling first if that would leave none."""
        if count <= 0:
            return
        if count >= len(self._segments):
            count = len(self._segments)
            self._roll(now_ms)
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for segment in doomed:
            segment.delete()
        log_start_offset = self._log_start_offset
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)
        if self.on_change is not None:
            self.on_change()
        if self.on_log_start_moved is not None and self._log_start_offset != log_start_offset:
            self.on_log_start_moved()

    # --- durability --------------------------------------------------------------------------------

    def flush(self, now_ms: int | None = None, *, up_to_offset: int | None = None) -> None:
        """Fsync everything from the recovery point up to ``up_to_offset`` (default: the log end offset),
        then move the recovery point there. Blocks the calling thread for the fsyncs.

        To fsync off the event loop, use the three steps it is made of: :meth:`prepare_flush` and
        :meth:`complete_flush` on the loop, :meth:`PendingFlush.run` in an executor between them.
        """
        pending = self.prepare_flush(up_to_offset)
        if pending is not None:
            pending.run()
            self.complete_flush(pending, now_ms)

    def prepare_flush(self, up_to_offset: int | None = None, *, records_only: bool = False,
                      ) -> PendingFlush | None:
        """Pick what to fsync (segments holding offsets from the recovery point to the target) and take
        duplicate descriptors of those files, so the fsyncs may run on another thread even if the
        segments are closed or deleted meanwhile. None if there is nothing to do.

        ``records_only`` (``log.flush.on.ack``): only what an acknowledged record needs to survive a
        power loss, the ``.log`` files from the durable offset on (and the directory, if a segment file
        was made since its last fsync). The indexes are left to the flushes that move the recovery
        point, and so is the recovery point: recovery trusts the indexes below it, and validates and
        re-indexes everything above it."""
        target = self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
        start = self.durable_offset if records_only else self._recovery_point
        if target <= start:
            return None
        first = self._segment_index_for(start)
        if records_only and target == self.log_end_offset:
            # The active segment's .log apart, so that extend_flush knows whether it is handed out.
            active = self._segments[-1]
            handles, synced = self._sync_handles([segment for segment in self._segments[first:-1]], records_only=True)
            more, done = active.prepare_sync(records_only=True)
            handles += more
            if done is not None:
                synced.append(done)
            return PendingFlush(target, 0, handles, synced, records_only=True, active=active if more else None)
        handles, synced = self._sync_handles([segment for segment in self._segments[first:]
                                              if segment.base_offset < target], records_only=records_only)
        if records_only:
            return PendingFlush(target, 0, handles, synced, records_only=True)
        return PendingFlush(target, self._unflushed_messages if target == self.log_end_offset else 0, handles,
                            synced)

    def extend_flush(self, pending: PendingFlush) -> bool:
        """Let a ``records_only`` flush that has not run yet cover the log end offset now, without new
        descriptors: possible while the active segment is the one whose ``.log`` it holds (an fdatasync
        covers every byte written to the file before it starts, through any descriptor). False when a
        segment was made since (``prepare_flush`` again), or the flush holds no active ``.log``."""
        if pending.active is None or pending.active is not self._segments[-1]:
            return False
        pending.target = self.log_end_offset
        return True

    def complete_flush(self, pending: PendingFlush, now_ms: int | None = None) -> None:
        """After :meth:`PendingFlush.run` returned: move the recovery point (on the event loop), or, after
        a ``records_only`` flush, the durable offset alone."""
        for synced in pending.synced:
            synced()
        if pending.records_only:
            self._durable_offset = max(self._durable_offset, pending.target)
            return
        self._recovery_point = max(self._recovery_point, pending.target)
        self._unflushed_messages = max(self._unflushed_messages - pending.messages, 0)
        self._last_flush_ms = wall_clock_ms() if now_ms is None else now_ms
        if self.on_change is not None:
            self.on_change()

    def prepare_close(self) -> PendingFlush:
        """The fsyncs of a clean close, to run anywhere (the log manager closes many logs at once): the
        active segment's final time index entry is written now, and after ``complete_flush`` a
        ``close(flush=True)`` finds nothing left to fsync."""
        self._segments[-1].on_roll()
        first = self._segment_index_for(self._recovery_point)
        handles, synced = self._sync_handles(self._segments[first:])
        return PendingFlush(self.log_end_offset, self._unflushed_messages, handles, synced)

    def close(self, *, flush: bool = False) -> None:
        """Write the active segment's final time index entry and release files; with ``flush``, fsync
        everything above the recovery point first (a clean shutdown)."""
        self._segments[-1].on_roll()
        if flush:
            first = self._segment_index_for(self._recovery_point)
            handles, _ = self._sync_handles(self._segments[first:])
            PendingFlush(self.log_end_offset, 0, handles).run()
            self._recovery_point = self.log_end_offset
            self._unflushed_messages = 0
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.delete()
