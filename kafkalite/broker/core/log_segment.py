"""Segments: the unit a partition log rolls, indexes, retains and recovers.

:class:`LogSegment` is what :class:`broker.core.log.SegmentedLog` needs from a segment; two engines
implement it: :class:`FileSegment` here (Kafka's ``.log`` / ``.index`` / ``.timeindex`` triple) and
``broker.core.memory_log.MemorySegment`` (a list of batches).

File formats (all integers big-endian, as in Kafka):

* ``<base offset, 20 digits>.log``: the stored batches back to back, byte for byte as appended.
* ``.index``: sparse offset index, 8-byte entries ``relative offset int32, file position int32``. The
  relative offset is the *last* offset of the indexed batch minus the segment's base offset and the
  position is where that batch starts. An entry is added before appending a batch once more than
  ``index.interval.bytes`` have been appended since the previous entry.
* ``.timeindex``: sparse time index, 12-byte entries ``timestamp int64, relative offset int32``: the
  segment's largest timestamp so far and the last offset of the batch that first reached it. Added at
  the same moments as offset index entries, but only when the timestamp has grown; a roll (and a clean
  close) adds the final entry so the last entry is always the segment's largest timestamp.

Unlike Kafka, index files are not preallocated to ``segment.index.bytes`` and mmapped; entries are
appended with ``os.write``, so a file's length is always a whole number of entries and no trim is needed
on roll. ``segment.index.bytes`` still bounds the entry count (``bytes // entry size``); a full index
rolls the segment, as in Kafka. Entries are kept in ``array`` objects, loaded from the file the first
time a lookup needs them.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Final

from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import LOG_OVERHEAD, NO_TIMESTAMP, RecordBatch, iter_batches

log = logging.getLogger("kafkalite.log")

__all__ = [
    "FileSegment",
    "LogSegment",
    "OffsetIndex",
    "SegmentRead",
    "TimeIndex",
    "segment_file_name",
]

Buffer = bytes | bytearray | memoryview

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"

INT32_MAX: Final = 2**31 - 1
_BATCH_LENGTH: Final = struct.Struct(">i")  # at byte 8 of every batch (LOG_OVERHEAD framing)
_BASE_OFFSET: Final = struct.Struct(">q")  # bytes 0..8 of every batch
_SPAN: Final = struct.Struct(">qi11xi")  # base offset, batch length, (11 bytes), last offset delta


@dataclass(frozen=True, slots=True)
class _BatchSpan:
    """Where a stored batch is and which offsets it holds, read from its header alone."""

    position: int
    base_offset: int
    last_offset: int
    size: int
_MIN_BLOCK: Final = 64 * 1024
_SCAN_BLOCK: Final = 16 * 1024
_MAX_BLOCK: Final = 8 * 1024 * 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class SegmentRead:
    """What one segment contributed to a read.

    ``stopped`` is True when the read must not go on to the next segment: the byte budget or the upper
    bound was reached inside this one.
    """

    buffers: list[Buffer] = field(default_factory=list)
    size: int = 0
    first_offset: int = -1
    next_offset: int = -1
    stopped: bool = False


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

    @abstractmethod
    def append(self, batch: RecordBatch, now_ms: int, index_interval_bytes: int) -> int:
        """Store ``batch`` (its base offset already assigned) at the end; return its position."""

    @abstractmethod
    def read(self, offset: int, max_bytes: int, min_one_batch: bool, upper_bound: int) -> SegmentRead:
        """Whole batches from the one containing ``offset``, while the total stays within ``max_bytes``
        (or the first one regardless, with ``min_one_batch``), stopping before any batch whose last
        offset is at or above ``upper_bound``."""

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

    def sync_handles(self) -> list[int]:
        """New file descriptors (dups) for every file written since the last call, for the caller to
        fsync and close, possibly on another thread; memory segments have none."""
        return []

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


# --------------------------------------------------------------------------------------------------
# Index files


class IndexCorrupt(Exception):
    """An index file that fails its sanity check; the segment rebuilds it from the ``.log``."""


class _SparseIndex:
    """A file of fixed-size ``(key, value)`` entries with increasing keys, and its in-memory copy."""

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPE: ClassVar[str]

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: array[int] | None = None
        self._values: array[int] | None = None
        self._fd: int | None = None
        self._dirty = False
        try:
            file_size = path.stat().st_size
        except FileNotFoundError:
            file_size = 0
        self._count = file_size // self.ENTRY.size

    @property
    def entry_count(self) -> int:
        return self._count

    def max_entries(self, segment_index_bytes: int) -> int:
        return segment_index_bytes // self.ENTRY.size

    def sanity_check(self) -> tuple[int, int] | None:
        """Raise :class:`IndexCorrupt` unless the file is whole entries; return the last entry."""
        try:
            file_size = self.path.stat().st_size
        except FileNotFoundError:
            raise IndexCorrupt(f"{self.path.name} is missing") from None
        if file_size % self.ENTRY.size:
            raise IndexCorrupt(f"{self.path.name} has {file_size} bytes, not a multiple of {self.ENTRY.size}")
        self._count = file_size // self.ENTRY.size
        if self._count == 0:
            return None
        with open(self.path, "rb") as file:
            file.seek(file_size - self.ENTRY.size)
            key, value = self.ENTRY.unpack(file.read(self.ENTRY.size))
        return key, value

    def last_entry(self) -> tuple[int, int] | None:
        if self._count == 0:
            return None
        keys, values = self._load()
        return keys[-1], values[-1]

    def _load(self) -> tuple[array[int], array[int]]:
        if self._keys is None or self._values is None:
            data = self.path.read_bytes() if self._count else b""
            data = data[: self._count * self.ENTRY.size]
            self._keys, self._values = self._decode(data)
        return self._keys, self._values

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        keys: array[int] = array(self.KEY_TYPE)
        values: array[int] = array("i")
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        return keys, values

    def floor(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= ``key``, if any."""
        if self._count == 0:
            return None
        keys, values = self._load()
        slot = bisect_right(keys, key) - 1
        return None if slot < 0 else (keys[slot], values[slot])

    def append(self, key: int, value: int) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _write_all(self._fd, self.ENTRY.pack(key, value))
        if self._keys is not None and self._values is not None:
            self._keys.append(key)
            self._values.append(value)
        self._count += 1
        self._dirty = True

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole file with ``entries`` (after recovery or a rebuild)."""
        self.close()
        data = b"".join(self.ENTRY.pack(key, value) for key, value in entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        self._keys = array(self.KEY_TYPE, (key for key, _ in entries))
        self._values = array("i", (value for _, value in entries))
        self._count = len(entries)
        self._dirty = True

    def sync_handle(self) -> int | None:
        """A new descriptor of the file if it was written since the last call (see LogSegment.sync_handles)."""
        if not self._dirty:
            return None
        self._dirty = False
        return os.dup(self._fd) if self._fd is not None else os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """``.index``: (last offset of a batch - base offset: int32, position of that batch: int32)."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        # Both halves are int32: decode the file in one go (a full 10 MiB index has 1.3 M entries).
        words: array[int] = array("i")
        words.frombytes(data)
        if sys.byteorder == "little":
            words.byteswap()
        return words[0::2], words[1::2]


    def floor_position(self, position: int) -> int | None:
        """The largest indexed batch position <= ``position`` (positions grow with offsets)."""
        if self._count == 0:
            return None
        _, positions = self._load()
        slot = bisect_right(positions, position) - 1
        return None if slot < 0 else positions[slot]


class TimeIndex(_SparseIndex):
    """``.timeindex``: (largest timestamp so far: int64, its batch's last offset - base offset: int32)."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"

    def maybe_append(self, timestamp: int, relative_offset: int) -> None:
        """Add an entry only if ``timestamp`` is larger than the last one (Kafka's ``maybeAppend``)."""
        last = self.last_entry()
        if timestamp < 0 or (last is not None and timestamp <= last[0]):
            return
        self.append(timestamp, relative_offset)


def _write_all(fd: int, data: Buffer) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# --------------------------------------------------------------------------------------------------
# The file segment


def file_batches(fd: int, start: int, end: int, block_size: int) -> Iterator[tuple[int, RecordBatch]]:
    """Walk the magic-2 batches stored in ``fd`` between positions ``start`` and ``end``.

    Yields ``(file position, batch)``; each batch is a view into a block read with one ``os.pread`` of
    about ``block_size`` bytes (more when a batch is larger). Stops quietly at a partial batch at the
    end; a bad length or magic raises :class:`CorruptRecordError`. CRCs are not checked.
    """
    position = start
    block_size = min(max(block_size, _SCAN_BLOCK), _MAX_BLOCK)
    while end - position >= LOG_OVERHEAD:
        want = min(end - position, block_size)
        block = os.pread(fd, want, position)
        if len(block) < LOG_OVERHEAD:
            return
        consumed = 0
        for batch in iter_batches(block):
            if not isinstance(batch, RecordBatch):
                raise CorruptRecordError(f"batch at byte {position + consumed} is not magic 2")
            yield position + consumed, batch
            consumed += batch.size
        if consumed == 0:
            # The next batch is larger than the block: read it whole next time, if it is all there.
            (length,) = _BATCH_LENGTH.unpack_from(block, 8)
            size = length + LOG_OVERHEAD
            if len(block) < want or position + size > end:
                return
            block_size = size
        position += consumed


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    """What scanning a segment found: how many bytes were valid and why the rest (if any) was cut."""

    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class FileSegment(LogSegment):
    """A segment stored as Kafka's three files in the partition directory.

    The ``.log`` file descriptor stays open (``O_RDWR | O_APPEND``): appends use ``os.write``, reads
    ``os.pread``. Index files are opened for writing only while the segment is active.
    """

    def __init__(self, directory: Path, base_offset: int, now_ms: int, *, create: bool) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if create else 0)
        if create:
            (directory / segment_file_name(base_offset, INDEX_SUFFIX)).unlink(missing_ok=True)
            (directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)).unlink(missing_ok=True)
        self._fd = os.open(self.log_path, flags, 0o644)
        self.offset_index = OffsetIndex(directory / segment_file_name(base_offset, INDEX_SUFFIX))
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX))
        stat = os.fstat(self._fd)
        self.size = stat.st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_append_ms = now_ms if self.size else None
        self.last_modified_ms = now_ms if create else int(stat.st_mtime * 1000)
        self._bytes_since_index_entry = 0
        self._log_dirty = create
        if create:
            # Empty index files exist from the start, as in Kafka.
            self.offset_index.replace([])
            self.time_index.replace([])

    # --- loading -----------------------------------------------------------------------------------

    def load_trusted(self, next_offset: int | None, index_interval_bytes: int) -> bool:
        """Take the files as they are (clean shutdown, or below the recovery point).

        ``next_offset`` is the next segment's base offset; None for the last segment, whose end is
        found by scanning from its last offset index entry. Returns False if an index failed its
        sanity check and was rebuilt from the ``.log``.
        """
        try:
            last_offset_entry = self.offset_index.sanity_check()
            last_time_entry = self.time_index.sanity_check()
            if last_offset_entry is not None and not (
                last_offset_entry[0] >= 0 and 0 <= last_offset_entry[1] < self.size
            ):
                raise IndexCorrupt(f"{self.offset_index.path.name} points past the end of the segment")
        except IndexCorrupt as exc:
            log.warning("Rebuilding the indexes of %s: %s", self.log_path, exc)
            self.recover(index_interval_bytes)
            return False
        if last_time_entry is not None:
            self.max_timestamp, relative = last_time_entry
            self.offset_of_max_timestamp = self.base_offset + relative
        if next_offset is not None:
            self.next_offset = next_offset
            return True
        start = last_offset_entry[1] if last_offset_entry is not None else 0
        try:
            for _, batch in file_batches(self._fd, start, self.size, _MIN_BLOCK):
                self.next_offset = batch.last_offset + 1
                if batch.max_timestamp > self.max_timestamp:  # the active segment's time index lags
                    self.max_timestamp = batch.max_timestamp
                    self.offset_of_max_timestamp = batch.last_offset
        except CorruptRecordError as exc:
            log.warning("Recovering %s although it was closed cleanly: %s", self.log_path, exc)
            self.recover(index_interval_bytes)
            return False
        self._bytes_since_index_entry = self.size - start if last_offset_entry is not None else self.size
        return True

    def recover(self, index_interval_bytes: int) -> RecoveryOutcome:
        """Validate every batch, rebuild both indexes, and cut the file at the first bad batch.

        A batch is good if it frames (length, magic 2), its CRC-32C matches, its offsets move forward
        from the segment's base offset and fit the index's relative offsets.
        """
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.next_offset = self.base_offset
        self._first_batch_timestamp = None
        bytes_since_entry = 0
        valid = 0
        reason: str | None = None
        expected_offset = self.base_offset
        try:
            for position, batch in file_batches(self._fd, 0, self.size, 1024 * 1024):
                batch.validate_crc()
                if batch.base_offset < expected_offset:
                    raise CorruptRecordError(f"base offset {batch.base_offset} is below {expected_offset}")
                if batch.last_offset_delta < 0 or batch.last_offset - self.base_offset > INT32_MAX:
                    raise CorruptRecordError(f"batch at base offset {batch.base_offset} has a bad last offset")
                if batch.max_timestamp > self.max_timestamp:
                    self.max_timestamp = batch.max_timestamp
                    self.offset_of_max_timestamp = batch.last_offset
                if bytes_since_entry > index_interval_bytes:
                    offset_entries.append((batch.last_offset - self.base_offset, position))
                    if self.max_timestamp >= 0 and (not time_entries or self.max_timestamp > time_entries[-1][0]):
                        time_entries.append((self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))
                    bytes_since_entry = 0
                bytes_since_entry += batch.size
                expected_offset = self.next_offset = batch.last_offset + 1
                valid = position + batch.size
        except CorruptRecordError as exc:
            reason = str(exc)
        truncated = self.size - valid
        if truncated and reason is None:
            reason = "partial batch at the end"
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
            self._log_dirty = True
        if self.max_timestamp >= 0 and (not time_entries or self.max_timestamp > time_entries[-1][0]):
            time_entries.append((self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))
        self.offset_index.replace(offset_entries)
        self.time_index.replace(time_entries)
        self._bytes_since_index_entry = bytes_since_entry
        return RecoveryOutcome(valid, truncated, reason)

    # --- appending ---------------------------------------------------------------------------------

    def append(self, batch: RecordBatch, now_ms: int, index_interval_bytes: int) -> int:
        position = self.size
        _write_all(self._fd, batch.buffer)
        self._log_dirty = True
        self._note_append(batch, now_ms)
        if self._bytes_since_index_entry > index_interval_bytes:
            self.offset_index.append(batch.last_offset - self.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += batch.size
        return position

    def is_index_full(self, segment_index_bytes: int) -> bool:
        return self.offset_index.entry_count >= self.offset_index.max_entries(
            segment_index_bytes
        ) or self.time_index.entry_count >= self.time_index.max_entries(segment_index_bytes)

    def on_roll(self) -> None:
        """Kafka's onBecomeInactiveSegment: the final time index entry, then stop writing indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        self.offset_index.close()
        self.time_index.close()

    # --- reading -----------------------------------------------------------------------------------

    def _position_for(self, offset: int) -> int:
        """Where to start scanning for ``offset``: the batch of the closest offset index entry below it."""
        entry = self.offset_index.floor(offset - self.base_offset)
        return 0 if entry is None else entry[1]

    def _header_at(self, position: int) -> _BatchSpan | None:
        """Offsets and size of the batch stored at ``position``, from its first 27 bytes only."""
        head = os.pread(self._fd, _SPAN.size, position)
        if len(head) < _SPAN.size:
            return None
        base_offset, length, last_offset_delta = _SPAN.unpack(head)
        size = length + LOG_OVERHEAD
        if length < 0 or position + size > self.size:
            return None  # a partial batch at the end
        return _BatchSpan(position, base_offset, base_offset + last_offset_delta, size)

    def _batch_at(self, offset: int) -> _BatchSpan | None:
        """The first batch whose last offset is >= ``offset``, walking headers from the closest index
        entry below it (one small ``pread`` per batch; batch bodies are never read here)."""
        position = self._position_for(offset)
        while (span := self._header_at(position)) is not None:
            if span.last_offset >= offset:
                return span
            position += span.size
        return None

    def _boundary_at_or_before(self, start: int, cap: int) -> int:
        """The last batch boundary at or before position ``cap``, walking headers forward from ``start``
        or from the closest offset index entry below ``cap``, whichever is later (both are batch starts)."""
        indexed = self.offset_index.floor_position(cap)
        boundary = start if indexed is None or indexed < start else indexed
        while (span := self._header_at(boundary)) is not None and boundary + span.size <= cap:
            boundary += span.size
        return boundary

    def read(self, offset: int, max_bytes: int, min_one_batch: bool, upper_bound: int) -> SegmentRead:
        """Find the byte range with the indexes and the batch headers near its two ends, then read it
        with one ``os.pread``.

        Offsets within a segment are contiguous (each batch's base offset is one past the previous
        batch's last offset), so the next offset after the range is the base offset stored at its end.
        """
        first = self._batch_at(offset)
        if first is None:
            return SegmentRead()
        start = first.position
        if first.last_offset >= upper_bound:
            return SegmentRead(stopped=True)
        limit_position = self.size
        if upper_bound < self.next_offset:
            limit = self._batch_at(upper_bound)
            if limit is not None:
                limit_position = limit.position
        if start + max_bytes >= limit_position:
            end = limit_position
            stopped = limit_position < self.size
        else:
            end = self._boundary_at_or_before(start, start + max_bytes)
            stopped = True
            if end == start:
                if not min_one_batch:
                    return SegmentRead(stopped=True)
                end = start + first.size
        data = os.pread(self._fd, end - start, start)
        if end >= self.size:
            next_offset = self.next_offset
        else:
            (next_offset,) = _BASE_OFFSET.unpack(os.pread(self._fd, _BASE_OFFSET.size, end))
        return SegmentRead([data], len(data), first.base_offset, next_offset, stopped)

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        for _, batch in file_batches(self._fd, self._position_for(offset), self.size, _MIN_BLOCK):
            if batch.last_offset >= offset:
                yield batch

    def batches_near_timestamp(self, timestamp: int, start_offset: int) -> Iterator[RecordBatch]:
        entry = self.time_index.floor(timestamp)
        indexed_offset = self.base_offset if entry is None else self.base_offset + entry[1]
        return self.batches_from(max(indexed_offset, start_offset))

    # --- durability and lifetime -------------------------------------------------------------------

    def sync_handles(self) -> list[int]:
        handles = []
        if self._log_dirty:
            handles.append(os.dup(self._fd))
            self._log_dirty = False
        for index in (self.offset_index, self.time_index):
            handle = index.sync_handle()
            if handle is not None:
                handles.append(handle)
        return handles

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
