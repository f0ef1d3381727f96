"""The disk engine: segments as Kafka's files, and the partition log that keeps them in a directory.

:class:`DiskLog` is a :class:`~kafkalite.broker.core.log.partition_log.SegmentedLog` whose segments are
:class:`FileSegment` objects; ``<data dir>/<topic>-<partition>/`` holds them. Build it with
:meth:`DiskLog.create` or :meth:`DiskLog.load` (which recovers after an unclean shutdown, as the
``log`` package docstring describes).

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

import errno
import logging
import os
import struct
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import pairwise, takewhile
from pathlib import Path
from typing import Final

from kafkalite.broker.core.log.allocate import ALLOCATE_MIN_BYTES, allocate_blocks
from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.files import FileHandle, OpenFiles
from kafkalite.broker.core.log.index import IndexCorrupt, OffsetIndex, TimeIndex, write_all
from kafkalite.broker.core.log.partition_log import LogConfig, SegmentedLog, wall_clock_ms
from kafkalite.broker.core.log.region import FileRegion, OwnedDescriptor
from kafkalite.broker.core.log.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentRead,
    segment_file_name,
)
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import LOG_OVERHEAD, NO_TIMESTAMP, RecordBatch, iter_batches

log = logging.getLogger("kafkalite.log")

__all__ = ["REGION_MIN_BYTES", "DiskLog", "FileSegment", "RecoveryOutcome", "file_batches"]

_BATCH_LENGTH: Final = struct.Struct(">i")  # at byte 8 of every batch (LOG_OVERHEAD framing)
_BASE_OFFSET: Final = struct.Struct(">q")  # bytes 0..8 of every batch
_SPAN: Final = struct.Struct(">qi11xi")  # base offset, batch length, (11 bytes), last offset delta
# base offset, batch length, (leader epoch), magic, (crc, attributes), last offset delta, (first timestamp),
# max timestamp: the first 43 bytes of a magic-2 batch
_HEAD: Final = struct.Struct(">qi4xb6xi8xq")
_MIN_BATCH_LENGTH: Final = 49  # a magic-2 batch header without its LOG_OVERHEAD
# Runs of stored batches at least this long are given as file regions when the reader asks for them:
# below it, a pread and one write cost less than a descriptor of its own and a sendfile between writes.
REGION_MIN_BYTES: Final = 64 * 1024


class _BatchSpan:
    """Where a stored batch is and which offsets it holds, read from its header alone."""

    __slots__ = ("position", "base_offset", "last_offset", "size")

    position: Final[int]
    base_offset: Final[int]
    last_offset: Final[int]
    size: Final[int]

    def __init__(self, position: int, base_offset: int, last_offset: int, size: int) -> None:
        self.position = position
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.size = size
_MIN_BLOCK: Final = 64 * 1024
_MAX_RECENT: Final = 1024  # recent appends remembered (a large index.interval.bytes walks headers beyond them)
_SCAN_BLOCK: Final = 16 * 1024
_MAX_BLOCK: Final = 8 * 1024 * 1024



def file_batches(file: FileHandle, start: int, end: int, block_size: int) -> Iterator[tuple[int, RecordBatch]]:
    """Walk the magic-2 batches stored in ``file`` between positions ``start`` and ``end``.

    Yields ``(file position, batch)``; each batch is a view into a block read with one ``os.pread`` of
    about ``block_size`` bytes (more when a batch is larger). Stops quietly at a partial batch at the
    end; a bad length or magic raises :class:`CorruptRecordError`. CRCs are not checked.
    """
    position = start
    block_size = min(max(block_size, _SCAN_BLOCK), _MAX_BLOCK)
    while end - position >= LOG_OVERHEAD:
        want = min(end - position, block_size)
        block = os.pread(file.descriptor(), want, position)
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


class RecoveryOutcome:
    """What scanning a segment found: how many bytes were valid and why the rest (if any) was cut."""

    __slots__ = ("valid_bytes", "truncated_bytes", "reason")

    valid_bytes: Final[int]
    truncated_bytes: Final[int]
    reason: Final[str | None]

    def __init__(self, valid_bytes: int, truncated_bytes: int, reason: str | None) -> None:
        self.valid_bytes = valid_bytes
        self.truncated_bytes = truncated_bytes
        self.reason = reason


class FileSegment(LogSegment):
    """A segment stored as Kafka's three files in the partition directory.

    The ``.log`` file is opened ``O_RDWR | O_APPEND`` through the log manager's ``OpenFiles`` budget
    (closed when least recently used, reopened when needed): appends use ``os.write``, reads
    ``os.pread``. Index files are opened for writing only while the segment is active, through the
    same budget.
    """

    def __init__(self, directory: Path, base_offset: int, now_ms: int, *, create: bool,
                 files: OpenFiles | None = None, staging: str = "") -> None:
        """``staging``: a suffix after each file's name (``.cleaned``: a cleaned segment being written)."""
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + staging)
        files = files if files is not None else OpenFiles(None)
        index_path = directory / (segment_file_name(base_offset, INDEX_SUFFIX) + staging)
        time_index_path = directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + staging)
        if create:
            index_path.unlink(missing_ok=True)
            time_index_path.unlink(missing_ok=True)
        self._file = FileHandle(files, self.log_path, os.O_RDWR | os.O_APPEND,
                                create_flags=os.O_CREAT | (os.O_TRUNC if create else 0))
        self.offset_index = OffsetIndex(index_path, files)
        self.time_index = TimeIndex(time_index_path, files)
        stat = os.fstat(self._file.descriptor())
        self.size = stat.st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_append_ms = now_ms if self.size else None
        self.last_modified_ms = now_ms if create else int(stat.st_mtime * 1000)
        self._bytes_since_index_entry = 0
        self._log_writes = 1 if create else 0  # writes to the .log file, and how many of them an fsync covered
        self._log_synced = 0
        self.torn = False  # a failed write could not be cut back: the file ends in a partial batch
        # The batches appended since the last offset index entry, that batch included (base offsets,
        # last offsets, positions): a read near the end finds its batch here instead of walking headers.
        self._recent: tuple[list[int], list[int], list[int]] = ([], [], [])
        if create:
            try:  # empty index files exist from the start, as in Kafka
                self.offset_index.replace([])
                self.time_index.replace([])
            except OSError:
                self.close()
                raise

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
            for last_offset, max_timestamp in self._headers_from(start):
                self.next_offset = last_offset + 1
                if max_timestamp > self.max_timestamp:  # the active segment's time index lags
                    self.max_timestamp = max_timestamp
                    self.offset_of_max_timestamp = last_offset
        except CorruptRecordError as exc:
            log.warning("Recovering %s although it was closed cleanly: %s", self.log_path, exc)
            self.recover(index_interval_bytes)
            return False
        self._bytes_since_index_entry = self.size - start if last_offset_entry is not None else self.size
        return True

    def _headers_from(self, position: int) -> Iterator[tuple[int, int]]:
        """(last offset, max timestamp) of each batch from ``position`` to the end of the file, read from
        the batch headers alone (one 43-byte ``pread`` each; bodies are skipped, CRCs not checked). Stops
        quietly at a partial batch at the end; a bad length or magic is :class:`CorruptRecordError`."""
        descriptor = self._file.descriptor()
        while self.size - position >= LOG_OVERHEAD:
            head = os.pread(descriptor, _HEAD.size, position)
            if len(head) < _HEAD.size:
                return
            base_offset, length, magic, last_offset_delta, max_timestamp = _HEAD.unpack(head)
            if length < _MIN_BATCH_LENGTH or magic != 2:
                raise CorruptRecordError(f"batch at byte {position} has length {length} and magic {magic}")
            if position + length + LOG_OVERHEAD > self.size:
                return
            yield base_offset + last_offset_delta, max_timestamp
            position += length + LOG_OVERHEAD

    def _trusted_prefix(self, recovery_point: int) -> tuple[_BatchSpan, list[tuple[int, int]],
                                                            list[tuple[int, int]]] | None:
        """After a crash, where this segment's validation may start: after the batch of the last offset
        index entry whose batch ends below ``recovery_point``. That batch, the ones before it and their
        index entries were fsynced when the recovery point moved past them. Returns that batch and the
        offset and time index entries up to it, or None (nothing below the recovery point is indexed, or
        the indexes do not hold together) to validate the whole segment."""
        last_trusted = recovery_point - 1 - self.base_offset  # relative last offset of a trusted batch
        if last_trusted < 0:
            return None
        try:
            self.offset_index.sanity_check()
            self.time_index.sanity_check()
            offsets = self.offset_index.entries()
            times = self.time_index.entries()
        except (IndexCorrupt, OSError):
            return None
        kept: list[tuple[int, int]] = []
        for key, position in offsets:
            if key > last_trusted:
                break
            if kept and (key <= kept[-1][0] or position <= kept[-1][1]):
                return None  # not in order: not an index to trust
            kept.append((key, position))
        if not kept or not 0 <= kept[-1][1] < self.size:
            return None
        key, position = kept[-1]
        span = self._header_at(position)
        if span is None or span.last_offset != self.base_offset + key:
            return None
        kept_times = list(takewhile(lambda entry: entry[1] <= key, times))
        if any(later[0] <= earlier[0] or later[1] < earlier[1] for earlier, later in pairwise(kept_times)):
            return None
        return span, kept, kept_times

    def recover(self, index_interval_bytes: int, recovery_point: int | None = None) -> RecoveryOutcome:
        """Validate the batches, rebuild both indexes, and cut the file at the first bad batch.

        A batch is good if it frames (length, magic 2), its CRC-32C matches, its offsets move forward
        from the segment's base offset and fit the index's relative offsets. With ``recovery_point``
        (after a crash), what lies wholly below it is trusted where the indexes say where it ends
        (``_trusted_prefix``): validation starts after the batch of the last index entry below it, and
        the index entries up to there are kept. ``valid_bytes`` counts from the start of the file.
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
        start = 0
        kept_offsets = kept_times = -1  # how many of the index files' entries stay (-1: rewrite them)
        prefix = None if recovery_point is None else self._trusted_prefix(recovery_point)
        if prefix is not None:
            # Resume as the appends left it just after the trusted batch was written and indexed.
            trusted, offset_entries, time_entries = prefix
            kept_offsets, kept_times = len(offset_entries), len(time_entries)
            start = valid = trusted.position + trusted.size
            bytes_since_entry = trusted.size
            expected_offset = self.next_offset = trusted.last_offset + 1
            if time_entries:
                self.max_timestamp = time_entries[-1][0]
                self.offset_of_max_timestamp = self.base_offset + time_entries[-1][1]
        try:
            for position, batch in file_batches(self._file, start, self.size, 1024 * 1024):
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
            os.ftruncate(self._file.descriptor(), valid)
            self.size = valid
        # What was validated may still be only in the page cache (the process died, not the machine):
        # the next flush fsyncs the file before the recovery point moves past it.
        self._log_writes += 1
        if self.max_timestamp >= 0 and (not time_entries or self.max_timestamp > time_entries[-1][0]):
            time_entries.append((self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))
        if kept_offsets < 0:
            self.offset_index.replace(offset_entries)
            self.time_index.replace(time_entries)
        else:
            self.offset_index.keep_and_append(kept_offsets, offset_entries[kept_offsets:])
            self.time_index.keep_and_append(kept_times, time_entries[kept_times:])
        self._bytes_since_index_entry = bytes_since_entry
        self._recent = ([], [], [])
        return RecoveryOutcome(valid, truncated, reason)

    # --- appending ---------------------------------------------------------------------------------

    def append(self, batch: RecordBatch, now_ms: int, index_interval_bytes: int) -> int:
        """Write the batch at the end. If the write fails (a full disk, a file size limit, a read-only
        file system), the file is cut back to where it ended, so nothing of the batch stays, and the
        OSError raised; if the cut fails too, ``torn`` is set and the log takes no more appends. An
        index entry that cannot be written is skipped (the index is sparse anyway)."""
        position = self.size
        try:
            fd = self._file.descriptor()
            if batch.size >= ALLOCATE_MIN_BYTES:
                allocate_blocks(fd, position, batch.size)
            write_all(fd, batch.buffer)
        except OSError:
            self._log_writes += 1
            try:
                os.ftruncate(self._file.descriptor(), position)
            except OSError:
                self.torn = True
            raise
        self._log_writes += 1
        self._note_append(batch, now_ms)
        if self._bytes_since_index_entry > index_interval_bytes:
            try:
                self.offset_index.append(batch.last_offset - self.base_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            except OSError as exc:
                log.warning("%s: an index entry could not be written (skipped): %s", self.log_path, exc)
            self._bytes_since_index_entry = 0
            self._recent = ([], [], [])
        self._bytes_since_index_entry += batch.size
        bases, lasts, positions = self._recent
        if len(positions) >= _MAX_RECENT:
            bases, lasts, positions = self._recent = ([], [], [])
        bases.append(batch.base_offset)
        lasts.append(batch.last_offset)
        positions.append(position)
        return position

    def is_index_full(self, segment_index_bytes: int) -> bool:
        return self.offset_index.is_full(segment_index_bytes) or self.time_index.is_full(segment_index_bytes)

    def on_roll(self) -> None:
        """Kafka's onBecomeInactiveSegment: the final time index entry, then stop writing indexes."""
        try:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        except OSError as exc:  # lookups near the end scan a little more; a rebuild restores it
            log.warning("%s: the final time index entry could not be written: %s", self.log_path, exc)
        self.offset_index.close()
        self.time_index.close()

    # --- reading -----------------------------------------------------------------------------------

    def _position_for(self, offset: int) -> int:
        """Where to start scanning for ``offset``: the batch of the closest offset index entry below it."""
        entry = self.offset_index.floor(offset - self.base_offset)
        return 0 if entry is None else entry[1]

    def _header_at(self, position: int) -> _BatchSpan | None:
        """Offsets and size of the batch stored at ``position``, from its first 27 bytes only."""
        head = os.pread(self._file.descriptor(), _SPAN.size, position)
        if len(head) < _SPAN.size:
            return None
        base_offset, length, last_offset_delta = _SPAN.unpack(head)
        size = length + LOG_OVERHEAD
        if length < 0 or position + size > self.size:
            return None  # a partial batch at the end
        return _BatchSpan(position, base_offset, base_offset + last_offset_delta, size)

    def _batch_at(self, offset: int) -> _BatchSpan | None:
        """The first batch whose last offset is >= ``offset``: among the recent appends when it is one
        of them, else walking headers from the closest index entry below it (one small ``pread`` per
        batch; batch bodies are never read here)."""
        bases, lasts, positions = self._recent
        if positions and offset >= bases[0]:
            found = bisect_left(lasts, offset)
            if found == len(lasts):
                return None
            position = positions[found]
            end = positions[found + 1] if found + 1 < len(positions) else self.size
            return _BatchSpan(position, bases[found], lasts[found], end - position)
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

    def read(self, offset: int, max_bytes: int, min_one_batch: bool, upper_bound: int,
             file_regions: bool = False) -> SegmentRead:
        """Find the byte range with the indexes and the batch headers near its two ends, then read it
        with one ``os.pread``, or, with ``file_regions`` and at least ``REGION_MIN_BYTES``, give it as a
        ``FileRegion`` on a descriptor of its own (``region`` module) for the writer to send.

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
        data: bytes | FileRegion | None = None
        if file_regions and end - start >= REGION_MIN_BYTES:
            try:
                data = FileRegion(OwnedDescriptor(self._file.descriptor()), start, end - start)
            except OSError as exc:  # no descriptor left for a duplicate: read the bytes instead
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
        if data is None:
            data = os.pread(self._file.descriptor(), end - start, start)
        if end >= self.size:
            next_offset = self.next_offset
        else:
            (next_offset,) = _BASE_OFFSET.unpack(os.pread(self._file.descriptor(), _BASE_OFFSET.size, end))
        return SegmentRead([data], len(data), first.base_offset, next_offset, stopped)

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        for _, batch in file_batches(self._file, self._position_for(offset), self.size, _MIN_BLOCK):
            if batch.last_offset >= offset:
                yield batch

    def batches_near_timestamp(self, timestamp: int, start_offset: int) -> Iterator[RecordBatch]:
        entry = self.time_index.floor(timestamp)
        indexed_offset = self.base_offset if entry is None else self.base_offset + entry[1]
        return self.batches_from(max(indexed_offset, start_offset))

    # --- durability and lifetime -------------------------------------------------------------------

    def prepare_sync(self, *, records_only: bool = False) -> tuple[list[int], Callable[[], None] | None]:
        handles = []
        writes = self._log_writes
        unsynced = writes > self._log_synced
        if unsynced:
            handles.append(self._file.duplicate())
        for index in () if records_only else (self.offset_index, self.time_index):
            handle = index.sync_handle()
            if handle is not None:
                handles.append(handle)
        return handles, partial(self._note_synced, writes) if unsynced else None

    def _note_synced(self, writes: int) -> None:
        if writes > self._log_synced:
            self._log_synced = writes

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self._file.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    def rename_files(self, log_path: Path, index_path: Path, time_index_path: Path) -> None:
        """Follow files the caller renamed (a cleaned segment swapped in); open descriptors stay valid."""
        self.log_path = self._file.path = log_path
        self.offset_index.rename(index_path)
        self.time_index.rename(time_index_path)


class DiskLog(SegmentedLog):
    """A partition log in ``directory`` (``<data dir>/<topic>-<partition>``), in Kafka's layout.

    Build it with :meth:`create` (new, empty) or :meth:`load` (existing, with recovery).
    """

    def __init__(self, directory: Path, config: LogConfig, now_ms: int, files: OpenFiles | None = None) -> None:
        super().__init__(directory.name, config, now_ms)
        self.directory = directory
        self._files = files if files is not None else OpenFiles(None)
        self._directory_changes = 1  # new or removed files, and how many of them an fsync of the directory covered
        self._directory_synced = 0
        self.background: Background | None = None  # where removing a deleted partition's files runs

    @classmethod
    def create(cls, directory: Path, config: LogConfig, now_ms: int | None = None,
               files: OpenFiles | None = None) -> DiskLog:
        """A new empty log with one segment at offset 0; the directory is created if missing.

        ``files`` is the open-file budget its segments share with other logs (none: no limit)."""
        now = wall_clock_ms() if now_ms is None else now_ms
        directory.mkdir(parents=True, exist_ok=True)
        disk_log = cls(directory, config, now, files)
        disk_log._add_segment(disk_log._new_segment(0, now))
        return disk_log

    @classmethod
    def load(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool,
        now_ms: int | None = None,
        files: OpenFiles | None = None,
        flush: bool = True,
    ) -> DiskLog:
        """Open the segments in ``directory``; after an unclean shutdown, recover from ``recovery_point``.

        Logs one INFO line per partition that needed recovery, saying what was truncated. What was
        validated is fsynced before this returns, unless ``flush`` is False (the log manager fsyncs
        the logs it loads all together): then the recovery point stays where it was until a flush.
        """
        now = wall_clock_ms() if now_ms is None else now_ms
        disk_log = cls(directory, config, now, files)
        base_offsets = disk_log._scan_directory()
        if not base_offsets:
            disk_log._add_segment(disk_log._new_segment(max(log_start_offset, 0), now))
            disk_log._log_start_offset = disk_log._recovery_point = max(log_start_offset, 0)
            return disk_log
        recovered: list[str] = []
        rebuilt = False  # an index rebuilt: a file may have been created in the directory
        for index, base_offset in enumerate(base_offsets):
            segment = FileSegment(directory, base_offset, now, create=False, files=disk_log._files)
            following = base_offsets[index + 1] if index + 1 < len(base_offsets) else None
            expected_start = disk_log._segments[-1].next_offset if disk_log._segments else base_offset
            if clean_shutdown or (following is not None and following <= recovery_point):
                rebuilt |= not segment.load_trusted(following, config.index_interval_bytes)
                disk_log._add_segment(segment)
                continue
            if base_offset < expected_start:
                # Overlapping offsets cannot be served; keep what came before and drop the rest.
                for later_base in base_offsets[index:]:
                    _delete_segment_files(directory, later_base)
                segment.close()
                recovered.append(
                    f"segment {base_offset} overlaps offsets up to {expected_start}; "
                    f"deleted it and {len(base_offsets) - index - 1} later segment(s)"
                )
                break
            outcome = segment.recover(config.index_interval_bytes, recovery_point)
            disk_log._add_segment(segment)
            if outcome.truncated_bytes:
                later = base_offsets[index + 1 :]
                for later_base in later:
                    _delete_segment_files(directory, later_base)
                recovered.append(
                    f"truncated {outcome.truncated_bytes} bytes at offset {segment.next_offset} of segment "
                    f"{base_offset} ({outcome.reason}) and deleted {len(later)} later segment(s)"
                )
                break
        disk_log._log_start_offset = max(log_start_offset, disk_log._bases[0])
        if disk_log._log_start_offset > disk_log.log_end_offset:
            disk_log._log_start_offset = disk_log.log_end_offset
        if clean_shutdown:
            disk_log._recovery_point = disk_log.log_end_offset
            if not rebuilt:  # every file was there and durable at the clean shutdown: no directory fsync due
                disk_log._directory_synced = disk_log._directory_changes
        else:
            # What was just validated is made durable, so the recovery point can move to the end.
            disk_log._recovery_point = min(recovery_point, disk_log.log_end_offset)
            if flush:
                disk_log.flush(now)
            log.info(
                "Recovered %s from offset %d: %s; log end offset %d",
                disk_log.name,
                recovery_point,
                "; ".join(recovered) or "nothing truncated",
                disk_log.log_end_offset,
            )
        return disk_log

    def _scan_directory(self) -> list[int]:
        """Base offsets of the ``.log`` files; orphan index files are removed, and a swap of cleaned
        segments a crash interrupted is completed (or, before its commit point, discarded)."""
        names = os.listdir(self.directory)  # one listing (a broker may load thousands of these)
        if any(name.endswith((SWAP_SUFFIX, CLEANED_SUFFIX)) for name in names):
            self._finish_swaps()
            names = os.listdir(self.directory)
        bases: set[int] = set()
        orphans: list[tuple[int, str]] = []
        for name in names:
            stem, _, rest = name.partition(".")
            if not (len(stem) == 20 and stem.isdigit()):
                continue
            suffix = "." + rest
            if suffix == LOG_SUFFIX:
                bases.add(int(stem))
            elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                orphans.append((int(stem), name))
        for base_offset, name in orphans:
            if base_offset not in bases:
                (self.directory / name).unlink(missing_ok=True)
        return sorted(bases)

    def _finish_swaps(self) -> None:
        """Log compaction writes a cleaned group to ``<base>.log.cleaned`` (with ``.index.cleaned`` and
        ``.timeindex.cleaned``), fsyncs it, and commits by renaming the log to ``<base>.<end>.swap``:
        then the old segments with base offsets in ``[base, end)`` are removed and the new files
        renamed into place. Here, at load: a ``.swap`` is finished the same way; ``.cleaned`` files
        without one are what a crash left of a cleaning never committed, and are removed."""
        swaps: dict[int, tuple[int, Path]] = {}
        for path in self.directory.glob("*" + SWAP_SUFFIX):
            parts = path.name[: -len(SWAP_SUFFIX)].split(".")
            if len(parts) == 2 and all(len(part) == 20 and part.isdigit() for part in parts):
                swaps[int(parts[0])] = (int(parts[1]), path)
        for base_offset, (end_offset, swap) in sorted(swaps.items()):
            for path in self.directory.iterdir():
                stem, suffix = path.stem, path.suffix
                if (suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX) and len(stem) == 20 and stem.isdigit()
                        and base_offset < int(stem) < end_offset):
                    path.unlink()
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                cleaned = self.directory / (segment_file_name(base_offset, suffix) + CLEANED_SUFFIX)
                if cleaned.exists():
                    os.replace(cleaned, self.directory / segment_file_name(base_offset, suffix))
            os.replace(swap, self.directory / segment_file_name(base_offset, LOG_SUFFIX))
            log.info("%s: completed the swap of the cleaned segment at offset %d", self.name, base_offset)
        for path in self.directory.glob("*" + CLEANED_SUFFIX):
            path.unlink()

    def new_cleaned_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return FileSegment(self.directory, base_offset, now_ms, create=True, files=self._files, staging=CLEANED_SUFFIX)

    def _commit_cleaned(self, old: Sequence[LogSegment], new: LogSegment, end_offset: int) -> None:
        """The swap (see :meth:`_finish_swaps`): its commit point is the rename to ``.swap``. The
        renames are made durable by an fsync of the directory, off the loop."""
        assert isinstance(new, FileSegment)
        base_offset = new.base_offset
        final = [self.directory / segment_file_name(base_offset, suffix)
                 for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
        swap = self.directory / f"{base_offset:020d}.{end_offset:020d}{SWAP_SUFFIX}"
        os.replace(new.log_path, swap)
        for segment in old:
            segment.close()
        for segment in old[1:]:
            segment.delete()
        os.replace(new.offset_index.path, final[1])
        os.replace(new.time_index.path, final[2])
        os.replace(swap, final[0])
        new.rename_files(*final)
        self._directory_changes += 1
        if self.background is not None:
            self.background.submit(partial(_sync_directory, self.directory))

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        self._directory_changes += 1
        try:
            return FileSegment(self.directory, base_offset, now_ms, create=True, files=self._files)
        except OSError:  # no room, or no right, for the new files: leave none behind
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                try:
                    (self.directory / segment_file_name(base_offset, suffix)).unlink(missing_ok=True)
                except OSError:
                    pass
            raise

    def _sync_handles(self, segments: list[LogSegment], *, records_only: bool = False,
                      ) -> tuple[list[int], list[Callable[[], None]]]:
        handles, synced = super()._sync_handles(segments, records_only=records_only)
        changes = self._directory_changes
        if changes > self._directory_synced:  # new segment files must survive in the directory too
            handles.append(os.open(self.directory, os.O_RDONLY))
            synced.append(partial(self._note_directory_synced, changes))
        return handles, synced

    def _note_directory_synced(self, changes: int) -> None:
        if changes > self._directory_synced:
            self._directory_synced = changes

    def delete(self) -> None:
        """Close and remove the partition directory: renamed to a ``-delete`` name at once, as Kafka
        does (a restart finishes removing such directories), then removed in the background."""
        self.close()
        doomed = self.directory.with_name(f"{self.directory.name}.{uuid.uuid4().hex}-delete")
        try:
            self.directory.rename(doomed)
        except FileNotFoundError:
            return
        import shutil  # (here: it imports bz2 and lzma, which no start needs)

        remove = partial(shutil.rmtree, doomed, ignore_errors=True)
        if self.background is None:
            remove()
        else:
            self.background.submit(remove)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except FileNotFoundError:  # deleted meanwhile
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete_segment_files(directory: Path, base_offset: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (directory / segment_file_name(base_offset, suffix)).unlink(missing_ok=True)
