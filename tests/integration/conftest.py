"""Brokers for integration tests, each a real ``python -m kafkalite serve`` subprocess.

Fixtures:

* ``wait_until``: ``wait_until(condition, timeout, message)`` polls until ``condition()`` is truthy
  and fails at the deadline (this directory is not a package, so helpers travel as fixtures).
* ``broker`` (session): one shared broker for tests that do not interfere with each other.
* ``fresh_broker`` (function): a factory, ``fresh_broker(*extra_args, data_dir=None)``, for tests that
  need their own broker (restarts, kills, special configs). Every broker it made is stopped after
  the test.

A ``BrokerProcess`` (``kafkalite.testing.process``) listens on ``127.0.0.1`` (port 0: the broker picks
one and we read it from its "listening on" log line) and offers ``.bootstrap``, ``.pid``, ``.port``,
``.data_dir``, ``.stop()`` (SIGTERM, returns the exit status), ``.kill()`` (SIGKILL), ``.restart()``
(same data dir, same port when it is free) and ``.log_text()``. Every wait has a deadline; every
process is terminated by its PID at teardown, even when a test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkalite.testing.process import BrokerProcess, close_all, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]

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
    """A factory of brokers private to one test: ``fresh_broker(*extra_args, data_dir=None)``."""
    made: list[BrokerProcess] = []

    def start(*extra_args: str, data_dir: Path | None = None, wait: bool = True) -> BrokerProcess:
        process = BrokerProcess(data_dir or tmp_path / f"broker-{len(made)}" / "data", extra_args=extra_args)
        made.append(process)
        if wait:
            process.start()
        return process

    try:
        yield start
    finally:
        for process in made:
            process.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Last resort: no broker outlives the test session."""
    close_all()
