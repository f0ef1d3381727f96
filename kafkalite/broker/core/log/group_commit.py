"""Group commit: the fsyncs that ``log.flush.on.ack`` waits for, shared by every answer that waits.

Theory of operation
-------------------
An ``acks=all`` answer with ``log.flush.on.ack=true`` may leave only once the bytes it acknowledges
are durable. One fsync per request would queue the requests behind one another on the disk; instead
the requests that wait at the same time share the fsyncs:

* ``durable(log)`` asks that everything appended to ``log`` so far be made durable, and returns a
  future that gets None once it is, or the ``OSError`` that stopped it.
* When no round runs, one starts at once: for each log asked for, ``prepare_flush`` (on the loop)
  picks the files holding the offsets above its recovery point, and one job on the log room's
  :class:`~kafkalite.broker.core.log.background.Background` (the server's I/O thread) fsyncs them,
  log after log. Back on the loop, ``complete_flush`` moves each recovery point and every future of
  the round is resolved together.
* Whatever is asked while a round runs waits for the next one, which starts as soon as the running
  one ends and covers every log asked for meanwhile with one fsync each, however many answers wait
  on it. A future is resolved only by a round whose ``prepare_flush`` came after the request asked,
  so the fsync it waited for covers the bytes it acknowledges.

A log whose ``prepare_flush`` finds nothing above the recovery point is durable already: its futures
are resolved at once. All state is touched on the event loop; the job touches only the descriptors
``prepare_flush`` duplicated for it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.partition_log import PartitionLog, PendingFlush

__all__ = ["GroupCommit"]

log = logging.getLogger("kafkalite.log")

Durable = asyncio.Future[OSError | None]


@dataclass(slots=True)
class _Flush:
    partition_log: PartitionLog
    pending: PendingFlush
    waiting: list[Durable]
    failure: OSError | None = None


class GroupCommit:
    """The fsync rounds of ``log.flush.on.ack``: one running at a time, each shared by every answer
    that asked before it started."""

    def __init__(self, background: Background) -> None:
        self.background = background
        self._asked: dict[PartitionLog, list[Durable]] = {}  # for the next round
        self._running = False
        self.rounds = 0  # rounds started (tests, measurements)

    def durable(self, partition_log: PartitionLog) -> Durable:
        """A future resolved once everything appended to ``partition_log`` so far is durable: with None,
        or with the OSError that kept it from being so."""
        future: Durable = asyncio.get_running_loop().create_future()
        self._asked.setdefault(partition_log, []).append(future)
        if not self._running:
            self._start()
        return future

    def _start(self) -> None:
        asked, self._asked = self._asked, {}
        flushes: list[_Flush] = []
        for partition_log, waiting in asked.items():
            try:
                pending = partition_log.prepare_flush()
            except OSError as exc:  # its files went (a deleted topic) or cannot be reopened
                _resolve(waiting, exc)
                continue
            if pending is None:  # durable already
                _resolve(waiting, None)
                continue
            flushes.append(_Flush(partition_log, pending, waiting))
        if not flushes:
            return
        self._running = True
        self.rounds += 1

        def work() -> None:  # on the I/O thread: only the duplicated descriptors
            for flush in flushes:
                try:
                    flush.pending.run()
                except OSError as exc:
                    flush.failure = exc

        def then(exc: BaseException | None) -> None:  # back on the loop
            self._running = False
            for flush in flushes:
                failure = flush.failure
                if failure is None and exc is not None:
                    failure = exc if isinstance(exc, OSError) else OSError(str(exc))
                if failure is None:
                    flush.partition_log.complete_flush(flush.pending)
                _resolve(flush.waiting, failure)
            if self._asked:
                self._start()

        self.background.submit(work, then)


def _resolve(waiting: list[Durable], failure: OSError | None) -> None:
    for future in waiting:
        if not future.done():
            future.set_result(failure)
