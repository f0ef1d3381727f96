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
from collections.abc import Iterator
from dataclasses import dataclass

from kafkalite.protocol.message import Message, Struct

__all__ = ["LATENCY_BUCKETS", "ApiStats", "ConnectionInfo", "LoggedRequest", "RequestLog", "RequestStats",
           "first_error"]

# Upper bounds (seconds) of the latency histogram's buckets (Prometheus' defaults, with 0.5 ms and 1 ms).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiStats:
    """One API's requests: how many ended with each error code, their latencies, their bytes."""

    __slots__ = ("errors", "buckets", "latency_sum", "count", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.errors: dict[int, int] = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # per bucket, not cumulative; the last is +Inf
        self.latency_sum = 0.0
        self.count = 0
        self.bytes_in = 0
        self.bytes_out = 0

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """The buckets as Prometheus counts them: each bound with every observation at or below it."""
        total, out = 0, []
        for bound, count in zip((*map(str, LATENCY_BUCKETS), "+Inf"), self.buckets, strict=True):
            total += count
            out.append((bound, total))
        return out


class RequestStats:
    """Every API's ``ApiStats``, and the broker's totals."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}
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

    def written(self, api_key: int, size: int) -> None:
        (self.apis.get(api_key) or self.api(api_key)).bytes_out += size

    def totals(self) -> tuple[int, int, int]:
        """(requests, bytes in, bytes out) since the broker started."""
        apis = list(self.apis.values())
        return sum(s.count for s in apis), sum(s.bytes_in for s in apis), sum(s.bytes_out for s in apis)


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


class RequestLog:
    """The last ``size`` requests, newest last (tuples until they are read)."""

    def __init__(self, size: int = 1000) -> None:
        self._entries: deque[tuple[int, int, str, str | None, int, int, int, float, int, int | None]] = deque(
            maxlen=size)

    def append(self, time_ms: int, connection_id: int, peer: str, client_id: str | None, api_key: int,
               api_version: int, correlation_id: int, latency_ms: float, error_code: int,
               fault_id: int | None) -> None:
        self._entries.append((time_ms, connection_id, peer, client_id, api_key, api_version, correlation_id,
                              latency_ms, error_code, fault_id))

    def __iter__(self) -> Iterator[LoggedRequest]:
        return (LoggedRequest(*entry) for entry in list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


class ConnectionInfo:
    """What the admin endpoint learned about one client connection from its requests."""

    __slots__ = ("connected_ms", "software_name", "software_version", "api_versions", "requests", "bytes_in",
                 "bytes_out", "__weakref__")

    def __init__(self, connected_ms: int) -> None:
        self.connected_ms = connected_ms  # when its first request was seen
        self.software_name: str | None = None  # from ApiVersions v3+ (KIP-511)
        self.software_version: str | None = None
        self.api_versions: dict[int, set[int]] = {}
        self.requests = 0
        self.bytes_in = 0
        self.bytes_out = 0


_SHAPES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _error_shape(cls: type[Struct]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The error code fields of a message class, and its fields that hold structs."""
    shape = _SHAPES.get(cls)
    if shape is None:
        errors = tuple(spec.name for spec in cls.FIELDS
                       if spec.name == "error_code" or spec.name.endswith("_error_code"))
        shape = _SHAPES[cls] = (errors, tuple(spec.name for spec in cls.FIELDS if spec.struct is not None))
    return shape


def first_error(message: Message | Struct) -> int:
    """The first error code other than NONE in a response, at the top or nested (0 when none)."""
    errors, nested = _error_shape(type(message))
    for name in errors:
        code = getattr(message, name)
        if code:
            return int(code)
    for name in nested:
        value = getattr(message, name)
        if isinstance(value, list):
            for item in value:
                code = first_error(item)
                if code:
                    return code
        elif value is not None:
            code = first_error(value)
            if code:
                return code
    return 0
