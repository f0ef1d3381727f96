"""The sender's answer to each Produce outcome, driven without sockets (the retry and KIP-360 table)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.client.config import ProducerConfig, parse_config
from kafkalite.client.errors import KafkaTimeoutError, TransactionAbortableError
from kafkalite.client.metadata import ClusterMetadata, TopicPartition
from kafkalite.client.producer.accumulator import ProducerBatch, RecordAccumulator
from kafkalite.client.producer.sender import Sender
from kafkalite.client.producer.transactions import TransactionManager, TransactionState
from kafkalite.protocol.errors import ErrorCode, KafkaError

PARTITION = TopicPartition("t", 0)


class FakeClient:
    def __init__(self) -> None:
        self.metadata = ClusterMetadata()
        self.updates = 0

    def request_metadata_update(self) -> None:
        self.updates += 1


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make(loop: asyncio.AbstractEventLoop, transactional: bool = False, **config: Any
         ) -> tuple[Sender, FakeClient, RecordAccumulator, TransactionManager]:
    producer_config = parse_config(ProducerConfig, **config)
    client = FakeClient()
    accumulator = RecordAccumulator(batch_size=1000, linger_ms=0, buffer_memory=100_000, retry_backoff_ms=10,
                                    delivery_timeout_ms=producer_config.delivery_timeout_ms,
                                    create_future=loop.create_future)
    transactions = TransactionManager(client, transactional_id="tx" if transactional else None,  # type: ignore[arg-type]
                                      transaction_timeout_ms=1000, max_block_ms=1000, retry_backoff_ms=10,
                                      idempotent=True)
    transactions.producer_id, transactions.producer_epoch = 5, 0
    if transactional:
        transactions.state = TransactionState.IN_TRANSACTION

    async def build() -> Sender:
        return Sender(client, accumulator, transactions, producer_config)  # type: ignore[arg-type]

    return loop.run_until_complete(build()), client, accumulator, transactions


def sent_batches(accumulator: RecordAccumulator, transactions: TransactionManager, count: int) -> list[ProducerBatch]:
    """``count`` batches of 3 records each, drained and numbered as the sender does."""
    batches = []
    for _ in range(count):
        assert accumulator.pool.try_reserve(1000)
        batch = accumulator.new_batch(PARTITION, 1000, 0.0)
        for _ in range(3):
            accumulator.append(PARTITION, 1, None, b"v", None)
        accumulator.batches[PARTITION].remove(batch)
        sequence = transactions.assign_sequence(batch)
        batch.build(0, None, transactions.producer_id, transactions.producer_epoch, sequence,  # type: ignore[arg-type]
                    transactions.is_transactional)
        batch.attempts = 1
        batch.sent_once = True
        batches.append(batch)
    return batches


def fail(sender: Sender, batch: ProducerBatch, code: ErrorCode, now: float = 1.0) -> None:
    sender._failed_attempt(batch, code, KafkaError(code, f"{PARTITION}: {code.name}"), now)


def test_success_and_duplicates_complete(loop: asyncio.AbstractEventLoop) -> None:
    sender, _, accumulator, transactions = make(loop)
    first, second = sent_batches(accumulator, transactions, 2)
    sender._complete(first, 100, -1)
    assert first.future.result() is first and transactions.last_acked_sequence[PARTITION] == 2
    assert accumulator.pool.available == 100_000 - 1000


def test_stale_metadata_is_refreshed_and_retried(loop: asyncio.AbstractEventLoop) -> None:
    sender, client, accumulator, _ = make(loop)
    [batch] = sent_batches(accumulator, sender.transactions, 1)
    fail(sender, batch, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert client.updates == 1 and list(accumulator.batches[PARTITION]) == [batch] and not batch.done


def test_a_gap_behind_a_failed_batch_is_retried_without_a_new_epoch(loop: asyncio.AbstractEventLoop) -> None:
    sender, _, accumulator, transactions = make(loop)
    first, second = sent_batches(accumulator, transactions, 2)
    fail(sender, first, ErrorCode.NETWORK_EXCEPTION)
    fail(sender, second, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert not transactions.epoch_bump_needed
    assert list(accumulator.batches[PARTITION]) == [first, second]  # in sequence order
    assert transactions.can_send(PARTITION, first) and not transactions.can_send(PARTITION, second)


def test_a_sequence_error_on_the_next_expected_batch_bumps_the_epoch(loop: asyncio.AbstractEventLoop) -> None:
    sender, _, accumulator, transactions = make(loop)
    first, second = sent_batches(accumulator, transactions, 2)
    fail(sender, first, ErrorCode.UNKNOWN_PRODUCER_ID)
    fail(sender, second, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert transactions.epoch_bump_needed and not first.done and not second.done
    assert not transactions.can_send(PARTITION, first)  # nothing goes out until the new epoch
    transactions.producer_epoch, transactions.epoch_bump_needed = 1, False
    transactions.reset_sequences(list(accumulator))
    assert [transactions.assign_sequence(batch) for batch in (first, second)] == [0, 3]


def test_in_a_transaction_a_sequence_error_makes_it_abortable(loop: asyncio.AbstractEventLoop) -> None:
    sender, _, accumulator, transactions = make(loop, transactional=True, transactional_id="tx")
    [batch] = sent_batches(accumulator, transactions, 1)
    fail(sender, batch, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert isinstance(batch.future.exception(), KafkaError)
    assert transactions.state is TransactionState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        transactions.check_can_send()


def test_fatal_errors_and_timeouts_fail_the_batch(loop: asyncio.AbstractEventLoop) -> None:
    sender, _, accumulator, transactions = make(loop, delivery_timeout_ms=1000)
    too_large, late = sent_batches(accumulator, transactions, 2)
    fail(sender, too_large, ErrorCode.MESSAGE_TOO_LARGE)
    assert "t-0" in str(too_large.future.exception())
    assert transactions.epoch_bump_needed  # its sequence is spent: the next batch would be a gap
    fail(sender, late, ErrorCode.REQUEST_TIMED_OUT, now=5000.0)
    assert isinstance(late.future.exception(), KafkaTimeoutError)
    assert accumulator.pool.available == 100_000
