"""The log manager and recovery: what survives a restart, and what a crash costs.

A clean shutdown reopens without scanning; a crash is recovered from the checkpointed recovery point,
truncating a torn or corrupt tail to the last good batch so appends continue at the right offset.
Checkpoint, ``partition.metadata`` and clean-shutdown files are checked in Kafka's formats.
"""

from __future__ import annotations

import base64
import logging
import uuid
from pathlib import Path

import pytest

from kafkalite.broker.core.log.disk import DiskLog, FileSegment
from kafkalite.broker.core.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_LAG_MS,
    LogManager,
    parse_partition_directory,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafkalite.broker.core.log.memory import MemoryLog
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.protocol.records import RecordBatch, iter_batches
from tests.unit.test_log import HOUR, T0, make_batch

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def manager(data_dir: Path, config: LogConfig | None = None) -> LogManager:
    log_manager = LogManager(data_dir, config or LogConfig())
    log_manager.open(now_ms=T0)
    return log_manager


def offsets_in(log_manager: LogManager, topic: str = "orders", partition: int = 0) -> list[int]:
    partition_log = log_manager.get_log(topic, partition)
    assert partition_log is not None
    result = partition_log.read(partition_log.log_start_offset, 1 << 30, min_one_batch=True)
    return [
        record.offset
        for batch in iter_batches(result.to_bytes())
        if isinstance(batch, RecordBatch)
        for record in batch.records()
    ]


def segment_path(data_dir: Path, base_offset: int, topic: str = "orders-0", suffix: str = ".log") -> Path:
    return data_dir / topic / f"{base_offset:020d}{suffix}"


# --------------------------------------------------------------------------------------------------
# Files and formats


def test_create_log_writes_the_partition_directory_and_metadata(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    log_manager.create_log("my.topic_name-x", 3, TOPIC_ID, now_ms=T0)

    directory = tmp_path / "my.topic_name-x-3"
    assert sorted(path.name for path in directory.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ]
    encoded = base64.urlsafe_b64encode(TOPIC_ID.bytes).decode().rstrip("=")
    assert (directory / "partition.metadata").read_text() == f"version: 0\ntopic_id: {encoded}\n"
    assert parse_partition_directory("my.topic_name-x-3") == ("my.topic_name-x", 3)
    assert parse_partition_directory("meta.properties") is None
    log_manager.close()

    reopened = manager(tmp_path)
    assert list(reopened.logs) == [("my.topic_name-x", 3)]
    assert reopened.topic_ids == {"my.topic_name-x": TOPIC_ID}
    reopened.close()


def test_checkpoint_files_use_kafkas_text_format(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    for partition in (0, 1):
        partition_log = log_manager.create_log("orders", partition, TOPIC_ID, now_ms=T0)
        for _ in range(partition + 2):
            partition_log.append(make_batch(2), T0)
    log_manager.get_log("orders", 1).delete_records_before(3, T0)  # type: ignore[union-attr]
    log_manager.get_log("orders", 0).flush(T0)  # type: ignore[union-attr]
    log_manager.checkpoint()

    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 4\norders 1 0\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 1 3\n"
    assert not list(tmp_path.glob("*.tmp"))
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 0, ("orders", 1): 3}

    log_manager.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 4\norders 1 6\n"
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":"0","broker_epoch":"-1"}'


def test_malformed_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text("0\n2\norders 0 4\n")
    assert read_offset_checkpoint(path) == {}
    write_offset_checkpoint(path, {("a-b.c", 12): 7})
    assert path.read_text() == "0\n1\na-b.c 12 7\n"


# --------------------------------------------------------------------------------------------------
# Clean restart


def test_clean_restart_keeps_everything_without_scanning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(make_batch(3))
    config = LogConfig(segment_bytes=size * 3, index_interval_bytes=size)
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for index in range(8):
        partition_log.append(make_batch(3, timestamp=T0 + index), T0)
    partition_log.delete_records_before(4, T0)
    log_manager.close(clean=True)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    def no_scan(*args: object) -> None:
        raise AssertionError("a clean restart must not scan segments")

    monkeypatch.setattr(FileSegment, "recover", no_scan)
    reopened = manager(tmp_path, config)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # removed at open: a crash from now on is noticed
    assert reopened.had_clean_shutdown
    reloaded = reopened.get_log("orders", 0)
    assert reloaded is not None
    partition_log = reloaded
    assert (partition_log.log_start_offset, partition_log.log_end_offset) == (4, 24)
    assert partition_log.recovery_point == 24
    assert offsets_in(reopened) == list(range(3, 24))  # from the batch holding the log start offset
    assert partition_log.max_timestamp() == (23, T0 + 7 + 2)
    assert partition_log.offset_for_timestamp(T0 + 5) == (11, T0 + 5)  # batch 3 holds T0+3..T0+5
    assert partition_log.append(make_batch(1), T0).base_offset == 24
    reopened.close()


def test_a_missing_index_is_rebuilt_after_a_clean_shutdown(tmp_path: Path) -> None:
    size = len(make_batch(3))
    config = LogConfig(index_interval_bytes=size - 1)  # an entry before every batch but the first
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for _ in range(6):
        partition_log.append(make_batch(3), T0)
    log_manager.close()
    index_path = segment_path(tmp_path, 0, suffix=".index")
    original = index_path.read_bytes()
    assert len(original) == 8 * 5
    index_path.write_bytes(original[:5])  # not a whole number of entries

    reopened = manager(tmp_path, config)
    assert index_path.read_bytes() == original
    assert offsets_in(reopened) == list(range(18))
    reopened.close()


# --------------------------------------------------------------------------------------------------
# Crash recovery


def crashed_log(tmp_path: Path, config: LogConfig, batches: int, flush_after: int | None = None) -> int:
    """Write ``batches`` batches of 3 records, flushing after ``flush_after`` of them, then stop uncleanly.

    Returns the size of one batch.
    """
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for index in range(batches):
        partition_log.append(make_batch(3, timestamp=T0 + index), T0)
        if flush_after is not None and index + 1 == flush_after:
            partition_log.flush(T0)
    log_manager.close(clean=False)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    return len(make_batch(3))


def test_crash_with_a_torn_last_batch_truncates_to_the_last_good_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = LogConfig(index_interval_bytes=1)
    size = crashed_log(tmp_path, config, 5)
    log_file = segment_path(tmp_path, 0)
    with open(log_file, "r+b") as file:
        file.truncate(size * 5 - 7)  # the last batch only partly reached the disk

    with caplog.at_level(logging.INFO, logger="kafkalite.log"):
        reopened = manager(tmp_path, config)
    assert not reopened.had_clean_shutdown
    partition_log = reopened.get_log("orders", 0)
    assert partition_log is not None
    assert partition_log.log_end_offset == 12
    assert log_file.stat().st_size == size * 4
    assert offsets_in(reopened) == list(range(12))
    recovered_lines = [record.getMessage() for record in caplog.records if "Recovered orders-0" in record.getMessage()]
    assert len(recovered_lines) == 1 and "truncated" in recovered_lines[0] and "partial batch" in recovered_lines[0]
    # The index was rebuilt for what survived (one entry per batch after the first at interval 1).
    assert segment_path(tmp_path, 0, suffix=".index").stat().st_size == 8 * 3

    assert partition_log.append(make_batch(2), T0).base_offset == 12
    assert offsets_in(reopened) == list(range(14))
    assert partition_log.recovery_point == 12  # the validated tail was made durable
    reopened.close()


def test_crash_with_a_corrupt_crc_truncates_there(tmp_path: Path) -> None:
    size = crashed_log(tmp_path, LogConfig(), 5)
    log_file = segment_path(tmp_path, 0)
    with open(log_file, "r+b") as file:
        file.seek(size * 3 + 70)  # inside the records of the 4th batch
        file.write(b"\xff\xfe")

    reopened = manager(tmp_path)
    partition_log = reopened.get_log("orders", 0)
    assert partition_log is not None
    assert partition_log.log_end_offset == 9
    assert log_file.stat().st_size == size * 3
    assert partition_log.append(make_batch(1), T0).base_offset == 9
    reopened.close()


def test_crash_recovery_deletes_segments_after_a_corrupt_one(tmp_path: Path) -> None:
    size = len(make_batch(3))
    config = LogConfig(segment_bytes=size * 2)
    crashed_log(tmp_path, config, 7)  # segments 0, 6, 12, 18
    with open(segment_path(tmp_path, 6), "r+b") as file:
        file.seek(size + 16)  # the magic byte of the second batch of segment 6
        file.write(b"\x07")

    reopened = manager(tmp_path, config)
    partition_log = reopened.get_log("orders", 0)
    assert partition_log is not None
    assert partition_log.segment_count() == 2
    assert partition_log.log_end_offset == 9
    assert not segment_path(tmp_path, 12).exists() and not segment_path(tmp_path, 18, suffix=".index").exists()
    assert offsets_in(reopened) == list(range(9))
    reopened.close()


def test_crash_recovery_starts_at_the_recovery_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(make_batch(3))
    config = LogConfig(segment_bytes=size * 2)
    crashed_log(tmp_path, config, 7, flush_after=5)  # recovery point 15, inside segment 12
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 15}

    scanned: list[int] = []
    original = FileSegment.recover

    def spy(segment: FileSegment, index_interval_bytes: int, recovery_point: int | None = None) -> object:
        scanned.append(segment.base_offset)
        return original(segment, index_interval_bytes, recovery_point)

    monkeypatch.setattr(FileSegment, "recover", spy)
    reopened = manager(tmp_path, config)
    assert scanned == [12, 18]
    assert offsets_in(reopened) == list(range(21))
    reopened.close()


def test_crash_with_an_empty_tail_of_zeros_is_truncated(tmp_path: Path) -> None:
    """Preallocated or zero-filled pages after a power loss: a batch length of 0 is not a batch."""
    size = crashed_log(tmp_path, LogConfig(), 2)
    with open(segment_path(tmp_path, 0), "ab") as file:
        file.write(bytes(4096))

    reopened = manager(tmp_path)
    assert reopened.get_log("orders", 0).log_end_offset == 6  # type: ignore[union-attr]
    assert segment_path(tmp_path, 0).stat().st_size == size * 2
    reopened.close()


# --------------------------------------------------------------------------------------------------
# The manager's periodic work and lifecycle


def test_a_periodic_checkpoint_rewrites_only_the_files_whose_offsets_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalite.broker.core.log.manager as manager_module

    written: list[str] = []
    write = manager_module._write_durably

    def counting_write(path: Path, data: bytes, **options: bool) -> None:
        written.append(path.name)
        write(path, data, **options)

    monkeypatch.setattr(manager_module, "_write_durably", counting_write)
    log_manager = manager(tmp_path)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    partition_log.append(make_batch(1), T0)
    log_manager.run_periodic(T0 + 5)  # the new partition enters both files
    partition_log.append(make_batch(2), T0)
    partition_log.flush(T0)
    written.clear()
    log_manager.run_periodic(T0 + 10)  # the recovery point moved, the log start offset did not
    assert written == ["recovery-point-offset-checkpoint"]
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 3}

    written.clear()
    partition_log.delete_records_before(2)  # the log start offset moves, the recovery point does not
    log_manager.run_periodic(T0 + 20)
    assert written == ["log-start-offset-checkpoint"]
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 2}

    written.clear()
    log_manager.run_periodic(T0 + 30)  # nothing moved
    assert written == []
    log_manager.close()
    log_manager = manager(tmp_path)  # a clean restart reads both files
    reopened = log_manager.get_log("orders", 0)
    assert reopened is not None and (reopened.log_start_offset, reopened.recovery_point) == (2, 3)
    log_manager.close()


def test_run_periodic_applies_retention_segment_ms_and_flush_ms(tmp_path: Path) -> None:
    config = LogConfig(retention_ms=2 * HOUR, segment_ms=HOUR, flush_ms=10_000)
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    partition_log.append(make_batch(3, timestamp=T0), T0)

    log_manager.run_periodic(T0 + 5_000)
    assert partition_log.recovery_point == 0  # flush.ms not yet due
    log_manager.run_periodic(T0 + 10_000)
    assert partition_log.recovery_point == 3

    log_manager.run_periodic(T0 + HOUR + 1)  # segment.ms: the active segment rolls
    assert partition_log.segment_count() == 2
    partition_log.append(make_batch(3, timestamp=T0 + 2 * HOUR), T0 + 2 * HOUR)

    assert log_manager.run_periodic(T0 + 2 * HOUR + 3) == 1  # retention: the first segment goes
    assert partition_log.log_start_offset == 3
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 3}
    log_manager.close()


def test_retention_runs_on_kafkas_schedule(tmp_path: Path) -> None:
    """First log.initial.task.delay.ms after open, then every log.retention.check.interval.ms; rolls
    and flushes keep running on every tick in between."""
    log_manager = LogManager(tmp_path, LogConfig(retention_ms=HOUR, segment_ms=10 * HOUR),
                             retention_check_interval_ms=300_000, initial_task_delay_ms=30_000)
    log_manager.open(now_ms=T0)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    partition_log.append(make_batch(2, timestamp=T0 - 2 * HOUR), T0)  # already past retention.ms

    assert log_manager.run_periodic(T0 + 29_999) == 0  # before the initial delay
    assert partition_log.log_start_offset == 0
    assert log_manager.run_periodic(T0 + 30_000) == 1  # the first check
    assert partition_log.log_start_offset == 2
    partition_log.append(make_batch(2, timestamp=T0 - 2 * HOUR), T0 + 31_000)
    assert log_manager.run_periodic(T0 + 329_999) == 0  # the next check is a whole interval later
    assert log_manager.run_periodic(T0 + 330_000) == 1
    assert log_manager.next_retention_check_ms == T0 + 630_000
    assert log_manager.run_periodic(T0 + 2_000_000) == 0  # a late tick runs it once, on the same rate
    assert log_manager.next_retention_check_ms == T0 + 2_130_000
    log_manager.close()


def test_cluster_ticks_as_often_as_its_retention_settings_ask() -> None:
    from kafkalite.broker.config import BrokerConfig
    from kafkalite.broker.core.cluster import Cluster

    assert Cluster(BrokerConfig({"log.storage": "memory"})).periodic_interval_ms() == 1000
    fast = Cluster(BrokerConfig({"log.storage": "memory", "log.retention.check.interval.ms": "50",
                                 "log.initial.task.delay.ms": "0"}))
    assert fast.periodic_interval_ms() == 50


def test_rolled_segments_are_flushed_by_the_periodic_task(tmp_path: Path) -> None:
    size = len(make_batch(3))
    log_manager = manager(tmp_path, LogConfig(segment_bytes=size * 2))
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for _ in range(5):
        partition_log.append(make_batch(3), T0)
    log_manager.run_periodic(T0)
    assert partition_log.recovery_point == partition_log.active_segment_base_offset == 12
    log_manager.close()


def test_delete_log_removes_the_directory(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    log_manager.create_log("orders", 1, TOPIC_ID, now_ms=T0)
    (tmp_path / "stale-0.abc-delete").mkdir()
    log_manager.delete_log("orders", 0)

    assert not (tmp_path / "orders-0").exists()
    assert log_manager.topic_ids == {"orders": TOPIC_ID}
    log_manager.delete_log("orders", 1)
    assert log_manager.topic_ids == {} and log_manager.logs == {}
    log_manager.close()
    reopened = manager(tmp_path)
    assert not (tmp_path / "stale-0.abc-delete").exists()
    assert reopened.logs == {}
    reopened.close()


def test_create_log_is_idempotent_and_guards_topic_ids(tmp_path: Path) -> None:
    log_manager = manager(tmp_path)
    first = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    assert log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0) is first
    with pytest.raises(Exception, match="topic id"):
        log_manager.create_log("orders", 1, uuid.uuid4(), now_ms=T0)
    log_manager.close()


def test_memory_manager_touches_no_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log_manager = LogManager(None, LogConfig())
    log_manager.open()
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    assert isinstance(partition_log, MemoryLog)
    partition_log.append(make_batch(2), T0)
    log_manager.run_periodic(T0)
    log_manager.checkpoint()
    log_manager.close()
    assert list(tmp_path.iterdir()) == []


def test_disk_log_load_of_an_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    (tmp_path / "orders-0").mkdir()
    partition_log = DiskLog.load(
        tmp_path / "orders-0", LogConfig(), log_start_offset=42, clean_shutdown=True, now_ms=T0
    )
    assert (partition_log.log_start_offset, partition_log.log_end_offset) == (42, 42)
    assert partition_log.append(make_batch(1), T0).base_offset == 42
    partition_log.close()


def test_an_idle_tick_touches_no_log(tmp_path: Path) -> None:
    """Periodic work follows changes: once written logs are flushed and checkpointed, a tick reads none
    of them, however many there are; a roll by age still comes when its deadline does."""
    config = LogConfig(segment_ms=HOUR)
    log_manager = manager(tmp_path, config)
    logs = [log_manager.create_log("wide", partition, TOPIC_ID, now_ms=T0) for partition in range(50)]
    for partition_log in logs:
        partition_log.append(make_batch(1, timestamp=T0), T0)
    log_manager.run_periodic(T0 + 1)
    calls: list[str] = []
    for partition_log in logs:
        for name in ("maybe_roll", "flush", "roll_deadline_ms"):
            original = getattr(partition_log, name)
            setattr(partition_log, name, lambda *args, _name=name, _original=original, **kwargs:
                    (calls.append(_name), _original(*args, **kwargs))[1])
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    written = checkpoint.stat().st_mtime_ns
    log_manager.run_periodic(T0 + 2)
    log_manager.run_periodic(T0 + 3)
    assert calls == []
    assert checkpoint.stat().st_mtime_ns == written
    log_manager.run_periodic(T0 + HOUR + 1)  # every active segment is now segment.ms old
    assert calls.count("maybe_roll") == 50
    assert all(partition_log.segment_count() == 2 for partition_log in logs)
    log_manager.close()


def test_a_checkpoint_that_could_not_be_written_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import kafkalite.broker.core.log.manager as manager_module

    log_manager = manager(tmp_path)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    partition_log.append(make_batch(2, timestamp=T0), T0)
    log_manager.run_periodic(T0 + 1)
    partition_log.delete_records_before(1, T0)
    real_write = manager_module._write_durably
    monkeypatch.setattr(manager_module, "_write_durably",
                        lambda *args: (_ for _ in ()).throw(OSError(24, "Too many open files")))
    with caplog.at_level(logging.WARNING, logger="kafkalite.log_manager"):
        log_manager.run_periodic(T0 + 2)  # the background file work fails: logged, not raised
    assert "will try again" in caplog.text
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 0}
    monkeypatch.setattr(manager_module, "_write_durably", real_write)
    log_manager.run_periodic(T0 + 3)  # nothing changed since: the failed write is retried all the same
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("orders", 0): 1}
    log_manager.close()


# --------------------------------------------------------------------------------------------------
# What opening reads of the segment files


def log_file_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every ``os.pread`` of a ``.log`` file from now on, as (file name, bytes read)."""
    import os

    reads: list[tuple[str, int]] = []
    original = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        data = original(fd, length, offset)
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".log"):
            reads.append((Path(name).name, len(data)))
        return data

    monkeypatch.setattr(os, "pread", pread)
    return reads


def write_log(tmp_path: Path, config: LogConfig, batches: int, flush_after: int | None = None) -> int:
    """``batches`` batches of 3 records of 100 bytes (flushed after ``flush_after``); the batch size."""
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for index in range(batches):
        partition_log.append(make_batch(3, timestamp=T0 + index, value_size=100), T0)
        if flush_after is not None and index + 1 == flush_after:
            partition_log.flush(T0)
    log_manager.close(clean=flush_after is None)
    return len(make_batch(3, value_size=100))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads are attributed to files through /proc")
def test_opening_after_a_clean_shutdown_reads_only_batch_headers(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The segments are trusted; the last one's end is found by walking the headers of the batches after
    its last index entry, never their records."""
    size = write_log(tmp_path, LogConfig(segment_bytes=20_000, index_interval_bytes=1000), 200)
    reads = log_file_reads(monkeypatch)
    reopened = manager(tmp_path, LogConfig(segment_bytes=20_000, index_interval_bytes=1000))
    partition_log = reopened.get_log("orders", 0)
    assert partition_log is not None and partition_log.log_end_offset == 600
    assert partition_log.segment_count() > 3
    last = f"{partition_log.segment_base_offsets()[-1]:020d}.log"
    assert reads and {name for name, _ in reads} == {last}
    assert all(length == 43 for _, length in reads)  # one batch header each
    assert len(reads) <= 1000 // size + 2  # the batches after the last index entry
    monkeypatch.undo()
    assert offsets_in(reopened) == list(range(600))
    reopened.close()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads are attributed to files through /proc")
def test_crash_recovery_validates_only_what_follows_the_recovery_point(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery point in the middle of a segment: validation starts at the last indexed batch below it."""
    config = LogConfig(index_interval_bytes=1000)
    size = write_log(tmp_path, config, 100, flush_after=90)  # one segment, recovery point 270
    reads = log_file_reads(monkeypatch)
    import os

    synced: list[str] = []
    original_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        original_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    reopened = manager(tmp_path, config)
    monkeypatch.undo()
    assert f"{0:020d}.log" in synced  # what was validated is made durable before the checkpoint says so
    partition_log = reopened.get_log("orders", 0)
    assert partition_log is not None and partition_log.log_end_offset == 300
    read_bytes = sum(length for _, length in reads)
    # the unflushed ten batches, and at most an index interval and a batch before them
    assert 10 * size <= read_bytes <= 10 * size + 1000 + 2 * size + 43
    assert offsets_in(reopened) == list(range(300))
    index = (tmp_path / "orders-0" / f"{0:020d}.index").read_bytes()
    time_index = (tmp_path / "orders-0" / f"{0:020d}.timeindex").read_bytes()
    reopened.close()

    # the same indexes as a recovery of the whole segment builds
    write_log(tmp_path / "whole", config, 100, flush_after=90)
    write_offset_checkpoint(tmp_path / "whole" / "recovery-point-offset-checkpoint", {("orders", 0): 0})
    whole = manager(tmp_path / "whole", config)
    assert (tmp_path / "whole" / "orders-0" / f"{0:020d}.index").read_bytes() == index
    assert (tmp_path / "whole" / "orders-0" / f"{0:020d}.timeindex").read_bytes() == time_index
    whole.close()


def test_crash_recovery_truncates_a_torn_tail_after_the_recovery_point(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=1000)
    size = write_log(tmp_path, config, 100, flush_after=90)
    log_file = segment_path(tmp_path, 0)
    with open(log_file, "r+b") as file:
        file.truncate(95 * size + size // 2)  # batch 95 torn, 96-99 gone
    reopened = manager(tmp_path, config)
    assert reopened.get_log("orders", 0).log_end_offset == 285  # type: ignore[union-attr]
    assert log_file.stat().st_size == 95 * size
    assert offsets_in(reopened) == list(range(285))
    reopened.close()


def test_crash_recovery_validates_the_whole_segment_when_its_index_is_not_usable(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=1000)
    size = write_log(tmp_path, config, 100, flush_after=90)
    index_file = segment_path(tmp_path, 0, suffix=".index")
    entries = index_file.read_bytes()
    index_file.write_bytes(entries[:8] + entries[:8] + entries[16:])  # keys no longer increase
    with open(segment_path(tmp_path, 0), "r+b") as file:  # and a batch below the recovery point is damaged
        file.seek(5 * size + 70)
        file.write(b"\xff")
    reopened = manager(tmp_path, config)
    assert reopened.get_log("orders", 0).log_end_offset == 15  # type: ignore[union-attr]
    reopened.close()


def test_opening_writes_no_checkpoint_that_would_say_what_the_disk_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty data directory and a clean restart fsync no checkpoint at open; a recovery that moved
    a recovery point writes it."""
    import kafkalite.broker.core.log.manager as manager_module

    written: list[str] = []
    write = manager_module._write_durably

    def counting_write(path: Path, data: bytes, **options: bool) -> None:
        if "checkpoint" in path.name:
            written.append(path.name)
        write(path, data, **options)

    monkeypatch.setattr(manager_module, "_write_durably", counting_write)
    log_manager = manager(tmp_path)  # an empty data directory
    assert written == [] and not (tmp_path / "recovery-point-offset-checkpoint").exists()
    log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0).append(make_batch(3), T0)
    log_manager.close()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 3}

    written.clear()
    log_manager = manager(tmp_path)  # after a clean shutdown
    assert written == [] and offsets_in(log_manager) == [0, 1, 2]
    log_manager.get_log("orders", 0).append(make_batch(2), T0)  # type: ignore[union-attr]
    log_manager.close(clean=False)

    written.clear()
    log_manager = manager(tmp_path)  # after a crash: the recovered tail moves the recovery point
    assert "recovery-point-offset-checkpoint" in written
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 5}


# --------------------------------------------------------------------------------------------------
# log.flush.on.ack: records synced before the answer, indexes and recovery point left to later flushes


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="synced files are named through /proc")
def test_records_only_flushes_survive_a_power_loss_that_takes_the_unsynced_indexes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a flush.on.ack round syncs (the ``.log`` files, the directory after a roll) is all an
    acknowledged record needs: with every index byte written after the last full flush lost, crash
    recovery from the checkpointed recovery point finds every record and rebuilds the indexes."""
    import os

    size = len(make_batch(3, value_size=100))
    config = LogConfig(segment_bytes=size * 8, index_interval_bytes=size)
    synced: dict[str, bytes] = {}  # what a power loss keeps of each file: its content at its last sync
    calls: list[tuple[str, str]] = []
    original = {name: getattr(os, name) for name in ("fsync", "fdatasync")}

    def spy(name: str) -> object:
        def sync(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            original[name](fd)
            calls.append((name, Path(path).name))
            if os.path.isfile(path):
                synced[path] = Path(path).read_bytes()
        return sync

    for name in original:
        monkeypatch.setattr(os, name, spy(name))
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for index in range(40):
        partition_log.append(make_batch(3, timestamp=T0 + index, value_size=100), T0)
        if index + 1 == 10:
            partition_log.flush(T0)  # recovery point 30, indexes synced up to there
        elif index + 1 > 10:
            calls.clear()
            pending = partition_log.prepare_flush(records_only=True)  # what a flush.on.ack round does
            assert pending is not None
            pending.run()
            partition_log.complete_flush(pending)
            assert calls and all(name == "fdatasync" and not file.endswith("index") for name, file in calls)
            assert partition_log.durable_offset == 3 * (index + 1) and partition_log.recovery_point == 30
    assert partition_log.prepare_flush(records_only=True) is None  # durable already
    log_manager.close(clean=False)
    monkeypatch.undo()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 30}

    # The power loss: every .log holds what was synced (all of it); each index only what its last sync kept.
    directory = tmp_path / "orders-0"
    for path in directory.iterdir():
        if path.suffix == ".log":
            assert synced[str(path)] == path.read_bytes()
        elif path.suffix in (".index", ".timeindex"):
            path.write_bytes(synced.get(str(path), b""))
    # what appending the same records again builds, to compare with
    fresh = manager(tmp_path / "fresh", config)
    again = fresh.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for index in range(40):
        again.append(make_batch(3, timestamp=T0 + index, value_size=100), T0)
    reopened = manager(tmp_path, config)
    recovered = reopened.get_log("orders", 0)
    assert recovered is not None and recovered.log_end_offset == 120 and recovered.segment_count() == 5
    assert offsets_in(reopened) == list(range(120))
    for offset in range(120):  # every lookup through the rebuilt indexes lands where it should
        batch = next(iter_batches(recovered.read(offset, 1, min_one_batch=True).to_bytes()))
        assert isinstance(batch, RecordBatch) and batch.base_offset <= offset <= batch.last_offset
    for timestamp in range(T0 - 1, T0 + 45):
        assert recovered.offset_for_timestamp(timestamp) == again.offset_for_timestamp(timestamp)
    reopened.close()
    fresh.close()
    assert {path.name: path.read_bytes() for path in directory.iterdir() if "index" in path.suffix} == {
        path.name: path.read_bytes() for path in (tmp_path / "fresh" / "orders-0").iterdir() if "index" in path.suffix}


def test_a_full_flush_after_records_only_flushes_syncs_only_the_indexes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    config = LogConfig(index_interval_bytes=1)
    log_manager = manager(tmp_path, config)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for _ in range(3):
        partition_log.append(make_batch(2), T0)
    partition_log.flush(T0, up_to_offset=0)
    pending = partition_log.prepare_flush(records_only=True)
    assert pending is not None
    pending.run()
    partition_log.complete_flush(pending)
    assert (partition_log.durable_offset, partition_log.recovery_point) == (6, 0)
    fsynced: list[str] = []
    original_fsync = os.fsync

    def fsync(fd: int) -> None:
        fsynced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).suffix)
        original_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    partition_log.flush(T0)
    assert sorted(fsynced) == [".index", ".timeindex"]  # the .log's records were synced already
    assert partition_log.recovery_point == 6
    log_manager.close()


def test_the_periodic_task_moves_the_recovery_point_up_to_what_flush_on_ack_synced(tmp_path: Path) -> None:
    """Records synced by flush.on.ack rounds get their indexes fsynced and the recovery point (and its
    checkpoint) moved by the periodic task once RECOVERY_POINT_LAG_MS have passed, not before."""
    log_manager = manager(tmp_path)
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    log_manager.run_periodic(T0)
    partition_log.append(make_batch(3), T0)
    pending = partition_log.prepare_flush(records_only=True)
    assert pending is not None
    pending.run()
    partition_log.complete_flush(pending)
    partition_log.append(make_batch(2), T0)  # not synced yet: stays above the new recovery point
    log_manager.run_periodic(T0 + 1000)
    assert partition_log.recovery_point == 0
    log_manager.run_periodic(T0 + RECOVERY_POINT_LAG_MS)
    assert partition_log.recovery_point == 3 and partition_log.durable_offset == 3
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 3}
    log_manager.run_periodic(T0 + 2 * RECOVERY_POINT_LAG_MS)  # nothing more was synced: nothing to do
    assert partition_log.recovery_point == 3
    log_manager.close()
