"""A disk that refuses writes, at the level of the log and the group coordinator, failures injected
by patching ``os``: a failed append leaves the log as it was (or, if it cannot be undone, stops
appends until a restart, which truncates the torn batch); a failed roll changes nothing; a file that
cannot be reopened for writing is reopened for reading; an offset commit that cannot be written is
refused with NOT_COORDINATOR and is not visible."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.core.log import disk, files
from kafkalite.broker.core.log.disk import DiskLog
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import RecordBatch, iter_batches
from tests.unit.test_log import T0, make_batch


def offsets_of(partition_log: DiskLog) -> list[int]:
    read = partition_log.read(partition_log.log_start_offset, 1 << 30, min_one_batch=True)
    return [record.offset for batch in iter_batches(read.to_bytes()) if isinstance(batch, RecordBatch)
            for record in batch.records()]


def half_then_fail(monkeypatch: pytest.MonkeyPatch, *, truncate_fails: bool = False) -> None:
    """The next os.write writes half of what it is given, the one after fails with EFBIG."""
    real_write = os.write
    calls = [0]

    def write(fd: int, data: Any) -> int:
        calls[0] += 1
        if calls[0] == 1:
            return real_write(fd, bytes(data)[:len(data) // 2])
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(os, "write", write)
    if truncate_fails:
        monkeypatch.setattr(os, "ftruncate", lambda fd, length: (_ for _ in ()).throw(OSError(errno.EIO, "I/O")))


def test_a_failed_append_leaves_no_trace_and_the_next_one_continues(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    partition_log = DiskLog.create(tmp_path / "orders-0", LogConfig(), T0)
    partition_log.append(make_batch(2), T0)
    size = (tmp_path / "orders-0" / f"{0:020d}.log").stat().st_size
    with monkeypatch.context() as patch:
        half_then_fail(patch)
        with pytest.raises(OSError):
            partition_log.append(make_batch(3), T0)
    assert (tmp_path / "orders-0" / f"{0:020d}.log").stat().st_size == size
    assert partition_log.log_end_offset == 2
    assert partition_log.append(make_batch(1), T0).base_offset == 2
    assert offsets_of(partition_log) == [0, 1, 2]
    partition_log.close()


def test_a_failed_append_that_cannot_be_undone_stops_appends_until_a_restart(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "orders-0"
    partition_log = DiskLog.create(directory, LogConfig(), T0)
    partition_log.append(make_batch(2), T0)
    with monkeypatch.context() as patch:
        half_then_fail(patch, truncate_fails=True)
        with pytest.raises(OSError):
            partition_log.append(make_batch(3), T0)
    with pytest.raises(OSError) as refused:
        partition_log.append(make_batch(1), T0)
    assert refused.value.errno == errno.EIO
    assert offsets_of(partition_log) == [0, 1]  # reads go on, without the torn batch
    partition_log.close()
    reopened = DiskLog.load(directory, LogConfig(), clean_shutdown=False, now_ms=T0)
    assert offsets_of(reopened) == [0, 1]  # recovery cut the torn batch
    assert reopened.append(make_batch(1), T0).base_offset == 2
    reopened.close()


def test_a_roll_that_cannot_create_the_new_segment_changes_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "orders-0"
    partition_log = DiskLog.create(directory, LogConfig(segment_bytes=300), T0)
    partition_log.append(make_batch(1, value_size=150), T0)
    real_replace = disk.OffsetIndex.replace

    def no_room(self: Any, entries: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(disk.OffsetIndex, "replace", no_room)
        with pytest.raises(OSError):
            partition_log.append(make_batch(1, value_size=150), T0)  # needs a roll
    assert partition_log.segment_count() == 1
    assert sorted(path.name for path in directory.iterdir()) == [f"{0:020d}.index", f"{0:020d}.log",
                                                                   f"{0:020d}.timeindex"]
    assert disk.OffsetIndex.replace is real_replace
    assert partition_log.append(make_batch(1, value_size=150), T0).base_offset == 1
    assert partition_log.segment_count() == 2
    partition_log.close()


def test_a_segment_that_cannot_be_reopened_for_writing_is_reopened_for_reading(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    partition_log = DiskLog.create(tmp_path / "orders-0", LogConfig(), T0, files=files.OpenFiles(2))
    partition_log.append(make_batch(2), T0)
    partition_log.close()
    real_open = os.open

    def read_only_file_system(path: Any, flags: int, mode: int = 0o777) -> int:
        if flags & (os.O_RDWR | os.O_WRONLY):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", read_only_file_system)
    reopened = DiskLog.load(tmp_path / "orders-0", LogConfig(), clean_shutdown=True, now_ms=T0,
                            files=files.OpenFiles(2))
    assert offsets_of(reopened) == [0, 1]
    with pytest.raises(OSError):
        reopened.append(make_batch(1), T0)
    assert offsets_of(reopened) == [0, 1]
    reopened.close()


def test_an_offset_commit_the_disk_refuses_is_not_coordinator_and_not_visible(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Cluster(BrokerConfig({"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"}))
    cluster.open()
    try:
        cluster.topics.create("orders", 1)
        coordinator = cluster.group_coordinator
        commit = [OffsetToCommit("orders", 0, 5)]
        assert coordinator.commit_offsets("g", -1, "", None, commit) == {("orders", 0): ErrorCode.NONE}
        with monkeypatch.context() as patch:
            patch.setattr(os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
            refused = coordinator.commit_offsets("g", -1, "", None, [OffsetToCommit("orders", 0, 9)])
        assert refused == {("orders", 0): ErrorCode.NOT_COORDINATOR}
        _, committed = coordinator.fetch_offsets("g", None)
        assert [(item.topic, item.partition, item.offset) for item in committed] == [("orders", 0, 5)]
        assert coordinator.commit_offsets("g", -1, "", None, [OffsetToCommit("orders", 0, 9)]) == {
            ("orders", 0): ErrorCode.NONE}
    finally:
        cluster.close()
