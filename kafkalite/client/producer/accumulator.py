"""The record accumulator: per-partition queues of open batches, and the memory they may use.

Theory of operation (the Java client's ``RecordAccumulator``, written afresh):

* ``send()`` appends each record to the last batch of its partition's deque (a
  :class:`~kafkalite.protocol.record_writer.RecordBatchWriter` growing in place). When it does not fit
  (``batch.size`` reached), a new batch is opened, which needs ``batch.size`` bytes (or the record's
  size, if larger) from the :class:`BufferPool` of ``buffer.memory`` bytes. With no memory left,
  ``send()`` waits (FIFO) until sent batches give memory back, at most ``max.block.ms``.
* A partition is *ready* when its first batch is full (or another batch queues behind it), when it
  has waited ``linger.ms`` (``retry.backoff.ms`` after a failure), when someone is flushing or
  waiting for memory, or when the producer is closing. :meth:`RecordAccumulator.ready` answers which
  leaders have something ready and when to look again; :meth:`RecordAccumulator.drain` takes, for
  one leader, the first batch of each of its partitions, up to ``max.request.size`` per request.
* Batches that wait longer than ``delivery.timeout.ms`` fail with :class:`KafkaTimeoutError`.
* A batch is built (header written, compressed) when it is first drained; the producer id, epoch and
  base sequence are stamped then, and again if a retry follows an epoch bump. A failed batch that
  may be retried goes back to the front of its deque, in sequence order.

Each batch has one asyncio future; a record's result (:class:`RecordFuture`) is a small object
pointing at its batch and its offset delta, turned into a :class:`RecordMetadata` only when asked.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.metadata import ClusterMetadata, TopicPartition
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.record_writer import RecordBatchWriter, estimate_record_size, stamp_producer_state

__all__ = ["BufferPool", "ProducerBatch", "RecordAccumulator", "RecordFuture", "RecordMetadata"]

_NO_SEQUENCE = -1


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record landed: its topic, partition, offset and timestamp.

    ``offset`` is -1 when the producer does not learn it (``acks=0``). ``timestamp`` is the record's
    create time, or the broker's append time when the topic uses LogAppendTime.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


class ProducerBatch:
    """Records for one partition, sent (and retried) together."""

    __slots__ = (
        "topic_partition", "writer", "built", "records_count", "size_estimate", "created_ms", "attempts",
        "retry_at_ms", "producer_id", "producer_epoch", "base_sequence", "reserved_bytes", "future", "is_full",
        "base_offset", "log_append_time", "sent_once",
    )  # fmt: skip

    def __init__(self, topic_partition: TopicPartition, created_ms: float, reserved_bytes: int,
                 future: asyncio.Future[ProducerBatch]) -> None:
        self.topic_partition = topic_partition
        self.writer: RecordBatchWriter | None = RecordBatchWriter()
        self.built: bytearray | None = None
        self.records_count = 0
        self.size_estimate = 61
        self.created_ms = created_ms
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = _NO_SEQUENCE
        self.reserved_bytes = reserved_bytes
        self.future = future
        self.is_full = False
        self.base_offset = -1
        self.log_append_time = -1
        self.sent_once = False

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic_partition}, records={self.records_count}, attempts={self.attempts}, "
                f"sequence={self.base_sequence})")

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.records_count - 1) & 0x7FFFFFFF

    def build(self, compression: Compression, compression_level: int | None, producer_id: int, producer_epoch: int,
              base_sequence: int, is_transactional: bool) -> bytearray:
        """Write the batch's bytes (first drain), or restamp them with new producer state (a retry)."""
        if self.built is None:
            assert self.writer is not None
            self.built = self.writer.build(compression=compression, compression_level=compression_level,
                                           producer_id=producer_id, producer_epoch=producer_epoch,
                                           base_sequence=base_sequence, is_transactional=is_transactional)
            self.writer = None
        elif (producer_id, producer_epoch, base_sequence) != (self.producer_id, self.producer_epoch,
                                                               self.base_sequence):
            stamp_producer_state(self.built, producer_id, producer_epoch, base_sequence)
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
        return self.built

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        if not self.future.done():
            self.future.set_result(self)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)
            self.future.exception()  # retrieved: record futures report it; no "never retrieved" warning

    @property
    def done(self) -> bool:
        return self.future.done()


class RecordFuture(NamedTuple):
    """The pending result of one record: awaitable, or read with :meth:`result` once :meth:`done`.

    A named tuple (its batch, its offset delta in the batch, its create time) so that making one per
    record costs no Python-level ``__init__``: the hot path builds it with ``tuple.__new__``.
    """

    batch: ProducerBatch
    offset_delta: int
    timestamp: int

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self.exception() else "done")
        return f"RecordFuture({self.batch.topic_partition}, {state})"

    def done(self) -> bool:
        return self.batch.future.done()

    def exception(self) -> BaseException | None:
        return self.batch.future.exception()

    def result(self) -> RecordMetadata:
        """The record's metadata; raises the batch's error; ``InvalidStateError`` while pending."""
        self.batch.future.result()
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        batch = self.batch
        offset = batch.base_offset + self.offset_delta if batch.base_offset >= 0 else -1
        timestamp = batch.log_append_time if batch.log_append_time >= 0 else self.timestamp
        return RecordMetadata(batch.topic_partition.topic, batch.topic_partition.partition, offset, timestamp)

    def add_done_callback(self, callback: Callable[[RecordFuture], Any]) -> None:
        self.batch.future.add_done_callback(lambda _: callback(self))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        yield from self.batch.future.__await__()
        return self._metadata()


_new_tuple = tuple.__new__


class BufferPool:
    """``buffer.memory`` bytes handed to batches, with FIFO waiting when they run out."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.available = total
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_reserve(self, size: int) -> bool:
        if self._waiters or size > self.available:
            return False
        self.available -= size
        return True

    async def reserve(self, size: int, timeout_ms: float) -> None:
        """Wait (in turn) for ``size`` bytes; :class:`KafkaTimeoutError` after ``timeout_ms``."""
        if self.try_reserve(size):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
        except TimeoutError:
            if future.done() and not future.cancelled():  # granted just as time ran out: give it back
                self.release(size)
            else:
                self._remove(entry)
            raise KafkaTimeoutError(
                f"no buffer space for {size} bytes within max.block.ms ({timeout_ms:.0f} ms): "
                f"buffer.memory ({self.total} bytes) is full of records not yet sent") from None
        except BaseException:
            if future.done() and not future.cancelled():
                self.release(size)
            else:
                self._remove(entry)
            raise

    def _remove(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        try:
            self._waiters.remove(entry)
        except ValueError:
            pass
        entry[1].cancel()
        self._grant()

    def release(self, size: int) -> None:
        self.available += size
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.available:
            size, future = self._waiters.popleft()
            if future.done():
                continue
            self.available -= size
            future.set_result(None)


class RecordAccumulator:
    """Per-partition deques of batches (see the module docstring)."""

    def __init__(self, *, batch_size: int, linger_ms: int, buffer_memory: int, retry_backoff_ms: int,
                 delivery_timeout_ms: int, create_future: Callable[[], asyncio.Future[Any]]) -> None:
        self.batch_size = max(batch_size, 1)
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = BufferPool(buffer_memory)
        self._create_future = create_future
        self.batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self.flushing = 0
        self.closing = False
        self.incomplete: set[ProducerBatch] = set()
        self._drain_index: dict[int, int] = {}

    # --- appending ---------------------------------------------------------------------------------

    def deque_for(self, topic_partition: TopicPartition) -> collections.deque[ProducerBatch]:
        queue = self.batches.get(topic_partition)
        if queue is None:
            queue = self.batches[topic_partition] = collections.deque()
        return queue

    def append(self, topic_partition: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]] | None) -> RecordFuture | None:
        """Append to the partition's open batch; ``None`` when a new batch is needed (see :meth:`new_batch`)."""
        return self.append_to(self.batches.get(topic_partition), timestamp, key, value, headers)

    def append_to(self, queue: collections.deque[ProducerBatch] | None, timestamp: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[tuple[str, bytes | None]] | None) -> RecordFuture | None:
        """:meth:`append` given the partition's deque (the producer keeps them at hand: no hashing per record)."""
        if queue:
            batch = queue[-1]
            writer = batch.writer
            if writer is not None and not batch.is_full:
                size = len(writer.buffer) + 21 + (len(key) if key is not None else 0) + (
                    len(value) if value is not None else 0)
                if headers:
                    size = len(writer.buffer) + estimate_record_size(key, value, headers)
                if size <= self.batch_size or batch.records_count == 0:
                    offset_delta = writer.append(timestamp, key, value, headers)
                    batch.records_count = offset_delta + 1
                    if size >= self.batch_size:
                        batch.is_full = True
                    return _new_tuple(RecordFuture, (batch, offset_delta, timestamp))
                batch.is_full = True
        return None

    def batch_bytes_for(self, key: bytes | None, value: bytes | None,
                        headers: Sequence[tuple[str, bytes | None]] | None) -> int:
        """Memory a new batch holding this record reserves."""
        return max(self.batch_size, 61 + estimate_record_size(key, value, headers))

    def new_batch(self, topic_partition: TopicPartition, reserved_bytes: int, now_ms: float) -> ProducerBatch:
        """Open a new batch (its memory already reserved) at the end of the partition's deque."""
        batch = ProducerBatch(topic_partition, now_ms, reserved_bytes, self._create_future())
        queue = self.deque_for(topic_partition)
        if queue:
            queue[-1].is_full = True
        queue.append(batch)
        self.incomplete.add(batch)
        return batch

    # --- sending -----------------------------------------------------------------------------------

    def ready(self, metadata: ClusterMetadata, now_ms: float,
              can_send: Callable[[TopicPartition, ProducerBatch], bool] | None = None
              ) -> tuple[set[int], float, bool]:
        """Leaders with a batch ready to send, ms until the next check, and whether a leader is unknown."""
        ready_nodes: set[int] = set()
        next_check = float("inf")
        unknown_leader = False
        exhausted = self.pool.waiting > 0
        hurry = exhausted or self.flushing > 0 or self.closing
        for topic_partition, queue in self.batches.items():
            if not queue:
                continue
            leader = metadata.leader_for(topic_partition)
            if leader is None:
                unknown_leader = True
                continue
            if leader in ready_nodes:
                continue
            batch = queue[0]
            if can_send is not None and not can_send(topic_partition, batch):
                continue
            if batch.attempts > 0 and batch.retry_at_ms > now_ms:
                next_check = min(next_check, batch.retry_at_ms - now_ms)
                continue
            if hurry or batch.is_full or len(queue) > 1 or batch.attempts > 0:
                ready_nodes.add(leader)
                continue
            waited = now_ms - batch.created_ms
            if waited >= self.linger_ms:
                ready_nodes.add(leader)
            else:
                next_check = min(next_check, self.linger_ms - waited)
        return ready_nodes, next_check, unknown_leader

    def drain(self, metadata: ClusterMetadata, node_id: int, max_request_size: int, now_ms: float,
              can_send: Callable[[TopicPartition, ProducerBatch], bool] | None = None) -> list[ProducerBatch]:
        """Take the first batch of each partition led by ``node_id``, up to ``max_request_size`` bytes."""
        partitions = [topic_partition for topic_partition, queue in self.batches.items()
                      if queue and metadata.leader_for(topic_partition) == node_id]
        if not partitions:
            return []
        start = self._drain_index.get(node_id, 0) % len(partitions)
        self._drain_index[node_id] = start + 1
        drained: list[ProducerBatch] = []
        size = 0
        for index in range(len(partitions)):
            topic_partition = partitions[(start + index) % len(partitions)]
            queue = self.batches[topic_partition]
            batch = queue[0]
            if batch.attempts > 0 and batch.retry_at_ms > now_ms:
                continue
            if can_send is not None and not can_send(topic_partition, batch):
                continue
            batch_size = len(batch.built) if batch.built is not None else len(batch.writer.buffer)  # type: ignore[union-attr]
            if drained and size + batch_size > max_request_size:
                break
            queue.popleft()
            if batch.writer is not None:
                batch.is_full = True
            size += batch_size
            drained.append(batch)
        return drained

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a failed batch back at the front of its deque (in sequence order), to retry after back-off."""
        batch.retry_at_ms = now_ms + self.retry_backoff_ms * (2 ** min(batch.attempts - 1, 5))
        queue = self.deque_for(batch.topic_partition)
        if batch.base_sequence == _NO_SEQUENCE:
            queue.appendleft(batch)
            return
        position = 0
        for position, queued in enumerate(queue):  # noqa: B007
            if queued.base_sequence == _NO_SEQUENCE or queued.base_sequence > batch.base_sequence:
                break
        else:
            position = len(queue)
        queue.insert(position, batch)

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is finished (delivered or failed for good): give its memory back."""
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.pool.release(batch.reserved_bytes)
            batch.reserved_bytes = 0

    def expired(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        limit = self.delivery_timeout_ms
        for queue in self.batches.values():
            while queue and now_ms - queue[0].created_ms >= limit:
                expired.append(queue.popleft())
        return expired

    def abort_all(self, error: BaseException) -> list[ProducerBatch]:
        """Remove every queued batch (closing without waiting, or aborting a transaction)."""
        removed: list[ProducerBatch] = []
        for queue in self.batches.values():
            removed.extend(queue)
            queue.clear()
        for batch in removed:
            batch.fail(error)
            self.deallocate(batch)
        return removed

    def has_queued(self) -> bool:
        return any(self.batches.values())

    def __iter__(self) -> Iterator[ProducerBatch]:
        for queue in self.batches.values():
            yield from queue
