"""What survives SIGKILL at random moments: a short run of ``benchmarks/crash_consistency.py``.

An idempotent producer (acks=all), an offset committer and a transactional producer run against a
broker that is killed with SIGKILL a few times and restarted on the same data directory (the script
does fifty, and takes ``--kills``). Afterwards every acknowledged record is stored exactly once at
its acknowledged offset, in order, with no record stored twice and no torn batch; every committed
offset is at least the last acknowledged commit; under read_committed every acknowledged commit is
whole, no aborted transaction visible and none half visible. With ``log.flush.on.ack=true`` the
fsync comes before each answer; without it the same holds across kill -9, because the page cache
outlives the process (what a power loss keeps is documented in the README, not testable here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import benchmarks.crash_consistency as harness


@pytest.mark.slow
@pytest.mark.parametrize(("flush_on_ack", "kills"), [(True, 4), (False, 2)], ids=["fsync-on-ack", "page-cache"])
def test_acknowledged_data_survives_kill_9(tmp_path: Path, flush_on_ack: bool, kills: int,
                                           record_property: Callable[[str, object], None],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    report = harness.run(kills, tmp_path, flush_on_ack=flush_on_ack)
    record_property("crash_consistency", report.summary())
    with capsys.disabled():
        print(f"\n[crash consistency, log.flush.on.ack={str(flush_on_ack).lower()}] {report.summary()}")
    assert report.kills == kills
    assert report.acknowledged > 0 and report.commits_acknowledged > 0 and report.transactions_committed > 0
    assert report.violations == []
