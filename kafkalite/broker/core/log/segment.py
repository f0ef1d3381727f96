"""Segments: the unit a partition log rolls, indexes, retains and recovers.

:class:`LogSegment` is what :class:`~kafkalite.broker.core.log.partition_log.SegmentedLog` needs from a
segment. Two engines implement it: :class:`~kafkalite.broker.core.log.disk.FileSegment` (Kafka's
``.log`` / ``.index`` / ``.timeindex`` triple) and :class:`~kafkalite.broker.core.log.memory.MemorySegment`
(a list of batches).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Final

from kafkalite.broker.core.log.region import FileRegion
from kafkalite.protocol.records import NO_TIMESTAMP, RecordBatch

log = logging.getLogger("kafkalite.log")

__all__ = ["CLEANED_SUFFIX", "INDEX_SUFFIX", "INT32_MAX", "LOG_SUFFIX", "SWAP_SUFFIX", "TIME_INDEX_SUFFIX", "Buffer",
           "LogSegment", "Piece", "SegmentRead", "segment_file_name"]

Buffer = bytes | bytearray | memoryview
Piece = bytes | bytearray | memoryview | FileRegion  # what a read gives: bytes, or a region of a file

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
CLEANED_SUFFIX: Final = ".cleaned"  # after a segment file's name: a cleaned segment being written
SWAP_SUFFIX: Final = ".swap"  # <base>.<end>.swap: a cleaned segment committed, replacing [base, end)

INT32_MAX: Final = 2**31 - 1
def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


class SegmentRead:
    """What one segment contributed to a read.

    ``stopped`` is True when the read must not go on to the next segment: the byte budget or the upper
    bound was reached inside this one.
    """

    __slots__ = ("buffers", "size", "first_offset", "next_offset", "stopped")

    def __init__(self, buffers: list[Piece] | None = None, size: int = 0, first_offset: int = -1,
                 next_offset: int = -1, stopped: bool = False) -> None:
        self.buffers: list[Piece] = [] if buffers is None else buffers
        self.size = size
        self.first_offset = first_offset
        self.next_offset = next_offset
        self.stopped = stopped


class LogSegment(ABC):
    """One segment: a contiguous run of batches starting at ``base_offset``.

    ``next_offset`` is one past the last stored offset (``base_offset`` while empty). ``max_timestamp``
    is the largest batch max timestamp (``-1`` if none) and ``offset_of_max_timestamp`` the last offset
    of the first batch that reached it. ``first_append_ms`` is the wall clock of the first append (or of
    loading a non-empty segment), the base for time-based rolls between appends.
    """

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    offset_of_max_timestamp: int
    first_append_ms: int | None
    last_modified_ms: int
    torn: bool = False  # a failed append could not be undone: the segment ends in a partial batch

    @abstractmethod
    def append(self, batch: RecordBatch, now_ms: int, index_interval_bytes: int) -> int:
        """Store ``batch`` (its base offset already assigned) at the end; return its position."""

    @abstractmethod
    def read(self, offset: int, max_bytes: int, min_one_batch: bool, upper_bound: int,
             file_regions: bool = False) -> SegmentRead:
        """Whole batches from the one containing ``offset``, while the total stays within ``max_bytes``
        (or the first one regardless, with ``min_one_batch``), stopping before any batch whose last
        offset is at or above ``upper_bound``. With ``file_regions``, an engine that stores files may
        give a large run of batches as a ``FileRegion`` instead of reading it (memory gives bytes)."""

    @abstractmethod
    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """Stored batches in order, starting with the first whose last offset is >= ``offset``."""

    @abstractmethod
    def batches_near_timestamp(self, timestamp: int, start_offset: int) -> Iterator[RecordBatch]:
        """Stored batches in order, starting at or before the first batch holding a record with offset
        >= ``start_offset`` and timestamp >= ``timestamp`` (the caller filters)."""

    @abstractmethod
    def is_index_full(self, segment_index_bytes: int) -> bool:
        """Whether the offset or time index holds as many entries as ``segment.index.bytes`` allows."""

    def on_roll(self) -> None:
        """Called when the segment stops being the active one."""

    def prepare_sync(self, *, records_only: bool = False) -> tuple[list[int], Callable[[], None] | None]:
        """New file descriptors (dups) of every file written since the last *completed* fsync, for the
        caller to fsync and close, possibly on another thread, and what to call (on the loop) once they
        are fsynced; memory segments have none. A file whose fsync is still running is handed out
        again, so a second flush never answers before the bytes it covers are durable. ``records_only``:
        the ``.log`` file alone, not the indexes."""
        return [], None

    def close(self) -> None:
        """Release files (no-op for memory)."""

    def delete(self) -> None:
        """Remove the segment's files (no-op for memory)."""

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares with: the max timestamp, or the last modification time if none."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    _first_batch_timestamp: int | None = None

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (Kafka's rolling base for segment.ms), -1 if empty or none."""
        if self._first_batch_timestamp is None:
            first = next(self.batches_from(self.base_offset), None)
            if first is None:
                return NO_TIMESTAMP
            self._first_batch_timestamp = first.max_timestamp
        return self._first_batch_timestamp

    def _note_append(self, batch: RecordBatch, now_ms: int) -> None:
        """Bookkeeping shared by both engines after a batch is stored."""
        if self.size == 0:
            self._first_batch_timestamp = batch.max_timestamp
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset
        self.next_offset = batch.last_offset + 1
        self.size += batch.size
        self.last_modified_ms = now_ms
