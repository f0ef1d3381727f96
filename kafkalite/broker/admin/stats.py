"""What the admin endpoint counts: requests by API and error code, latencies, bytes, connections.

Plain counters kept on the event loop, each request costing a few dictionary and list updates:
``/metrics`` hands them to prometheus_client as metric families when it is scraped (see
``metrics``), so nothing of that library runs on the request path. Each connection's facts
(``ConnectionInfo``) live as long as the connection does (a weak mapping in the observer).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from kafkalite.protocol.message import Message, Struct

__all__ = ["LATENCY_BUCKETS", "ApiStats", "ConnectionInfo", "Entry", "LoggedRequest", "RequestLog", "RequestStats",
           "first_error"]

# Upper bounds (seconds) of the latency histogram's buckets (Prometheus' defaults, with 0.5 ms and 1 ms).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiStats:
    """One API's requests: how many ended with each error code, their latencies, their bytes."""

    __slots__ = ("errors", "buckets", "latency_sum", "count", "bytes_in")

    def __init__(self) -> None:
        self.errors: dict[int, int] = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # per bucket, not cumulative; the last is +Inf
        self.latency_sum = 0.0
        self.count = 0
        self.bytes_in = 0

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """The buckets as Prometheus counts them: each bound with every observation at or below it."""
        total, out = 0, []
        for bound, count in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self.buckets, strict=True):
            total += count
            out.append((bound, total))
        return out


class RequestStats:
    """Every API's ``ApiStats`` and bytes of responses, and the broker's totals.

    Requests are recorded in batches (``absorb``): the observer keeps each answered request as a
    log entry and hands them over when they are read or a batch is full, so the request path only
    appends a tuple."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
        self.bytes_out: dict[int, int] = {}  # API key -> bytes of responses written
        self.started = time.time()

    def api(self, api_key: int) -> ApiStats:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats()
        return stats

    def record(self, api_key: int, error_code: int, seconds: float, bytes_in: int) -> None:
        stats = self.apis.get(api_key) or self.api(api_key)
        stats.errors[error_code] = stats.errors.get(error_code, 0) + 1
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        stats.latency_sum += seconds
        stats.count += 1
        stats.bytes_in += bytes_in

    def absorb(self, entries: Iterable[Entry]) -> None:
        """Record a batch of request log entries."""
        apis = self.apis
        for entry in entries:
            api_key, seconds, error_code = entry[4], entry[7], entry[8]
            stats = apis.get(api_key) or self.api(api_key)
            errors = stats.errors
            errors[error_code] = errors.get(error_code, 0) + 1
            stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
            stats.latency_sum += seconds
            stats.count += 1
            stats.bytes_in += entry[10]

    def totals(self) -> tuple[int, int, int]:
        """(requests, bytes in, bytes out) since the broker started."""
        apis = list(self.apis.values())
        return sum(s.count for s in apis), sum(s.bytes_in for s in apis), sum(self.bytes_out.values())


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One request of the recent-request log."""

    time_ms: int  # when its answer was ready (or the connection dropped)
    connection_id: int
    peer: str
    client_id: str | None
    api_key: int
    api_version: int
    correlation_id: int
    latency_ms: float
    error_code: int
    fault_id: int | None  # the fault that took it, if one did


# (arrival on the observer's clock, connection id, peer, client id, API key, API version, correlation
# id, latency in seconds, error code, fault id, bytes of the request)
Entry = tuple[float, int, str, str | None, int, int, int, float, int, int | None, int]


class RequestLog:
    """The last ``size`` requests, newest last, kept as tuples of plain values (which the cyclic
    garbage collector stops tracking) until they are read as ``LoggedRequest`` values. Times are
    read from ``clock`` (the observer's) and made wall-clock times when read."""

    def __init__(self, size: int = 1000, clock: Callable[[], float] = time.perf_counter) -> None:
        self._entries: deque[Entry] = deque(maxlen=size)
        self._clock = clock

    def extend(self, entries: Iterable[Entry]) -> None:
        self._entries.extend(entries)

    def __iter__(self) -> Iterator[LoggedRequest]:
        wall = time.time() - self._clock()  # the wall-clock time at 0 on the clock
        for started, connection_id, peer, client_id, api_key, version, correlation_id, seconds, error, fault, _ \
                in list(self._entries):
            yield LoggedRequest(int((wall + started + seconds) * 1000), connection_id, peer, client_id, api_key,
                                version, correlation_id, seconds * 1000, error, fault)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


class ConnectionInfo:
    """What the admin endpoint learned about one client connection from its requests."""

    __slots__ = ("connected_ms", "software_name", "software_version", "api_versions", "requests", "__weakref__")

    def __init__(self, connected_ms: int) -> None:
        self.connected_ms = connected_ms  # when its first request was seen
        self.software_name: str | None = None  # from ApiVersions v3+ (KIP-511)
        self.software_version: str | None = None
        self.api_versions: dict[int, set[int]] = {}
        self.requests = 0


# For each message class, a function that finds its first error code: it reads the error code fields
# and walks only the fields whose structs have error codes somewhere below (built once per class).
_Finder = Callable[[Any], int]
_FINDERS: dict[type, _Finder | None] = {}
_LEAVES: dict[type, Callable[[Any], int]] = {}  # structs whose only error is one field: its getter
_LISTS: dict[type, tuple[Callable[[Any], Any], Callable[[Any], int]]] = {}  # a list of such structs


def nested_struct(cls: type[Struct], name: str) -> type:
    return next(spec.struct for spec in cls.FIELDS if spec.name == name and spec.struct is not None)


def _no_error(message: Any) -> int:
    return 0


def _finder(cls: type[Struct]) -> _Finder | None:
    if cls in _FINDERS:
        return _FINDERS[cls]
    _FINDERS[cls] = None  # a struct that contains itself is not followed twice
    errors = tuple(spec.name for spec in cls.FIELDS if spec.name == "error_code" or spec.name.endswith("_error_code"))
    nested = []
    for spec in cls.FIELDS:
        if spec.struct is not None:
            child = _finder(spec.struct)
            if child is not None:
                nested.append((spec.name, spec.type.startswith("[]"), child))
    if not errors and not nested:
        return None
    if len(errors) == 1 and not nested:
        read = attrgetter(errors[0])
        _LEAVES[cls] = read

        def find(message: Any) -> int:
            return int(read(message))
    elif not errors and len(nested) == 1 and nested[0][1]:
        name, _, child = nested[0]
        items = attrgetter(name)
        leaf = _LEAVES.get(nested_struct(cls, name))
        if leaf is not None:  # a list of structs, each with one error code
            _LISTS[cls] = (items, leaf)

            def find(message: Any) -> int:
                for item in items(message) or ():
                    code = leaf(item)
                    if code:
                        return int(code)
                return 0
        elif (inner := _LISTS.get(nested_struct(cls, name))) is not None:  # lists of lists: Produce, ListOffsets
            inner_items, inner_leaf = inner

            def find(message: Any) -> int:
                for item in items(message) or ():
                    for inner_item in inner_items(item) or ():
                        code = inner_leaf(inner_item)
                        if code:
                            return int(code)
                return 0
        else:
            def find(message: Any) -> int:
                for item in items(message) or ():
                    code = child(item)
                    if code:
                        return code
                return 0
    else:
        def find(message: Any) -> int:
            for name in errors:
                code = getattr(message, name)
                if code:
                    return int(code)
            for name, is_list, child in nested:
                value = getattr(message, name)
                if value is None:
                    continue
                for item in value if is_list else (value,):
                    code = child(item)
                    if code:
                        return code
            return 0

    _FINDERS[cls] = find
    return find


def first_error(message: Message | Struct) -> int:
    """The first error code other than NONE in a response, at the top or nested (0 when none)."""
    find = _FINDERS.get(type(message), _no_error) if type(message) in _FINDERS else _finder(type(message))
    return 0 if find is None else find(message)
