"""Producer identity, sequence numbers and transactions: the producer's ``TransactionManager``.

Theory of operation.

**Idempotence** (on by default). The producer gets a producer id and epoch (InitProducerId) before
its first batch. Each partition numbers its records from sequence 0; a batch takes its base
sequence when it is first drained and keeps it across retries, so the broker can drop a duplicate
and refuse a gap. Batches are remembered per partition, in sequence order, from their first send
until they are done (``in_flight``); a retried batch may go out again only when it is the first of
them, so with up to five requests in flight the order still holds across retries.

When the broker and the producer no longer agree on a partition's sequence
(OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for the batch right after the last one
acknowledged, or a batch that timed out after it was sent), the producer bumps its epoch (KIP-360):
it waits until nothing is in flight, asks InitProducerId for the next epoch of the same producer id
(a new producer id from brokers before InitProducerId v3), and numbers every partition from 0 again;
batches waiting for a retry are restamped. A gap behind an earlier failed batch is just retried.

**Transactions** (``transactional.id`` set). States, as the Java client's::

    UNINITIALIZED -init_transactions-> READY -begin-> IN_TRANSACTION -commit-> COMMITTING -> READY
                                                     IN_TRANSACTION -abort-> ABORTING -> READY
    IN_TRANSACTION -(a batch or request fails)-> ABORTABLE_ERROR -abort-> ABORTING -> READY
    any -(fenced, or an error no abort can repair)-> FATAL_ERROR

A partition's first record in a transaction adds it to ``pending_partitions``; the sender sends one
AddPartitionsToTxn for all pending partitions before it drains their batches. Commit flushes, then
sends EndTxn; abort drops the batches not yet sent, waits for the ones in flight, then sends EndTxn.
Fencing is :class:`ProducerFencedError`, a failed transaction :class:`TransactionAbortableError`, a
call in the wrong state :class:`TransactionStateError`, and running out of ``max.block.ms``
:class:`KafkaTimeoutError` (the call may be repeated).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.errors import (
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionStateError,
    error_for,
)
from kafkalite.client.metadata import TopicPartition
from kafkalite.client.network import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, NetworkClient, monotonic_ms
from kafkalite.client.producer.accumulator import ProducerBatch
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkalite.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkalite.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TransactionState"]

log = logging.getLogger("kafkalite.client")

_NO_SEQUENCE = -1
_FENCING = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                      ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_ABORTABLE = frozenset({ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                        ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs to know of the consuming group (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    """Producer id, epoch and sequences; the transaction state machine (see the module docstring)."""

    def __init__(self, client: NetworkClient, *, transactional_id: str | None, transaction_timeout_ms: int,
                 max_block_ms: int, retry_backoff_ms: int, idempotent: bool) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.max_block_ms = max_block_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.idempotent = idempotent or transactional_id is not None
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence: dict[TopicPartition, int] = {}
        self.last_acked_sequence: dict[TopicPartition, int] = {}
        self.in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self.epoch_bump_needed = False
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.adding_partitions = False
        self._add_failed_partitions: set[TopicPartition] = set()
        self._offsets_added = False

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    # --- sequences -----------------------------------------------------------------------------------

    def assign_sequence(self, batch: ProducerBatch) -> int:
        """The base sequence for a batch's first send (or first send after an epoch bump)."""
        topic_partition = batch.topic_partition
        sequence = self.next_sequence.get(topic_partition, 0)
        self.next_sequence[topic_partition] = (sequence + batch.records_count) & 0x7FFFFFFF
        in_flight = self.in_flight.setdefault(topic_partition, [])
        in_flight.append(batch)
        return sequence

    def can_send(self, topic_partition: TopicPartition, batch: ProducerBatch) -> bool:
        """Whether the first batch of a partition may go out now (order, transaction membership)."""
        if self.is_transactional:
            if self.state is not TransactionState.IN_TRANSACTION and self.state is not TransactionState.COMMITTING:
                return False
            if topic_partition not in self.partitions_in_transaction:
                return False
        if not self.idempotent:
            return True
        if self.epoch_bump_needed or self.producer_id < 0:
            return False
        if batch.base_sequence != _NO_SEQUENCE:  # a retry goes only when it is the first in flight
            in_flight = self.in_flight.get(topic_partition)
            return not in_flight or in_flight[0] is batch
        return True

    def batch_done(self, batch: ProducerBatch, acknowledged: bool) -> None:
        """A batch left the producer: delivered (``acknowledged``) or failed for good."""
        in_flight = self.in_flight.get(batch.topic_partition)
        if in_flight is not None and batch in in_flight:
            in_flight.remove(batch)
        if acknowledged and batch.base_sequence != _NO_SEQUENCE:
            previous = self.last_acked_sequence.get(batch.topic_partition, -1)
            if batch.producer_epoch == self.producer_epoch and batch.last_sequence > previous:
                self.last_acked_sequence[batch.topic_partition] = batch.last_sequence

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` follows the last acknowledged one (an error on it is not caused by a gap)."""
        last = self.last_acked_sequence.get(batch.topic_partition, -1)
        return batch.base_sequence == ((last + 1) & 0x7FFFFFFF)

    def request_epoch_bump(self, reason: str) -> None:
        if not self.epoch_bump_needed:
            log.info("producer %s epoch %s: bumping the epoch (%s)", self.producer_id, self.producer_epoch, reason)
        self.epoch_bump_needed = True

    def reset_sequences(self, queued: list[ProducerBatch]) -> None:
        """After a new epoch: number every partition from 0; batches waiting to retry get new numbers."""
        self.next_sequence.clear()
        self.last_acked_sequence.clear()
        self.in_flight.clear()
        for batch in queued:  # in deque order, which is sequence order per partition
            if batch.base_sequence != _NO_SEQUENCE:
                batch.base_sequence = _NO_SEQUENCE
                batch.producer_epoch = -2  # forces a restamp on the next drain

    # --- producer id -----------------------------------------------------------------------------------

    async def init_producer_id(self, bump: bool = False) -> None:
        """InitProducerId at the transaction coordinator (or any broker when idempotent only)."""
        deadline = monotonic_ms() + self.max_block_ms
        attempt = 0
        while True:
            try:
                if self.is_transactional:
                    assert self.transactional_id is not None
                    node_id = await self.client.coordinator(COORDINATOR_TRANSACTION, self.transactional_id,
                                                            self._left(deadline))
                    connection = await self.client.connection(node_id)
                else:
                    connection = await self.client.any_connection()
                version = connection.version_for(InitProducerIdRequest)
                request = InitProducerIdRequest(transactional_id=self.transactional_id,
                                                transaction_timeout_ms=self.transaction_timeout_ms)
                if bump and version >= 3 and self.producer_id >= 0:
                    request.producer_id = self.producer_id
                    request.producer_epoch = self.producer_epoch
                response: InitProducerIdResponse = await connection.send(request, version)
                code = ErrorCode.from_code(response.error_code)
                if code is ErrorCode.NONE:
                    self.producer_id = response.producer_id
                    self.producer_epoch = response.producer_epoch
                    self.epoch_bump_needed = False
                    return
                if code in _COORDINATOR_MOVED and self.transactional_id is not None:
                    self.client.forget_coordinator(COORDINATOR_TRANSACTION, self.transactional_id)
                elif code in _FENCING:
                    raise self._fatal(error_for(code, context=f"transactional id {self.transactional_id!r}"))
                elif not code.retriable and code is not ErrorCode.CONCURRENT_TRANSACTIONS:
                    raise error_for(code, context="InitProducerId")
            except (ProducerFencedError, TransactionStateError):
                raise
            except KafkaError as exc:
                if not exc.retriable or monotonic_ms() >= deadline:
                    if monotonic_ms() >= deadline:
                        raise KafkaTimeoutError(f"no producer id within max.block.ms: {exc}") from exc
                    raise
            attempt += 1
            await self._backoff(attempt, deadline, "InitProducerId")

    def _left(self, deadline: float) -> float:
        return max(1.0, deadline - monotonic_ms())

    async def _backoff(self, attempt: int, deadline: float, what: str) -> None:
        if monotonic_ms() >= deadline:
            raise KafkaTimeoutError(f"{what} did not complete within max.block.ms ({self.max_block_ms} ms)")
        await asyncio.sleep(min(self.retry_backoff_ms * (2 ** min(attempt, 5)), 1000, self._left(deadline)) / 1000)

    def _fatal(self, error: KafkaError) -> KafkaError:
        self.state = TransactionState.FATAL_ERROR
        self.last_error = error
        return error

    # --- transaction state -----------------------------------------------------------------------------

    def require_state(self, *states: TransactionState, action: str) -> None:
        if self.transactional_id is None:
            raise TransactionStateError(f"cannot {action}: the producer has no transactional.id")
        if self.state is TransactionState.FATAL_ERROR:
            raise TransactionStateError(f"cannot {action}: the producer hit a fatal error: {self.last_error}")
        if self.state not in states:
            raise TransactionStateError(f"cannot {action} in state {self.state.value}")

    async def init_transactions(self) -> None:
        self.require_state(TransactionState.UNINITIALIZED, TransactionState.INITIALIZING, action="init_transactions")
        self.state = TransactionState.INITIALIZING
        await self.init_producer_id()
        self.next_sequence.clear()
        self.last_acked_sequence.clear()
        self.state = TransactionState.READY

    def begin_transaction(self) -> None:
        self.require_state(TransactionState.READY, action="begin_transaction")
        self.partitions_in_transaction.clear()
        self.pending_partitions.clear()
        self.state = TransactionState.IN_TRANSACTION

    def check_can_send(self) -> None:
        """Raise unless a transactional producer may send now (an idempotent one always may)."""
        if self.transactional_id is None:
            return
        if self.state is TransactionState.IN_TRANSACTION:
            return
        if self.state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                ErrorCode.TRANSACTION_ABORTABLE,
                f"the transaction failed ({self.last_error}); call abort_transaction() first")
        if self.state is TransactionState.FATAL_ERROR:
            raise TransactionStateError(f"the producer hit a fatal error: {self.last_error}")
        raise TransactionStateError(f"cannot send in state {self.state.value}: call begin_transaction() first")

    def maybe_add_partition(self, topic_partition: TopicPartition) -> None:
        if topic_partition not in self.partitions_in_transaction:
            self.pending_partitions.add(topic_partition)

    def abortable_error(self, error: KafkaError) -> None:
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
            self.state = TransactionState.ABORTABLE_ERROR
            self.last_error = error

    def fail_from_produce(self, code: ErrorCode, error: KafkaError) -> None:
        """A transactional batch failed with ``code``: the transaction cannot commit."""
        if code in _FENCING:
            self._fatal(error)
        else:
            self.abortable_error(error)

    async def add_pending_partitions(self) -> None:
        """One AddPartitionsToTxn for every partition waiting to join the transaction."""
        if not self.pending_partitions or self.adding_partitions or self.transactional_id is None:
            return
        partitions = sorted(self.pending_partitions)
        self.adding_partitions = True
        attempt = 0
        deadline = monotonic_ms() + self.max_block_ms
        try:
            while self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING):
                topics: dict[str, list[int]] = {}
                for topic_partition in partitions:
                    topics.setdefault(topic_partition.topic, []).append(topic_partition.partition)
                request = AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.producer_epoch,
                    v3_and_below_topics=[AddPartitionsToTxnTopic(name, sorted(indexes))
                                         for name, indexes in topics.items()])
                try:
                    node_id = await self.client.coordinator(COORDINATOR_TRANSACTION, self.transactional_id)
                    response: AddPartitionsToTxnResponse = await self.client.send(node_id, request, max_version=3)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    attempt += 1
                    await self._backoff(attempt, deadline, "AddPartitionsToTxn")
                    continue
                errors = {TopicPartition(topic.name, result.partition_index): ErrorCode.from_code(
                              result.partition_error_code)
                          for topic in response.results_by_topic_v3_and_below
                          for result in topic.results_by_partition}
                failures = {tp: code for tp, code in errors.items() if code is not ErrorCode.NONE}
                if not failures:
                    self.partitions_in_transaction.update(partitions)
                    self.pending_partitions.difference_update(partitions)
                    return
                retry = all(code.retriable or code in _COORDINATOR_MOVED or code is ErrorCode.CONCURRENT_TRANSACTIONS
                            or code is ErrorCode.OPERATION_NOT_ATTEMPTED for code in failures.values())
                if retry:
                    if any(code in _COORDINATOR_MOVED for code in failures.values()):
                        self.client.forget_coordinator(COORDINATOR_TRANSACTION, self.transactional_id)
                    attempt += 1
                    await self._backoff(attempt, deadline, "AddPartitionsToTxn")
                    continue
                code = next(code for code in failures.values() if code is not ErrorCode.OPERATION_NOT_ATTEMPTED)
                failed = next(tp for tp, value in failures.items() if value is code)
                error = error_for(code, context=f"adding {failed} to transaction {self.transactional_id!r}")
                if code in _FENCING:
                    self._fatal(error)
                else:
                    self.abortable_error(error)
                self._add_failed_partitions.update(partitions)
                return
        except KafkaError as exc:
            self.abortable_error(exc)
            self._add_failed_partitions.update(partitions)
        finally:
            self.adding_partitions = False

    def take_failed_partitions(self) -> set[TopicPartition]:
        failed, self._add_failed_partitions = self._add_failed_partitions, set()
        self.pending_partitions.difference_update(failed)
        return failed

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int],
                                          group: ConsumerGroupMetadata) -> None:
        self.require_state(TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR,
                      action="send_offsets_to_transaction")
        if self.state is TransactionState.ABORTABLE_ERROR:
            self.check_can_send()
        assert self.transactional_id is not None
        deadline = monotonic_ms() + self.max_block_ms
        await self._coordinator_request(
            lambda: AddOffsetsToTxnRequest(transactional_id=self.transactional_id or "",
                                           producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                           group_id=group.group_id),
            lambda response: ErrorCode.from_code(response.error_code), "AddOffsetsToTxn", deadline,
            AddOffsetsToTxnResponse)
        topics: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        for topic_partition, offset in sorted(offsets.items()):
            topics.setdefault(topic_partition.topic, []).append(
                TxnOffsetCommitRequestPartition(partition_index=topic_partition.partition, committed_offset=offset,
                                                committed_leader_epoch=-1, committed_metadata=""))
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group.group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequestTopic(name, partitions) for name, partitions in topics.items()])
        attempt = 0
        while True:
            try:
                node_id = await self.client.coordinator(COORDINATOR_GROUP, group.group_id, self._left(deadline))
                response: TxnOffsetCommitResponse = await self.client.send(node_id, request)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                attempt += 1
                await self._backoff(attempt, deadline, "TxnOffsetCommit")
                continue
            codes = [ErrorCode.from_code(partition.error_code)
                     for topic in response.topics for partition in topic.partitions]
            failed = [code for code in codes if code is not ErrorCode.NONE]
            if not failed:
                return
            code = failed[0]
            if code in _COORDINATOR_MOVED:
                self.client.forget_coordinator(COORDINATOR_GROUP, group.group_id)
            if code.retriable or code in _COORDINATOR_MOVED or code is ErrorCode.CONCURRENT_TRANSACTIONS:
                attempt += 1
                await self._backoff(attempt, deadline, "TxnOffsetCommit")
                continue
            error = error_for(code, context=f"committing offsets of group {group.group_id!r} in the transaction")
            if code in _FENCING:
                raise self._fatal(error)
            self.abortable_error(error)
            raise error

    async def end_transaction(self, commit: bool) -> None:
        """EndTxn at the coordinator, retried until ``max.block.ms``; the state becomes READY."""
        assert self.transactional_id is not None
        deadline = monotonic_ms() + self.max_block_ms
        if self.partitions_in_transaction or self._offsets_added:
            await self._coordinator_request(
                lambda: EndTxnRequest(transactional_id=self.transactional_id or "", producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, committed=commit),
                lambda response: ErrorCode.from_code(response.error_code), "EndTxn", deadline, EndTxnResponse,
                commit=commit)
        self.partitions_in_transaction.clear()
        self.pending_partitions.clear()
        self._offsets_added = False
        self.state = TransactionState.READY

    async def _coordinator_request(self, build: Any, error_of: Any, what: str, deadline: float,
                                   response_type: type[Any], commit: bool | None = None) -> Any:
        assert self.transactional_id is not None
        attempt = 0
        while True:
            try:
                node_id = await self.client.coordinator(COORDINATOR_TRANSACTION, self.transactional_id,
                                                        self._left(deadline))
                # EndTxn v5 is transactions V2 (KIP-890 part 2): epochs bump on every commit. Not yet here.
                response = await self.client.send(node_id, build(), max_version=4 if what == "EndTxn" else None)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                attempt += 1
                await self._backoff(attempt, deadline, what)
                continue
            code: ErrorCode = error_of(response)
            if code is ErrorCode.NONE:
                if response_type is AddOffsetsToTxnResponse:
                    self._offsets_added = True
                return response
            if code in _COORDINATOR_MOVED:
                self.client.forget_coordinator(COORDINATOR_TRANSACTION, self.transactional_id)
            if code.retriable or code in _COORDINATOR_MOVED or code is ErrorCode.CONCURRENT_TRANSACTIONS:
                attempt += 1
                await self._backoff(attempt, deadline, what)
                continue
            error = error_for(code, context=f"{what} of transactional id {self.transactional_id!r}")
            if code in _FENCING:
                raise self._fatal(error)
            if commit is None and code in _ABORTABLE:
                self.abortable_error(error)
            raise error
