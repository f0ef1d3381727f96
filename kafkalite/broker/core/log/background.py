"""File work that may block (fsync, writing and removing files), handed off the event loop.

The broker's state lives on one event loop, and an fsync can take tens of milliseconds, during
which every connection would wait. So the log room splits such work in three: what to do is decided
on the loop (which files, with duplicated descriptors, and what bytes to write), the blocking part
runs elsewhere, and its result is applied back on the loop. ``Background.submit(work, then)`` takes
the blocking part (``work``, which must touch no broker state) and the part to run on the loop after
it (``then``, given None, or the exception ``work`` raised).

Where the work runs is the server's choice: ``runner`` is set by ``kafkalite.broker.server`` to run
``work`` on one I/O thread (so the jobs run one after another, in the order submitted: a checkpoint
written after an fsync job sees it done) and ``then`` back on the loop. Without a runner (unit tests,
tools that open a log manager by themselves) ``submit`` runs both at once, in the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["Background", "Runner"]

log = logging.getLogger("kafkalite.log")

Then = Callable[[BaseException | None], None]
# (work, then): run work off the loop, then call then(exception or None) on the loop.
Runner = Callable[[Callable[[], None], Then], None]


class Background:
    """Blocking file work of the log room, run by the server's I/O thread (or at once, without one)."""

    def __init__(self) -> None:
        self.runner: Runner | None = None
        self.submitted = 0  # jobs handed over so far (for tests and measurements)

    def submit(self, work: Callable[[], None], then: Then | None = None) -> None:
        """Run ``work`` off the loop, then ``then`` on it (with the exception ``work`` raised, if any)."""
        self.submitted += 1
        finish = then if then is not None else _log_failure
        if self.runner is None:
            try:
                work()
            except Exception as exc:
                finish(exc)
                return
            finish(None)
            return
        self.runner(work, finish)


def _log_failure(exc: BaseException | None) -> None:
    if exc is not None:
        log.warning("background file work failed: %s", exc)
