"""Blocking file work off the event loop: what runs where, and what moves only once it is done.

A ``DeferredRunner`` stands in for the server's I/O thread: jobs queue up and run when the test
says, so the state between "decided on the loop" and "done on disk" can be looked at.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.log.disk import DiskLog
from kafkalite.broker.core.log.manager import LogManager, read_offset_checkpoint
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.broker.core.log.producer_state import SNAPSHOT_SUFFIX
from kafkalite.broker.core.partition import Partition
from tests.unit.test_log import T0, make_batch

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


class DeferredRunner:
    """Queues (work, then) pairs; ``run_all`` runs them in order, as the I/O thread would."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], None], Callable[[BaseException | None], None]]] = []

    def __call__(self, work: Callable[[], None], then: Callable[[BaseException | None], None]) -> None:
        self.jobs.append((work, then))

    def run_all(self) -> int:
        count = 0
        while self.jobs:
            work, then = self.jobs.pop(0)
            try:
                work()
            except Exception as exc:
                then(exc)
            else:
                then(None)
            count += 1
        return count


@pytest.fixture
def deferred() -> DeferredRunner:
    return DeferredRunner()


def open_manager(data_dir: Path, runner: DeferredRunner, config: LogConfig | None = None) -> LogManager:
    log_manager = LogManager(data_dir, config or LogConfig())
    log_manager.open(now_ms=T0)
    log_manager.background.runner = runner
    return log_manager


def test_rolled_segments_are_fsynced_and_checkpointed_by_one_background_job(tmp_path: Path,
                                                                            deferred: DeferredRunner,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    log_manager = open_manager(tmp_path, deferred, LogConfig(segment_bytes=300))
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for _ in range(3):
        partition_log.append(make_batch(2, value_size=60), T0)  # each batch rolls the segment before it
    assert partition_log.segment_count() == 3
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])

    log_manager.run_periodic(T0 + 1)
    assert synced == [] and len(deferred.jobs) == 1  # decided on the loop, nothing fsynced yet
    assert partition_log.recovery_point == 0
    log_manager.run_periodic(T0 + 2)  # a tick while the job runs leaves its work for later
    assert len(deferred.jobs) == 1

    deferred.run_all()
    assert synced  # the rolled segments, then the checkpoint files
    assert partition_log.recovery_point == partition_log.active_segment_base_offset == 4
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("orders", 0): 4}
    log_manager.background.runner = None
    log_manager.close()


def test_a_failed_background_flush_moves_nothing_and_is_tried_again(tmp_path: Path, deferred: DeferredRunner,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log_manager = open_manager(tmp_path, deferred, LogConfig(segment_bytes=300))
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    for _ in range(2):
        partition_log.append(make_batch(2, value_size=60), T0)
    log_manager.run_periodic(T0 + 1)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", broken)
        deferred.run_all()
    assert partition_log.recovery_point == 0
    # (no checkpoint yet: opening an empty directory wrote none)
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint").get(("orders", 0)) != 2
    log_manager.run_periodic(T0 + 2)
    deferred.run_all()
    assert partition_log.recovery_point == 2
    log_manager.background.runner = None
    log_manager.close()


def test_flush_messages_flushes_in_the_background(tmp_path: Path, deferred: DeferredRunner) -> None:
    log_manager = open_manager(tmp_path, deferred, LogConfig(flush_messages=2))
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    partition_log.append(make_batch(1), T0)
    assert deferred.jobs == []
    partition_log.append(make_batch(1), T0)
    partition_log.append(make_batch(1), T0)  # one flush at a time per log
    assert len(deferred.jobs) == 1 and partition_log.recovery_point == 0
    deferred.run_all()
    assert partition_log.recovery_point == 2  # what the flush covered when it was decided
    log_manager.background.runner = None
    log_manager.close()


def test_a_second_flush_while_the_first_runs_fsyncs_the_file_again(tmp_path: Path) -> None:
    """Two acks=all answers in flight on one partition: the second must not answer before the bytes
    it covers are durable, even though the first flush took the file's descriptor already."""
    partition_log = DiskLog.create(tmp_path / "orders-0", LogConfig(), T0)
    partition_log.append(make_batch(1), T0)
    partition_log.append(make_batch(1), T0)
    first = partition_log.prepare_flush()
    second = partition_log.prepare_flush()
    assert first is not None and second is not None
    assert first.handles and second.handles  # the .log file in both
    for pending in (second, first):
        pending.run()
        partition_log.complete_flush(pending)
    third = partition_log.prepare_flush()
    assert third is None  # everything is durable now
    partition_log.append(make_batch(1), T0)
    fourth = partition_log.prepare_flush()
    assert fourth is not None and fourth.handles
    fourth.run()
    partition_log.close()


def test_a_roll_writes_the_producer_state_snapshot_in_the_background(tmp_path: Path, deferred: DeferredRunner
                                                                     ) -> None:
    log_manager = open_manager(tmp_path, deferred, LogConfig(segment_bytes=300))
    partition_log = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    settings = BrokerConfig({"log.storage": "memory"}).topic_settings()
    partition = Partition("orders", 0, partition_log, settings, producer_id_expiration_ms=86_400_000,
                          background=log_manager.background)
    for sequence in range(3):
        partition.append_from_client(idempotent_batch(sequence), T0)
    snapshots = sorted(path.name for path in (tmp_path / "orders-0").glob("*" + SNAPSHOT_SUFFIX))
    assert snapshots == [] and deferred.jobs
    deferred.run_all()
    snapshots = sorted(path.name for path in (tmp_path / "orders-0").glob("*" + SNAPSHOT_SUFFIX))
    assert snapshots == [f"{2:020d}{SNAPSHOT_SUFFIX}", f"{3:020d}{SNAPSHOT_SUFFIX}"]  # the two newest
    log_manager.background.runner = None
    log_manager.close()


def idempotent_batch(sequence: int) -> bytearray:
    from kafkalite.protocol.records import RecordBatchBuilder

    builder = RecordBatchBuilder(producer_id=7, producer_epoch=0, base_sequence=sequence)
    builder.append(timestamp=T0, key=b"k", value=b"v" * 100)
    return builder.build()
