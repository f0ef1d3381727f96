"""The group commit of ``log.flush.on.ack``: answers that wait at the same time share one fsync round on
the log room's I/O thread, none is released before its bytes are fsynced, and a failure reaches only
the answers of the log that failed. A ``DeferredRunner`` stands in for the I/O thread."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalite.broker.core.log.group_commit import GroupCommit
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.log.partition_log import LogConfig, PartitionLog
from tests.unit.test_background_io import DeferredRunner
from tests.unit.test_log import T0, make_batch

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def test_answers_waiting_while_a_round_runs_share_the_next_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 ) -> None:
    log_manager, runner, orders, audit, commit = _two_logs(tmp_path)
    fsynced: list[int] = []  # the inode of each file synced
    during_fsync: list[Callable[[], None]] = []
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        fsynced.append(os.fstat(fd).st_ino)
        while during_fsync:
            during_fsync.pop(0)()
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        first = [commit.durable(orders)]
        assert commit.rounds == 1 and len(runner.jobs) == 1  # a round is handed over at once
        orders.append(make_batch(1), T0)
        first.append(commit.durable(orders))  # its fsyncs have not started: this answer joins it
        assert commit.rounds == 1
        later: list[asyncio.Future[OSError | None]] = []

        def arrive() -> None:  # three answers ask while the first round's fsync runs, on two logs
            orders.append(make_batch(1), T0)
            audit.append(make_batch(1), T0)
            later.extend([commit.durable(orders), commit.durable(audit), commit.durable(orders)])

        during_fsync.append(arrive)
        work, then = runner.jobs.pop(0)
        work()
        assert len(later) == 3 and commit.rounds == 2 and len(runner.jobs) == 1  # the next round, handed over
        assert not any(future.done() for future in first)  # fsynced, released back on the loop
        then(None)
        assert all(future.done() and future.result() is None for future in first)
        assert orders.durable_offset == 2  # what the first round decided: not the bytes that came during it
        assert orders.recovery_point == 0  # the indexes were not synced: recovery validates from 0
        assert not any(future.done() for future in later)
        fsynced.clear()
        runner.run_all()
        # The three answers cost one fdatasync of each .log file of the two logs and of their directories
        # (new segment files must stay found; orders' directory sync had not completed when they asked),
        # and no index file.
        synced = {os.stat(path).st_ino for path in (*(tmp_path / "orders-0").glob("*.log"), tmp_path / "orders-0",
                                                    *(tmp_path / "audit-0").glob("*.log"), tmp_path / "audit-0")}
        assert sorted(fsynced) == sorted(synced)
        assert all(future.done() and future.result() is None for future in later)
        assert (orders.durable_offset, audit.durable_offset) == (3, 1)
        # Nothing new: durable already, answered without a round.
        again = commit.durable(orders)
        assert again.done() and again.result() is None and commit.rounds == 2

    asyncio.run(scenario())
    log_manager.background.runner = None
    log_manager.close()


def test_a_failed_fsync_reaches_only_its_logs_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log_manager, runner, orders, audit, commit = _two_logs(tmp_path)

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        audit.append(make_batch(1), T0)
        # One round for both logs; the fsync of audit's file fails.
        first = commit.durable(orders)
        second = commit.durable(audit)
        assert commit.rounds == 1
        failing = OSError(5, "Input/output error")
        real_fdatasync = os.fdatasync
        audit_files = {os.stat(path).st_ino for path in (tmp_path / "audit-0").iterdir()}

        def broken(fd: int) -> None:
            if os.fstat(fd).st_ino in audit_files:
                raise failing
            real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", broken)
        runner.run_all()
        assert first.result() is None and orders.durable_offset == 1
        assert second.result() is failing
        assert audit.durable_offset == 0  # not durable: nothing moved
        retry = commit.durable(audit)  # asked again: the same file is synced again
        monkeypatch.setattr(os, "fdatasync", real_fdatasync)
        runner.run_all()
        assert retry.result() is None and audit.durable_offset == 1

    asyncio.run(scenario())
    monkeypatch.undo()
    log_manager.background.runner = None
    log_manager.close()


def test_rounds_overlap_on_the_commit_threads_and_each_answer_waits_for_its_own_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two commit threads a round handed over while another's sync is in the kernel starts at
    once; an answer is released only by a sync that started after its append, whichever ends first."""
    import threading

    log_manager = LogManager(tmp_path, LogConfig())
    log_manager.open(now_ms=T0)
    orders = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    orders.flush(T0)
    real_fdatasync = os.fdatasync
    started: list[threading.Event] = [threading.Event(), threading.Event()]
    release: list[threading.Event] = [threading.Event(), threading.Event()]
    calls: list[int] = []
    lock = threading.Lock()

    def fdatasync(fd: int) -> None:
        with lock:
            number = len(calls)
            calls.append(number)
        if number < 2:
            started[number].set()
            assert release[number].wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)

    async def until(condition: Callable[[], bool]) -> None:
        deadline = asyncio.get_running_loop().time() + 10
        while not condition():
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)

    async def scenario() -> None:
        commit = GroupCommit(log_manager.background)
        commit.use_threads(asyncio.get_running_loop(), 2)
        try:
            orders.append(make_batch(1), T0)
            first = commit.durable(orders)
            await until(started[0].is_set)  # the first round's sync is in the kernel
            orders.append(make_batch(1), T0)
            second = commit.durable(orders)
            await until(started[1].is_set)  # the second round started beside it, not after it
            assert commit.rounds == 2
            release[1].set()  # the later sync ends first: only its own answer goes
            await second
            assert second.result() is None and not first.done()
            assert orders.durable_offset == 2 and orders.recovery_point == 0
            release[0].set()
            assert await first is None
            assert orders.durable_offset == 2
        finally:
            release[0].set()
            release[1].set()
            commit.close()

    asyncio.run(scenario())
    log_manager.close()


def test_answers_joining_a_round_reuse_its_descriptors_until_a_roll(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer joining the open round extends its flush to the log end offset without duplicating
    a descriptor; after a roll the flush is decided again, so the new segment is synced too."""
    size = len(make_batch(1))
    log_manager = LogManager(tmp_path, LogConfig(segment_bytes=size * 3))
    log_manager.open(now_ms=T0)
    runner = DeferredRunner()
    log_manager.background.runner = runner
    orders = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    commit = GroupCommit(log_manager.background)
    duplicated: list[int] = []
    real_dup = os.dup

    def dup(fd: int) -> int:
        duplicated.append(fd)
        return real_dup(fd)

    monkeypatch.setattr(os, "dup", dup)
    synced: list[str] = []
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        answers = [commit.durable(orders)]
        first = len(duplicated)
        for _ in range(2):  # the same active segment: no descriptor more
            orders.append(make_batch(1), T0)
            answers.append(commit.durable(orders))
        assert len(duplicated) == first and commit.rounds == 1
        orders.append(make_batch(1), T0)  # rolls: offset 3 is in a new segment
        assert orders.segment_count() == 2
        answers.append(commit.durable(orders))
        assert len(duplicated) > first and commit.rounds == 1
        runner.run_all()
        assert all(answer.result() is None for answer in answers)
        assert orders.durable_offset == 4 and orders.recovery_point == 0
        assert sorted(name for name in synced if name.endswith(".log")) == [f"{0:020d}.log", f"{3:020d}.log"]
        assert "orders-0" in synced  # the new segment's directory entry

    asyncio.run(scenario())
    monkeypatch.undo()
    log_manager.background.runner = None
    log_manager.close()


def test_commit_threads_run_rounds_off_the_loop_in_order_and_close_waits_for_them() -> None:
    """Rounds run on a thread of their own (started on first use), one after another in the order
    handed over, each handed back to the loop with what it raised; close waits for the queued ones."""
    import threading

    from kafkalite.broker.core.log.group_commit import CommitThreads

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        before = threading.active_count()
        threads = CommitThreads(loop)
        assert threading.active_count() == before  # nothing started until a round comes
        ran: list[tuple[str, int]] = []
        handed_back: list[tuple[str, BaseException | None, int]] = []
        gate = threading.Event()
        failing = OSError(5, "Input/output error")

        def work(name: str) -> Callable[[], None]:
            def run() -> None:
                if name == "first":
                    assert gate.wait(10)
                ran.append((name, threading.get_ident()))
                if name == "second":
                    raise failing
            return run

        def then(name: str) -> Callable[[BaseException | None], None]:
            return lambda exc: handed_back.append((name, exc, threading.get_ident()))

        for name in ("first", "second", "third"):
            threads(work(name), then(name))
        assert threading.active_count() == before + 1
        await asyncio.sleep(0)
        assert ran == [] and handed_back == []  # the first round still runs: the others wait behind it
        gate.set()
        threads.close()  # returns once every round handed over has run
        assert [name for name, _ in ran] == ["first", "second", "third"]
        assert {ident for _, ident in ran} != {threading.get_ident()} and len({ident for _, ident in ran}) == 1
        assert threading.active_count() == before
        deadline = loop.time() + 10
        while len(handed_back) < 3:  # back on the loop, in the order they ran
            assert loop.time() < deadline
            await asyncio.sleep(0.001)
        assert [(name, exc) for name, exc, _ in handed_back] == [("first", None), ("second", failing), ("third", None)]
        assert {ident for _, _, ident in handed_back} == {threading.get_ident()}
        with pytest.raises(RuntimeError):
            threads(work("late"), then("late"))

    asyncio.run(scenario())


def test_a_deferred_round_is_handed_over_when_its_read_is_dispatched_with_every_answer_asked_before(
        tmp_path: Path) -> None:
    """With ``defer`` (the server's end of the read being dispatched), a new round waits for it: the
    answers asked in between join that round, and it is handed over once, then runs as usual."""
    log_manager, runner, orders, audit, commit = _two_logs(tmp_path)
    deferred: list[Callable[[], None]] = []
    commit.defer = deferred.append

    async def scenario() -> None:
        orders.append(make_batch(1), T0)
        answers = [commit.durable(orders)]
        assert commit.rounds == 0 and not runner.jobs and len(deferred) == 1  # made, not handed over yet
        audit.append(make_batch(1), T0)
        orders.append(make_batch(1), T0)
        answers += [commit.durable(audit), commit.durable(orders)]
        assert len(deferred) == 1  # they joined it
        deferred.pop()()
        assert commit.rounds == 1 and len(runner.jobs) == 1
        assert not any(answer.done() for answer in answers)
        runner.run_all()
        assert all(answer.done() and answer.result() is None for answer in answers)
        assert (orders.durable_offset, audit.durable_offset) == (2, 1)
        orders.append(make_batch(1), T0)
        later = commit.durable(orders)  # the round is over: a new one, deferred again
        assert len(deferred) == 1 and commit.rounds == 1 and not later.done()
        deferred.pop()()
        runner.run_all()
        assert later.result() is None and orders.durable_offset == 3

    asyncio.run(scenario())
    log_manager.background.runner = None
    log_manager.close()


def test_a_server_answers_flush_on_ack_produce_once_synced_with_one_round_per_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a server (commit thread, hand-over at the end of the read): two acks=all Produce requests
    read together share one round, and neither answer leaves before that round's fdatasync returned."""
    import select
    import socket
    import struct
    import threading

    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.framing import encode_request, parse_response_header
    from kafkalite.protocol.messages import ProduceRequest, ProduceResponse
    from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
    from kafkalite.protocol.records import RecordBatchBuilder
    from kafkalite.testing.embedded import EmbeddedBroker

    entered, release = threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            entered.set()
            assert release.wait(10)
        real_fdatasync(fd)

    def produce(correlation_id: int) -> bytes:
        builder = RecordBatchBuilder()
        builder.append(timestamp=T0, key=None, value=b"v%d" % correlation_id)
        request = ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
            name="orders", partition_data=[PartitionProduceData(index=0, records=builder.build())])])
        return encode_request(request, 9, correlation_id, "flush-test")

    with EmbeddedBroker({"log.flush.on.ack": "true"}, data_dir=tmp_path) as broker:
        broker.create_topic("orders")
        assert broker.server is not None and broker.server.cluster is not None
        group_commit = broker.server.cluster.log_manager.group_commit
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        connection = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        try:
            connection.sendall(produce(1) + produce(2))  # one write: one read of both
            assert entered.wait(10)
            assert group_commit.rounds == 1
            assert select.select([connection], [], [], 0)[0] == []  # nothing answered during the sync
            release.set()
            answers = []
            for _ in range(2):
                size = struct.unpack(">i", _read_exactly(connection, 4))[0]
                body = parse_response_header(_read_exactly(connection, size), ProduceRequest.API_KEY, 9)
                partition = ProduceResponse.decode_from(body, 9).responses[0].partition_responses[0]
                answers.append((partition.error_code, partition.base_offset))
            assert answers == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 1)]
            assert group_commit.rounds == 1
        finally:
            release.set()
            connection.close()


def _read_exactly(connection: object, size: int) -> bytes:
    import socket

    assert isinstance(connection, socket.socket)
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return bytes(data)


def _two_logs(tmp_path: Path) -> tuple[LogManager, DeferredRunner, PartitionLog, PartitionLog, GroupCommit]:
    """A log manager on disk whose background jobs run only when told, two logs, and a group commit."""
    log_manager = LogManager(tmp_path, LogConfig())
    log_manager.open(now_ms=T0)
    runner = DeferredRunner()
    log_manager.background.runner = runner
    orders = log_manager.create_log("orders", 0, TOPIC_ID, now_ms=T0)
    audit = log_manager.create_log("audit", 0, uuid.uuid4(), now_ms=T0)
    return log_manager, runner, orders, audit, GroupCommit(log_manager.background)
