"""The asyncio consumer.

::

    async with Consumer({"bootstrap.servers": "localhost:9092", "group.id": "app"},
                        auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["events"])                      # or pattern=r"events-.*", listener=...
        records = await consumer.poll(timeout_ms=1000)      # ConsumerRecords: iterate, or .records(tp)
        async for record in consumer:                       # or one record at a time
            ...
        await consumer.commit()                             # what was consumed; or explicit offsets

A consumer either subscribes (its group assigns partitions: :mod:`.classic` or, with
``group.protocol=consumer``, :mod:`.membership`) or is assigned partitions with ``assign()``.
``poll()`` does the work a Kafka user expects of it: it keeps the group membership current (rebalances
and the rebalance listener run inside it), finds the positions of new partitions (the committed
offset, else ``auto.offset.reset``), auto-commits, and returns up to ``max.poll.records`` records
that the :class:`~.fetcher.Fetcher` has already fetched in the background. Records returned by
``poll()`` count as consumed at once; the async iterator counts each record as it hands it out, so a
commit (or a close with auto-commit) never covers a record the application has not seen.

Methods that only change local state (``subscribe``, ``assign``, ``seek``, ``pause``...) are plain
methods; those that talk to brokers are coroutines. Configs use Kafka's key names, as a dict and/or
keywords (``auto_offset_reset="earliest"``); an unknown key is refused by name.
"""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from kafkalite.client.admin_types import OffsetAndMetadata
from kafkalite.client.config import ConfigError, ConsumerConfig, parse_config
from kafkalite.client.consumer.classic import ClassicCoordinator, assignors_from_config
from kafkalite.client.consumer.fetcher import Fetcher, OffsetAndTimestamp, Wakeup
from kafkalite.client.consumer.group import GroupCoordinatorBase, OffsetCommitCallback
from kafkalite.client.consumer.records import ConsumerRecord, ConsumerRecords
from kafkalite.client.consumer.subscription import OffsetResetStrategy, PartitionState, SubscriptionState
from kafkalite.client.errors import ClientClosedError, KafkaTimeoutError, NoOffsetForPartitionError
from kafkalite.client.metadata import TopicPartition
from kafkalite.client.network import NetworkClient, monotonic_ms
from kafkalite.client.producer.transactions import ConsumerGroupMetadata

__all__ = ["Consumer"]

_Chunk = tuple[PartitionState, list[ConsumerRecord], int, int | None]
_CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def _partition(value: Any) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    try:
        topic, partition = value
    except (TypeError, ValueError):
        raise TypeError(f"a partition is a TopicPartition or a (topic, partition) pair, not {value!r}") from None
    return TopicPartition(str(topic), int(partition))


def _offsets(offsets: Mapping[Any, int | OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
    normalized = {}
    for key, value in offsets.items():
        if isinstance(value, OffsetAndMetadata):
            normalized[_partition(key)] = value
        elif isinstance(value, int) and not isinstance(value, bool):
            normalized[_partition(key)] = OffsetAndMetadata(value)
        else:
            raise TypeError(f"an offset is an int or an OffsetAndMetadata, not {value!r}")
    return normalized


class Consumer:
    """The asyncio Kafka consumer. ``Consumer(config_dict, **keywords)`` with Kafka's config keys."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self.config = config_ = parse_config(ConsumerConfig, config, **keywords)
        given = {key.replace("_", ".") for key in [*(config or {}), *keywords]}
        if config_.group_id is None:
            if config_.enable_auto_commit and "enable.auto.commit" in given:
                raise ConfigError("enable.auto.commit needs a group.id")
            if config_.group_instance_id is not None:
                raise ConfigError("group.instance.id needs a group.id")
            self.config = config_ = parse_config(ConsumerConfig, config, **{**keywords, "enable_auto_commit": False})
        self.classic = config_.group_protocol == "classic"
        if not self.classic:
            named = [key for key in _CLASSIC_ONLY if key in given]
            if named:
                raise ConfigError(f"{', '.join(named)} apply to group.protocol=classic only; with group.protocol="
                                  "consumer the coordinator decides (see group.remote.assignor)")
        self._assignors = assignors_from_config(config_.partition_assignment_strategy) if self.classic else []
        self.subscriptions = SubscriptionState(OffsetResetStrategy(config_.auto_offset_reset))
        self._client: NetworkClient | None = None
        self._fetcher: Fetcher | None = None
        self._coordinator: GroupCoordinatorBase | None = None
        self._wakeup: Wakeup | None = None
        self._start_lock: asyncio.Lock | None = None
        self._closed = False
        self._iterator: collections.deque[_Chunk] = collections.deque()
        self._iter_records: list[ConsumerRecord] = []
        self._iter_state: PartitionState | None = None
        self._iter_end = 0
        self._iter_index = 0
        self._committed_task: asyncio.Task[dict[TopicPartition, OffsetAndMetadata | None]] | None = None
        self._committed_for: frozenset[TopicPartition] = frozenset()

    # --- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and fetch metadata (the first call that needs the cluster does this anyway)."""
        if self._client is not None:
            return
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._client is not None:
                return
            config = self.config
            client = NetworkClient(config, allow_auto_topic_creation=config.allow_auto_create_topics)
            await client.start(config.default_api_timeout_ms)
            wakeup = Wakeup()
            fetcher = Fetcher(client, self.subscriptions, config, wakeup)
            coordinator: GroupCoordinatorBase | None = None
            if config.group_id is not None:
                if self.classic:
                    coordinator = ClassicCoordinator(client, self.subscriptions, fetcher, config, self._assignors)
                else:
                    from kafkalite.client.consumer.membership import ConsumerGroupCoordinator

                    coordinator = ConsumerGroupCoordinator(client, self.subscriptions, fetcher, config)
                coordinator.wakeup = wakeup
            self._wakeup, self._fetcher, self._coordinator = wakeup, fetcher, coordinator
            self._client = client
            self._follow_metadata()
            fetcher.start()

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), leave the group (the listener is told), and disconnect.

        ``timeout`` seconds bound the commit and the leave (default ``default.api.timeout.ms``).
        """
        if self._closed:
            return
        self._closed = True
        self._settle_iterator()
        deadline = monotonic_ms() + (timeout * 1000 if timeout is not None else self.config.default_api_timeout_ms)
        try:
            if self._committed_task is not None:
                self._committed_task.cancel()
            if self._coordinator is not None:
                await self._coordinator.close(deadline)
        finally:
            if self._fetcher is not None:
                await self._fetcher.close()
            if self._client is not None:
                await self._client.close()
            if self._wakeup is not None:
                self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    async def _started(self) -> tuple[NetworkClient, Fetcher]:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        if self._client is None:
            await self.start()
        assert self._client is not None and self._fetcher is not None
        return self._client, self._fetcher

    def _group(self) -> GroupCoordinatorBase:
        if self.config.group_id is None:
            raise ValueError("this needs a group.id in the consumer's config")
        if self._coordinator is None:
            raise ClientClosedError("the consumer is not started")
        return self._coordinator

    def _deadline(self, timeout_ms: float | None) -> float:
        return monotonic_ms() + (timeout_ms if timeout_ms is not None else self.config.default_api_timeout_ms)

    def _follow_metadata(self) -> None:
        client = self._client
        if client is None:
            return
        client.want_all_topics = self.subscriptions.pattern is not None
        topics = set(self.subscriptions.topics) | {partition.topic for partition in self.subscriptions.assignment}
        client.add_topics(topics)
        if client.want_all_topics:
            client.request_metadata_update()

    def _changed(self) -> None:
        self._follow_metadata()
        if self._fetcher is not None:
            self._fetcher.wakeup()

    # --- subscribing and assigning -------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str] | None = None, listener: Any = None, *,
                  pattern: str | re.Pattern[str] | None = None) -> None:
        """Join the group for these topics (a list, or one name), or for every topic matching ``pattern``.

        ``listener`` (a :class:`~.group.ConsumerRebalanceListener`, or any object with some of its
        methods) is told of partitions revoked, assigned and lost; its methods run inside ``poll()``.
        """
        self._check_open()
        if self.config.group_id is None:
            raise ValueError("subscribe() needs a group.id in the consumer's config (or use assign())")
        if isinstance(topics, re.Pattern):
            topics, pattern = None, topics
        if pattern is not None:
            if topics is not None:
                raise ValueError("subscribe() takes topics or a pattern, not both")
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.subscriptions.subscribe_pattern(compiled, listener)
            self._match_pattern()
        else:
            names = [topics] if isinstance(topics, str) else list(topics or ())
            if not names:
                raise ValueError("subscribe() needs at least one topic or a pattern (unsubscribe() to stop)")
            for name in names:
                if not isinstance(name, str) or not name.strip():
                    raise ValueError(f"topic names are non-empty strings, not {name!r}")
            self.subscriptions.subscribe(names, listener)
        self._changed()

    def _match_pattern(self) -> None:
        """A pattern subscription follows the topics the cluster has now."""
        if self.subscriptions.pattern is None or self._client is None:
            return
        exclude_internal = self.config.exclude_internal_topics
        matched = {name for name, info in self._client.metadata.topics.items()
                   if self.subscriptions.matches(name) and not (exclude_internal and info.is_internal)
                   and info.partitions}
        self.subscriptions.change_topics(matched)

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matches now)."""
        return set(self.subscriptions.topics) if self.subscriptions.is_subscribed else set()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions, without group membership (commits still go to ``group.id``)."""
        self._check_open()
        self._sync_iterator()
        wanted = [_partition(partition) for partition in partitions]
        if self.subscriptions.is_subscribed:
            raise ValueError("assign() and subscribe() do not mix: call unsubscribe() first")
        if self._coordinator is not None and self.config.enable_auto_commit:
            offsets = self._coordinator.consumed_offsets()
            if offsets:
                self._coordinator.commit_async(offsets)
        if not wanted:
            self.subscriptions.unsubscribe()
        else:
            self.subscriptions.assign_from_user(wanted)
        self._drop_iterator()
        self._changed()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads now."""
        return self.subscriptions.assigned_partitions()

    async def unsubscribe(self) -> None:
        """Give up every partition (the listener is told), leave the group, and stop reading."""
        self._check_open()
        self._settle_iterator()
        if self._coordinator is not None and self.subscriptions.is_subscribed:
            await self._coordinator.on_unsubscribe(self._deadline(None))
        self.subscriptions.unsubscribe()
        self._drop_iterator()
        if self._fetcher is not None:
            self._fetcher.buffer.clear()
        self._changed()

    # --- positions -----------------------------------------------------------------------------------

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Read ``partition`` from ``offset`` on (the next poll)."""
        self._check_open()
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"an offset to seek to is an int >= 0, not {offset!r}")
        topic_partition = _partition(partition)
        state = self.subscriptions.state(topic_partition)
        self._before_move(topic_partition)
        state.seek(offset)
        self._changed()

    def _before_move(self, partition: TopicPartition) -> None:
        self._settle_iterator()
        self._drop_iterator(partition)
        if self._fetcher is not None:
            self._fetcher.drop_buffered(partition)

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Read from the log start (of these partitions, or all assigned), looked up on the next poll."""
        self._seek_to(OffsetResetStrategy.EARLIEST, partitions)

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Read from the log end (of these partitions, or all assigned), looked up on the next poll."""
        self._seek_to(OffsetResetStrategy.LATEST, partitions)

    def _seek_to(self, strategy: OffsetResetStrategy, partitions: tuple[Any, ...]) -> None:
        self._check_open()
        targets = [_partition(partition) for partition in partitions] or list(self.subscriptions.assignment)
        for partition in targets:
            state = self.subscriptions.state(partition)
            self._before_move(partition)
            state.request_reset(strategy)
        self._changed()

    async def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record ``poll()`` returns for ``partition`` (looked up if not yet known)."""
        topic_partition = _partition(partition)
        self.subscriptions.state(topic_partition)
        await self._started()
        self._sync_iterator()
        deadline = self._deadline(timeout_ms)
        while True:
            state = self.subscriptions.state(topic_partition)
            if state.has_position:
                assert state.position is not None
                return state.position
            wakeup = self._wakeup
            assert wakeup is not None and self._fetcher is not None
            wakeup.clear()
            await self._update_positions(deadline)
            if state.has_position:
                continue
            self._fetcher.raise_errors()
            left = deadline - monotonic_ms()
            if left <= 0:
                raise KafkaTimeoutError(f"the position of {topic_partition} is not known in time")
            await wakeup.wait(min(left, 100) / 1000)

    async def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]] | TopicPartition,
                        timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets for these partitions (None where nothing is committed)."""
        await self._started()
        wanted = [partitions] if isinstance(partitions, TopicPartition) else [_partition(item) for item in partitions]
        return await self._group().fetch_committed(wanted, self._deadline(timeout_ms))

    async def offsets_for_times(self, timestamps: Mapping[Any, int], timeout_ms: float | None = None
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp (ms), with that record's timestamp; None past the end."""
        _, fetcher = await self._started()
        wanted = {_partition(key): int(value) for key, value in timestamps.items()}
        for partition, timestamp in wanted.items():
            if timestamp < 0:
                raise ValueError(f"the timestamp for {partition} must be >= 0, not {timestamp}")
        return await fetcher.list_offsets(wanted, self._deadline(timeout_ms) - monotonic_ms())

    async def beginning_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                                timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        return await self._ends(partitions, OffsetResetStrategy.EARLIEST, timeout_ms)

    async def end_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The high watermark (the last stable offset with ``read_committed``) of each partition."""
        return await self._ends(partitions, OffsetResetStrategy.LATEST, timeout_ms)

    async def _ends(self, partitions: Iterable[Any], strategy: OffsetResetStrategy,
                    timeout_ms: float | None) -> dict[TopicPartition, int]:
        _, fetcher = await self._started()
        wanted = {_partition(partition): strategy.timestamp for partition in partitions}
        found = await fetcher.list_offsets(wanted, self._deadline(timeout_ms) - monotonic_ms())
        return {partition: result.offset if result is not None else -1 for partition, result in found.items()}

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark last seen in a Fetch response (None before the first)."""
        value = self.subscriptions.state(_partition(partition)).high_watermark
        return value if value >= 0 else None

    def pause(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Stop fetching and returning records of these partitions until ``resume()``."""
        for partition in partitions:
            self.subscriptions.state(_partition(partition)).paused = True

    def resume(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        for partition in partitions:
            self.subscriptions.state(_partition(partition)).paused = False
        self._changed()

    def paused(self) -> set[TopicPartition]:
        return {partition for partition, state in self.subscriptions.assignment.items() if state.paused}

    async def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[int]:
        client, _ = await self._started()
        return list(range(await client.wait_for_topic(topic, self._deadline(timeout_ms) - monotonic_ms())))

    async def list_topics(self) -> dict[str, int]:
        """Every topic of the cluster (internal ones left out) and its partition count."""
        client, _ = await self._started()
        await client.refresh_metadata(all_topics=True)
        return {name: len(info.partitions) for name, info in client.metadata.topics.items()
                if not info.is_internal and info.partitions}

    # --- polling -------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1000, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched for the assigned partitions, waiting up to ``timeout_ms`` for some.

        Rebalances, the rebalance listener, position lookups and auto-commits happen in here.
        """
        self._settle_iterator()
        chunks = await self._poll_chunks(timeout_ms, max_records or self.config.max_poll_records)
        by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
        for state, records, end, epoch in chunks:
            state.position = end
            if records:
                state.position_leader_epoch = epoch
                known = by_partition.get(state.topic_partition)
                if known is None:
                    by_partition[state.topic_partition] = records
                else:
                    known.extend(records)
        return ConsumerRecords(by_partition)

    async def _poll_chunks(self, timeout_ms: float, max_records: int) -> list[_Chunk]:
        _, fetcher = await self._started()
        self._sync_iterator()
        wakeup = self._wakeup
        assert wakeup is not None
        deadline = monotonic_ms() + max(0.0, timeout_ms)
        while True:
            self._check_open()
            wakeup.clear()
            fetcher.raise_errors()
            if self._coordinator is not None:
                if self.subscriptions.pattern is not None:
                    self._match_pattern()
                    self._follow_metadata()
                await self._coordinator.poll(deadline)
            elif not self.subscriptions.assignment and not self.subscriptions.is_user_assigned:
                raise ValueError("the consumer is neither subscribed to topics nor assigned partitions")
            await self._update_positions(deadline)
            chunks = fetcher.collect(max_records)
            if any(records for _, records, _, _ in chunks):
                return chunks
            for state, _, end, _ in chunks:
                state.position = end
            left = deadline - monotonic_ms()
            if left <= 0:
                return []
            await wakeup.wait(left / 1000)

    async def _update_positions(self, deadline_ms: float) -> None:
        """New partitions start at the committed offset, else by ``auto.offset.reset``."""
        subscriptions = self.subscriptions
        missing = subscriptions.missing_positions()
        if missing:
            if self._coordinator is not None:
                committed = await self._committed_offsets(missing, deadline_ms)
                if committed is None:
                    return
                for state in missing:
                    if subscriptions.assignment.get(state.topic_partition) is not state or state.position is not None:
                        continue
                    found = committed.get(state.topic_partition)
                    if found is not None:
                        state.seek(found.offset, found.leader_epoch if found.leader_epoch >= 0 else None)
                    else:
                        state.request_reset(subscriptions.default_reset)
            else:
                for state in missing:
                    state.request_reset(subscriptions.default_reset)
            assert self._fetcher is not None
            self._fetcher.wakeup()
        stuck = [state.topic_partition for state in subscriptions.awaiting_reset()
                 if state.reset_strategy is OffsetResetStrategy.NONE]
        if stuck:
            for partition in stuck:
                subscriptions.assignment[partition].reset_strategy = None
            raise NoOffsetForPartitionError(
                f"no committed offset for {sorted(map(str, stuck))} and auto.offset.reset is none", list(stuck))

    async def _committed_offsets(self, missing: list[PartitionState], deadline_ms: float
                                 ) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        """The committed offsets of ``missing``, waiting until ``deadline_ms`` at most (None: not yet).

        The lookup runs as a task: a ``poll()`` that runs out of time leaves it going, and a later
        ``poll()`` for the same partitions picks up its answer, as the Java client does.
        """
        assert self._coordinator is not None
        wanted = frozenset(state.topic_partition for state in missing)
        task = self._committed_task
        if task is None or self._committed_for != wanted:
            task = self._committed_task = asyncio.get_running_loop().create_task(self._coordinator.fetch_committed(
                wanted, monotonic_ms() + self.config.default_api_timeout_ms))
            self._committed_for = wanted
        if not task.done():
            await asyncio.wait({task}, timeout=max(0.0, (deadline_ms - monotonic_ms()) / 1000))
            if not task.done():
                return None
        self._committed_task = None
        return task.result()

    # --- the iterator --------------------------------------------------------------------------------

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        records = self._iter_records
        index = self._iter_index
        if index < len(records):  # the hot path: positions follow lazily (_sync_iterator)
            self._iter_index = index + 1
            return records[index]
        return await self._next_chunk()

    async def _next_chunk(self) -> ConsumerRecord:
        self._sync_iterator()
        while True:
            if self._closed:
                raise StopAsyncIteration
            while self._iterator:
                state, records, end, epoch = self._iterator.popleft()
                if self.subscriptions.assignment.get(state.topic_partition) is not state:
                    continue
                if not records:
                    state.position = end
                    continue
                if records[0].offset < (state.position or 0):
                    continue  # the partition moved meanwhile (a seek)
                if epoch is not None:
                    state.position_leader_epoch = epoch
                self._iter_state, self._iter_records, self._iter_end = state, records, end
                self._iter_index = 1
                return records[0]
            try:
                chunks = await self._poll_chunks(1000, self.config.max_poll_records)
            except ClientClosedError:
                raise StopAsyncIteration from None
            self._iterator.extend(chunks)

    def _sync_iterator(self) -> None:
        """Move the position of the partition the iterator reads to just after the last record it handed out.

        The iterator hands records out without touching positions; everything that reads a position
        (polls, commits, ``position()``, seeks, close) calls this first.
        """
        state = self._iter_state
        index = self._iter_index
        if state is None or index == 0:
            return
        records = self._iter_records
        if self.subscriptions.assignment.get(state.topic_partition) is state:
            state.position = records[index - 1][2] + 1 if index < len(records) else self._iter_end
        if index >= len(records):
            self._iter_state = None
            self._iter_records = []
            self._iter_index = 0

    def _settle_iterator(self) -> None:
        """Records the iterator holds but has not handed out are not consumed: fetch them again later."""
        self._sync_iterator()
        pending: dict[int, PartitionState] = {}
        if self._iter_state is not None and self._iter_index < len(self._iter_records):
            pending[id(self._iter_state)] = self._iter_state
        for state, records, _, _ in self._iterator:
            if records:
                pending[id(state)] = state
        for state in pending.values():
            if self.subscriptions.assignment.get(state.topic_partition) is state and state.position is not None:
                if self._fetcher is not None:
                    self._fetcher.drop_buffered(state.topic_partition)
                state.fetch_offset = state.position
        self._iterator.clear()
        self._iter_state = None
        self._iter_records = []
        self._iter_index = 0
        if pending and self._fetcher is not None:
            self._fetcher.wakeup()

    def _apply_positions(self, positions: list[tuple[PartitionState, int]], refetch: list[PartitionState]) -> None:
        """For the blocking facade's iterator: what it handed out, and partitions whose rest it dropped."""
        for state, position in positions:
            if self.subscriptions.assignment.get(state.topic_partition) is state:
                state.position = position
        for state in refetch:
            if self.subscriptions.assignment.get(state.topic_partition) is state and state.position is not None:
                if self._fetcher is not None:
                    self._fetcher.drop_buffered(state.topic_partition)
                    self._fetcher.wakeup()
                state.fetch_offset = state.position

    def _drop_iterator(self, partition: TopicPartition | None = None) -> None:
        if partition is None:
            self._iterator.clear()
            self._iter_records = []
            self._iter_index = 0
            return
        self._iterator = collections.deque(chunk for chunk in self._iterator if chunk[0].topic_partition != partition)
        if self._iter_state is not None and self._iter_state.topic_partition == partition:
            self._iter_records = []
            self._iter_index = 0

    # --- commits -------------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
                     timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` (partition -> the next offset to read), or every position; wait for the answer.

        Raises :class:`~kafkalite.client.errors.CommitFailedError` when the group rebalanced meanwhile.
        """
        await self._started()
        group = self._group()
        self._sync_iterator()
        wanted = _offsets(offsets) if offsets is not None else group.consumed_offsets()
        await group.commit(wanted, self._deadline(timeout_ms))

    def commit_async(self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
                     callback: OffsetCommitCallback | None = None) -> asyncio.Future[None]:
        """Send a commit and return at once: a future, and ``callback(offsets, error)`` when it is answered."""
        self._check_open()
        self._sync_iterator()
        wanted = _offsets(offsets) if offsets is not None else None

        async def run() -> None:
            await self._started()
            group = self._group()
            await group.commit_async(wanted if wanted is not None else group.consumed_offsets(), callback)

        return asyncio.get_running_loop().create_task(run())

    def group_metadata(self) -> ConsumerGroupMetadata:
        """What ``Producer.send_offsets_to_transaction`` needs to commit offsets for this consumer's group."""
        if self._coordinator is not None:
            return self._coordinator.group_metadata()
        if self.config.group_id is None:
            raise ValueError("the consumer has no group.id")
        return ConsumerGroupMetadata(self.config.group_id)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
