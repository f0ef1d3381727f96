"""The admin endpoint's hook in request dispatch: count, time, log, and break on purpose.

``KafkaConnection`` calls ``RequestObserver.handle`` in place of the handler when the broker has an
observer (``admin.listener`` set, or a test broker whose faults were asked for); without one the
connection calls the handler itself and pays one attribute check. ``handle`` notes what the
connection told about itself (ApiVersions v3+ names the client software), asks the fault registry
whether a fault takes the request, calls the handler (or answers for it, see ``fault_responses``),
and records the request when its answer is ready: counters by API and error code, the latency
histogram, the recent-request log (each answered request is one tuple appended to a list, folded
into the counters and the log in batches and whenever they are read). An answer that has to wait
(a long-poll Fetch, a JoinGroup barrier) is counted in ``parked`` (the purgatory) until it is
ready. ``response_written`` counts the bytes of each response.

Everything runs on the event loop; faults that wait (latency, stall) are coroutines on it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from kafkalite.broker.admin.fault_responses import (
    WRITES,
    error_response,
    fail_partitions,
    leader_unavailable_metadata,
    request_partitions,
    split_request,
)
from kafkalite.broker.admin.faults import FaultKind, FaultRegistry, Match
from kafkalite.broker.admin.stats import ConnectionInfo, Entry, RequestLog, RequestStats, first_error
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.handlers.registry import ApiHandler, HandlerResult, RequestContext
    from kafkalite.broker.net import KafkaConnection

__all__ = ["LoopLagMonitor", "RequestObserver"]

API_VERSIONS, METADATA = 18, 3
FOLD_EVERY = 256  # answered requests kept before they are counted (they are also counted whenever read)


class _Topics:
    """The cluster's topics as ``fault_responses`` asks about them."""

    __slots__ = ("_cluster",)

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def name_of(self, topic_id: uuid.UUID) -> str:
        return self._cluster.topics.name_of(topic_id)

    def id_of(self, name: str) -> uuid.UUID:
        topic = self._cluster.topics.get(name)
        return topic.topic_id if topic is not None else uuid.UUID(int=0)

    def partition_count(self, name: str) -> int:
        topic = self._cluster.topics.get(name)
        return 0 if topic is None else len(topic.partitions)

    def names(self) -> list[str]:
        return [topic.name for topic in self._cluster.topics]


class LoopLagMonitor:
    """How late the event loop runs a callback it was asked to run ``interval`` seconds later."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.last = 0.0  # seconds, the latest sample
        self.max = 0.0
        self.samples = 0
        self._handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._handle is None:
            self._schedule(loop)

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        due = loop.time() + self.interval
        self._handle = loop.call_at(due, self._tick, loop, due)

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self.last = max(0.0, loop.time() - due)
        self.max = max(self.max, self.last)
        self.samples += 1
        self._schedule(loop)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class RequestObserver:
    """Counts, times and logs every request, and applies the faults of ``faults``."""

    def __init__(self, cluster: Cluster, *, request_log_size: int = 1000,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.cluster = cluster
        self.faults = FaultRegistry()
        self._stats = RequestStats()
        self._requests = RequestLog(request_log_size, clock)
        self._pending: list[Entry] = []  # answered, not yet folded into _stats and _requests
        self._written = self._stats.bytes_out
        self.connections: weakref.WeakKeyDictionary[KafkaConnection, ConnectionInfo] = weakref.WeakKeyDictionary()
        self.parked: dict[int, int] = {}  # API key -> answers being waited for (the purgatory)
        self.loop_lag = LoopLagMonitor()
        self._topics = _Topics(cluster)
        self._clock = clock
        # The connection of the latest request, and its facts: most requests spare the weak lookup.
        self._last_connection: KafkaConnection | None = None
        self._last_info = ConnectionInfo(0)

    # the hook ------------------------------------------------------------------------------------
    def handle(self, connection: KafkaConnection, handler: ApiHandler, context: RequestContext, body: Any,
               size: int) -> HandlerResult:
        """Count the request, apply a fault if one takes it, and record it once its answer is ready.
        (Written out flat: it runs for every request while the admin endpoint is on.)"""
        started = self._clock()
        if self._last_connection is connection:
            info = self._last_info
        else:
            info = self._connection_info(connection)
        info.requests += 1
        api_key = context.api_key
        versions = info.api_versions.get(api_key)
        if versions is None or context.api_version not in versions:
            self._note_versions(info, context, body)
        match = self.faults.match(api_key, context.client_id, body, context.api_version, self._partitions_of) \
            if self.faults.active else None
        result = handler.handle(context, body) if match is None else self._inject(match, connection, handler,
                                                                                 context, body)
        if result is not None and not isinstance(result, Message):
            self.parked[api_key] = self.parked.get(api_key, 0) + 1
            return self._when_ready(result, context, size, started, match)
        self._pending.append((started, context.connection_id, context.peer, context.client_id, api_key,
                              context.api_version, context.correlation_id, self._clock() - started,
                              0 if result is None else first_error(result),
                              None if match is None else match.fault.fault_id, size + 4))
        if len(self._pending) >= FOLD_EVERY:
            self.fold()
        return result

    def response_written(self, connection: KafkaConnection, api_key: int,
                         buffers: Sequence[bytes | bytearray | memoryview]) -> None:
        written = self._written
        written[api_key] = written.get(api_key, 0) + sum(map(len, buffers))

    def fold(self) -> None:
        """Hand the requests answered since the last fold to the counters and the request log."""
        pending = self._pending
        if pending:
            self._stats.absorb(pending)
            self._requests.extend(pending)
            pending.clear()

    @property
    def stats(self) -> RequestStats:
        """The request counters, up to date."""
        self.fold()
        return self._stats

    @property
    def requests(self) -> RequestLog:
        """The recent-request log, up to date."""
        self.fold()
        return self._requests

    def _connection_info(self, connection: KafkaConnection) -> ConnectionInfo:
        info = self.connections.get(connection)
        if info is None:
            info = self.connections[connection] = ConnectionInfo(int(time.time() * 1000))
        self._last_connection, self._last_info = connection, info
        return info

    @staticmethod
    def _note_versions(info: ConnectionInfo, context: RequestContext, body: Any) -> None:
        info.api_versions.setdefault(context.api_key, set()).add(context.api_version)
        if context.api_key == API_VERSIONS and context.api_version >= 3:
            info.software_name, info.software_version = body.client_software_name, body.client_software_version

    async def _when_ready(self, result: Awaitable[Message | None], context: RequestContext, size: int,
                          started: float, match: Match | None) -> Message | None:
        try:
            answer = await result
        finally:
            self.parked[context.api_key] -= 1
        self._done(context, size, answer, started, match)
        return answer

    def _done(self, context: RequestContext, size: int, result: Message | None, started: float,
              match: Match | None) -> None:
        self._pending.append((started, context.connection_id, context.peer, context.client_id, context.api_key,
                              context.api_version, context.correlation_id, self._clock() - started,
                              0 if result is None else first_error(result),
                              None if match is None else match.fault.fault_id, size + 4))

    def _partitions_of(self, api_key: int, api_version: int, request: Any) -> list[tuple[str, int]] | None:
        return request_partitions(api_key, api_version, request, self._topics)

    # faults --------------------------------------------------------------------------------------
    def _inject(self, match: Match, connection: KafkaConnection, handler: ApiHandler, context: RequestContext,
                body: Any) -> HandlerResult:
        spec = match.fault.spec
        kind = spec.kind
        if kind is FaultKind.DROP_BEFORE:
            connection.close()
            return None
        if kind is FaultKind.DROP_AFTER:
            return _then(handler.handle(context, body), lambda answer: connection.close(), drop=True)
        if kind is FaultKind.LATENCY:
            return _after_delay(spec.delay_ms / 1000, handler, context, body)
        if kind is FaultKind.STALL:
            return _hold(handler.handle(context, body), spec.delay_ms / 1000)
        api_key, version = context.api_key, context.api_version
        if kind is FaultKind.LEADER_UNAVAILABLE:
            error = ErrorCode.LEADER_NOT_AVAILABLE if api_key == METADATA else ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            assert spec.error is not None  # parse_fault gives error and disk_full faults an error
            error = spec.error
        failing = match.partitions
        if failing is None:
            answer = error_response(api_key, version, body, error, self._topics)
            return answer if answer is not None else handler.handle(context, body)
        if api_key == METADATA:
            return _then(handler.handle(context, body),
                         lambda answer: leader_unavailable_metadata(answer, failing, error))
        topics = self._topics
        handled = split_request(api_key, version, body, failing, topics) if api_key in WRITES else body
        return _then(handler.handle(context, handled),
                     lambda answer: fail_partitions(api_key, version, body, answer, failing, error, topics))


def _then(result: HandlerResult, change: Callable[[Any], object], drop: bool = False) -> HandlerResult:
    """Apply ``change`` to the handler's answer once it is ready; ``drop``: then answer nothing."""
    if result is None or isinstance(result, Message):
        if result is not None or drop:
            change(result)
        return None if drop else result

    async def later() -> Message | None:
        answer = await result
        if answer is not None or drop:
            change(answer)
        return None if drop else answer

    return later()


async def _after_delay(seconds: float, handler: ApiHandler, context: RequestContext, body: Any) -> Message | None:
    await asyncio.sleep(seconds)
    result = handler.handle(context, body)
    if result is None or isinstance(result, Message):
        return result
    return await result


async def _hold(result: HandlerResult, seconds: float) -> Message | None:
    if result is not None and not isinstance(result, Message):
        result = await result
    await asyncio.sleep(seconds)
    return result
