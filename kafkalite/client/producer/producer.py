"""The asyncio producer: ``send()`` into the accumulator, a sender task to the brokers.

::

    async with Producer({"bootstrap.servers": "localhost:9092", "linger.ms": 5}) as producer:
        future = await producer.send("events", b"value", key=b"key")   # waits only for buffer space
        metadata = await future                                        # RecordMetadata
        metadata = await producer.send_and_wait("events", b"other")
        futures = await producer.send_many("events", [b"a", b"b", b"c"])  # one call, many records

``send()`` validates and serializes the record, picks its partition (:mod:`.partitioner`), appends
it to its partition's open batch (:mod:`.accumulator`) and returns a :class:`RecordFuture`; the
:class:`~.sender.Sender` task sends batches as they fill up or linger out. The await in ``send()``
blocks only for metadata of a new topic or for buffer space, each at most ``max.block.ms``.
Transactions: :meth:`Producer.init_transactions` once, then ``begin_transaction()``, sends,
``send_offsets_to_transaction()``, and ``commit_transaction()`` or ``abort_transaction()``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from kafkalite.client.config import ConfigError, ProducerConfig, parse_config
from kafkalite.client.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TransactionAbortableError,
    TransactionStateError,
)
from kafkalite.client.metadata import ClusterMetadata, TopicPartition
from kafkalite.client.network import NetworkClient, monotonic_ms
from kafkalite.client.producer.accumulator import ProducerBatch, RecordAccumulator, RecordFuture, RecordMetadata
from kafkalite.client.producer.partitioner import Partitioner
from kafkalite.client.producer.sender import Sender
from kafkalite.client.producer.transactions import ConsumerGroupMetadata, TransactionManager, TransactionState
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_writer import estimate_record_size

__all__ = ["Producer", "RecordFuture", "RecordMetadata"]

log = logging.getLogger("kafkalite.client")
_time_ns = time.time_ns

Headers = Mapping[str, Any] | Iterable[tuple[str, Any]]
# A topic's partitions, their accumulator deques, and the metadata version they were read at.
_TopicEntry = tuple[list[TopicPartition], list[collections.deque[ProducerBatch]], int]
_BYTES_TYPES = (bytes, bytearray, memoryview)


def _to_bytes(what: str, value: Any) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, _BYTES_TYPES):
        return bytes(value)
    raise TypeError(f"the record {what} must be bytes, str or None (or configure {what}.serializer), "
                    f"not {type(value).__name__}")


def _normalize_headers(headers: Headers | None) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    normalized = []
    for item in items:
        try:
            header_key, header_value = item
        except (TypeError, ValueError):
            raise TypeError(f"a header is a (str, bytes) pair, not {item!r}") from None
        if not isinstance(header_key, str):
            raise TypeError(f"a header key must be str, not {type(header_key).__name__}")
        normalized.append((header_key, _to_bytes("header value", header_value)))
    return normalized


class Producer:
    """The asyncio Kafka producer. ``Producer(config_dict, **keywords)`` with Kafka's config keys."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        self.config = config_ = parse_config(ProducerConfig, config, **keywords)
        given = {key.replace("_", ".") for key in [*(config or {}), *keywords]}
        idempotent = config_.enable_idempotence
        if config_.transactional_id is not None:
            if "enable.idempotence" in given and not idempotent:
                raise ConfigError("transactional.id needs enable.idempotence=true")
            idempotent = True
        if idempotent:
            problems = []
            if config_.acks != -1:
                problems.append("acks=all")
            if config_.max_in_flight_requests_per_connection > 5:
                problems.append("max.in.flight.requests.per.connection <= 5")
            if config_.retries == 0:
                problems.append("retries > 0")
            if problems:
                if "enable.idempotence" in given or config_.transactional_id is not None:
                    raise ConfigError(f"enable.idempotence=true needs {', '.join(problems)}")
                idempotent = False  # the default gives way to explicit settings, as in the Java client
        self.idempotent = idempotent
        self._key_serializer = config_.key_serializer
        self._value_serializer = config_.value_serializer
        self._partitioner = Partitioner(config_.partitioner_class, config_.partitioner_ignore_keys)
        self._client: NetworkClient | None = None
        self._accumulator: RecordAccumulator | None = None
        self._sender: Sender | None = None
        self._transactions: TransactionManager | None = None
        self._sender_task: asyncio.Task[None] | None = None
        self._topics: dict[str, _TopicEntry] = {}
        self._metadata: ClusterMetadata | None = None
        self._transactional = config_.transactional_id is not None
        self._start_lock: asyncio.Lock | None = None
        self._closed = False
        self._max_record_size = min(config_.max_request_size, config_.buffer_memory)

    # --- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and fetch metadata (``send()`` does this on first use)."""
        if self._sender_task is not None:
            return
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._sender_task is not None:
                return
            config = self.config
            client = NetworkClient(config, allow_auto_topic_creation=True)
            await client.start(config.max_block_ms)
            loop = asyncio.get_running_loop()
            accumulator = RecordAccumulator(
                batch_size=config.batch_size, linger_ms=config.linger_ms, buffer_memory=config.buffer_memory,
                retry_backoff_ms=config.retry_backoff_ms, delivery_timeout_ms=config.delivery_timeout_ms,
                create_future=loop.create_future)
            transactions = TransactionManager(
                client, transactional_id=config.transactional_id, transaction_timeout_ms=config.transaction_timeout_ms,
                max_block_ms=config.max_block_ms, retry_backoff_ms=config.retry_backoff_ms, idempotent=self.idempotent)
            self._client, self._accumulator, self._transactions = client, accumulator, transactions
            self._metadata = client.metadata
            self._sender = Sender(client, accumulator, transactions, config)
            self._sender_task = loop.create_task(self._sender.run())

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is buffered (waiting at most ``timeout`` seconds, None: until delivered) and stop.

        Records still unsent when the time is up fail. ``close(0)`` fails them at once.
        """
        if self._closed:
            return
        self._closed = True
        sender, task = self._sender, self._sender_task
        if sender is not None and task is not None:
            sender.running = False
            if timeout == 0:
                sender.force_close = True
            sender.wakeup()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except TimeoutError:
                sender.force_close = True
                sender.wakeup()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                assert self._accumulator is not None
                self._accumulator.abort_all(KafkaTimeoutError(
                    f"the producer was closed before the record was sent (close timeout {timeout} s)"))
        if self._client is not None:
            await self._client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    async def flush(self, timeout: float | None = None) -> None:
        """Send every buffered record now and wait until each is delivered or failed."""
        await self._ensure_started()
        accumulator, sender = self._accumulator, self._sender
        assert accumulator is not None and sender is not None
        pending = [batch.future for batch in accumulator.incomplete]
        if not pending:
            return
        accumulator.flushing += 1
        sender.wakeup()
        try:
            done, not_done = await asyncio.wait(pending, timeout=timeout)
            if not_done:
                raise KafkaTimeoutError(f"flush() timed out after {timeout} s with {len(not_done)} batch(es) pending")
        finally:
            accumulator.flushing -= 1

    async def _ensure_started(self) -> None:
        if self._sender_task is None:
            await self.start()
        elif self._closed:
            raise ClientClosedError("the producer is closed")

    # --- sending -------------------------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic`` (waiting up to ``max.block.ms`` for its metadata)."""
        await self._ensure_started()
        assert self._client is not None
        count = await self._client.wait_for_topic(topic, self.config.max_block_ms)
        return list(range(count))

    async def _topic_partitions_for(self, topic: str) -> list[TopicPartition]:
        return (await self._topic_entry(topic))[0]

    async def _topic_entry(self, topic: str) -> _TopicEntry:
        """The topic's partitions and their accumulator deques, as of the current metadata."""
        client, accumulator = self._client, self._accumulator
        assert client is not None and accumulator is not None
        count = client.metadata.partition_count(topic)
        if count is None:
            if not isinstance(topic, str) or not topic:
                raise TypeError(f"the topic must be a non-empty str, not {topic!r}")
            count = await client.wait_for_topic(topic, self.config.max_block_ms)
        entry = self._topics.get(topic)
        if entry is None or len(entry[0]) != count:
            partitions = [TopicPartition(topic, index) for index in range(count)]
            entry = (partitions, [accumulator.deque_for(partition) for partition in partitions], 0)
        entry = self._topics[topic] = (entry[0], entry[1], client.metadata.version)
        return entry

    async def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                   headers: Headers | None = None, timestamp: int | None = None) -> RecordFuture:
        """Buffer one record; a future resolving to its :class:`RecordMetadata`.

        Keys and values are bytes, str (UTF-8) or None, or anything the configured serializers take.
        Headers are a dict or (str, bytes) pairs. ``timestamp`` is ms since the epoch (default: now).
        """
        if self._sender_task is None or self._closed:
            await self._ensure_started()
        if self._transactional:
            self._transactions.check_can_send()  # type: ignore[union-attr]
        if self._key_serializer is not None:
            key = self._key_serializer(key) if key is not None else None
        if self._value_serializer is not None:
            value = self._value_serializer(value) if value is not None else None
        if key is not None and type(key) is not bytes:
            key = _to_bytes("key", key)
        if value is not None and type(value) is not bytes:
            value = _to_bytes("value", value)
        header_list = _normalize_headers(headers) if headers else None
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif type(timestamp) is not int:
            if isinstance(timestamp, bool) or not isinstance(timestamp, int):
                raise TypeError(f"the timestamp must be an int (ms since the epoch), not {type(timestamp).__name__}")
            timestamp = int(timestamp)
        entry = self._topics.get(topic)
        if entry is None or entry[2] != self._metadata.version:  # type: ignore[union-attr]
            entry = await self._topic_entry(topic)
        partitions, queues, _ = entry
        count = len(partitions)
        partitioner = self._partitioner
        if partition is None:
            sticky = partitioner.sticky.get(topic) if key is None else None
            index = sticky if sticky is not None and sticky < count else partitioner.partition(topic, key, count, ())
        else:
            if type(partition) is not int:
                raise TypeError(f"the partition must be an int, not {type(partition).__name__}")
            if not 0 <= partition < count:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"partition {partition} is not in the range [0, {count}) of topic {topic!r}")
            index = partition
        accumulator = self._accumulator
        future = accumulator.append_to(queues[index], timestamp, key, value, header_list)  # type: ignore[union-attr]
        if future is not None:
            return future
        if partition is None and partitioner.uses_sticky(key):
            index = partitioner.next_sticky(topic, index, count, self._metadata.available_partitions(topic))  # type: ignore[union-attr]
            future = accumulator.append_to(queues[index], timestamp, key, value, header_list)  # type: ignore[union-attr]
            if future is not None:
                return future
        return await self._append_new_batch(partitions[index], timestamp, key, value, header_list)

    async def _append_new_batch(self, topic_partition: TopicPartition, timestamp: int, key: bytes | None,
                                value: bytes | None, headers: list[tuple[str, bytes | None]] | None) -> RecordFuture:
        accumulator, sender = self._accumulator, self._sender
        assert accumulator is not None and sender is not None
        record_size = 61 + estimate_record_size(key, value, headers)
        if record_size > self._max_record_size:
            raise RecordTooLargeError(
                f"a record of about {record_size} bytes for {topic_partition} is larger than max.request.size "
                f"({self.config.max_request_size}) or buffer.memory ({self.config.buffer_memory})")
        size = accumulator.batch_bytes_for(key, value, headers)
        size = min(size, accumulator.pool.total)
        if not accumulator.pool.try_reserve(size):
            sender.wakeup()
            await accumulator.pool.reserve(size, self.config.max_block_ms)
            if self._closed:
                accumulator.pool.release(size)
                raise ClientClosedError("the producer was closed while send() waited for buffer space")
            future = accumulator.append(topic_partition, timestamp, key, value, headers)
            if future is not None:  # another batch opened meanwhile
                accumulator.pool.release(size)
                return future
        accumulator.new_batch(topic_partition, size, monotonic_ms())
        transactions = self._transactions
        if transactions is not None and transactions.transactional_id is not None:
            transactions.maybe_add_partition(topic_partition)
        future = accumulator.append(topic_partition, timestamp, key, value, headers)
        assert future is not None
        sender.wakeup()
        # Let the sender run once per batch: a caller sending in a tight loop never yields otherwise,
        # and full batches would wait for the end of its loop instead of going out while it goes on.
        await asyncio.sleep(0)
        return future

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                            headers: Headers | None = None, timestamp: int | None = None) -> RecordMetadata:
        """Send one record and wait for its :class:`RecordMetadata`."""
        future = await self.send(topic, value, key, partition, headers, timestamp)
        return await future

    async def send_many(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None = None,
                        partition: int | None = None, timestamp: int | None = None) -> list[RecordFuture]:
        """Buffer many records of one topic in one call (the fast path); one future per batch used.

        ``values`` (and ``keys``, of the same length) are bytes or str. Keyless records without a
        partition go to the sticky partition, filling whole batches at a time; keyed records are
        hashed each. Returns the futures of the batches used, each resolving to the
        :class:`RecordMetadata` of the first record that call put in it (``offset`` + i is the i-th).
        """
        await self._ensure_started()
        transactions = self._transactions
        if transactions is not None and transactions.transactional_id is not None:
            transactions.check_can_send()
        if keys is not None and partition is None and self._key_serializer is None and self._value_serializer is None:
            return await self._send_many_keyed(topic, values, keys, timestamp)
        if keys is not None or partition is not None or self._value_serializer is not None:
            futures = []
            for index, value in enumerate(values):
                futures.append(await self.send(topic, value, None if keys is None else keys[index], partition,
                                               None, timestamp))
            return futures
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        values = [value if type(value) is bytes else _to_bytes("value", value) for value in values]
        partitions = await self._topic_partitions_for(topic)
        futures = []
        position, total = 0, len(values)
        sender = self._sender
        assert sender is not None
        while position < total:
            index = self._partitioner.partition(topic, None, len(partitions), ())
            position, full = await self._fill_batch(partitions[index], timestamp, None, values, position, futures)
            if full:  # send it while the next one fills
                if self._partitioner.uses_sticky(None):
                    self._partitioner.next_sticky(topic, index, len(partitions),
                                                  self._client.metadata.available_partitions(topic))  # type: ignore[union-attr]
                sender.wakeup()
                await asyncio.sleep(0)
        sender.wakeup()
        return futures

    async def _send_many_keyed(self, topic: str, values: Sequence[Any], keys: Sequence[Any],
                               timestamp: int | None) -> list[RecordFuture]:
        """:meth:`send_many` with keys: each key picks its partition (as :meth:`send` does), then each
        partition's records go into its batches many at a time, in the order given."""
        if len(keys) != len(values):
            raise ValueError(f"send_many() got {len(values)} values and {len(keys)} keys")
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        partitions = await self._topic_partitions_for(topic)
        count = len(partitions)
        available = self._client.metadata.available_partitions(topic)  # type: ignore[union-attr]
        choose = self._partitioner.partition
        grouped: dict[int, tuple[list[bytes | None], list[bytes | None]]] = {}
        for key, value in zip(keys, values, strict=True):
            if key is not None and type(key) is not bytes:
                key = _to_bytes("key", key)
            if value is not None and type(value) is not bytes:
                value = _to_bytes("value", value)
            group = grouped.get(index := choose(topic, key, count, available))
            if group is None:
                group = grouped[index] = ([], [])
            group[0].append(key)
            group[1].append(value)
        futures: list[RecordFuture] = []
        for index, (partition_keys, partition_values) in grouped.items():
            futures += await self._append_many(partitions[index], timestamp, partition_keys, partition_values)
        return futures

    async def _append_many(self, topic_partition: TopicPartition, timestamp: int, keys: list[bytes | None],
                           values: list[bytes | None]) -> list[RecordFuture]:
        """Append keyed records to one partition's batches; one future per batch used."""
        sender = self._sender
        assert sender is not None
        futures: list[RecordFuture] = []
        position, total = 0, len(values)
        while position < total:
            position, full = await self._fill_batch(topic_partition, timestamp, keys, values, position, futures)
            if full:  # send it while the next one fills
                sender.wakeup()
                await asyncio.sleep(0)
        sender.wakeup()
        return futures

    async def _fill_batch(self, topic_partition: TopicPartition, timestamp: int, keys: Sequence[bytes | None] | None,
                          values: Sequence[bytes | None], position: int,
                          futures: list[RecordFuture]) -> tuple[int, bool]:
        """Put records from ``position`` on into the partition's open batch (opening one when there is
        none), as many as it takes; add the future of what went in to ``futures``. Returns the next
        position and whether the batch is full now (marked so: the sender may take it)."""
        accumulator = self._accumulator
        assert accumulator is not None
        batch_size = accumulator.batch_size
        total = len(values)
        queue = accumulator.batches.get(topic_partition)
        batch = queue[-1] if queue else None
        if batch is None or batch.writer is None or batch.is_full:
            opened = await self._append_new_batch(topic_partition, timestamp, None if keys is None else keys[position],
                                                  values[position], None)
            position += 1
            batch, first = opened.batch, opened.offset_delta
            if batch.writer is None or batch.is_full:  # the sender took it while we yielded
                futures.append(opened)
                return position, False
        else:
            first = batch.records_count
        writer = batch.writer
        # Offer about as many records as the batch can still take (a slice, not the whole rest).
        typical = 0
        if position < total:
            typical = len(values[position] or b"") + (0 if keys is None else len(keys[position] or b""))
        end = min(total, position + 16 + max(0, batch_size - len(writer.buffer)) // (typical + 8))
        taken = writer.append_values(timestamp, values[position:end], None if keys is None else keys[position:end],
                                     limit=batch_size)
        batch.records_count = writer.records_count
        position += taken
        if taken or first < batch.records_count:
            futures.append(RecordFuture(batch, first, timestamp))
        full = position < end
        if full:
            batch.is_full = True
        return position, full

    # --- transactions --------------------------------------------------------------------------------

    def _transaction_manager(self) -> TransactionManager:
        if self._transactions is None:
            raise TransactionStateError("the producer is not started")
        return self._transactions

    async def init_transactions(self) -> None:
        """Register the ``transactional.id`` (fencing older instances) and finish what they left open."""
        await self._ensure_started()
        await self._transaction_manager().init_transactions()
        assert self._sender is not None
        self._sender.wakeup()

    async def begin_transaction(self) -> None:
        await self._ensure_started()
        self._transaction_manager().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, int],
                                          group_metadata: ConsumerGroupMetadata | str | Any) -> None:
        """Commit a consumer group's offsets as part of the transaction (consume-transform-produce).

        ``offsets`` maps ``TopicPartition`` (or ``(topic, partition)``) to the next offset to consume.
        ``group_metadata`` is a group id, a :class:`ConsumerGroupMetadata`, or a consumer's group metadata.
        """
        await self._ensure_started()
        if isinstance(group_metadata, str):
            group = ConsumerGroupMetadata(group_metadata)
        elif isinstance(group_metadata, ConsumerGroupMetadata):
            group = group_metadata
        else:
            group = ConsumerGroupMetadata(
                group_metadata.group_id, getattr(group_metadata, "generation_id", -1),
                getattr(group_metadata, "member_id", ""), getattr(group_metadata, "group_instance_id", None))
        normalized = {(key if isinstance(key, TopicPartition) else TopicPartition(*key)): int(offset)
                      for key, offset in offsets.items()}
        await self._transaction_manager().send_offsets_to_transaction(normalized, group)

    async def commit_transaction(self) -> None:
        """Flush, then commit. :class:`TransactionAbortableError` if the transaction failed (abort it)."""
        await self._ensure_started()
        transactions = self._transaction_manager()
        if transactions.state is TransactionState.ABORTABLE_ERROR:
            transactions.check_can_send()
        if transactions.state is not TransactionState.COMMITTING:
            transactions.require_state(TransactionState.IN_TRANSACTION, action="commit_transaction")
            transactions.state = TransactionState.COMMITTING
        deadline = monotonic_ms() + self.config.max_block_ms
        try:
            await self.flush(timeout=max(0.001, (deadline - monotonic_ms()) / 1000))
        except KafkaTimeoutError:
            raise KafkaTimeoutError("commit_transaction() could not flush within max.block.ms; call it again") from None
        while transactions.pending_partitions or transactions.adding_partitions:
            if monotonic_ms() > deadline:
                raise KafkaTimeoutError("commit_transaction() timed out adding partitions; call it again")
            await asyncio.sleep(0.005)
        if transactions.state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortableError(ErrorCode.TRANSACTION_ABORTABLE,
                                            f"the transaction cannot commit: {transactions.last_error}; abort it")
        if transactions.state is TransactionState.FATAL_ERROR:
            assert transactions.last_error is not None
            raise transactions.last_error
        await transactions.end_transaction(commit=True)

    async def abort_transaction(self) -> None:
        """Drop the records not yet sent, wait for those in flight, and abort the transaction."""
        await self._ensure_started()
        transactions = self._transaction_manager()
        transactions.require_state(TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR,
                              TransactionState.ABORTING, TransactionState.COMMITTING, action="abort_transaction")
        transactions.state = TransactionState.ABORTING
        accumulator, sender = self._accumulator, self._sender
        assert accumulator is not None and sender is not None
        for batch in list(accumulator):
            transactions.batch_done(batch, False)
        accumulator.abort_all(TransactionAbortableError(ErrorCode.TRANSACTION_ABORTABLE,
                                                        "the transaction was aborted before the record was sent"))
        await asyncio.wait_for(sender.wait_idle(), self.config.max_block_ms / 1000)
        await transactions.end_transaction(commit=False)
        if transactions.epoch_bump_needed:
            await transactions.init_producer_id(bump=True)
            transactions.reset_sequences([])
        sender.wakeup()
