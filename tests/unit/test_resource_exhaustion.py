"""Running out of descriptors or disk, without sockets: the acceptor refuses what it cannot take and
says so once in a while, and a topic whose files cannot be written is not created, deleted or
reconfigured half-way: KAFKA_STORAGE_ERROR, and everything as it was.

The acceptor is driven with a fake loop (readers and timers recorded, a manual clock) and a fake
listening socket whose ``accept`` follows a script; file-system failures are injected by patching
``os``. The same behaviour against a broker process under a real open-file limit is in
``tests/integration/test_resource_exhaustion.py``."""

from __future__ import annotations

import errno
import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.accept import Acceptor, RefusalReport, SpareDescriptor
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.protocol.errors import ErrorCode, KafkaError

EMFILE = OSError(errno.EMFILE, "Too many open files")


class FakeLoop:
    def __init__(self) -> None:
        self.now = 0.0
        self.readers: dict[int, Callable[[], None]] = {}
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.handed_over: list[object] = []

    def time(self) -> float:
        return self.now

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> None:
        self.readers.pop(fd, None)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        self.timers.append((self.now + delay, callback))
        return _Timer(self.timers, self.timers[-1])

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [timer for timer in self.timers if timer[0] <= self.now]
        self.timers[:] = [timer for timer in self.timers if timer[0] > self.now]
        for _, callback in due:
            callback()


class _Timer:
    def __init__(self, timers: list[tuple[float, Callable[[], None]]], entry: tuple[float, Callable[[], None]]) -> None:
        self._timers, self._entry = timers, entry

    def cancel(self) -> None:
        if self._entry in self._timers:
            self._timers.remove(self._entry)


class FakeConnection:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def setblocking(self, flag: bool) -> None:
        pass


class FakeListeningSocket:
    """``accept`` answers from ``script``: a connection, or an exception; EAGAIN when it runs out."""

    def __init__(self) -> None:
        self.script: deque[FakeConnection | OSError] = deque()
        self.closed = False

    def fileno(self) -> int:
        return 99

    def setblocking(self, flag: bool) -> None:
        pass

    def accept(self) -> tuple[FakeConnection, tuple[str, int]]:
        if not self.script:
            raise BlockingIOError(errno.EAGAIN, "again")
        step = self.script.popleft()
        if isinstance(step, OSError):
            raise step
        return step, ("127.0.0.1", 40000)

    def close(self) -> None:
        self.closed = True


def make_acceptor(loop: FakeLoop, spare: SpareDescriptor) -> tuple[Acceptor, FakeListeningSocket, RefusalReport]:
    sock = FakeListeningSocket()
    report = RefusalReport(loop, interval_s=10.0, clock=loop.time)  # type: ignore[arg-type]
    acceptor = Acceptor(loop, sock, "PLAINTEXT://127.0.0.1:9092", object, spare, report)  # type: ignore[arg-type]
    acceptor._hand_over = loop.handed_over.append  # type: ignore[method-assign]
    acceptor.start()
    return acceptor, sock, report


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if "cannot accept connections" in record.getMessage()]


def test_connections_are_accepted_and_handed_over_until_none_waits() -> None:
    loop = FakeLoop()
    spare = SpareDescriptor()
    try:
        acceptor, sock, report = make_acceptor(loop, spare)
        first, second = FakeConnection(), FakeConnection()
        sock.script.extend([first, second])
        loop.readers[99]()
        assert loop.handed_over == [first, second]
        assert report.refused == 0
        acceptor.close()
        assert sock.closed and 99 not in loop.readers
    finally:
        spare.close()


def test_out_of_descriptors_the_waiting_connection_is_closed_and_said_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="kafkalite.server")
    loop = FakeLoop()
    spare = SpareDescriptor()
    try:
        _, sock, report = make_acceptor(loop, spare)
        storm = [FakeConnection() for _ in range(50)]
        for connection in storm:  # each wake-up: no descriptor, then the spare's slot takes the connection
            sock.script.extend([EMFILE, connection])
            loop.readers[99]()
            assert spare.held  # taken back after every refusal
        assert all(connection.closed for connection in storm) and not loop.handed_over
        assert report.refused == 50
        lines = refusal_lines(caplog)
        assert len(lines) == 1 and "refused 1 connection " in lines[0] and "Too many open files" not in lines[0]
        assert "no file descriptor left" in lines[0]
        assert all(record.exc_info is None for record in caplog.records)
        loop.advance(10.0)  # the rest is said in one line when the interval is over
        lines = refusal_lines(caplog)
        assert len(lines) == 2 and "refused 49 connections" in lines[1]
        loop.advance(60.0)
        assert len(refusal_lines(caplog)) == 2  # nothing more to say
    finally:
        spare.close()


def test_out_of_descriptors_after_the_last_connection_is_not_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    """accept() fails with EMFILE before it looks at the backlog: the connection that took the last
    descriptor is followed by an EMFILE although nothing waits."""
    caplog.set_level(logging.ERROR, logger="kafkalite.server")
    loop = FakeLoop()
    spare = SpareDescriptor()
    try:
        _, sock, report = make_acceptor(loop, spare)
        last = FakeConnection()
        sock.script.extend([last, EMFILE])
        loop.readers[99]()
        assert loop.handed_over == [last] and not last.closed
        assert report.refused == 0 and refusal_lines(caplog) == []
        assert 99 in loop.readers
    finally:
        spare.close()


def test_without_a_spare_descriptor_the_acceptor_pauses_instead_of_spinning(caplog: pytest.LogCaptureFixture,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.ERROR, logger="kafkalite.server")
    loop = FakeLoop()
    spare = SpareDescriptor()
    try:
        _, sock, _ = make_acceptor(loop, spare)
        spare.release()
        with monkeypatch.context() as patch:
            patch.setattr(os, "open", lambda *args, **kwargs: (_ for _ in ()).throw(EMFILE))
            sock.script.append(EMFILE)
            loop.readers[99]()
            assert 99 not in loop.readers  # not watched for a while: the socket stays readable
            assert len(refusal_lines(caplog)) == 1 and "wait until a descriptor is free" in refusal_lines(caplog)[0]
        waiting = FakeConnection()
        sock.script.append(waiting)
        loop.advance(1.0)
        assert 99 in loop.readers
        loop.readers[99]()
        assert loop.handed_over == [waiting]
    finally:
        spare.close()


# --- topics whose files cannot be created ---------------------------------------------------------------


def open_cluster(tmp_path: Path) -> Cluster:
    cluster = Cluster(BrokerConfig({"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"}))
    cluster.open()
    return cluster


def fail_opening(monkeypatch: pytest.MonkeyPatch, fragment: str, error: int = errno.ENOSPC) -> None:
    real_open = os.open

    def refusing(path: Any, *args: Any, **kwargs: Any) -> int:
        if fragment in os.fspath(path):
            raise OSError(error, os.strerror(error), os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)


def partition_directories(tmp_path: Path, topic: str) -> list[str]:
    return sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(f"{topic}-")
                  and not path.name.endswith("-delete"))


def test_a_topic_whose_files_cannot_be_created_is_storage_error_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cluster = open_cluster(tmp_path)
    try:
        with monkeypatch.context() as patch:
            fail_opening(patch, f"{os.sep}full-2{os.sep}")
            with pytest.raises(KafkaError) as refused:
                cluster.topics.create("full", 3)
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "No space left on device" in refused.value.message
        assert cluster.topics.get("full") is None
        assert partition_directories(tmp_path, "full") == []
        assert [record.getMessage() for record in caplog.records if "cannot create topic" in record.getMessage()]
        cluster.topics.create("full", 3)  # once there is room, as if nothing had happened
        assert partition_directories(tmp_path, "full") == ["full-0", "full-1", "full-2"]
    finally:
        cluster.close()


def test_a_topic_whose_metadata_cannot_be_written_is_not_created(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = open_cluster(tmp_path)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
            with pytest.raises(KafkaError) as refused:
                cluster.topics.create("orders", 2)
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert cluster.topics.get("orders") is None
        assert partition_directories(tmp_path, "orders") == []
        assert cluster.log_manager.get_log("orders", 0) is None
        cluster.topics.create("orders", 2)
    finally:
        cluster.close()
    reopened = open_cluster(tmp_path)
    try:
        topic = reopened.topics.get("orders")
        assert topic is not None and len(topic.partitions) == 2
    finally:
        reopened.close()


def test_partitions_that_cannot_be_added_are_storage_error_and_the_topic_keeps_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = open_cluster(tmp_path)
    try:
        cluster.topics.create("orders", 2)
        with monkeypatch.context() as patch:
            fail_opening(patch, f"{os.sep}orders-3{os.sep}", errno.EMFILE)
            with pytest.raises(KafkaError) as refused:
                cluster.topics.create_partitions("orders", 5)
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        topic = cluster.topics.get("orders")
        assert topic is not None and len(topic.partitions) == 2
        assert partition_directories(tmp_path, "orders") == ["orders-0", "orders-1"]
        cluster.topics.create_partitions("orders", 5)
        assert len(topic.partitions) == 5
    finally:
        cluster.close()


def test_a_topic_whose_deletion_cannot_be_written_stays_as_it_was(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = open_cluster(tmp_path)
    try:
        cluster.topics.create("orders", 2)
        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
            with pytest.raises(KafkaError) as refused:
                cluster.topics.delete("orders")
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert cluster.topics.get("orders") is not None
        assert partition_directories(tmp_path, "orders") == ["orders-0", "orders-1"]
        assert cluster.log_manager.get_log("orders", 1) is not None
        cluster.topics.delete("orders")
        assert partition_directories(tmp_path, "orders") == []
    finally:
        cluster.close()


def test_topic_configs_that_cannot_be_written_are_not_applied(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = open_cluster(tmp_path)
    try:
        cluster.topics.create("orders", 1, {"retention.ms": "60000"})
        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
            with pytest.raises(KafkaError) as refused:
                cluster.topics.set_configs("orders", {"retention.ms": "1000"})
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        topic = cluster.topics.get("orders")
        assert topic is not None and topic.configs == {"retention.ms": "60000"}
        assert topic.settings.retention_ms == 60000
    finally:
        cluster.close()
