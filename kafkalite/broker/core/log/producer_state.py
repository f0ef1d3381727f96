"""Per-partition producer state: idempotent sequence checks, open transactions and the last stable offset.

Theory of operation
-------------------
Every batch with a producer id (idempotent or transactional producers) carries the producer's
*epoch* and the *sequence number* of its first record; the last record's sequence follows from the
batch's offset delta, wrapping from 2**31-1 to 0. For each producer id seen in a partition the
:class:`ProducerStateManager` keeps a :class:`ProducerStateEntry`: the current epoch, the sequence
and offset ranges of the last five batches appended (a producer has at most five requests in
flight), the coordinator epoch of its last transaction marker, the timestamp of its last write and,
while a transaction is open in this partition, the offset where it began.

A batch from a client is judged against that entry before it is appended (``check_client_batch``;
a dict lookup and a few integer compares, the only cost idempotence adds to the produce path):

* same epoch and the same first/last sequence as one of the five remembered batches: a *duplicate*
  (a retry of a batch that was written but whose answer was lost). It is not appended; the producer
  is answered with success and the original base offset.
* an epoch older than the entry's: INVALID_PRODUCER_EPOCH (a fenced zombie).
* a newer epoch must start again at sequence 0; the same epoch must continue at last sequence + 1:
  otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.
* a producer this partition has no state for (new, expired, or whose records retention removed)
  may start at any sequence. Kafka brokers have done this since 2.5 (KIP-360) instead of answering
  UNKNOWN_PRODUCER_ID, which today's clients only expect from older brokers.
* a non-transactional batch while the producer has a transaction open here: INVALID_TXN_STATE.

After the append, ``on_data_batch`` records the batch. A transactional batch from a producer with
no open transaction here opens one at the batch's base offset. A COMMIT or ABORT *control marker*
written by the transaction coordinator (``on_marker``) closes it; an aborted one is added to the
:class:`~kafkalite.broker.core.log.txn_index.AbortedTransactionIndex`. The *last stable offset* (LSO) is the
first offset of the oldest open transaction, or the high watermark when none is open:
read_committed consumers never read past it.

Producers idle for ``producer.id.expiration.ms`` (by the timestamp of their last batch, as in
Kafka) and without an open transaction are forgotten by ``remove_expired``.

Persistence follows Kafka's scheme. ``<offset>.snapshot`` files in the partition directory hold
every entry (all five batches, unlike Kafka's single one) as the state was with the log ending
at ``offset``; one is written when the log rolls a segment and on a clean shutdown, the two newest
are kept. The file is ``version int16 (1), crc32c uint32 of the rest, count int32`` and per
producer ``producer id int64, epoch int16, coordinator epoch int32, last timestamp int64, open
transaction first offset int64 (-1 none), batch count int8`` and per batch ``first sequence int32,
last sequence int32, first offset int64, last offset int64, max timestamp int64``. On start
(``load``) the newest snapshot not beyond the log end offset that passes its CRC is read and the
log is replayed from its offset (batch headers only, plus the one record of each marker); without
a snapshot the whole log is replayed. So duplicate detection and open transactions survive a
restart, clean or not. With in-memory storage nothing is written.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kafkalite.broker.core.log.txn_index import AbortedTransactionIndex, names_ending_with, sync_files
from kafkalite.protocol._crc32c import crc32c
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import ControlRecordType, RecordBatch, iter_batches

if TYPE_CHECKING:
    from kafkalite.broker.core.log.aborted import AbortedTxn
    from kafkalite.broker.core.log.partition_log import PartitionLog

log = logging.getLogger("kafkalite.producer_state")

__all__ = [
    "BatchMetadata",
    "PendingSnapshot",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SNAPSHOT_SUFFIX",
]

SNAPSHOT_SUFFIX: Final = ".snapshot"
MAX_BATCHES_PER_PRODUCER: Final = 5
NO_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
_INT32_MAX: Final = 2**31 - 1
_SNAPSHOT_VERSION: Final = 1
_SNAPSHOTS_KEPT: Final = 2
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_REPLAY_CHUNK: Final = 4 * 1024 * 1024



class PendingSnapshot:
    """A producer state snapshot decided on the event loop, to write anywhere (it owns bytes and paths only)."""

    __slots__ = ("path", "data", "sync_first", "obsolete")

    def __init__(self, path: Path, data: bytes, sync_first: list[Path], obsolete: list[Path]) -> None:
        self.path = path
        self.data = data
        self.sync_first = sync_first  # aborted-transaction index files to fsync before the snapshot lands
        self.obsolete = obsolete  # older snapshots to remove once it has

    def run(self) -> None:
        sync_files(self.sync_first)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(self.data)
        os.replace(tmp, self.path)
        for path in self.obsolete:
            path.unlink(missing_ok=True)


class BatchMetadata:
    """Where one appended batch of a producer went, and which sequences it covered.

    A slotted class with its ``__init__`` written out, equal to another with the same fields: as cheap to
    make as the named tuple it was, without the class a named tuple builds at import."""

    __slots__ = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")

    def __init__(self, first_seq: int, last_seq: int, first_offset: int, last_offset: int, timestamp: int) -> None:
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp  # the batch's max timestamp as stored

    def _values(self) -> tuple[int, int, int, int, int]:
        return self.first_seq, self.last_seq, self.first_offset, self.last_offset, self.timestamp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchMetadata):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        return ("BatchMetadata(first_seq={}, last_seq={}, first_offset={}, last_offset={}, timestamp={})"
                .format(*self._values()))


class ProducerStateEntry:
    """What one partition knows about one producer id."""

    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch", "last_timestamp", "txn_first_offset")

    def __init__(self, producer_id: int, epoch: int = NO_EPOCH) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: list[BatchMetadata] = []  # the last five, oldest first
        self.coordinator_epoch = -1
        self.last_timestamp = -1
        self.txn_first_offset = -1  # first offset of the transaction open in this partition, -1 if none

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.epoch}, "
                f"last_seq={self.last_seq}, txn_first_offset={self.txn_first_offset})")

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def set_epoch(self, epoch: int) -> None:
        """A new epoch starts with no remembered batches (its sequences start again at 0)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` directly follows ``last_seq`` (sequences wrap from int32 max to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    """The producer entries, open transactions and aborted transactions of one partition."""

    def __init__(self, name: str, directory: Path | None) -> None:
        self.name = name  # "topic-partition", for log lines
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.aborted = AbortedTransactionIndex(directory)
        self._open_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._first_unstable: int | None = None
        self._snapshot_offsets: list[int] = []  # snapshot files on disk, ascending
        self._changed = False  # anything recorded since the last snapshot

    # --- the produce path --------------------------------------------------------------------------

    def check_client_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        """Judge a client batch with a producer id; the original batch if it is a duplicate.

        Raises :class:`KafkaError` when the batch must be refused.
        """
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            return None
        epoch = batch.producer_epoch
        first_seq = batch.base_sequence
        if epoch == entry.epoch:
            duplicate = entry.find_duplicate(first_seq, batch.last_sequence)
            if duplicate is not None:
                return duplicate
        if epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"Epoch {epoch} of producer {batch.producer_id} is older than the last seen "
                                     f"epoch {entry.epoch} in {self.name}")
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                         f"Invalid sequence number {first_seq} for new epoch {epoch} of producer "
                                         f"{batch.producer_id} in {self.name} (a new epoch starts at 0)")
        elif not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"Out of order sequence number for producer {batch.producer_id} in "
                                     f"{self.name}: {first_seq} (incoming), {entry.last_seq} (last appended)")
        if entry.txn_first_offset >= 0 and not batch.is_transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                     f"Expected a transactional write from producer {batch.producer_id} in "
                                     f"{self.name}: it has a transaction open")
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Judge a transaction marker about to be written (raises :class:`KafkaError`)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                     f"Marker epoch {epoch} of producer {producer_id} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                     f"Marker coordinator epoch {coordinator_epoch} is older than "
                                     f"{entry.coordinator_epoch} for producer {producer_id}")

    def has_open_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.txn_first_offset >= 0

    def on_data_batch(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                      last_offset: int, timestamp: int, transactional: bool) -> None:
        """Record an appended data batch (from a client, a coordinator or the replay of the log)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        entry.set_epoch(epoch)
        if first_seq >= 0:
            batches = entry.batches
            batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
            if len(batches) > MAX_BATCHES_PER_PRODUCER:
                del batches[0]
        entry.last_timestamp = timestamp
        if transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self._open_txns[producer_id] = first_offset
            if self._first_unstable is None or first_offset < self._first_unstable:
                self._first_unstable = first_offset
        self._changed = True

    def on_marker(self, producer_id: int, epoch: int, committed: bool, coordinator_epoch: int, offset: int,
                  timestamp: int, segment_base_offset: int) -> AbortedTxn | None:
        """Record a COMMIT/ABORT marker appended at ``offset``; the aborted transaction it ends, if any."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first_offset = entry.txn_first_offset
        entry.txn_first_offset = -1
        self._changed = True
        if first_offset < 0:
            return None
        del self._open_txns[producer_id]
        self._first_unstable = min(self._open_txns.values()) if self._open_txns else None
        if committed:
            return None
        from kafkalite.broker.core.log.aborted import AbortedTxn  # the first abort: the class is made now

        aborted = AbortedTxn(producer_id, first_offset, offset,
                             offset + 1 if self._first_unstable is None else self._first_unstable)
        self.aborted.append(aborted, segment_base_offset)
        return aborted

    # --- reading the state -------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None when none is open."""
        return self._first_unstable

    @property
    def open_transactions(self) -> dict[int, int]:
        return dict(self._open_txns)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.aborted.collect(fetch_offset, upper_bound)

    def max_producer_id(self) -> int:
        return max(self.producers, default=-1)

    # --- expiration and retention ------------------------------------------------------------------

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` that have no open transaction; how many went."""
        expired = [producer_id for producer_id, entry in self.producers.items()
                   if entry.txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms]
        for producer_id in expired:
            del self.producers[producer_id]
        if expired:
            self._changed = True
        return len(expired)

    def on_log_start_offset(self, log_start_offset: int, segment_bases: list[int]) -> None:
        """Retention or DeleteRecords moved the log start offset: drop what lies wholly below it."""
        self.aborted.truncate_head(log_start_offset, segment_bases)
        doomed = [offset for offset in self._snapshot_offsets if offset < log_start_offset]
        for offset in doomed:
            self._delete_snapshot(offset)

    # --- snapshots ---------------------------------------------------------------------------------

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshot_offsets[-1] if self._snapshot_offsets else None

    def take_snapshot(self, log_end_offset: int, *, force: bool = False) -> Path | None:
        """Write ``<log end offset>.snapshot`` unless the newest one already says the same (blocks;
        ``prepare_snapshot`` is the same in two halves, for writing off the event loop)."""
        pending = self.prepare_snapshot(log_end_offset, force=force)
        if pending is None:
            return None
        pending.run()
        return pending.path

    def prepare_snapshot(self, log_end_offset: int, *, force: bool = False) -> PendingSnapshot | None:
        """The snapshot of the state now, as bytes to write with :meth:`PendingSnapshot.run` (anywhere:
        it touches no state), or None when the newest snapshot already says the same. The older
        snapshots beyond the two kept are removed by ``run``, after the new one is written."""
        if self.directory is None:
            return None
        if not force and not self._changed and self.latest_snapshot_offset == log_end_offset:
            return None
        path = self.directory / f"{log_end_offset:020d}{SNAPSHOT_SUFFIX}"
        # A snapshot must never cover an abort the index could still lose: run() fsyncs these first.
        pending = PendingSnapshot(path, encode_snapshot(self.producers.values()), self.aborted.take_unsynced(), [])
        if log_end_offset not in self._snapshot_offsets:
            self._snapshot_offsets.append(log_end_offset)
            self._snapshot_offsets.sort()
        while len(self._snapshot_offsets) > _SNAPSHOTS_KEPT:
            pending.obsolete.append(self.directory / f"{self._snapshot_offsets.pop(0):020d}{SNAPSHOT_SUFFIX}")
        self._changed = False
        return pending

    def snapshot_failed(self, pending: PendingSnapshot) -> None:
        """``pending.run`` failed: the aborted-transaction files it was to fsync still need it, and the
        state must be written again."""
        self.aborted.restore_unsynced(pending.sync_first)
        self._changed = True

    def _delete_snapshot(self, offset: int) -> None:
        if self.directory is not None:
            (self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}").unlink(missing_ok=True)
        if offset in self._snapshot_offsets:
            self._snapshot_offsets.remove(offset)

    # --- loading -----------------------------------------------------------------------------------

    def load(self, partition_log: PartitionLog, now_ms: int, expiration_ms: int) -> None:
        """Rebuild the state at start: the newest usable snapshot, then a replay of the log after it."""
        log_start, log_end = partition_log.log_start_offset, partition_log.log_end_offset
        bases = partition_log.segment_base_offsets()
        start = log_start
        loaded: list[ProducerStateEntry] | None = None
        if self.directory is not None and self.directory.is_dir():
            self._snapshot_offsets = self._list_snapshots()
            for offset in [o for o in self._snapshot_offsets if o > log_end or o < log_start]:
                self._delete_snapshot(offset)
            for offset in reversed(list(self._snapshot_offsets)):
                path = self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
                try:
                    loaded = decode_snapshot(path.read_bytes())
                except (OSError, ValueError) as exc:
                    log.warning("%s: ignoring producer snapshot %s: %s", self.name, path.name, exc)
                    self._delete_snapshot(offset)
                    continue
                start = offset
                break
        self.aborted.load(bases, log_start, start)
        for entry in loaded or ():
            if entry.txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms:
                continue
            self.producers[entry.producer_id] = entry
            if entry.txn_first_offset >= 0:
                self._open_txns[entry.producer_id] = entry.txn_first_offset
        self._first_unstable = min(self._open_txns.values()) if self._open_txns else None
        replayed = self._replay(partition_log, start, bases)
        self._changed = replayed > 0
        if replayed:
            log.info("%s: rebuilt producer state from offset %d (%d batches replayed)", self.name, start, replayed)
            self.take_snapshot(log_end)

    def _replay(self, partition_log: PartitionLog, offset: int, bases: list[int]) -> int:
        replayed = 0
        for batch in _batches_from(partition_log, offset):
            if batch.producer_id < 0:
                continue
            replayed += 1
            if batch.is_control:
                try:
                    marker = batch.end_transaction_marker()
                except CorruptRecordError:
                    marker = None
                if marker is None:
                    continue
                segment_base = bases[max(bisect_right(bases, batch.base_offset) - 1, 0)] if bases else 0
                self.on_marker(batch.producer_id, batch.producer_epoch,
                               marker.control_type == ControlRecordType.COMMIT, marker.coordinator_epoch,
                               batch.base_offset, batch.max_timestamp, segment_base)
            else:
                self.on_data_batch(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                   batch.last_sequence, batch.base_offset, batch.last_offset, batch.max_timestamp,
                                   batch.is_transactional)
        return replayed

    def _list_snapshots(self) -> list[int]:
        assert self.directory is not None
        offsets = []
        for name in names_ending_with(self.directory, SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)


def _batches_from(partition_log: PartitionLog, offset: int) -> Iterator[RecordBatch]:
    """Every stored batch ending at or after ``offset``, in order."""
    while offset < partition_log.log_end_offset:
        result = partition_log.read(offset, _REPLAY_CHUNK, min_one_batch=True)
        if not result.size:
            return
        for batch in iter_batches(result.to_bytes()):
            if isinstance(batch, RecordBatch) and batch.last_offset >= offset:
                yield batch
                offset = batch.next_offset


# --------------------------------------------------------------------------------------------------
# Snapshot files


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for entry in entries:
        count += 1
        body += _ENTRY.pack(entry.producer_id, entry.epoch, entry.coordinator_epoch, entry.last_timestamp,
                            entry.txn_first_offset, len(entry.batches))
        for batch in entry.batches:
            body += _BATCH.pack(batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset,
                                batch.timestamp)
    rest = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", _SNAPSHOT_VERSION, crc32c(rest)) + rest


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot file; ValueError if it is truncated, corrupt or of an unknown version."""
    if len(data) < _HEADER.size:
        raise ValueError("snapshot is shorter than its header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != _SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c(data[6:]) != crc:
        raise ValueError("snapshot CRC mismatch")
    entries: list[ProducerStateEntry] = []
    position = _HEADER.size
    try:
        for _ in range(count):
            producer_id, epoch, coordinator_epoch, last_timestamp, txn_first, batch_count = _ENTRY.unpack_from(
                data, position)
            position += _ENTRY.size
            entry = ProducerStateEntry(producer_id, epoch)
            entry.coordinator_epoch = coordinator_epoch
            entry.last_timestamp = last_timestamp
            entry.txn_first_offset = txn_first
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
                position += _BATCH.size
            entries.append(entry)
    except struct.error as exc:
        raise ValueError(f"snapshot is truncated: {exc}") from None
    if position != len(data):
        raise ValueError(f"{len(data) - position} bytes after the last snapshot entry")
    return entries
