"""Keyed timers and futures for the group coordinator, with a real and a manual clock.

The coordinator never calls ``time`` or ``loop.call_later`` itself: it asks a ``Timers`` object.
A timer has a key (``("heartbeat", group_id, member_id)``); scheduling a key that is already armed
replaces it, as Kafka's coordinator timer does, so "reschedule the session timeout" is one call.

``LoopTimers`` runs on the event loop (``loop.call_later``, wall-clock milliseconds).
``ManualTimers`` is the fake clock for tests: time moves only when ``advance(ms)`` is called, and
due callbacks run in deadline order, so session and rebalance timeouts are tested without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

__all__ = ["LoopTimers", "ManualTimers", "Timers"]

log = logging.getLogger("kafkalite.groups")

Callback = Callable[[], None]


class Timers(Protocol):
    """What the coordinator needs from a clock."""

    def now_ms(self) -> int: ...

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...

    def create_future(self) -> asyncio.Future[Any]: ...

    def poll(self) -> None:
        """Fire what fell due while no loop could (see ``LoopTimers``)."""

    def cancel_all(self) -> None: ...


def _run(key: Hashable, callback: Callback) -> None:
    try:
        callback()
    except Exception:  # a timer must never take the loop down
        log.exception("group coordinator timer %r failed", key)


class LoopTimers:
    """Timers on the running event loop; ``now_ms`` is wall-clock time (commit timestamps use it)."""

    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}
        # Timers scheduled while no loop runs (state loaded by Cluster.open in a test): fired by poll().
        self._deferred: dict[Hashable, tuple[int, Callback]] = {}

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        self.cancel(key)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._deferred[key] = (self.now_ms() + max(0, delay_ms), callback)
            return

        def fire() -> None:
            self._handles.pop(key, None)
            _run(key, callback)

        self._handles[key] = loop.call_later(max(0, delay_ms) / 1000, fire)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()
        self._deferred.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._handles or key in self._deferred

    def poll(self) -> None:
        """Fire deferred timers that are due (called from the coordinator's periodic work)."""
        if not self._deferred:
            return
        now = self.now_ms()
        for key, (deadline, callback) in list(self._deferred.items()):
            if deadline <= now and self._deferred.get(key, (None, None))[1] is callback:
                del self._deferred[key]
                _run(key, callback)

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        self._deferred.clear()


class ManualTimers:
    """A fake clock: nothing happens until ``advance``; futures belong to a loop that never runs."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms
        self._sequence = itertools.count()
        self._heap: list[tuple[int, int, Hashable]] = []
        self._armed: dict[Hashable, tuple[int, int, Callback]] = {}  # key -> (deadline, sequence, callback)
        self.loop = asyncio.new_event_loop()

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: Hashable, delay_ms: int, callback: Callback) -> None:
        deadline, sequence = self._now + max(0, delay_ms), next(self._sequence)
        self._armed[key] = (deadline, sequence, callback)
        heapq.heappush(self._heap, (deadline, sequence, key))

    def cancel(self, key: Hashable) -> None:
        self._armed.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._armed

    def deadline(self, key: Hashable) -> int | None:
        armed = self._armed.get(key)
        return None if armed is None else armed[0]

    def advance(self, ms: int) -> None:
        """Move the clock forward, firing every timer that falls due on the way, in order."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, sequence, key = heapq.heappop(self._heap)
            armed = self._armed.get(key)
            if armed is None or armed[1] != sequence:
                continue  # cancelled or rescheduled
            del self._armed[key]
            self._now = max(self._now, deadline)
            _run(key, armed[2])
        self._now = target

    def create_future(self) -> asyncio.Future[Any]:
        return self.loop.create_future()

    def poll(self) -> None:
        """Nothing is deferred: time moves only with ``advance``."""

    def cancel_all(self) -> None:
        self._armed.clear()

    def close(self) -> None:
        self.loop.close()
