"""The transaction coordinator: producer ids, transactional ids, and committing or aborting transactions.

Theory of operation
-------------------
This node coordinates every transactional id. ``TransactionCoordinator`` holds one immutable
:class:`~broker.core.txn_state.TransactionMetadata` per id (states and transitions are described
in ``broker.core.txn_state``) and is the only entry point for the handlers. Every change is first
written as a key/value record to the ``__transaction_state`` partition of the id
(``abs(hash(id)) % transaction.state.log.num.partitions``, like Kafka), then installed; ``open``
replays the topic (last record per key wins, a tombstone forgets the id).

InitProducerId without a transactional id hands out a fresh producer id (epoch 0) from the
:class:`~broker.core.txn_producer_ids.ProducerIdAllocator`. With one, it checks the timeout against
``transaction.max.timeout.ms`` and bumps the id's epoch, which fences every older producer
instance: their AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn get PRODUCER_FENCED,
their produce requests INVALID_PRODUCER_EPOCH. If a transaction is open, it is first aborted with an
epoch bump and the caller gets CONCURRENT_TRANSACTIONS, so that its retry bumps once more (KIP-360).

Ending a transaction is two steps, as in Kafka. EndTxn moves Ongoing to PrepareCommit or
PrepareAbort and writes it: from then on the outcome is decided and survives a crash. Then the
*markers* are written, scheduled on the event loop (``schedule``): a COMMIT or ABORT control batch
in every partition of the transaction (``Partition.append_marker``, one offset each), and, if the
transaction holds ``__consumer_offsets`` partitions, the group coordinator is told to commit or drop
the offsets TxnOffsetCommit staged. Then CompleteCommit/CompleteAbort is written and the EndTxn is
answered. Unlike Kafka, which answers EndTxn once PrepareCommit is written, the answer waits for
the markers (they are local appends), so a read_committed consumer sees a committed transaction as
soon as its producer does. While the markers are pending, a request touching the transaction gets
CONCURRENT_TRANSACTIONS (clients retry it). A prepared transaction found by ``open`` is completed
the same way. A marker that cannot be written (a storage error) leaves the transaction prepared;
``periodic`` retries it.

Timers (``periodic``, from the broker's timer): every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, Ongoing transactions older than
their timeout are fenced (epoch + 1) and aborted; every
``transaction.remove.expired.transaction.cleanup.interval.ms``, ids idle (Empty or Complete*) for
``transactional.id.expiration.ms`` are forgotten with a tombstone; every
``producer.id.expiration.check.interval.ms``, partitions forget idle producers. ``clock`` and
``schedule`` are injectable, so tests drive every timeout and every step without sleeping.

The produce path asks ``verify_partition`` before a transaction's first batch lands in a partition
(KIP-890's verification): only partitions added to the producer's ongoing transaction accept it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.broker.core.coordinator_log import CoordinatorLog, partition_for
from kafkalite.broker.core.log import wall_clock_ms
from kafkalite.broker.core.partition import AppendError
from kafkalite.broker.core.txn_producer_ids import ProducerIdAllocator
from kafkalite.broker.core.txn_state import (
    NO_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    new_metadata,
    prepare_abort_or_commit,
    prepare_add_partitions,
    prepare_complete,
    prepare_dead,
    prepare_fence,
    prepare_init,
)
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster
    from kafkalite.broker.core.partition import Partition

log = logging.getLogger("kafkalite.transactions")

__all__ = ["InitResult", "TransactionCoordinator", "TRANSACTION_STATE_TOPIC", "COORDINATOR_EPOCH"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0  # one coordinator that never moves
TopicPartition = tuple[str, int]
Done = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    """Every transactional id of the broker. Touch only from the event loop."""

    def __init__(self, cluster: Cluster, *, clock: Callable[[], int] | None = None,
                 schedule: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.cluster = cluster
        self.log = CoordinatorLog(cluster, TRANSACTION_STATE_TOPIC, "transaction.state.log.num.partitions")
        self.producer_ids = ProducerIdAllocator(cluster.data_dir)
        self.clock = clock or wall_clock_ms
        self._schedule = schedule
        self._transactions: dict[str, TransactionMetadata] = {}
        self._by_producer_id: dict[int, str] = {}
        self._waiters: dict[str, list[Done]] = {}  # EndTxn answers waiting for the markers
        self._markers_scheduled: set[str] = set()
        self._last_run: dict[str, int] = {}

    # --- lifecycle ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Replay ``__transaction_state``; reserve producer ids; complete prepared transactions."""
        count = 0
        for _, record in self.log.replay_all():
            count += 1
            try:
                transactional_id = decode_key(record.key or b"")
                if record.value is None:
                    self._forget(transactional_id)
                else:
                    self._install(decode_value(transactional_id, record.value))
            except Exception as exc:  # a damaged record must not stop the broker from starting
                log.warning("skipping an unreadable %s record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                            record.offset, exc)
        highest = max((max(m.producer_id, m.previous_producer_id) for m in self._transactions.values()), default=-1)
        for partition in self._partitions():
            highest = max(highest, partition.producer_state.max_producer_id())
        self.producer_ids.open(at_least=highest + 1)
        now = self.clock()
        self._last_run = dict.fromkeys(("timeouts", "expiration", "producers"), now)
        prepared = [m.transactional_id for m in self._transactions.values() if m.state.preparing]
        for transactional_id in prepared:
            self._schedule_markers(transactional_id)
        if count:
            log.info("loaded %d transactional ids from %d %s records (%d prepared, completing them)",
                     len(self._transactions), count, TRANSACTION_STATE_TOPIC, len(prepared))

    def close(self, clean: bool = True) -> None:
        """Snapshot every partition's producer state (a clean shutdown), so the next start replays nothing."""
        if not clean:
            return
        for partition in self._partitions():
            try:
                partition.snapshot_producer_state()
            except OSError as exc:
                log.warning("%s: could not write a producer state snapshot: %s", partition, exc)

    def periodic(self, now_ms: int) -> None:
        """Abort timed-out transactions, forget expired ids and idle producers, retry stuck markers."""
        config = self.cluster.config
        if self._due("timeouts", now_ms, config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms")):
            self.abort_timed_out(now_ms)
            for metadata in list(self._transactions.values()):
                if metadata.state.preparing:
                    self._schedule_markers(metadata.transactional_id)
        if self._due("expiration", now_ms,
                     config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms")):
            self.expire_transactional_ids(now_ms)
        if self._due("producers", now_ms, config.get_int("producer.id.expiration.check.interval.ms")):
            for partition in self._partitions():
                partition.remove_expired_producers(now_ms)

    def _due(self, name: str, now_ms: int, interval_ms: int) -> bool:
        if now_ms - self._last_run.get(name, 0) < interval_ms:
            return False
        self._last_run[name] = now_ms
        return True

    # --- InitProducerId ----------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1) -> InitResult:
        """InitProducerId: a new idempotent producer id, or the transactional id's producer id with a new epoch."""
        if transactional_id is None:
            return InitResult(ErrorCode.NONE, self.producer_ids.next_id(), 0)
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.cluster.config.get_int("transaction.max.timeout.ms"):
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        now = self.clock()
        metadata = self._transactions.get(transactional_id)
        if metadata is None:
            metadata = new_metadata(transactional_id, self.producer_ids.next_id(), timeout_ms, now)
        expected = None if producer_id < 0 else (producer_id, producer_epoch)
        if expected is not None and not (
                metadata.producer_epoch == NO_EPOCH
                or producer_id == metadata.producer_id
                or (producer_id == metadata.previous_producer_id and producer_epoch >= 32766)):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        if metadata.state.preparing or transactional_id in self._markers_scheduled:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if metadata.state == TransactionState.ONGOING:
            # Abort the open transaction with a bumped epoch (never returned); the retry bumps again.
            if not self._fence_and_abort(metadata, now):
                return InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        expected_epoch = None if expected is None else producer_epoch
        if metadata.epoch_exhausted and (expected_epoch is None or expected_epoch == metadata.producer_epoch):
            updated = prepare_init(metadata, timeout_ms, expected_epoch, now, new_producer_id=self.producer_ids.next_id())
        else:
            updated = prepare_init(metadata, timeout_ms, expected_epoch, now)
        if updated is None:
            return InitResult(ErrorCode.PRODUCER_FENCED)
        if not self._try_store(updated):
            return InitResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        log.info("initialized transactional id %s with producer id %d epoch %d", transactional_id,
                 updated.producer_id, updated.producer_epoch)
        return InitResult(ErrorCode.NONE, updated.producer_id, updated.producer_epoch)

    # --- adding partitions -------------------------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn): the partitions join the ongoing transaction."""
        wanted = frozenset(partitions)
        metadata, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        if metadata.state.preparing or transactional_id in self._markers_scheduled:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state == TransactionState.ONGOING and wanted <= metadata.partitions:
            return ErrorCode.NONE
        if not self._try_store(prepare_add_partitions(metadata, wanted, self.clock())):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition of a group, which AddOffsetsToTxn adds to the transaction."""
        topic = self.cluster.topics.get(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic is not None else self.cluster.config.get_int(
            "offsets.topic.num.partitions")
        return OFFSETS_TOPIC, partition_for(group_id, count)

    def verify_partition(self, producer_id: int, producer_epoch: int, partition: Partition) -> ErrorCode:
        """May a transaction's first batch land in ``partition``? NONE, or the Produce error to answer."""
        transactional_id = self._by_producer_id.get(producer_id)
        metadata = None if transactional_id is None else self._transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if metadata.state.preparing:
            # CONCURRENT_TRANSACTIONS, answered as Kafka does to Produce: a retriable error every client retries.
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if metadata.state != TransactionState.ONGOING or (partition.topic.name, partition.index) not in \
                metadata.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    def verify_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       group_id: str) -> ErrorCode:
        """May TxnOffsetCommit stage offsets of ``group_id`` in this transaction? (AddOffsetsToTxn came first.)"""
        metadata, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        if metadata.state.preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if metadata.state != TransactionState.ONGOING or self.offsets_partition(group_id) not in metadata.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    # --- ending ------------------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        done: Done) -> ErrorCode | None:
        """EndTxn. Returns the answer, or None when ``done`` will be called once the markers are written."""
        metadata, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        state = metadata.state
        if transactional_id in self._markers_scheduled:
            if state == (TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return ErrorCode.INVALID_TXN_STATE
        if state == TransactionState.ONGOING:
            now = self.clock()
            if not self._try_store(prepare_abort_or_commit(metadata, commit, now)):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            self._waiters.setdefault(transactional_id, []).append(done)
            self._schedule_markers(transactional_id)
            return None
        if state == TransactionState.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        if state == TransactionState.COMPLETE_ABORT:
            return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
        if state.preparing:  # prepared and not yet scheduled (a marker failed): the retry is under way
            same = state == (TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT)
            return ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE  # Empty: nothing to end

    def abort_timed_out(self, now_ms: int) -> list[str]:
        """Fence and abort every Ongoing transaction older than its timeout; the ids aborted."""
        aborted = []
        for metadata in list(self._transactions.values()):
            if (metadata.state == TransactionState.ONGOING
                    and metadata.transactional_id not in self._markers_scheduled
                    and metadata.start_ms + metadata.timeout_ms < now_ms):
                log.info("aborting transaction of %s (producer id %d epoch %d): open for %d ms, timeout %d ms",
                         metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
                         now_ms - metadata.start_ms, metadata.timeout_ms)
                if self._fence_and_abort(metadata, now_ms):
                    aborted.append(metadata.transactional_id)
        return aborted

    def _fence_and_abort(self, metadata: TransactionMetadata, now_ms: int) -> bool:
        """Bump the epoch and move to PrepareAbort (one record), then schedule the markers."""
        if not self._try_store(prepare_abort_or_commit(prepare_fence(metadata), False, now_ms)):
            return False
        self._schedule_markers(metadata.transactional_id)
        return True

    def _schedule_markers(self, transactional_id: str) -> None:
        if transactional_id in self._markers_scheduled:
            return
        self._markers_scheduled.add(transactional_id)
        schedule = self._schedule
        if schedule is None:
            try:
                schedule = asyncio.get_running_loop().call_soon
            except RuntimeError:
                schedule = _call_now
        schedule(lambda: self.write_markers(transactional_id))

    def write_markers(self, transactional_id: str) -> None:
        """Write the markers of a prepared transaction, then complete it and answer its EndTxn."""
        self._markers_scheduled.discard(transactional_id)
        metadata = self._transactions.get(transactional_id)
        if metadata is None or not metadata.state.preparing:
            return
        commit = metadata.state == TransactionState.PREPARE_COMMIT
        now = self.clock()
        try:
            offsets_partitions = False
            for topic, index in sorted(metadata.partitions):
                partition = self.cluster.topics.partition(topic, index)
                if partition is None:  # deleted meanwhile: nothing to mark, as in Kafka
                    continue
                try:
                    partition.append_marker(metadata.producer_id, metadata.producer_epoch, commit,
                                            COORDINATOR_EPOCH, now)
                except AppendError as exc:
                    log.warning("%s: marker for %s not written: %s", partition, transactional_id, exc.message)
                offsets_partitions = offsets_partitions or topic == OFFSETS_TOPIC
            if offsets_partitions:
                groups = getattr(self.cluster, "group_coordinator", None)
                if groups is not None:
                    groups.complete_transaction(metadata.producer_id, commit)
            self._store(prepare_complete(metadata, self.clock()))
        except OSError as exc:
            log.error("could not complete the transaction of %s (will retry): %s", transactional_id, exc)
            return
        for done in self._waiters.pop(transactional_id, []):
            done(ErrorCode.NONE)

    # --- expiration --------------------------------------------------------------------------------

    def expire_transactional_ids(self, now_ms: int) -> list[str]:
        """Forget ids idle (Empty, CompleteCommit, CompleteAbort) for ``transactional.id.expiration.ms``."""
        limit = now_ms - self.cluster.config.get_int("transactional.id.expiration.ms")
        expired = [m for m in self._transactions.values()
                   if m.state.complete_or_empty and m.last_update_ms <= limit
                   and m.transactional_id not in self._markers_scheduled]
        forgotten = []
        for metadata in expired:
            prepare_dead(metadata)  # checks the transition
            try:
                self._write(metadata.transactional_id, None)
            except OSError as exc:
                log.error("could not expire transactional id %s: %s", metadata.transactional_id, exc)
                break
            self._forget(metadata.transactional_id)
            forgotten.append(metadata.transactional_id)
            log.info("transactional id %s expired", metadata.transactional_id)
        return forgotten

    # --- describing --------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._transactions.get(transactional_id)

    def transactions(self) -> list[TransactionMetadata]:
        return list(self._transactions.values())

    def is_marking(self, transactional_id: str) -> bool:
        return transactional_id in self._markers_scheduled

    # --- internals ---------------------------------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> tuple[TransactionMetadata | None, ErrorCode]:
        if not transactional_id:
            return None, ErrorCode.INVALID_REQUEST
        metadata = self._transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return metadata, ErrorCode.NONE

    def _try_store(self, metadata: TransactionMetadata) -> bool:
        """``_store``, answering a storage failure as Kafka does: COORDINATOR_NOT_AVAILABLE (retriable)."""
        try:
            self._store(metadata)
        except OSError as exc:
            log.error("could not write the state of %s to %s: %s", metadata.transactional_id,
                      TRANSACTION_STATE_TOPIC, exc)
            return False
        return True

    def _store(self, metadata: TransactionMetadata) -> None:
        """Write the new value to the transaction log, then install it (OSError: nothing changed)."""
        if metadata.state == TransactionState.PREPARE_EPOCH_FENCE:
            raise IllegalTransition("PrepareEpochFence is never written")
        self._write(metadata.transactional_id, encode_value(metadata))
        self._install(metadata)

    def _write(self, transactional_id: str, value: bytes | None) -> None:
        key = encode_key(transactional_id)
        self.log.append(self.log.partition_for(transactional_id), [(key, value)], self.clock())

    def _install(self, metadata: TransactionMetadata) -> None:
        previous = self._transactions.get(metadata.transactional_id)
        if previous is not None and self._by_producer_id.get(previous.producer_id) == metadata.transactional_id:
            del self._by_producer_id[previous.producer_id]
        self._transactions[metadata.transactional_id] = metadata
        self._by_producer_id[metadata.producer_id] = metadata.transactional_id

    def _forget(self, transactional_id: str) -> None:
        metadata = self._transactions.pop(transactional_id, None)
        if metadata is not None and self._by_producer_id.get(metadata.producer_id) == transactional_id:
            del self._by_producer_id[metadata.producer_id]

    def _partitions(self) -> Iterable[Partition]:
        for topic in self.cluster.topics:
            yield from topic.partitions


def _call_now(callback: Callable[[], None]) -> None:
    callback()
