"""Group commit: the fsyncs that ``log.flush.on.ack`` waits for, shared by every answer that waits.

Theory of operation
-------------------
An ``acks=all`` answer with ``log.flush.on.ack=true`` may leave only once the bytes it acknowledges are
durable. One fsync per request would queue the requests behind one another on the disk; instead the
requests that wait at the same time share the fsyncs, in *rounds*, run in a server by
:class:`CommitThreads` (a thread of its own by default, so a round never waits behind the checkpoints
and snapshots of the log room's I/O thread; it waits on a queue for the next round, with no future
per round); elsewhere by the log room's :class:`~kafkalite.broker.core.log.background.Background`:

* ``when_durable(log, waiter)`` asks that everything appended to ``log`` so far be made durable, and
  calls ``waiter`` with None once it is, or with the ``OSError`` that stopped it (``durable(log)``: the
  same as a future). The bytes are in the file already (the append wrote them); what is left is a sync
  that starts after now. Only the records must survive a power loss before the answer: a round syncs the
  ``.log`` files above the log's durable offset with ``fdatasync`` (and the partition directory after a
  roll), never the index files, and moves the durable offset, never the recovery point
  (``prepare_flush(records_only=True)``). Recovery after a crash validates and re-indexes everything
  above the recovery point, so indexes that a power loss cut short cost a longer recovery, not a record;
  the periodic flushes (a rolled segment, ``flush.ms``, and the indexes of what the rounds synced, at
  most ``manager.RECOVERY_POINT_LAG_MS`` later) sync the indexes and move the recovery point, and no
  checkpoint file is written for a round.
* The request joins the *open* round, the one made or handed over whose syncs have not started: its
  log's flush is extended to the log end offset now (``extend_flush``: the same descriptors, as long as
  no segment was made meanwhile; else decided again by ``prepare_flush``, with fresh descriptors, and
  the one it replaces discarded). With no open round, a new one is made and handed over: at once, or,
  in a server, once the read that made it has been dispatched (``defer``, the connection's end of
  dispatch), so every request read with it joins it, and the thread, woken as the loop is about to
  wait, finds the interpreter lock free rather than waking a second time for it. With more than one
  thread, rounds overlap: a round handed over while another's fdatasync is in the kernel starts at
  once on a free thread; only when every thread is busy does the open round wait, gathering every
  request that arrives, and it starts as soon as a thread is free, without waiting for the loop,
  syncing each of its logs once however many answers wait on it. A file whose sync is still running in
  an earlier round is synced again by a later one (a segment hands out its file until a sync of it has
  *completed*), so no answer leaves before its own bytes are durable, whichever round ends first.
  ``COMMIT_THREADS`` is 1: on the 2-core development VM two overlapping threads were 3-6x slower at 10k
  records/s (the rounds split into more, smaller ones, each a sync and a wake-up of the loop, where one
  thread gathers them) and no better at 1k/s beyond the noise; even when a round started beside a
  running one only if that one answered at most two requests, bursts of requests read in one loop step
  made small rounds.
* The round's job marks it started (under its lock, so a request either joined before or makes the next
  round), syncs log after log, and comes back to the loop with one ``call_soon_threadsafe``:
  ``complete_flush`` moves each durable offset and every waiter of the round is told, in the same loop
  step; a failed sync reaches only the answers of that log.

A log whose ``prepare_flush`` finds nothing above its durable offset is durable already: its waiter is
told at once. State is touched on the event loop only; the job touches its round (under the lock) and
the descriptors ``prepare_flush`` duplicated for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from functools import partial
from queue import SimpleQueue
from typing import Final

from kafkalite.broker.core.log.background import Background, Runner, Then
from kafkalite.broker.core.log.partition_log import PartitionLog, PendingFlush

__all__ = ["COMMIT_THREADS", "CommitThreads", "GroupCommit", "Waiter"]

Durable = asyncio.Future[OSError | None]
Waiter = Callable[[OSError | None], None]  # told, on the loop, that the bytes are durable (None) or why not
log = logging.getLogger("kafkalite.log")
COMMIT_THREADS: Final = 1  # rounds that may sync at the same time (see the module docstring)


class CommitThreads:
    """Threads that run the rounds in a server: ``work`` on a free thread, then ``then`` on the loop,
    handed back with one ``call_soon_threadsafe``. Threads start on first use (a broker that never
    flushes on ack has none).

    Each thread waits on a ``SimpleQueue`` for its next round, and goes back to it as soon as the
    round is handed back: no future per round, nothing held between a round's end and the loop taking
    over (an executor's worker would resolve a future and count itself idle while the woken loop
    waits for the interpreter lock)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int = COMMIT_THREADS) -> None:
        self._loop = loop
        self._count = count
        self._jobs: SimpleQueue[tuple[Callable[[], None], Then] | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def __call__(self, work: Callable[[], None], then: Then) -> None:
        if self._closed:
            raise RuntimeError("the commit threads are closed")
        if not self._threads:
            for number in range(self._count):
                thread = threading.Thread(target=self._serve, name=f"kafkalite-commit-{number}", daemon=True)
                thread.start()
                self._threads.append(thread)
        self._jobs.put((work, then))

    def _serve(self) -> None:
        jobs, call_soon_threadsafe = self._jobs, self._loop.call_soon_threadsafe
        while (job := jobs.get()) is not None:
            work, then = job
            failure: BaseException | None = None
            try:
                work()
            except Exception as exc:
                failure = exc
            try:
                call_soon_threadsafe(then, failure)
            except RuntimeError:  # the loop is closed: the broker has stopped, nobody waits for the answer
                pass
            del job, work, then, failure

    def close(self) -> None:
        """Wait for the rounds running or queued; their answers are handed to the loop as usual."""
        self._closed = True
        threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)  # after every round queued before it
        for thread in threads:
            thread.join()


class _Flush:
    """One log's part of a round: what to sync, and the answers waiting for it."""

    __slots__ = ("pending", "waiting", "failure")

    def __init__(self, pending: PendingFlush, waiting: list[Waiter], failure: OSError | None = None) -> None:
        self.pending = pending
        self.waiting = waiting
        self.failure = failure


class _Round:
    """One round of fsyncs, shared by every answer that joined it before it started."""

    __slots__ = ("flushes", "lock", "started")

    def __init__(self) -> None:
        self.flushes: dict[PartitionLog, _Flush] = {}
        self.lock = threading.Lock()
        self.started = False  # set by the job when its fsyncs begin: nobody joins after that


class GroupCommit:
    """The fsync rounds of ``log.flush.on.ack``: run one after another, each shared by every answer
    that asked before its fsyncs started."""

    def __init__(self, background: Background) -> None:
        self.background = background
        self.runner: Runner | None = None  # where rounds run (a server's CommitThreads); None: background
        self._threads: CommitThreads | None = None
        self._open: _Round | None = None  # made or handed over, its syncs not started: requests join it
        # Where a new round's hand-over waits (the server's: the end of the read being dispatched), or
        # None: at once.
        self.defer: Callable[[Callable[[], None]], None] | None = None
        self.rounds = 0  # rounds handed over (tests, measurements)

    def use_threads(self, loop: asyncio.AbstractEventLoop, count: int = COMMIT_THREADS) -> None:
        """Run the rounds on ``count`` threads of their own, coming back to ``loop`` (the server's)."""
        self.close()
        self.runner = self._threads = CommitThreads(loop, count)

    def close(self) -> None:
        """Stop the threads, once the rounds handed to them have run (later rounds run in the caller)."""
        threads, self._threads = self._threads, None
        if threads is not None:
            self.runner = None
            threads.close()

    def when_durable(self, partition_log: PartitionLog, waiter: Waiter) -> None:
        """Call ``waiter`` on the loop once everything appended to ``partition_log`` so far is durable:
        with None, or with the OSError that kept it from being so. At once (inside this call) when it
        is durable already or cannot be made so; else from the round's completion, in the same loop
        step for every waiter of the round (no task, no future)."""
        joining = self._open
        if joining is not None:
            with joining.lock:
                if not joining.started:
                    self._add(joining, partition_log, waiter)
                    return
        fresh = _Round()
        if self._add(fresh, partition_log, waiter):
            self._open = fresh
            if self.defer is None:
                self._hand_over(fresh)
            else:
                self.defer(partial(self._hand_over, fresh))

    def durable(self, partition_log: PartitionLog) -> Durable:
        """``when_durable`` as a future: resolved with None once durable, or with the OSError."""
        future: Durable = asyncio.get_running_loop().create_future()
        self.when_durable(partition_log, lambda failure: None if future.done() else future.set_result(failure))
        return future

    def _add(self, joining: _Round, partition_log: PartitionLog, waiter: Waiter) -> bool:
        """Put the log's flush, decided now, in the round; False when nothing is left to sync."""
        flush = joining.flushes.get(partition_log)
        if flush is not None and partition_log.extend_flush(flush.pending):  # the same files: no new descriptors
            flush.waiting.append(waiter)
            return True
        try:
            pending = partition_log.prepare_flush(records_only=True)
        except OSError as exc:  # its files went (a deleted topic) or cannot be reopened
            waiter(exc)
            return False
        if pending is None:  # durable already
            waiter(None)
            return False
        if flush is None:
            joining.flushes[partition_log] = _Flush(pending, [waiter])
        else:
            flush.pending.discard()
            flush.pending = pending
            flush.waiting.append(waiter)
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
                for waiter in flush.waiting:
                    try:
                        waiter(failure)
                    except Exception:  # one answer's trouble is not the others'
                        log.exception("a flush.on.ack answer could not be completed")

        if self.runner is not None:
            self.runner(work, then)
        else:
            self.background.submit(work, then)
