"""Partition logs: what a producer and a consumer rely on, on both engines (disk and memory).

Offsets assigned per batch, fetches that return whole stored batches (the containing batch first, the
max_bytes and "first batch always" rules, the high watermark bound), segment rolls, ListOffsets by
timestamp and max timestamp, retention and DeleteRecords moving the log start offset. The disk-only
tests check the Kafka file layout byte for byte. Time is injected; nothing sleeps.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalite.broker.core.log.disk import DiskLog
from kafkalite.broker.core.log.files import OpenFiles
from kafkalite.broker.core.log.memory import MemoryLog
from kafkalite.broker.core.log.partition_log import (
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    RecordBatchTooLarge,
    SegmentedLog,
)
from kafkalite.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    RecordBatch,
    RecordBatchBuilder,
    build_end_transaction_marker,
    iter_batches,
)

T0 = 1_700_000_000_000
HOUR = 3_600_000

LogFactory = Callable[..., SegmentedLog]


def make_batch(
    records: int = 1, *, timestamp: int = T0, value_size: int = 10, timestamps: list[int] | None = None
) -> bytearray:
    """A magic-2 batch of ``records`` records (timestamps ``timestamp, timestamp+1, ...`` unless given)."""
    builder = RecordBatchBuilder()
    stamps = timestamps if timestamps is not None else [timestamp + i for i in range(records)]
    for index, stamp in enumerate(stamps):
        builder.append(timestamp=stamp, key=b"k%d" % index, value=b"v" * value_size)
    return builder.build()


@pytest.fixture(params=["disk", "memory", "disk-2-open-files"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogFactory]:
    """Build a fresh log of the parametrized engine: ``make_log(config=..., now_ms=...)``.

    ``disk-2-open-files``: the disk engine with a budget of two open files shared by every log the
    test makes, so segment and index files are closed and reopened all the time."""
    created: list[SegmentedLog] = []
    files = OpenFiles(2) if request.param == "disk-2-open-files" else None

    def factory(config: LogConfig | None = None, now_ms: int = T0) -> SegmentedLog:
        config = config or LogConfig()
        partition_log: SegmentedLog
        if request.param.startswith("disk"):
            partition_log = DiskLog.create(tmp_path / f"topic-{len(created)}", config, now_ms, files)
        else:
            partition_log = MemoryLog(f"topic-{len(created)}", config, now_ms)
        created.append(partition_log)
        return partition_log

    yield factory
    for partition_log in created:
        partition_log.close()


def batches_of(result_bytes: bytes) -> list[RecordBatch]:
    return [batch for batch in iter_batches(result_bytes) if isinstance(batch, RecordBatch)]


def fill(partition_log: PartitionLog, count: int, records: int = 3, *, value_size: int = 10) -> list[bytes]:
    """Append ``count`` batches of ``records`` records; return their stored bytes."""
    stored = []
    for index in range(count):
        data = make_batch(records, timestamp=T0 + index * 10, value_size=value_size)
        partition_log.append(data, T0 + index)
        stored.append(bytes(data))
    return stored


# --------------------------------------------------------------------------------------------------
# Append and read


def test_append_assigns_offsets_per_batch_by_rewriting_the_base_offset(make_log: LogFactory) -> None:
    partition_log = make_log()
    first = make_batch(3)
    second = make_batch(2)
    result1 = partition_log.append(first, T0)
    result2 = partition_log.append(memoryview(second), T0)

    assert (result1.base_offset, result1.last_offset, result1.position) == (0, 2, 0)
    assert (result2.base_offset, result2.last_offset, result2.position) == (3, 4, len(first))
    assert RecordBatch(first).base_offset == 0 and RecordBatch(second).base_offset == 3  # rewritten in place
    RecordBatch(second).validate_crc()  # the base offset is outside the CRC
    assert partition_log.log_start_offset == 0
    assert partition_log.log_end_offset == 5
    assert partition_log.size_bytes() == len(first) + len(second)


def test_read_returns_the_stored_bytes_unchanged(make_log: LogFactory) -> None:
    partition_log = make_log()
    stored = fill(partition_log, 5)
    result = partition_log.read(0, 1 << 20, min_one_batch=False)

    assert result.to_bytes() == b"".join(stored)
    assert result.size == sum(map(len, stored))
    assert (result.first_offset, result.next_offset) == (0, 15)
    assert [batch.base_offset for batch in batches_of(result.to_bytes())] == [0, 3, 6, 9, 12]
    assert [record.offset for batch in batches_of(result.to_bytes()) for record in batch.records()] == list(range(15))


def test_read_from_the_middle_of_a_batch_returns_the_containing_batch(make_log: LogFactory) -> None:
    partition_log = make_log()
    stored = fill(partition_log, 4)
    result = partition_log.read(7, 1 << 20, min_one_batch=False)

    assert result.first_offset == 6  # batch 6..8 starts before 7, as in Kafka
    assert result.to_bytes() == b"".join(stored[2:])


def test_max_bytes_returns_whole_batches_only(make_log: LogFactory) -> None:
    partition_log = make_log()
    stored = fill(partition_log, 4)
    size = len(stored[0])

    two_and_a_half = partition_log.read(0, size * 2 + size // 2, min_one_batch=False)
    assert two_and_a_half.to_bytes() == stored[0] + stored[1]
    assert two_and_a_half.next_offset == 6

    exact = partition_log.read(3, size * 2, min_one_batch=False)
    assert exact.to_bytes() == stored[1] + stored[2]


def test_first_batch_is_returned_whole_when_min_one_batch(make_log: LogFactory) -> None:
    partition_log = make_log()
    big = make_batch(2, value_size=5000)
    partition_log.append(big, T0)
    fill(partition_log, 2)

    assert partition_log.read(0, 100, min_one_batch=False).empty
    result = partition_log.read(0, 100, min_one_batch=True)
    assert result.to_bytes() == bytes(big)
    assert result.next_offset == 2


def test_upper_bound_hides_batches_at_or_beyond_it(make_log: LogFactory) -> None:
    partition_log = make_log()
    stored = fill(partition_log, 4)  # batches 0-2, 3-5, 6-8, 9-11

    assert partition_log.read(0, 1 << 20, min_one_batch=True, upper_bound=6).to_bytes() == stored[0] + stored[1]
    assert partition_log.read(0, 1 << 20, min_one_batch=True, upper_bound=7).to_bytes() == stored[0] + stored[1]
    assert partition_log.read(6, 1 << 20, min_one_batch=True, upper_bound=6).empty
    assert partition_log.read(0, 1 << 20, min_one_batch=True, upper_bound=0).empty


def test_offsets_outside_the_log_are_out_of_range(make_log: LogFactory) -> None:
    partition_log = make_log()
    fill(partition_log, 2)

    end = partition_log.read(6, 1000, min_one_batch=True)
    assert end.empty and end.next_offset == 6 and end.chunks == []
    with pytest.raises(OffsetOutOfRange) as raised:
        partition_log.read(7, 1000, min_one_batch=True)
    assert (raised.value.log_start_offset, raised.value.log_end_offset) == (0, 6)
    partition_log.delete_records_before(3, T0)
    with pytest.raises(OffsetOutOfRange):
        partition_log.read(2, 1000, min_one_batch=True)
    with pytest.raises(OffsetOutOfRange):
        partition_log.read(-1, 1000, min_one_batch=True)


def test_empty_log_reads_empty_at_offset_zero(make_log: LogFactory) -> None:
    partition_log = make_log()
    assert partition_log.read(0, 1000, min_one_batch=True).empty
    assert partition_log.offset_for_timestamp(0) is None
    assert partition_log.max_timestamp() is None


def test_control_and_transactional_batches_are_appended_like_any_other(make_log: LogFactory) -> None:
    partition_log = make_log()
    data = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    data.append(timestamp=T0, key=None, value=b"in a transaction")
    partition_log.append(data.build(), T0)
    marker = build_end_transaction_marker(
        EndTransactionMarker(ControlRecordType.COMMIT, 3), producer_id=7, producer_epoch=0, timestamp=T0
    )
    result = partition_log.append(marker, T0)

    assert (result.base_offset, result.last_offset) == (1, 1)
    stored = batches_of(partition_log.read(1, 1000, min_one_batch=True).to_bytes())
    assert stored[0].is_control
    assert stored[0].end_transaction_marker() == EndTransactionMarker(ControlRecordType.COMMIT, 3)


# --------------------------------------------------------------------------------------------------
# Rolling


def test_roll_by_segment_bytes(make_log: LogFactory) -> None:
    size = len(make_batch(3))
    partition_log = make_log(LogConfig(segment_bytes=size * 3 + 10))
    stored = fill(partition_log, 10)

    assert partition_log.segment_count() == 4
    assert partition_log.segment_base_offsets() == [0, 9, 18, 27]
    assert partition_log.active_segment_base_offset == 27
    # A read spanning segments returns every batch, in order, as several chunks.
    result = partition_log.read(0, 1 << 20, min_one_batch=False)
    assert result.to_bytes() == b"".join(stored)
    assert len(result.chunks) >= 4
    assert partition_log.read(8, size * 2, min_one_batch=False).to_bytes() == stored[2] + stored[3]


def test_batch_larger_than_segment_bytes_is_refused(make_log: LogFactory) -> None:
    partition_log = make_log(LogConfig(segment_bytes=1000))
    with pytest.raises(RecordBatchTooLarge):
        partition_log.append(make_batch(1, value_size=2000), T0)
    assert partition_log.log_end_offset == 0


def test_roll_by_segment_ms_uses_batch_timestamps_on_append(make_log: LogFactory) -> None:
    partition_log = make_log(LogConfig(segment_ms=HOUR))
    partition_log.append(make_batch(1, timestamp=T0), T0)
    partition_log.append(make_batch(1, timestamp=T0 + HOUR), T0)  # exactly segment.ms: no roll
    assert partition_log.segment_count() == 1
    partition_log.append(make_batch(1, timestamp=T0 + HOUR + 1), T0)
    assert partition_log.segment_base_offsets() == [0, 2]


def test_periodic_roll_by_segment_ms_uses_wall_clock_since_first_append(make_log: LogFactory) -> None:
    partition_log = make_log(LogConfig(segment_ms=HOUR))
    assert not partition_log.maybe_roll(T0 + 10 * HOUR)  # empty active segment never rolls
    partition_log.append(make_batch(1, timestamp=T0 - 100 * HOUR), T0)  # old CreateTime does not matter here
    assert not partition_log.maybe_roll(T0 + HOUR)
    assert partition_log.maybe_roll(T0 + HOUR + 1)
    assert partition_log.segment_base_offsets() == [0, 1]
    assert not partition_log.maybe_roll(T0 + 5 * HOUR)


# --------------------------------------------------------------------------------------------------
# Timestamps


def test_offset_for_timestamp_finds_the_exact_record_across_segments(make_log: LogFactory) -> None:
    size = len(make_batch(3))
    partition_log = make_log(LogConfig(segment_bytes=size * 2, index_interval_bytes=1))
    for index in range(8):  # batch i holds timestamps T0+100i, +1, +2 at offsets 3i..3i+2
        partition_log.append(make_batch(3, timestamp=T0 + 100 * index), T0)
    assert partition_log.segment_count() == 4

    assert partition_log.offset_for_timestamp(0) == (0, T0)
    assert partition_log.offset_for_timestamp(T0 + 501) == (16, T0 + 501)
    assert partition_log.offset_for_timestamp(T0 + 503) == (18, T0 + 600)  # next record at or after
    assert partition_log.offset_for_timestamp(T0 + 702) == (23, T0 + 702)
    assert partition_log.offset_for_timestamp(T0 + 703) is None
    partition_log.delete_records_before(17, T0)
    assert partition_log.offset_for_timestamp(0) == (17, T0 + 502)


def test_offset_for_timestamp_with_out_of_order_timestamps(make_log: LogFactory) -> None:
    partition_log = make_log(LogConfig(index_interval_bytes=1))
    partition_log.append(make_batch(timestamps=[T0 + 50, T0 + 10]), T0)
    partition_log.append(make_batch(timestamps=[T0 + 20, T0 + 30]), T0)
    partition_log.append(make_batch(timestamps=[T0 + 40, T0 + 60]), T0)

    assert partition_log.offset_for_timestamp(T0 + 15) == (0, T0 + 50)  # the earliest offset wins
    assert partition_log.offset_for_timestamp(T0 + 55) == (5, T0 + 60)


def test_max_timestamp_is_the_first_record_holding_it(make_log: LogFactory) -> None:
    size = len(make_batch(3))
    partition_log = make_log(LogConfig(segment_bytes=size * 2))
    partition_log.append(make_batch(timestamps=[T0, T0 + 5, T0 + 1]), T0)
    partition_log.append(make_batch(timestamps=[T0 + 2, T0 + 900, T0 + 3]), T0)
    partition_log.append(make_batch(timestamps=[T0 + 900, T0 + 4, T0 + 6]), T0)
    partition_log.append(make_batch(timestamps=[T0 + 7, T0 + 8, T0 + 9]), T0)

    assert partition_log.max_timestamp() == (4, T0 + 900)


# --------------------------------------------------------------------------------------------------
# Retention and DeleteRecords


def old_and_new_segments(make_log: LogFactory, config: LogConfig) -> SegmentedLog:
    """Three full segments of batches stamped 10, 9 and 8 hours ago, then one batch stamped now."""
    size = len(make_batch(3))
    partition_log = make_log(dataclasses.replace(config, segment_bytes=size * 2))
    for hours_ago in (10, 10, 9, 9, 8, 8):
        partition_log.append(make_batch(3, timestamp=T0 - hours_ago * HOUR), T0)
    partition_log.append(make_batch(3, timestamp=T0), T0)
    assert partition_log.segment_base_offsets() == [0, 6, 12, 18]
    return partition_log


def test_retention_by_time_deletes_old_segments_and_moves_the_log_start_offset(make_log: LogFactory) -> None:
    partition_log = old_and_new_segments(make_log, LogConfig(retention_ms=int(8.5 * HOUR)))

    assert partition_log.enforce_retention(T0) == 2
    assert partition_log.segment_base_offsets() == [12, 18]
    assert partition_log.log_start_offset == 12
    assert partition_log.read(12, 1 << 20, min_one_batch=True).first_offset == 12
    with pytest.raises(OffsetOutOfRange):
        partition_log.read(11, 100, min_one_batch=True)
    assert partition_log.enforce_retention(T0) == 0


def test_retention_rolls_and_deletes_an_expired_active_segment(make_log: LogFactory) -> None:
    partition_log = old_and_new_segments(make_log, LogConfig(retention_ms=HOUR))

    assert partition_log.enforce_retention(T0 + 2 * HOUR) == 4
    assert partition_log.segment_base_offsets() == [21]
    assert partition_log.log_start_offset == partition_log.log_end_offset == 21
    assert partition_log.size_bytes() == 0
    assert partition_log.read(21, 100, min_one_batch=True).empty
    assert partition_log.append(make_batch(1), T0).base_offset == 21


def test_retention_by_size_deletes_oldest_segments(make_log: LogFactory) -> None:
    size = len(make_batch(3))
    partition_log = old_and_new_segments(make_log, LogConfig(retention_ms=-1, retention_bytes=size * 3))

    # 7 batches: delete whole 2-batch segments while the rest stays >= 3 batches.
    assert partition_log.enforce_retention(T0) == 2
    assert partition_log.segment_base_offsets() == [12, 18]
    assert partition_log.log_start_offset == 12
    assert partition_log.size_bytes() == size * 3


def test_retention_respects_the_high_watermark_and_cleanup_policy(make_log: LogFactory) -> None:
    partition_log = old_and_new_segments(make_log, LogConfig(retention_ms=HOUR))
    assert partition_log.enforce_retention(T0 + 2 * HOUR, high_watermark=7) == 1  # segment 6..11 is not all below 7
    assert partition_log.log_start_offset == 6

    compacted = old_and_new_segments(make_log, LogConfig(retention_ms=HOUR, cleanup_policy="compact"))
    assert compacted.enforce_retention(T0 + 2 * HOUR) == 0
    assert compacted.segment_count() == 4


def test_delete_records_before_moves_the_log_start_offset(make_log: LogFactory) -> None:
    size = len(make_batch(3))
    partition_log = make_log(LogConfig(segment_bytes=size * 2))
    stored = fill(partition_log, 6)  # segments 0 (0..5), 6 (6..11), 12 (12..17)

    partition_log.delete_records_before(7, T0)
    assert partition_log.log_start_offset == 7
    assert partition_log.segment_base_offsets() == [6, 12]
    # The batch holding the log start offset is served whole, as in Kafka.
    assert partition_log.read(7, 1 << 20, min_one_batch=True).to_bytes() == b"".join(stored[2:])

    partition_log.delete_records_before(3, T0)  # never backwards
    assert partition_log.log_start_offset == 7
    partition_log.delete_records_before(100, T0)  # never beyond the log end offset
    assert partition_log.log_start_offset == partition_log.log_end_offset == 18
    assert partition_log.segment_base_offsets() == [18]
    assert partition_log.append(make_batch(1), T0).base_offset == 18


# --------------------------------------------------------------------------------------------------
# Flushing


def test_flush_messages_and_flush_move_the_recovery_point(make_log: LogFactory) -> None:
    partition_log = make_log(LogConfig(flush_messages=5))
    fill(partition_log, 1)  # 3 records
    assert partition_log.recovery_point == 0
    fill(partition_log, 1)  # 6 >= 5: flushed
    assert partition_log.recovery_point == 6
    fill(partition_log, 1)
    partition_log.flush(T0 + 5)
    assert partition_log.recovery_point == 9
    assert partition_log.last_flush_ms == T0 + 5


# --------------------------------------------------------------------------------------------------
# Configuration


def test_log_config_deletes_only_with_the_delete_policy() -> None:
    assert not LogConfig(cleanup_policy="compact").deletes and LogConfig(cleanup_policy="compact,delete").deletes


# --------------------------------------------------------------------------------------------------
# Disk layout


def read_entries(path: Path, entry: struct.Struct) -> list[tuple[int, ...]]:
    return list(entry.iter_unpack(path.read_bytes()))


def test_segment_files_follow_kafkas_layout(tmp_path: Path) -> None:
    size = len(make_batch(3))
    config = LogConfig(segment_bytes=size * 11, index_interval_bytes=size * 2)
    partition_log = DiskLog.create(tmp_path / "events-0", config, T0)
    for index in range(14):  # batch i: offsets 3i..3i+2, max timestamp T0+100i+2, except batch 5 (older)
        stamp = T0 + 100 * index if index != 5 else T0 - 1000
        partition_log.append(make_batch(3, timestamp=stamp), T0)

    names = sorted(path.name for path in (tmp_path / "events-0").iterdir())
    assert names == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000033.index", "00000000000000000033.log", "00000000000000000033.timeindex",
    ]  # fmt: skip
    first_log = (tmp_path / "events-0" / "00000000000000000000.log").read_bytes()
    assert len(first_log) == size * 11

    # An offset index entry (last offset of the batch - base offset, position of the batch) once more
    # than index.interval.bytes were appended since the previous entry: at batches 3, 6 and 9.
    offsets = read_entries(tmp_path / "events-0" / "00000000000000000000.index", struct.Struct(">ii"))
    assert offsets == [(11, size * 3), (20, size * 6), (29, size * 9)]
    for relative_offset, position in offsets:
        assert RecordBatch(first_log[position:]).last_offset == relative_offset

    # Time index: (max timestamp so far, last offset of the batch that reached it - base offset) at the
    # same moments, only while it grows, plus the final entry written when the segment rolled.
    times = read_entries(tmp_path / "events-0" / "00000000000000000000.timeindex", struct.Struct(">qi"))
    assert times == [(T0 + 302, 11), (T0 + 602, 20), (T0 + 902, 29), (T0 + 1002, 32)]

    # The active segment (batches 11-13, no entry yet) gets its final time index entry on close.
    assert (tmp_path / "events-0" / "00000000000000000033.timeindex").read_bytes() == b""
    partition_log.close()
    active_times = read_entries(tmp_path / "events-0" / "00000000000000000033.timeindex", struct.Struct(">qi"))
    assert active_times == [(T0 + 1302, 8)]


def test_disk_reads_match_the_batch_by_batch_memory_engine(tmp_path: Path) -> None:
    """The disk engine finds read ranges through its sparse index; the memory engine walks every batch.

    Random batch sizes, index intervals and segment sizes, then reads from every offset with assorted
    budgets and upper bounds: both must return the same bytes and offsets.
    """
    import random

    rng = random.Random(20240611)
    for round_number in range(6):
        config = LogConfig(
            segment_bytes=rng.choice([4000, 8000, 1 << 20]), index_interval_bytes=rng.choice([0, 1, 300, 1000, 4096])
        )
        disk = DiskLog.create(tmp_path / f"round-{round_number}", config, T0)
        memory = MemoryLog("memory", config, T0)
        for _ in range(40):
            records = rng.randint(1, 4)
            data = make_batch(records, value_size=rng.choice([1, 50, 200, 900]))
            disk.append(bytearray(data), T0)
            memory.append(bytearray(data), T0)
        end = disk.log_end_offset
        for offset in range(0, end + 1):
            max_bytes = rng.choice([0, 1, 100, 500, 1500, 5000, 1 << 20])
            upper_bound = rng.choice([None, end, rng.randint(0, end)])
            min_one_batch = rng.random() < 0.5
            expected = memory.read(offset, max_bytes, min_one_batch=min_one_batch, upper_bound=upper_bound)
            actual = disk.read(offset, max_bytes, min_one_batch=min_one_batch, upper_bound=upper_bound)
            context = (round_number, offset, max_bytes, upper_bound, min_one_batch)
            assert actual.to_bytes() == expected.to_bytes(), context
            assert (actual.size, actual.first_offset, actual.next_offset) == (
                expected.size, expected.first_offset, expected.next_offset
            ), context  # fmt: skip
        disk.close()


def test_flush_can_run_off_the_event_loop(tmp_path: Path) -> None:
    """prepare_flush on the loop, the fsyncs on another thread, complete_flush back on the loop; the log
    keeps changing meanwhile (appends, a deleted segment) without harm."""
    import threading

    size = len(make_batch(3))
    partition_log = DiskLog.create(tmp_path / "orders-0", LogConfig(segment_bytes=size * 2), T0)
    fill(partition_log, 3)  # segments 0 (offsets 0..5) and 6 (6..8)
    pending = partition_log.prepare_flush()
    assert pending is not None and pending.target == 9 and pending.handles

    partition_log.append(make_batch(3), T0)  # offsets 9..11, not covered by this flush
    partition_log.delete_records_before(6, T0)  # segment 0 is closed and deleted; its duplicate is not
    worker = threading.Thread(target=pending.run)
    worker.start()
    worker.join()
    partition_log.complete_flush(pending, T0 + 1)

    assert partition_log.recovery_point == 9
    assert partition_log.last_flush_ms == T0 + 1
    assert partition_log.prepare_flush(up_to_offset=9) is None
    partition_log.flush(T0 + 2)
    assert partition_log.recovery_point == 12
    partition_log.close()
    memory = MemoryLog("memory", LogConfig(), T0)
    memory.append(make_batch(1), T0)
    memory_pending = memory.prepare_flush()
    assert memory_pending is not None and memory_pending.handles == []


def test_reads_near_the_end_find_the_same_batches_as_a_log_that_walks_its_headers(tmp_path: Path) -> None:
    """A segment remembers where its recent appends are; every read must find what walking the
    batch headers from the offset index finds (a reopened log remembers nothing, so it walks)."""
    config = LogConfig(index_interval_bytes=300, segment_bytes=2500)
    written = DiskLog.create(tmp_path / "t-0", config, T0)
    for index in range(60):
        written.append(make_batch(1 + index % 4, timestamp=T0 + index, value_size=5 + index % 7), T0)
    reopened = DiskLog.load(tmp_path / "t-0", config, clean_shutdown=False, now_ms=T0)
    try:
        end = written.log_end_offset
        assert reopened.log_end_offset == end and len(written.segment_base_offsets()) > 2
        for offset in range(end + 1):
            for max_bytes in (1, 150, 400, 10_000):
                for upper_bound in (None, max(offset, end - 3)):
                    seen = [log.read(offset, max_bytes, min_one_batch=True, upper_bound=upper_bound)
                            for log in (written, reopened)]
                    assert [b"".join(result.chunks) for result in seen][0] == b"".join(seen[1].chunks)
                    assert (seen[0].next_offset, seen[0].size) == (seen[1].next_offset, seen[1].size)
    finally:
        written.close()
        reopened.close()
