"""A handler's answer that an event completes later: Kafka's delayed operations, without a task.

A handler whose answer has to wait for something that happens on the event loop (an append that
brings a long-polling Fetch its bytes, or the timer of its ``max_wait_ms``) returns a
``DelayedAnswer`` and completes it from that callback. ``net.py`` is told at once and writes the
answer in the same loop iteration: no task, no future and no extra step of the loop between the
append and the answer. A connection that closes first cancels it, which calls ``stop_waiting``:
the ``on_cancel`` given, or, in a subclass that is itself what waits (Fetch's parked answer), its own
(to take its listeners and timers back).

An event inside a request (an append) should not complete an answer in the middle of that request,
nor before the other requests read with it: ``after_dispatch(callback)`` runs the completion once
the connection has dispatched what it read (``net.py`` calls ``begin_dispatch`` when a read starts
and ``run_after_dispatch`` at its end), still in the same loop iteration; an event outside any read
(a timer, a task) has it run in the loop's next step.

It is also awaitable (through a future), for what wraps handlers and awaits their answers: the admin
endpoint's observer, the ACL checks. Cancelling the task that awaits it cancels it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

from kafkalite.protocol.message import Message

__all__ = ["DelayedAnswer", "after_dispatch", "begin_dispatch", "run_after_dispatch"]

log = logging.getLogger("kafkalite.handlers")


class _PerLoop(threading.local):
    """One event loop per thread: whether it is dispatching a read, and the completions waiting for the end of it."""

    def __init__(self) -> None:
        self.reading = False
        self.due: list[Callable[[], None]] = []


_per_loop = _PerLoop()


def begin_dispatch() -> None:
    """A read's requests are about to be dispatched, and ``run_after_dispatch`` follows them: until
    then ``after_dispatch`` needs no step of the loop of its own."""
    _per_loop.reading = True


def after_dispatch(callback: Callable[[], None]) -> None:
    """Run ``callback`` once the requests being dispatched are (see the module docstring)."""
    due = _per_loop.due
    if not due and not _per_loop.reading:
        asyncio.get_running_loop().call_soon(run_after_dispatch)  # no read is being dispatched
    due.append(callback)


def run_after_dispatch() -> None:
    """Run the completions ``after_dispatch`` keeps (a failure is logged, never raised)."""
    _per_loop.reading = False
    due = _per_loop.due
    while due:
        callbacks = due[:]
        due.clear()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("completing a delayed answer failed")


class DelayedAnswer:
    """An answer (a response, or None for no response) that ``complete`` or ``fail`` gives later."""

    __slots__ = ("_callbacks", "_cancelled", "_done", "_error", "_on_cancel", "_response")

    def __init__(self, on_cancel: Callable[[], None] | None = None) -> None:
        self._done = self._cancelled = False
        self._response: Message | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[DelayedAnswer], None]] = []
        self._on_cancel = on_cancel

    @property
    def done(self) -> bool:
        """Completed, failed or cancelled."""
        return self._done

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def complete(self, response: Message | None) -> None:
        if not self._done:
            self._done, self._response = True, response
            self._call_back()

    def fail(self, error: BaseException) -> None:
        if not self._done:
            self._done, self._error = True, error
            self._call_back()

    def cancel(self) -> None:
        """Nobody waits for the answer any more (its connection closed)."""
        if self._done:
            return
        self._done = self._cancelled = True
        self._callbacks.clear()
        self.stop_waiting()

    def stop_waiting(self) -> None:
        """Take back what the answer waits on (called once it is cancelled): the ``on_cancel`` given.
        A subclass that listens and times by itself overrides it, and calls it as it completes too."""
        if self._on_cancel is not None:
            self._on_cancel()

    def result(self) -> Message | None:
        """The response; the failure raised; CancelledError once cancelled; InvalidStateError before."""
        if not self._done:
            raise asyncio.InvalidStateError("the answer is not there yet")
        if self._cancelled:
            raise asyncio.CancelledError()
        if self._error is not None:
            raise self._error
        return self._response

    def add_done_callback(self, callback: Callable[[DelayedAnswer], None]) -> None:
        """Call ``callback(self)`` once the answer is there: at once if it is (never if cancelled)."""
        if not self._done:
            self._callbacks.append(callback)
        elif not self._cancelled:
            callback(self)

    def _call_back(self) -> None:
        """Tell who waits. What they do runs inside the completing event (an append, say): their
        failure is logged here, never raised into it."""
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a delayed answer's callback failed")

    def __await__(self) -> Generator[Any, None, Message | None]:
        if not self._done:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.add_done_callback(lambda _: None if future.done() else future.set_result(None))
            try:
                yield from future.__await__()
            except asyncio.CancelledError:
                self.cancel()
                raise
        return self.result()
