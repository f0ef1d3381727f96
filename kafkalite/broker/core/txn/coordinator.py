"""The transaction coordinator: the one entry point handlers use for producer ids and transactions.

See the ``kafkalite.broker.core.txn`` package docstring for the theory of operation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafkalite.broker.config import config_field
from kafkalite.broker.core.coordinator_log import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, CoordinatorLog
from kafkalite.broker.core.log.partition_log import wall_clock_ms
from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import TopicManager
from kafkalite.broker.core.txn.producer_ids import ProducerIdAllocator
from kafkalite.broker.core.txn.state import (
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
from kafkalite.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkalite.transactions")

__all__ = ["InitResult", "TransactionCoordinator", "TransactionSettings", "COORDINATOR_EPOCH"]

COORDINATOR_EPOCH = 0  # one coordinator that never moves
TopicPartition = tuple[str, int]
Done = Callable[[ErrorCode], None]


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    """The transaction coordinator's configuration: each field mirrors the broker key it names."""

    max_timeout_ms: int = config_field("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = config_field("transactional.id.expiration.ms")
    abort_timed_out_interval_ms: int = config_field("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    remove_expired_interval_ms: int = config_field("transaction.remove.expired.transaction.cleanup.interval.ms")


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    """Every transactional id of the broker. Touch only from the event loop.

    ``log`` is ``__transaction_state``; ``offsets_log`` is ``__consumer_offsets`` (AddOffsetsToTxn adds
    the group's partition of it to the transaction); ``complete_offsets(producer_id, commit)`` is told
    when the markers of a transaction that staged offsets are written (the group coordinator's
    ``complete_transaction``). ``settings`` may be replaced when a dynamic broker config changes.
    """

    def __init__(self, topics: TopicManager, log: CoordinatorLog, producer_ids: ProducerIdAllocator,
                 settings: TransactionSettings, *, offsets_log: CoordinatorLog,
                 complete_offsets: Callable[[int, bool], None] | None = None,
                 clock: Callable[[], int] | None = None,
                 schedule: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.topics = topics
        self.log = log
        self.producer_ids = producer_ids
        self.settings = settings
        self.offsets_log = offsets_log
        self._complete_offsets = complete_offsets
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
        for partition in self.topics.partitions():
            highest = max(highest, partition.producer_state.max_producer_id())
        self.producer_ids.open(at_least=highest + 1)
        now = self.clock()
        self._last_run = dict.fromkeys(("timeouts", "expiration"), now)
        prepared = [m.transactional_id for m in self._transactions.values() if m.state.preparing]
        for transactional_id in prepared:
            self._schedule_markers(transactional_id)
        if count:
            log.info("loaded %d transactional ids from %d %s records (%d prepared, completing them)",
                     len(self._transactions), count, TRANSACTION_STATE_TOPIC, len(prepared))

    def periodic(self, now_ms: int) -> None:
        """Abort timed-out transactions, forget expired ids, retry stuck markers."""
        settings = self.settings
        if self._due("timeouts", now_ms, settings.abort_timed_out_interval_ms):
            self.abort_timed_out(now_ms)
            for metadata in list(self._transactions.values()):
                if metadata.state.preparing:
                    self._schedule_markers(metadata.transactional_id)
        if self._due("expiration", now_ms, settings.remove_expired_interval_ms):
            self.expire_transactional_ids(now_ms)

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
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
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
            updated = prepare_init(metadata, timeout_ms, expected_epoch, now,
                                   new_producer_id=self.producer_ids.next_id())
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
        return OFFSETS_TOPIC, self.offsets_log.partition_for(group_id)

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
        if metadata.state != TransactionState.ONGOING or (partition.topic_name, partition.index) not in \
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
        if self._schedule is not None:
            self._schedule(lambda: self.write_markers(transactional_id))
            return
        try:
            asyncio.get_running_loop().call_soon(self.write_markers, transactional_id)
        except RuntimeError:  # no loop runs (state loaded outside the broker): write them now
            self.write_markers(transactional_id)

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
                partition = self.topics.partition(topic, index)
                if partition is None:  # deleted meanwhile: nothing to mark, as in Kafka
                    continue
                try:
                    partition.append_marker(metadata.producer_id, metadata.producer_epoch, commit,
                                            COORDINATOR_EPOCH, now)
                except KafkaError as exc:
                    log.warning("%s: marker for %s not written: %s", partition, transactional_id, exc.message)
                offsets_partitions = offsets_partitions or topic == OFFSETS_TOPIC
            if offsets_partitions and self._complete_offsets is not None:
                self._complete_offsets(metadata.producer_id, commit)
            self._store(prepare_complete(metadata, self.clock()))
        except OSError as exc:
            log.error("could not complete the transaction of %s (will retry): %s", transactional_id, exc)
            return
        for done in self._waiters.pop(transactional_id, []):
            done(ErrorCode.NONE)

    # --- expiration --------------------------------------------------------------------------------

    def expire_transactional_ids(self, now_ms: int) -> list[str]:
        """Forget ids idle (Empty, CompleteCommit, CompleteAbort) for ``transactional.id.expiration.ms``."""
        limit = now_ms - self.settings.transactional_id_expiration_ms
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

