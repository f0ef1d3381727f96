"""Process limits: the broker raises its open-file limit as far as the hard limit allows and says so."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

from kafkalite.testing import wait_for

TIMEOUT_S = 20.0


def _lower_soft_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))


def test_serve_raises_the_open_file_limit_and_logs_it(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "kafkalite", "serve", "--memory", "--port", "0",
             "--listeners", "PLAINTEXT://127.0.0.1:0"],
            stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_lower_soft_limit)
    try:
        wait_for(lambda: "listening on" in log_path.read_text(), TIMEOUT_S, "the broker did not start")
        limit = open(f"/proc/{process.pid}/limits").read()
        soft_in_force = next(line.split()[3] for line in limit.splitlines() if line.startswith("Max open files"))
        expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        assert soft_in_force == expected
        assert log_path.read_text().count(f"open-file limit: {expected}") == 1
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(TIMEOUT_S)


def test_many_partitions_under_a_small_open_file_limit(tmp_path: Path) -> None:
    """300 partitions under a hard limit of 64 descriptors: created, listed, written with acks=all,
    restarted, listed again and read back in full, with no traceback (the full-size run, 10,000
    partitions under 256, is benchmarks/partitions.py)."""
    import benchmarks.partitions as scenario

    broker = scenario.run(topics=30, partitions=10, nofile=64, scratch=tmp_path)
    assert "Traceback" not in broker.log_text()
    assert "Too many open files" not in broker.log_text()
