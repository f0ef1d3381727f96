"""Brokers for integration tests, each a real ``python -m kafkalite.broker serve`` subprocess.

Fixtures:

* ``wait_until``: ``wait_until(condition, timeout, message)`` polls until ``condition()`` is truthy
  and fails at the deadline (this directory is not a package, so helpers travel as fixtures).
* ``broker`` (session): one shared broker for tests that do not interfere with each other.
* ``fresh_broker`` (function): a factory, ``fresh_broker(*extra_args, data_dir=None)``, for tests that
  need their own broker (restarts, kills, special configs). Every broker it made is stopped after
  the test.
* ``mock_cluster`` (function): a factory, ``mock_cluster(brokers=1)``, of librdkafka's in-memory mock
  cluster, a Kafka implementation nobody here wrote. A confluent-kafka client created with
  ``test.mock.num.brokers`` starts it inside this process, serving real TCP on 127.0.0.1; its
  bootstrap address is read from librdkafka's "Mock cluster enabled ... replaced with HOST:PORT" log
  line (``debug=mock``, delivered through a Python logger on ``poll()``). The cluster lives as long as
  that client handle; teardown drops it.

A ``BrokerProcess`` listens on ``127.0.0.1`` (port 0: the broker picks one and we read it from its
"listening on" log line) and offers ``.bootstrap``, ``.pid``, ``.port``, ``.data_dir``,
``.stop()`` (SIGTERM, returns the exit status), ``.kill()`` (SIGKILL), ``.restart()`` (same data dir,
same port when it is free) and ``.log_text()``. Every wait has a deadline; every process is
terminated by its PID at teardown, even when a test fails.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0
_LISTENING = re.compile(r"listening on \w+://(?:\[[^\]]*\]|[^:\s]+):(\d+)")
_live: set[BrokerProcess] = set()


def wait_for(condition: Callable[[], object], timeout: float, message: str, interval: float = 0.005) -> object:
    """Poll ``condition`` until it returns something truthy; fail with ``message`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} (waited {timeout:.1f} s)")
        time.sleep(interval)


class BrokerProcess:
    """A broker subprocess on 127.0.0.1 with its own data directory and log file."""

    def __init__(self, data_dir: Path, extra_args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.log_path = data_dir.parent / f"{data_dir.name}.broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log_offset = 0

    # lifecycle -------------------------------------------------------------------------------
    def spawn(self, port: int = 0) -> None:
        """Start the process and return at once (``wait_until_listening`` waits for it)."""
        if self.running:
            raise RuntimeError(f"broker pid {self.pid} is already running")
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "kafkalite", "serve", "--port", str(port), "--data-dir", str(self.data_dir),
                   "--listeners", f"PLAINTEXT://127.0.0.1:{port}", *self.extra_args]
        environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
        environment["PYTHONUNBUFFERED"] = "1"
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log_file, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=environment)
        _live.add(self)

    def wait_until_listening(self, timeout: float = START_TIMEOUT_S) -> int:
        """Wait for this run's "listening on" line; return the port it names."""
        def listening() -> int | None:
            match = _LISTENING.search(self.log_text(since=self._log_offset))
            if match:
                return int(match.group(1))
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker exited with status {self.process.returncode} before listening:\n"
                                   f"{self.log_text(since=self._log_offset)}")
            return None

        self.port = int(wait_for(listening, timeout, f"broker did not log 'listening on'; log:\n{self.log_path}"))  # type: ignore[arg-type]
        return self.port

    def start(self, port: int = 0) -> BrokerProcess:
        self.spawn(port)
        self.wait_until_listening()
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; the exit status. A broker that does not stop in time is killed (and fails)."""
        process = self._require_process()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise TimeoutError(f"broker pid {process.pid} ignored SIGTERM for {timeout} s") from None
        _live.discard(self)
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: no clean shutdown."""
        process = self._require_process()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT_S)
        _live.discard(self)

    def restart(self, kill: bool = False) -> BrokerProcess:
        """Stop (or kill) and start again on the same data dir, on the same port if it is still free."""
        old_port = self.port
        if self.running:
            self.kill() if kill else self.stop()
        try:
            return self.start(old_port)
        except RuntimeError:  # the port was taken meanwhile
            return self.start(0)

    def close(self) -> None:
        """Teardown: make sure the process is gone."""
        if self.process is not None and self.process.poll() is None:
            self.kill()
        _live.discard(self)

    # facts -----------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        return self._require_process().pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def log_text(self, since: int = 0) -> str:
        """The broker's log output (from byte offset ``since``)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as log_file:
            log_file.seek(since)
            return log_file.read().decode("utf-8", "replace")

    def log_mark(self) -> int:
        """An offset for ``log_text(since=...)``: what is logged from now on."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError("broker was never started")
        return self.process

    def __repr__(self) -> str:
        return f"BrokerProcess(pid={self.process.pid if self.process else None}, bootstrap={self.bootstrap})"


@pytest.fixture(scope="session")
def wait_until() -> Callable[..., object]:
    """``wait_for`` as a fixture."""
    return wait_for


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the whole session."""
    process = BrokerProcess(tmp_path_factory.mktemp("shared-broker") / "data")
    try:
        process.start()
        yield process
    finally:
        process.close()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """A factory of brokers private to one test: ``fresh_broker(*extra_args, data_dir=None)``."""
    made: list[BrokerProcess] = []

    def start(*extra_args: str, data_dir: Path | None = None, wait: bool = True) -> BrokerProcess:
        process = BrokerProcess(data_dir or tmp_path / f"broker-{len(made)}" / "data", extra_args)
        made.append(process)
        if wait:
            process.start()
        return process

    try:
        yield start
    finally:
        for process in made:
            process.close()


class MockCluster:
    """librdkafka's mock cluster with ``brokers`` brokers, alive while this object holds its client."""

    _BOOTSTRAP = re.compile(r"Mock cluster enabled.*replaced with (\S+)")

    def __init__(self, brokers: int = 1) -> None:
        from confluent_kafka import Producer as ConfluentProducer

        self._lines: list[str] = []
        logger = logging.getLogger(f"kafkalite.tests.mock.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        handler = logging.Handler()
        handler.emit = lambda record: self._lines.append(record.getMessage())  # type: ignore[method-assign]
        logger.addHandler(handler)
        self.handle: object | None = ConfluentProducer({"test.mock.num.brokers": brokers,
                                                        "bootstrap.servers": "127.0.0.1:1",
                                                        "debug": "mock", "logger": logger})

        def found() -> str | None:
            self.handle.poll(0.01)  # type: ignore[union-attr]
            match = self._BOOTSTRAP.search("\n".join(self._lines))
            return match.group(1) if match else None

        self.bootstrap = str(wait_for(found, START_TIMEOUT_S, "librdkafka logged no mock cluster address"))

    def close(self) -> None:
        self.handle = None


@pytest.fixture
def mock_cluster() -> Iterator[Callable[..., MockCluster]]:
    """A factory of librdkafka mock clusters: ``mock_cluster(brokers=1)``."""
    made: list[MockCluster] = []

    def start(brokers: int = 1) -> MockCluster:
        cluster = MockCluster(brokers)
        made.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in made:
            cluster.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Last resort: no broker outlives the test session."""
    for process in list(_live):
        process.close()
