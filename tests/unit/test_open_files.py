"""The open-file budget: segment and index files opened when used, least recently used closed first."""

from __future__ import annotations

import gc
import os
import uuid
from pathlib import Path

import pytest

from kafkalite.broker.core.log.files import FileHandle, OpenFiles
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.broker.limits import RESERVED_DESCRIPTORS, segment_file_budget
from kafkalite.protocol.records import RecordBatch, iter_batches
from tests.unit.test_log import T0, make_batch

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_least_recently_used_is_closed_first(tmp_path: Path) -> None:
    files = OpenFiles(2)
    handles = [FileHandle(files, tmp_path / f"f{index}", os.O_RDWR | os.O_APPEND, create_flags=os.O_CREAT)
               for index in range(3)]
    assert [handle.is_open for handle in handles] == [False, True, True]  # the third pushed out the first
    handles[1].descriptor()  # used: now the newest
    os.write(handles[0].descriptor(), b"zero")  # reopened: pushes out the least recently used (2)
    assert [handle.is_open for handle in handles] == [True, True, False]
    assert len(files) == 2
    os.write(handles[2].descriptor(), b"two")
    assert (tmp_path / "f0").read_bytes() == b"zero" and (tmp_path / "f2").read_bytes() == b"two"
    for handle in handles:
        handle.close()
    assert len(files) == 0


def test_no_budget_keeps_everything_open(tmp_path: Path) -> None:
    files = OpenFiles(None)
    handles = [FileHandle(files, tmp_path / f"f{index}", os.O_RDONLY, create_flags=os.O_CREAT) for index in range(5)]
    assert all(handle.is_open for handle in handles)
    for handle in handles:
        handle.close()


def test_a_budget_is_at_least_one() -> None:
    with pytest.raises(ValueError):
        OpenFiles(0)


def test_the_budget_leaves_room_for_connections() -> None:
    assert segment_file_budget(256) == (256 - RESERVED_DESCRIPTORS) // 2
    assert segment_file_budget(64) == 16  # never below a working minimum


def test_many_partitions_on_a_few_descriptors(tmp_path: Path) -> None:
    """200 partitions, 3 segments each, written and read back and reopened with 8 files open at most."""
    gc.collect()  # earlier tests' garbage that holds a descriptor: closed now, not while this one counts
    before = open_descriptors()
    config = LogConfig(segment_bytes=len(make_batch(2)) * 2, index_interval_bytes=1)
    log_manager = LogManager(tmp_path, config, files=OpenFiles(8))
    log_manager.open(now_ms=T0)
    for partition in range(200):
        partition_log = log_manager.create_log("wide", partition, TOPIC_ID, config, now_ms=T0)
        for _ in range(6):
            partition_log.append(make_batch(2), T0)
        assert open_descriptors() - before <= 8
    log_manager.close()
    assert open_descriptors() == before

    reopened = LogManager(tmp_path, config, files=OpenFiles(8))
    reopened.open(now_ms=T0)
    for partition in range(200):
        partition_log = reopened.get_log("wide", partition)
        assert partition_log is not None and partition_log.segment_count() >= 3
        read = partition_log.read(0, 1 << 20, min_one_batch=True)
        offsets = [record.offset for batch in iter_batches(read.to_bytes()) if isinstance(batch, RecordBatch)
                   for record in batch.records()]
        assert offsets == list(range(12))
        assert open_descriptors() - before <= 8
    reopened.close()
    assert open_descriptors() == before
