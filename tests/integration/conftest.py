"""Brokers for integration tests, each a real ``python -m kafkalite serve`` subprocess.

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

A ``BrokerProcess`` (``kafkalite.testing.process``) listens on ``127.0.0.1`` (port 0: the broker picks
one and we read it from its "listening on" log line) and offers ``.bootstrap``, ``.pid``, ``.port``,
``.data_dir``, ``.stop()`` (SIGTERM, returns the exit status), ``.kill()`` (SIGKILL), ``.restart()``
(same data dir, same port when it is free) and ``.log_text()``. Every wait has a deadline; every
process is terminated by its PID at teardown, even when a test fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalite.testing.process import BrokerProcess, close_all, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
MOCK_START_TIMEOUT_S = 20.0

__all__ = ["BrokerProcess", "REPO_ROOT", "wait_for"]


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
    """A factory of brokers private to one test: ``fresh_broker(*extra_args, data_dir=None, admin=False)``.
    Without the admin endpoint unless asked (``admin=True``): loading its HTTP server takes about 0.3 s
    of CPU just after the start, and these tests speak Kafka only."""
    made: list[BrokerProcess] = []

    def start(*extra_args: str, data_dir: Path | None = None, wait: bool = True, admin: bool = False) -> BrokerProcess:
        process = BrokerProcess(data_dir or tmp_path / f"broker-{len(made)}" / "data", extra_args=extra_args,
                                admin=admin)
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

        self.bootstrap = str(wait_for(found, MOCK_START_TIMEOUT_S, "librdkafka logged no mock cluster address"))

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
    close_all()
