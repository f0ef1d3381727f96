"""The in-memory partition log: the same segments, rolls, reads and retention as the disk log, no files.

Each :class:`MemorySegment` is a list of stored batches (immutable ``bytes`` copies, so a buffer handed
out by ``read`` never changes) with parallel lists of last offsets, byte positions and a running maximum
of batch timestamps, searched with ``bisect``. All the offset, roll and retention rules live in
:class:`~kafkalite.broker.core.log.partition_log.SegmentedLog` and are shared with the disk engine, so
tests that run against this engine exercise the same logic. Used by test fixtures and by a broker with
``log.storage=memory``. Nothing survives the process: ``flush`` only moves the recovery point.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from kafkalite.broker.core.log.partition_log import LogConfig, SegmentedLog, wall_clock_ms
from kafkalite.broker.core.log.segment import LogSegment, SegmentRead
from kafkalite.protocol.records import NO_TIMESTAMP, RecordBatch

__all__ = ["MemoryLog", "MemorySegment"]


class MemorySegment(LogSegment):
    """A segment held as a list of batches; positions count bytes as if the batches were in a file."""

    def __init__(self, base_offset: int, now_ms: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_append_ms = None
        self.last_modified_ms = now_ms
        self._batches: list[bytes] = []
        self._last_offsets: list[int] = []
        self._positions: list[int] = []
        self._running_max_timestamps: list[int] = []  # max timestamp of batches[0..i], non-decreasing

    def append(self, batch: RecordBatch, now_ms: int, index_interval_bytes: int) -> int:
        position = self.size
        self._batches.append(bytes(batch.buffer))
        self._last_offsets.append(batch.last_offset)
        self._positions.append(position)
        self._note_append(batch, now_ms)
        self._running_max_timestamps.append(self.max_timestamp)
        return position

    def read(self, offset: int, max_bytes: int, min_one_batch: bool, upper_bound: int,
             file_regions: bool = False) -> SegmentRead:
        result = SegmentRead()
        for index in range(bisect_left(self._last_offsets, offset), len(self._batches)):
            data = self._batches[index]
            last_offset = self._last_offsets[index]
            if last_offset >= upper_bound or (
                result.size + len(data) > max_bytes and not (min_one_batch and result.size == 0)
            ):
                result.stopped = True
                break
            if result.first_offset < 0:
                result.first_offset = RecordBatch(data).base_offset
            result.buffers.append(data)
            result.size += len(data)
            result.next_offset = last_offset + 1
        return result

    def _batches_from_index(self, index: int) -> Iterator[RecordBatch]:
        for data in self._batches[index:]:
            yield RecordBatch(data)

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        return self._batches_from_index(bisect_left(self._last_offsets, offset))

    def batches_near_timestamp(self, timestamp: int, start_offset: int) -> Iterator[RecordBatch]:
        first_reaching = bisect_left(self._running_max_timestamps, timestamp)
        return self._batches_from_index(max(first_reaching, bisect_left(self._last_offsets, start_offset)))

    def is_index_full(self, segment_index_bytes: int) -> bool:
        return False


class MemoryLog(SegmentedLog):
    """A partition log kept in memory, starting empty at ``log_start_offset``."""

    directory = None  # no files

    def __init__(self, name: str, config: LogConfig, now_ms: int | None = None, log_start_offset: int = 0) -> None:
        now = wall_clock_ms() if now_ms is None else now_ms
        super().__init__(name, config, now)
        self._add_segment(MemorySegment(log_start_offset, now))
        self._log_start_offset = self._recovery_point = log_start_offset

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        return MemorySegment(base_offset, now_ms)
