"""Group commit: the fsyncs that ``log.flush.on.ack`` waits for, shared by every answer that waits.

Theory of operation
-------------------
An ``acks=all`` answer with ``log.flush.on.ack=true`` may leave only once the bytes it acknowledges
are durable. One fsync per request would queue the requests behind one another on the disk; instead
the requests that wait at the same time share the fsyncs, in *rounds* run one after another by the
log room's :class:`~kafkalite.broker.core.log.background.Background` (the server's I/O thread):

* ``durable(log)`` asks that everything appended to ``log`` so far be made durable, and returns a
  future that gets None once it is, or the ``OSError`` that stopped it. The bytes are in the file
  already (the append wrote them); what is left is a sync that starts after now. Only the records
  must survive a power loss before the answer: a round syncs the ``.log`` files above the log's
  durable offset with ``fdatasync`` (and the partition directory after a roll), never the index
  files, and moves the durable offset, never the recovery point (``prepare_flush(records_only=True)``).
  Recovery after a crash validates and re-indexes everything above the recovery point, so indexes
  that a power loss cut short cost a longer recovery, not a record; the periodic flushes (a rolled
  segment, ``flush.ms``) sync the indexes and move the recovery point as without flush.on.ack, and
  no checkpoint file is written for a round.
* The request joins the *open* round, the one handed to the I/O thread whose fsyncs have not
  started: its log's flush is decided again on the loop (``prepare_flush``, up to the log end offset
  now, with fresh duplicate descriptors; the one it replaces is discarded). With no open round, a new
  one is made and handed over at once. So while a round's fsyncs run, every request that arrives
  joins the next round, which starts as soon as the running one ends, on the I/O thread itself,
  without waiting for the loop, and fsyncs each of its logs once however many answers wait on it.
* The round's job marks it started (under its lock, so a request either joined before or makes the
  next round), syncs log after log, and back on the loop ``complete_flush`` moves each durable
  offset and every future of the round is resolved together; a failed fsync reaches only the answers
  of that log.

A log whose ``prepare_flush`` finds nothing above its durable offset is durable already: its future
is resolved at once. State is touched on the event loop only; the job touches its round (under the
lock) and the descriptors ``prepare_flush`` duplicated for it.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.partition_log import PartitionLog, PendingFlush

__all__ = ["GroupCommit"]

Durable = asyncio.Future[OSError | None]


@dataclass(slots=True)
class _Flush:
    pending: PendingFlush
    waiting: list[Durable]
    failure: OSError | None = None


@dataclass(slots=True)
class _Round:
    flushes: dict[PartitionLog, _Flush] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: bool = False  # set by the job when its fsyncs begin: nobody joins after that


class GroupCommit:
    """The fsync rounds of ``log.flush.on.ack``: run one after another, each shared by every answer
    that asked before its fsyncs started."""

    def __init__(self, background: Background) -> None:
        self.background = background
        self._open: _Round | None = None  # handed over, its fsyncs not started: requests join it
        self.rounds = 0  # rounds handed over (tests, measurements)

    def durable(self, partition_log: PartitionLog) -> Durable:
        """A future resolved once everything appended to ``partition_log`` so far is durable: with None,
        or with the OSError that kept it from being so."""
        future: Durable = asyncio.get_running_loop().create_future()
        joining = self._open
        if joining is not None:
            with joining.lock:
                if not joining.started:
                    self._add(joining, partition_log, future)
                    return future
        fresh = _Round()
        if self._add(fresh, partition_log, future):
            self._open = fresh
            self._hand_over(fresh)
        return future

    def _add(self, joining: _Round, partition_log: PartitionLog, future: Durable) -> bool:
        """Put the log's flush, decided now, in the round; False when nothing is left to fsync."""
        try:
            pending = partition_log.prepare_flush(records_only=True)
        except OSError as exc:  # its files went (a deleted topic) or cannot be reopened
            future.set_result(exc)
            return False
        if pending is None:  # durable already
            future.set_result(None)
            return False
        flush = joining.flushes.get(partition_log)
        if flush is None:
            joining.flushes[partition_log] = _Flush(pending, [future])
        else:
            flush.pending.discard()
            flush.pending = pending
            flush.waiting.append(future)
        return True

    def _hand_over(self, round_: _Round) -> None:
        self.rounds += 1

        def work() -> None:  # on the I/O thread: the round and its duplicated descriptors only
            with round_.lock:
                round_.started = True
                flushes = list(round_.flushes.values())
            for flush in flushes:
                try:
                    flush.pending.run()
                except OSError as exc:
                    flush.failure = exc

        def then(exc: BaseException | None) -> None:  # back on the loop
            if self._open is round_:
                self._open = None
            for partition_log, flush in round_.flushes.items():
                failure = flush.failure
                if failure is None and exc is not None:
                    failure = exc if isinstance(exc, OSError) else OSError(str(exc))
                if failure is None:
                    partition_log.complete_flush(flush.pending)
                for future in flush.waiting:
                    if not future.done():
                        future.set_result(failure)

        self.background.submit(work, then)
