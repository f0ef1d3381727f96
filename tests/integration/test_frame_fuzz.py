"""Mutated real client frames over several connections: the broker stays alive, bounded and quiet.

A short run of ``tests/tools/frame_fuzz.py`` (``python -m tests.tools.frame_fuzz --seconds 600`` runs
it for as long as you like): four connections send the frames captured from real clients, mutated
at the byte level and field by field, with lying size prefixes, half-sent frames, silent connections
and clients that never read. Afterwards the broker is alive and answered every probe, its resident
memory stayed under 100 MiB, its open sockets came back to where they started once the fuzzing
connections closed (the half-sent and silent ones by the broker's own timeouts), and its log holds
no traceback: every error was one line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tools import frame_fuzz

SECONDS = 6.0
CONNECTIONS = 4


@pytest.mark.slow
@pytest.mark.parametrize("memory", [False, True], ids=["disk", "memory"])
def test_mutated_frames_leave_the_broker_alive_bounded_and_quiet(
        tmp_path: Path, memory: bool, record_property: Callable[[str, object], None],
        capsys: pytest.CaptureFixture[str]) -> None:
    report = frame_fuzz.run(SECONDS, CONNECTIONS, tmp_path, memory=memory)
    record_property("frame_fuzz", report.summary())
    with capsys.disabled():
        print(f"\n[frame fuzz, {'memory' if memory else 'disk'}] {report.summary()}")
    assert report.alive, "the broker died"
    assert report.frames_sent > 0 and report.probe_latencies_ms, "nothing was sent, or no probe got through"
    assert report.probe_failures == 0
    assert report.peak_rss_mib < frame_fuzz.RSS_LIMIT_MIB
    assert report.sockets_at_end <= report.sockets_at_start
    assert report.tracebacks == 0 and report.errors == 0, "\n".join(report.error_samples)
