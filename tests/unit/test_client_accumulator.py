"""The record accumulator and the sequence bookkeeping, driven without sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kafkalite.client.errors import KafkaTimeoutError
from kafkalite.client.metadata import ClusterMetadata, TopicPartition
from kafkalite.client.producer.accumulator import BufferPool, RecordAccumulator
from kafkalite.client.producer.transactions import TransactionManager
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.messages import MetadataResponse
from kafkalite.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkalite.protocol.records import RecordBatch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def metadata(leaders: dict[int, int]) -> ClusterMetadata:
    """Topic "t" with one partition per entry of ``leaders`` (partition -> node; -1: no leader)."""
    cluster = ClusterMetadata()
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node, "h", 9000 + node) for node in (1, 2)],
        topics=[MetadataResponseTopic(name="t", partitions=[
            MetadataResponsePartition(partition_index=index, leader_id=node, leader_epoch=0)
            for index, node in leaders.items()])])
    cluster.update(response, 0.0, ["t"])
    return cluster


def accumulator(loop: asyncio.AbstractEventLoop, **overrides: int) -> RecordAccumulator:
    settings = {"batch_size": 1000, "linger_ms": 10, "buffer_memory": 10_000, "retry_backoff_ms": 100,
                "delivery_timeout_ms": 5000} | overrides
    return RecordAccumulator(create_future=loop.create_future, **settings)


def add(acc: RecordAccumulator, topic_partition: TopicPartition, value: bytes, now: float = 0.0) -> None:
    if acc.append(topic_partition, 1, None, value, None) is None:
        size = acc.batch_bytes_for(None, value, None)
        assert acc.pool.try_reserve(size)
        acc.new_batch(topic_partition, size, now)
        assert acc.append(topic_partition, 1, None, value, None) is not None


def test_records_fill_a_batch_then_open_the_next(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    for _ in range(20):
        add(acc, T0, b"x" * 100)
    batches = list(acc.batches[T0])
    assert len(batches) == 3 and sum(batch.records_count for batch in batches) == 20
    assert all(batch.is_full for batch in batches[:-1])
    assert acc.pool.available == 10_000 - 3 * 1000


def test_ready_waits_for_linger_unless_full(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    cluster = metadata({0: 1, 1: 2})
    add(acc, T0, b"x", now=0)
    assert acc.ready(cluster, 4) == (set(), 6, False)
    assert acc.ready(cluster, 10)[0] == {1}
    for _ in range(10):
        add(acc, T1, b"y" * 100, now=9)
    assert acc.ready(cluster, 9)[0] == {2}  # T1's first batch is full
    acc.flushing += 1
    assert acc.ready(cluster, 0)[0] == {1, 2}


def test_unknown_leader_is_reported(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    add(acc, T0, b"x")
    assert acc.ready(metadata({0: -1}), 100) == (set(), float("inf"), True)


def test_drain_respects_max_request_size_and_builds_batches(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    cluster = metadata({0: 1, 1: 1})
    for _ in range(9):
        add(acc, T0, b"x" * 100)
        add(acc, T1, b"y" * 100)
    drained = acc.drain(cluster, 1, 1500, 100)
    assert len(drained) == 1  # one batch per partition per request, and two would pass 1500 bytes
    drained += acc.drain(cluster, 1, 10_000, 100)
    assert {batch.topic_partition for batch in drained} == {T0, T1}
    built = drained[0].build(Compression.NONE, None, 5, 1, 0, False)
    assert RecordBatch(built).records_count == drained[0].records_count


def test_reenqueue_keeps_sequence_order_and_backs_off(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    cluster = metadata({0: 1})
    for _ in range(30):
        add(acc, T0, b"x" * 100)
    first, second = acc.drain(cluster, 1, 10_000, 0), acc.drain(cluster, 1, 10_000, 0)
    first[0].base_sequence, second[0].base_sequence = 0, 9
    for batch in (first[0], second[0]):
        batch.attempts = 1
    acc.reenqueue(second[0], 0)
    acc.reenqueue(first[0], 0)
    assert list(acc.batches[T0])[:2] == [first[0], second[0]]
    assert acc.ready(cluster, 50)[0] == set()  # backing off
    assert acc.ready(cluster, 100)[0] == {1}


def test_expired_batches_leave_the_queue(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop, delivery_timeout_ms=100)
    add(acc, T0, b"x", now=0)
    assert acc.expired(99) == []
    [expired] = acc.expired(100)
    acc.deallocate(expired)
    assert acc.pool.available == 10_000 and not acc.incomplete


def test_buffer_pool_waits_in_turn_and_times_out(loop: asyncio.AbstractEventLoop) -> None:
    async def scenario() -> None:
        pool = BufferPool(100)
        assert pool.try_reserve(80)
        waiter = asyncio.ensure_future(pool.reserve(50, 1000))
        await asyncio.sleep(0)
        assert not pool.try_reserve(10)  # someone is waiting: no overtaking
        pool.release(80)
        await waiter
        assert pool.available == 50
        with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
            await pool.reserve(60, 10)
        assert pool.available == 50 and pool.waiting == 0

    loop.run_until_complete(scenario())


def test_sequences_retries_and_epoch_reset(loop: asyncio.AbstractEventLoop) -> None:
    acc = accumulator(loop)
    manager = TransactionManager(client=None, transactional_id=None, transaction_timeout_ms=1000,  # type: ignore[arg-type]
                                 max_block_ms=1000, retry_backoff_ms=10, idempotent=True)
    manager.producer_id, manager.producer_epoch = 7, 0
    cluster = metadata({0: 1})
    for _ in range(30):
        add(acc, T0, b"x" * 100)
    batches = [acc.drain(cluster, 1, 10_000, 0)[0] for _ in range(3)]
    sequences = [manager.assign_sequence(batch) for batch in batches]
    for batch, sequence in zip(batches, sequences, strict=True):
        batch.build(Compression.NONE, None, 7, 0, sequence, False)
    assert sequences == [0, batches[0].records_count, batches[0].records_count + batches[1].records_count]
    assert manager.is_next_expected(batches[0]) and not manager.is_next_expected(batches[1])
    # the first fails and comes back; the later ones may not overtake it
    assert manager.can_send(T0, batches[0])
    assert not manager.can_send(T0, batches[1])
    manager.batch_done(batches[0], acknowledged=True)
    assert manager.is_next_expected(batches[1]) and manager.can_send(T0, batches[1])
    # an epoch bump renumbers what waits for a retry
    manager.request_epoch_bump("test")
    assert not manager.can_send(T0, batches[1])
    manager.producer_epoch = 1
    manager.epoch_bump_needed = False
    manager.reset_sequences(batches[1:])
    assert batches[1].base_sequence == -1
    assert manager.assign_sequence(batches[1]) == 0
    built = batches[1].build(Compression.NONE, None, 7, 1, 0, False)
    header = RecordBatch(built)
    header.validate_crc()
    assert (header.producer_epoch, header.base_sequence) == (1, 0)
