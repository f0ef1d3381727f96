"""The fetcher: Fetch requests to partition leaders, the fetch buffer, and offset lookups.

Theory of operation.

One task (:meth:`Fetcher.run`) keeps data coming. Each round it takes the fetchable partitions (see
:meth:`~.subscription.SubscriptionState.fetchable`), groups them by leader, and sends one Fetch to
every leader that has none in flight: **one Fetch in flight per broker**. The request carries
``fetch.min.bytes``, ``fetch.max.wait.ms`` (the broker's long poll), ``fetch.max.bytes``,
``max.partition.fetch.bytes`` per partition and ``isolation.level``, and goes through the broker's
:class:`~.fetch_session.FetchSessionHandler` (KIP-227: after the first full request only changes
travel). Topic ids are used from Fetch v13 on when every topic's id is known; otherwise v12 at most.

Each partition's data becomes a :class:`~.records.CompletedFetch` in the fetch buffer, decoded only
when ``poll()`` drains it. A partition's ``fetch_offset`` moves to the end of what was received, so
its next Fetch goes out at once while the application works through the buffered data: **prefetch**,
bounded to two buffered responses per partition. Draining moves ``position``; a seek or a reset sets
both positions and drops the partition's buffered data; a response for a position that moved on
meanwhile is dropped.

Errors per partition: OFFSET_OUT_OF_RANGE resets the position by ``auto.offset.reset`` (or raises
:class:`OffsetOutOfRangeError` from ``poll()`` with ``none``); leadership and metadata errors
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH...) refresh the metadata
and the partition is fetched again from its new leader; anything else (authorization, corrupt data)
is raised from the next ``poll()``. A failed request drops its session state (the next request is
full) and asks for fresh metadata.

Positions that need a lookup (``auto.offset.reset``, ``seek_to_beginning``/``end``,
``offsets_for_times``) are ListOffsets requests to each partition's leader, retried after metadata
errors with ``retry.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.config import ConsumerConfig
from kafkalite.client.consumer.fetch_session import FetchPosition, FetchRequestData, FetchSessionHandler
from kafkalite.client.consumer.records import CompletedFetch, ConsumerRecord
from kafkalite.client.consumer.subscription import OffsetResetStrategy, PartitionState, SubscriptionState
from kafkalite.client.errors import KafkaTimeoutError, OffsetOutOfRangeError, error_for
from kafkalite.client.metadata import TopicPartition, is_stale_metadata_error
from kafkalite.client.network import NetworkClient, monotonic_ms
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkalite.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

__all__ = ["Fetcher", "OffsetAndTimestamp", "Wakeup"]

log = logging.getLogger("kafkalite.client")

_ZERO_UUID = uuid.UUID(int=0)
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})
_RETRY_LATER = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
                          ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
                          ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
                          ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS,
                          ErrorCode.BROKER_NOT_AVAILABLE})
_CONNECT_POLL_S = 0.05


class Wakeup:
    """A flag tasks wait on, with a timeout; ``set()`` resumes them in one step of the event loop.

    ``asyncio.wait_for(event.wait(), timeout)`` wraps each wait in a task of its own and takes three
    hops of the loop to resume the waiter; a record waiting to be handed out should not.
    """

    __slots__ = ("_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._waiters: list[asyncio.Future[None]] = []

    def set(self) -> None:
        self._flag = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    async def wait(self, timeout: float | None = None) -> bool:
        """Until set or ``timeout`` seconds (None: no limit) pass; whether it is set."""
        if self._flag:
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if not waiter.done():
                waiter.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
        return self._flag


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    """An offset found by timestamp (ListOffsets): the offset, the record's timestamp, its leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass(slots=True)
class _InFlight:
    data: FetchRequestData
    topic_names: dict[uuid.UUID, str]


class Fetcher:
    """Fetches for the assigned partitions and keeps the fetch buffer (see the module docstring)."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 data_available: Wakeup | None = None) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.read_committed = config.isolation_level == "read_committed"
        self.buffer: collections.deque[CompletedFetch] = collections.deque()
        self.sessions: dict[int, FetchSessionHandler] = {}
        self.in_flight: dict[int, _InFlight] = {}
        self.errors: list[BaseException] = []
        self.data_available = data_available if data_available is not None else Wakeup()
        self._wakeup = Wakeup()
        self._closed = False
        self._reset_task: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        for task in (self._task, self._reset_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    def wakeup(self) -> None:
        """Something changed (assignment, seek, resume, drained data): look for fetches to send."""
        self._wakeup.set()

    # --- the loop ------------------------------------------------------------------------------------

    async def run(self) -> None:
        while not self._closed:
            self._wakeup.clear()
            try:
                delay = self.send_fetches()
                reset_in = self._maybe_reset()
                if reset_in is not None:
                    delay = reset_in if delay is None else min(delay, reset_in)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop fetching silently
                log.exception("fetch round failed")
                self.errors.append(exc)
                self.data_available.set()
                delay = self.config.retry_backoff_ms / 1000
            await self._wakeup.wait(delay)

    def send_fetches(self) -> float | None:
        """Send a Fetch to every leader that has fetchable partitions and none in flight.

        Returns how long to wait before trying again (a connection still being opened), or None.
        """
        metadata = self.client.metadata
        by_node: dict[int, dict[TopicPartition, FetchPosition]] = {}
        max_bytes = self.config.max_partition_fetch_bytes
        missing_leader = False
        for state in self.subscriptions.fetchable():
            partition = state.topic_partition
            leader = metadata.leader_for(partition)
            if leader is None:
                if (self.subscriptions.is_user_assigned
                        and metadata.topic_error(partition.topic) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    state.fetch_offset = None  # stop fetching it; a seek or a new assign() starts again
                    self._fail(KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (
                        f"{partition} is assigned but topic {partition.topic!r} does not exist (deleted?); "
                        "it is no longer fetched")))
                    continue
                missing_leader = True
                continue
            if leader in self.in_flight:
                continue
            assert state.fetch_offset is not None
            info = metadata.topics.get(partition.topic)
            by_node.setdefault(leader, {})[partition] = FetchPosition(
                state.fetch_offset, max_bytes, metadata.leader_epoch(partition),
                topic_id=info.topic_id if info is not None else _ZERO_UUID)
        if missing_leader:
            self.client.request_metadata_update()
        delay: float | None = 0.5 if missing_leader else None
        for node_id, wanted in by_node.items():
            connection = self.client.ready_connection(node_id)
            if connection is None:
                wait = max(_CONNECT_POLL_S, self.client.connect_delay_ms(node_id) / 1000)
                delay = wait if delay is None else min(delay, wait)
                continue
            self._send(node_id, connection, wanted)
        return delay

    def _send(self, node_id: int, connection: Any, wanted: dict[TopicPartition, FetchPosition]) -> None:
        topic_ids = {partition.topic: position.topic_id for partition, position in wanted.items()}
        max_version = None if all(topic_id != _ZERO_UUID for topic_id in topic_ids.values()) else 12
        version = connection.version_for(FetchRequest, max_version=max_version, min_version=4)
        handler = self.sessions.get(node_id)
        if handler is None:
            handler = self.sessions[node_id] = FetchSessionHandler(node_id, use_sessions=version >= 7)
        handler.use_sessions = version >= 7
        data = handler.build(wanted)
        use_ids = version >= 13
        topics: dict[str, list[FetchPartition]] = {}
        for partition, position in data.to_send.items():
            topics.setdefault(partition.topic, []).append(FetchPartition(
                partition=partition.partition, current_leader_epoch=position.current_leader_epoch,
                fetch_offset=position.fetch_offset, log_start_offset=position.log_start_offset,
                partition_max_bytes=position.max_bytes))
        forgotten: dict[str, list[int]] = {}
        for partition in data.to_forget:
            forgotten.setdefault(partition.topic, []).append(partition.partition)
        config = self.config
        request = FetchRequest(
            replica_id=-1, max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes, isolation_level=1 if self.read_committed else 0,
            session_id=data.session_id, session_epoch=data.epoch,
            topics=[FetchTopic(topic=name, topic_id=self._topic_id(name, topic_ids), partitions=partitions)
                    for name, partitions in topics.items()],
            forgotten_topics_data=[ForgottenTopic(topic=name, topic_id=self._topic_id(name, topic_ids),
                                                  partitions=partitions) for name, partitions in forgotten.items()],
            rack_id=config.client_rack)
        names = {topic_id: name for name, topic_id in topic_ids.items()} if use_ids else {}
        self.in_flight[node_id] = _InFlight(data, names)
        future = connection.send(request, version)
        future.add_done_callback(lambda done: self._on_response(node_id, handler, done))

    def _topic_id(self, name: str, topic_ids: dict[str, uuid.UUID]) -> uuid.UUID:
        known = topic_ids.get(name)
        if known is not None:
            return known
        info = self.client.metadata.topics.get(name)
        return info.topic_id if info is not None else _ZERO_UUID

    # --- responses -----------------------------------------------------------------------------------

    def _on_response(self, node_id: int, handler: FetchSessionHandler, future: asyncio.Future[Any]) -> None:
        sent = self.in_flight.pop(node_id, None)
        self._wakeup.set()
        if future.cancelled():
            return
        error = future.exception()
        if sent is None or self._closed:
            return
        if error is not None:
            handler.handle_error()
            self.client.request_metadata_update()
            log.debug("Fetch from node %s failed: %s", node_id, error)
            return
        response: FetchResponse = future.result()
        if not handler.handle_response(sent.data, response.error_code, response.session_id):
            code = ErrorCode.from_code(response.error_code)
            if code not in _SESSION_ERRORS and not code.retriable:
                self._fail(error_for(code, context=f"Fetch from node {node_id}"))
            return
        try:
            self._handle_partitions(response, sent, handler)
        except KafkaError as exc:
            self._fail(exc)
        try:
            self.send_fetches()  # the next Fetch to this broker goes out now, not a loop step later
        except Exception:  # noqa: BLE001 - the fetch loop tries again and reports it
            self._wakeup.set()

    def _fail(self, error: BaseException) -> None:
        self.errors.append(error)
        self.data_available.set()

    def _handle_partitions(self, response: FetchResponse, sent: _InFlight,
                           handler: FetchSessionHandler | None = None) -> None:
        assignment = self.subscriptions.assignment
        config = self.config
        new_data = False
        session_reset = False
        for topic in response.responses:
            name = topic.topic or sent.topic_names.get(topic.topic_id, "")
            for data in topic.partitions:
                partition = TopicPartition(name, data.partition_index)
                requested = sent.data.wanted.get(partition)
                state = assignment.get(partition)
                if requested is None or state is None or state.fetch_offset != requested.fetch_offset:
                    continue  # not asked for, no longer assigned, or the position moved meanwhile
                code = data.error_code
                if code == ErrorCode.NONE:
                    if data.high_watermark >= 0:
                        state.high_watermark = data.high_watermark
                    if data.last_stable_offset >= 0:
                        state.last_stable_offset = data.last_stable_offset
                    if data.log_start_offset >= 0:
                        state.log_start_offset = data.log_start_offset
                    records = data.records
                    if not records:
                        continue
                    aborted = None
                    if self.read_committed and data.aborted_transactions:
                        aborted = [(entry.producer_id, entry.first_offset) for entry in data.aborted_transactions]
                    completed = CompletedFetch(
                        partition, state, requested.fetch_offset, records, high_watermark=data.high_watermark,
                        last_stable_offset=data.last_stable_offset, log_start_offset=data.log_start_offset,
                        aborted_transactions=aborted, read_committed=self.read_committed,
                        check_crcs=config.check_crcs, key_deserializer=config.key_deserializer,
                        value_deserializer=config.value_deserializer)
                    if not completed.has_batches:
                        if len(records) >= requested.max_bytes:
                            self._fail(KafkaError(ErrorCode.MESSAGE_TOO_LARGE, (
                                f"{partition} at offset {requested.fetch_offset}: a batch larger than "
                                f"max.partition.fetch.bytes ({requested.max_bytes}) came back cut short")))
                        continue
                    state.fetch_offset = completed.end_offset
                    state.buffered += 1
                    self.buffer.append(completed)
                    new_data = True
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(state, requested.fetch_offset)
                elif code in _RETRY_LATER:
                    log.debug("Fetch of %s: %s; refreshing metadata", partition, ErrorCode.from_code(code).name)
                    self.client.request_metadata_update()
                    if code in (ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID):
                        session_reset = True  # the session holds the old topic id: start a new one
                else:
                    self._fail(error_for(code, context=str(partition)))
        if new_data:
            self.data_available.set()
        if session_reset and handler is not None:
            handler.handle_error()

    def _out_of_range(self, state: PartitionState, fetch_offset: int) -> None:
        strategy = self.subscriptions.default_reset
        partition = state.topic_partition
        self.drop_buffered(partition)
        if strategy is OffsetResetStrategy.NONE:
            state.fetch_offset = None  # stop fetching it until the application seeks
            self._fail(OffsetOutOfRangeError(
                f"fetch position {fetch_offset} of {partition} is out of range and auto.offset.reset is none",
                {partition: fetch_offset}))
            return
        log.info("fetch position %s of %s is out of range; resetting to the %s offset", fetch_offset, partition,
                 strategy.value)
        state.request_reset(strategy)
        self.wakeup()

    # --- the buffer ----------------------------------------------------------------------------------

    def drop_buffered(self, partition: TopicPartition) -> None:
        """Forget what was fetched for ``partition`` and not yet read (after a seek or a reset)."""
        kept = collections.deque(completed for completed in self.buffer if completed.topic_partition != partition)
        if len(kept) != len(self.buffer):
            self.buffer = kept
        state = self.subscriptions.assignment.get(partition)
        if state is not None:
            state.buffered = 0

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors.pop(0)

    def has_buffered_data(self) -> bool:
        return any(not completed.state.paused for completed in self.buffer)

    def collect(self, max_records: int) -> list[tuple[PartitionState, list[ConsumerRecord], int, int | None]]:
        """Drain up to ``max_records`` records: (state, records, position after them, leader epoch) per chunk.

        Positions are *not* moved here; the caller moves each state's position to its chunk's end
        (``poll()`` at once, the iterators as they hand records out).
        """
        chunks: list[tuple[PartitionState, list[ConsumerRecord], int, int | None]] = []
        assignment = self.subscriptions.assignment
        positions: dict[int, int | None] = {}
        remaining = max_records
        drained_any = False
        for completed in list(self.buffer):
            if remaining <= 0:
                break
            state: PartitionState = completed.state
            if assignment.get(completed.topic_partition) is not state:
                self._remove(completed)
                continue
            if state.paused:
                continue
            expected = positions.get(id(state), state.position)
            if expected != completed.next_offset:
                self._remove(completed)  # the position moved (a seek): this data is stale
                state.buffered = max(0, state.buffered - 1)
                drained_any = True
                continue
            records = completed.drain(remaining)
            positions[id(state)] = completed.next_offset
            if records or completed.next_offset != expected:
                chunks.append((state, records, completed.next_offset, completed.leader_epoch))
                remaining -= len(records)
            if completed.exhausted:
                self._remove(completed)
                state.buffered = max(0, state.buffered - 1)
                drained_any = True
        if drained_any:
            self._wakeup.set()
        return chunks

    def _remove(self, completed: CompletedFetch) -> None:
        with contextlib.suppress(ValueError):
            self.buffer.remove(completed)

    # --- offsets by timestamp ------------------------------------------------------------------------

    def _maybe_reset(self) -> float | None:
        """Start looking up the positions awaiting a reset; seconds until the next try is due, or None."""
        waiting = [state for state in self.subscriptions.awaiting_reset()
                   if state.reset_strategy is not OffsetResetStrategy.NONE and not state.reset_in_flight]
        if not waiting or (self._reset_task is not None and not self._reset_task.done()):
            return None
        now = monotonic_ms()
        if any(state.next_reset_ms <= now for state in waiting):
            self._reset_task = asyncio.get_running_loop().create_task(self.reset_offsets())
            return None
        return max(0.001, (min(state.next_reset_ms for state in waiting) - now) / 1000)

    async def reset_offsets(self) -> None:
        """Look up the position of every partition awaiting a reset (earliest, latest, or by time)."""
        now = monotonic_ms()
        pending = [state for state in self.subscriptions.awaiting_reset()
                   if not state.reset_in_flight and state.next_reset_ms <= now]
        if not pending:
            return
        specs: dict[TopicPartition, int] = {}
        for state in pending:
            assert state.reset_strategy is not None
            if state.reset_strategy is OffsetResetStrategy.NONE:
                continue
            state.reset_in_flight = True
            specs[state.topic_partition] = (state.reset_timestamp if state.reset_timestamp is not None
                                            else state.reset_strategy.timestamp)
        try:
            results = await self._list_offsets_once(specs)
        finally:
            for state in pending:
                state.reset_in_flight = False
        retry_at = monotonic_ms() + self.config.retry_backoff_ms
        for partition in specs:
            current = self.subscriptions.assignment.get(partition)
            if current is None or current.reset_strategy is None:
                continue
            result = results.get(partition)
            if isinstance(result, OffsetAndTimestamp):
                if result.offset < 0:  # no record at or after that time: the end of the log
                    current.request_reset(OffsetResetStrategy.LATEST)
                    continue
                self.drop_buffered(partition)
                current.seek(result.offset, result.leader_epoch)
                log.debug("reset the position of %s to %s", partition, result.offset)
            else:
                current.next_reset_ms = retry_at
                if isinstance(result, KafkaError) and not (result.retriable
                                                           or is_stale_metadata_error(result.error_code)):
                    self._fail(result)
        self.wakeup()
        self.data_available.set()

    async def list_offsets(self, timestamps: Mapping[TopicPartition, int],
                           timeout_ms: float) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The offset for each partition's timestamp (-1 latest, -2 earliest); None where there is none."""
        deadline = monotonic_ms() + timeout_ms
        pending = dict(timestamps)
        found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        self.client.add_topics({partition.topic for partition in pending})
        while True:
            results = await self._list_offsets_once(pending)
            for partition, result in results.items():
                if isinstance(result, OffsetAndTimestamp):
                    found[partition] = result if result.offset >= 0 else None
                    pending.pop(partition, None)
                elif isinstance(result, KafkaError) and not (result.retriable
                                                             or is_stale_metadata_error(result.error_code)):
                    raise result
            if not pending:
                return found
            if monotonic_ms() >= deadline:
                raise KafkaTimeoutError(f"offsets of {sorted(map(str, pending))} not found within {timeout_ms:.0f} ms")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            with contextlib.suppress(KafkaError, OSError):
                await asyncio.wait_for(self.client.refresh_metadata(), max(0.001, (deadline - monotonic_ms()) / 1000))

    async def _list_offsets_once(self, specs: Iterable[TopicPartition] | Mapping[TopicPartition, int]
                                 ) -> dict[TopicPartition, OffsetAndTimestamp | BaseException]:
        """One ListOffsets per leader; each partition's answer or its error."""
        specs = dict(specs)  # type: ignore[arg-type]
        metadata = self.client.metadata
        by_node: dict[int, list[TopicPartition]] = {}
        results: dict[TopicPartition, OffsetAndTimestamp | BaseException] = {}
        for partition in specs:
            leader = metadata.leader_for(partition)
            if leader is None:
                self.client.request_metadata_update()
                results[partition] = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{partition} has no known leader")
            else:
                by_node.setdefault(leader, []).append(partition)
        isolation_level = 1 if self.read_committed else 0

        async def ask(node_id: int, partitions: list[TopicPartition]) -> None:
            topics: dict[str, list[ListOffsetsPartition]] = {}
            for partition in partitions:
                topics.setdefault(partition.topic, []).append(ListOffsetsPartition(
                    partition_index=partition.partition, current_leader_epoch=metadata.leader_epoch(partition),
                    timestamp=specs[partition]))
            request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                                         topics=[ListOffsetsTopic(name, items) for name, items in topics.items()])
            try:
                response: ListOffsetsResponse = await self.client.send(node_id, request, min_version=1)
            except (KafkaError, OSError) as exc:
                self.client.request_metadata_update()
                for partition in partitions:
                    results[partition] = exc
                return
            for topic in response.topics:
                for item in topic.partitions:
                    partition = TopicPartition(topic.name, item.partition_index)
                    if item.error_code != ErrorCode.NONE:
                        if is_stale_metadata_error(item.error_code):
                            self.client.request_metadata_update()
                        results[partition] = error_for(item.error_code, context=str(partition))
                    else:
                        results[partition] = OffsetAndTimestamp(
                            item.offset, item.timestamp, item.leader_epoch if item.leader_epoch >= 0 else None)

        await asyncio.gather(*(ask(node_id, partitions) for node_id, partitions in by_node.items()))
        return results
