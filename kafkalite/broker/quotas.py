"""What the connections of one server may hold together: how many there are, and how much they have read.

``ConnectionQuotas`` applies ``max.connections`` and ``max.connections.per.ip`` (with the exceptions
of ``max.connections.per.ip.overrides``, ``host:count`` pairs; a host is matched by its address as
written, without name resolution). The limits are read from the configuration at each new
connection, so AlterConfigs changes them at once. A connection over a limit is closed as soon as it
is accepted, with one INFO line, as Kafka does for the per-address limit; where Kafka holds a
connection over the broker-wide limit in the listen backlog until another closes, this broker
closes it too (the client reconnects after its back-off).

``RequestBudget`` bounds what every connection together has read but not yet answered:
``queued.max.requests`` requests (the ones whose handler is still waiting: long-polling fetches,
JoinGroup barriers, fsyncs before an acks=all answer, and answers queued behind them) and
``queued.max.request.bytes`` bytes of request frames being received (-1: no bound, Kafka's
default). A connection that wants to start a new request while either bound is reached pauses
reading and waits in line; each request answered or frame released resumes the connections in
line (on the next loop iteration) while room remains. A frame already begun is always finished,
as Kafka's memory pool lets a started request complete, so the byte bound can be overshot by one
frame per connection, never more.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Protocol

__all__ = ["BudgetWaiter", "ConnectionQuotas", "RequestBudget", "parse_connection_overrides"]

log = logging.getLogger("kafkalite.net")


def parse_connection_overrides(text: str) -> dict[str, int]:
    """``"127.0.0.1:200,10.0.0.7:0"`` -> ``{"127.0.0.1": 200, "10.0.0.7": 0}``; raises ValueError when malformed."""
    overrides: dict[str, int] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        if not colon or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"{item!r} is not host:count")
        overrides[host.strip().strip("[]")] = int(count)
    return overrides


class ConnectionQuotas:
    """Counts the open connections, in all and per address, against limits read at each new connection.

    ``limits`` returns ``(max.connections, max.connections.per.ip, overrides)``.
    """

    def __init__(self, limits: Callable[[], tuple[int, int, str]]) -> None:
        self._limits = limits
        self.total = 0
        self.per_address: Counter[str] = Counter()
        self._overrides_text = ""
        self._overrides: dict[str, int] = {}

    def admit(self, address: str) -> str | None:
        """Count a new connection from ``address``; None if admitted, else why it is refused."""
        most, most_per_address, overrides = self._limits()
        if overrides != self._overrides_text:
            try:
                self._overrides = parse_connection_overrides(overrides)
            except ValueError as exc:
                log.warning("ignoring max.connections.per.ip.overrides: %s", exc)
                self._overrides = {}
            self._overrides_text = overrides
        allowed = self._overrides.get(address, most_per_address)
        if self.per_address[address] >= allowed:
            return f"address already has the configured maximum of {allowed} connections"
        if self.total >= most:
            return f"the broker already has the configured maximum of {most} connections (max.connections)"
        self.total += 1
        self.per_address[address] += 1
        return None

    def release(self, address: str) -> None:
        """An admitted connection from ``address`` closed."""
        self.total -= 1
        self.per_address[address] -= 1
        if self.per_address[address] <= 0:
            del self.per_address[address]


class BudgetWaiter(Protocol):
    """A connection waiting for room in the budget."""

    def budget_available(self) -> None: ...


class RequestBudget:
    """Requests in progress and request bytes being received, across the connections of one server."""

    def __init__(self, max_requests: int, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes  # -1: no bound
        self.requests = 0
        self.bytes = 0
        self._waiting: dict[int, BudgetWaiter] = {}  # id -> connection, in the order they started waiting
        self._wake_scheduled = False

    @property
    def exhausted(self) -> bool:
        return self.requests >= self.max_requests or (0 <= self.max_bytes <= self.bytes)

    def wait(self, waiter: BudgetWaiter) -> None:
        """``waiter.budget_available()`` is called once there is room (it may have to wait again)."""
        self._waiting[id(waiter)] = waiter

    def forget(self, waiter: BudgetWaiter) -> None:
        self._waiting.pop(id(waiter), None)

    def add_request(self) -> None:
        self.requests += 1

    def end_request(self) -> None:
        self.requests -= 1
        self._maybe_wake()

    def add_bytes(self, count: int) -> None:
        self.bytes += count

    def release_bytes(self, count: int) -> None:
        self.bytes -= count
        self._maybe_wake()

    def _maybe_wake(self) -> None:
        if self._waiting and not self.exhausted and not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_scheduled = False
        while self._waiting and not self.exhausted:
            key = next(iter(self._waiting))
            waiter = self._waiting.pop(key)
            waiter.budget_available()
