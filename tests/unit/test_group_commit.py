"""The group commit of ``log.flush.on.ack``: answers that wait at the same time share one fsync round on
the log room's I/O thread, none is released before its bytes are fsynced, and a failure reaches only
the answers of the log that failed. A ``DeferredRunner`` stands in for the I/O thread."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from kafkalite.broker.core.log.group_commit import GroupCommit
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.log.partition_log import LogConfig
from tests.unit.test_background_io import DeferredRunner
from tests.unit.test_log import T0, make_batch

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def test_answers_waiting_while_a_round_runs_share_the_next_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 ) -> None:
    fsynced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsynced.append(fd) or real_fsync(fd))
    log_manager = LogManager(tmp_path, LogConfig())
    log_manager.open(now_ms=T0)
    runner = DeferredRunner()
    log_manager.background.runner = runner
    orders = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    audit = log_manager.create_log("audit", 0, uuid.uuid4(), now_ms=T0)
    commit = GroupCommit(log_manager.background)

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        first = commit.durable(orders)
        assert commit.rounds == 1 and len(runner.jobs) == 1  # a round starts at once
        # While it runs, three more answers wait, on two logs: one round later covers them all.
        orders.append(make_batch(1), T0)
        audit.append(make_batch(1), T0)
        later = [commit.durable(orders), commit.durable(audit), commit.durable(orders)]
        assert commit.rounds == 1 and not first.done() and not any(future.done() for future in later)
        assert orders.recovery_point == 0
        fsynced.clear()
        work, then = runner.jobs.pop(0)
        work()
        assert fsynced and not first.done()  # fsynced, released back on the loop
        then(None)
        assert first.done() and first.result() is None and orders.recovery_point == 1
        assert not any(future.done() for future in later)  # their bytes came after the first round's fsync
        assert commit.rounds == 2 and len(runner.jobs) == 1  # the next round started when the first ended
        runner.run_all()
        assert all(future.done() and future.result() is None for future in later)
        assert (orders.recovery_point, audit.recovery_point) == (2, 1)
        # Nothing new: durable already, answered without a round.
        again = commit.durable(orders)
        assert again.done() and again.result() is None and commit.rounds == 2

    asyncio.run(scenario())
    log_manager.background.runner = None
    log_manager.close()


def test_a_failed_fsync_reaches_only_its_logs_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log_manager = LogManager(tmp_path, LogConfig())
    log_manager.open(now_ms=T0)
    runner = DeferredRunner()
    log_manager.background.runner = runner
    orders = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    audit = log_manager.create_log("audit", 0, uuid.uuid4(), now_ms=T0)
    commit = GroupCommit(log_manager.background)

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        audit.append(make_batch(1), T0)
        # The first round covers orders; audit waits for the second, whose fsyncs fail.
        first = commit.durable(orders)
        second = commit.durable(audit)
        work, then = runner.jobs.pop(0)
        work()
        then(None)
        assert first.result() is None
        failing = OSError(5, "Input/output error")

        def broken(fd: int) -> None:
            raise failing

        monkeypatch.setattr(os, "fsync", broken)
        runner.run_all()
        assert second.result() is failing
        assert audit.recovery_point == 0  # not durable: nothing moved

    asyncio.run(scenario())
    monkeypatch.undo()
    log_manager.background.runner = None
    log_manager.close()
