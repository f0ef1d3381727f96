"""One topic partition: validating appends, serving reads, and waking long-polling fetches.

Theory of operation
-------------------
This broker is the only replica, so every partition is led here with leader epoch 0, the
high watermark equals the log end offset as soon as an append returns, and ``acks=all`` means
"appended" (plus an fsync when ``log.flush.on.ack`` is set; the handler does that).

An append takes the bytes of one magic-2 batch from a Produce request and checks what Kafka's
``LogValidator`` checks for a client batch, from the 61-byte header: framing, CRC-32C, an offset
range consistent with the record count, no control batches from clients, a sequence when there
is a producer id, the size against ``max.message.bytes``. Offsets are assigned by rewriting the
base offset in place; the log appends the bytes as they are.

Timestamps follow Kafka's rules. With ``message.timestamp.type=LogAppendTime`` the header gets
the LogAppendTime flag and the append time as its max timestamp (the CRC is recomputed); a
client batch that already carries the flag is INVALID_TIMESTAMP. With CreateTime, Kafka stores
as the batch's max timestamp the largest record timestamp (-1 when no record has one), whatever
the client's header said, and checks every record timestamp other than -1 against
``message.timestamp.before.max.ms`` and ``after.max.ms``. Reading every record's timestamp costs
a walk over the records (and a decompression), so the header's max timestamp is trusted when it
is plausible: a first timestamp of 0 or more and a max timestamp not below it (equal to it in a
one-record batch). Every client that computes the header writes such a header; the clients known
to send a wrong one leave it unset (0 or -1 under records without a timestamp, as librdkafka 2.0
does; a value below the first timestamp, as Sarama did), and those batches are walked and their
header corrected. The records are also walked when ``message.timestamp.before.max.ms`` is set
(the smallest timestamp is not in the header), and decoded in full only to rebuild a batch whose
codec is not the topic's ``compression.type``, to name the records a timestamp check
refused (``RecordValidationError``, which Produce v8+ reports per record as Kafka does), or, on a
compacted topic, to refuse records without a key (INVALID_RECORD, as Kafka's validator does).

Batches with a producer id go through the partition's ``ProducerStateManager`` (see
``kafkalite.broker.core.log.producer_state``): before the append, a duplicate of one of the producer's last five
batches is answered with its original offsets and not written again, and a sequence gap, a fenced
epoch or a non-transactional write inside an open transaction is refused; after it, the batch is
recorded. The first transactional batch of a transaction in this partition is first checked with
the transaction coordinator (``verify_transaction``), so that data of a transaction the
coordinator does not know can never hold the last stable offset back forever (Kafka's KIP-890
verification). ``append_marker`` writes the COMMIT/ABORT control batch the coordinator asks for
and closes the producer's transaction here. The last stable offset is the first offset of the
oldest open transaction (or the high watermark); read_committed reads stop there and list the
aborted transactions of the range they return. A segment roll writes a producer state snapshot.

Fetches that find too little data park a listener on each partition they read; every append calls
the listeners of its partition, which resolve their future once ``min_bytes`` have arrived; while
they are told, ``appended`` holds the batch just stored, so a woken fetch can answer from a copy of
it (``read_appended``) instead of reading the log again. Fetch sessions keep a *watcher* on each
partition they hold: it is told of every append (with its size),
of the partition's deletion (size 0) and of a log start offset or last stable offset that moved
without an append (``OFFSETS_MOVED``), so a session knows which of its partitions changed without
looking at the others. Timers and futures all live on the event loop, so nothing needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kafkalite.broker.config import TOPIC_KEYS, TopicConfig
from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.disk import REGION_MIN_BYTES
from kafkalite.broker.core.log.partition_log import PartitionLog, wall_clock_ms
from kafkalite.broker.core.log.producer_state import ProducerStateManager
from kafkalite.broker.core.log.region import FileRegion
from kafkalite.broker.core.log.segment import Piece
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    build_end_transaction_marker,
    build_record_batch,
)

if TYPE_CHECKING:
    from kafkalite.broker.core.log.aborted import AbortedTxn
    from kafkalite.protocol.records import Record

log = logging.getLogger("kafkalite.partition")

__all__ = ["AppendInfo", "AppendedBatch", "Partition", "ReadInfo", "RecordValidationError", "LEADER_EPOCH",
           "OFFSETS_MOVED"]

LEADER_EPOCH = 0
OFFSETS_MOVED = -1  # the size a watcher is told when the log start or last stable offset moved without an append
_LONG_MAX = (1 << 63) - 1
_TIMESTAMP_TYPE_BIT = 0x08  # batch attributes (docs/record-batch.md)
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_TOPIC_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


class RecordValidationError(KafkaError):
    """Records of a batch refused one by one: ``record_errors`` holds ``(batch index, message)`` for
    each, which Produce v8+ returns alongside the partition's error, as Kafka's log validator does."""

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(error_code, message)
        self.record_errors = record_errors


class AppendInfo:
    """What a Produce answer says of an append: the batch's base offset, its log append time (-1
    unless the topic uses LogAppendTime) and the partition's log start offset."""

    __slots__ = ("base_offset", "log_append_time", "log_start_offset")

    base_offset: Final[int]
    log_append_time: Final[int]
    log_start_offset: Final[int]

    def __init__(self, base_offset: int, log_append_time: int, log_start_offset: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset


class ReadInfo:
    """What a Fetch answer says of a partition: the stored batches read (bytes, or FileRegion objects
    when the read asked for file regions), their size, the partition's high watermark, last stable
    offset and log start offset, and the aborted transactions overlapping the read (read_committed
    only, else None)."""

    __slots__ = ("records", "size", "high_watermark", "last_stable_offset", "log_start_offset",
                 "aborted_transactions")

    def __init__(self, records: list[Piece], size: int, high_watermark: int, last_stable_offset: int,
                 log_start_offset: int, aborted_transactions: list[AbortedTxn] | None = None) -> None:
        self.records = records
        self.size = size
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted_transactions = aborted_transactions

    def buffers(self) -> list[bytes | bytearray | memoryview]:
        """The records as buffers, file regions read."""
        return [piece.read() if isinstance(piece, FileRegion) else piece for piece in self.records]


class AppendedBatch:
    """A copy of the batch an append stored, taken by a waiting fetch from ``Partition.appended``
    while it was told of the append (that batch's buffer may be a request's, reused afterwards)."""

    __slots__ = ("records", "base_offset", "last_offset")

    records: Final[bytes]
    base_offset: Final[int]
    last_offset: Final[int]

    def __init__(self, records: bytes, base_offset: int, last_offset: int) -> None:
        self.records = records
        self.base_offset = base_offset
        self.last_offset = last_offset

    @classmethod
    def of(cls, batch: RecordBatch) -> AppendedBatch | None:
        """The copy, or None for a batch of ``REGION_MIN_BYTES`` or more (read from the log, which
        may answer with a file region)."""
        if batch.size >= REGION_MIN_BYTES:
            return None
        return cls(bytes(batch.buffer), batch.base_offset, batch.last_offset)


Listener = Callable[["Partition", int], None]
# Told (partition, appended bytes) of every append, 0 when the partition is deleted, OFFSETS_MOVED
# when its log start offset or last stable offset moved without an append (fetch sessions).
Watcher = Callable[["Partition", int], None]
# Asked before the first transactional batch of a transaction lands here:
# (producer id, producer epoch, partition) -> NONE, or the error to refuse the batch with.
TransactionVerifier = Callable[[int, int, "Partition"], ErrorCode]


class Partition:
    """A partition of a topic, backed by a ``PartitionLog``.

    ``settings`` are the topic's effective configs; the topic manager replaces them whenever the
    topic's overrides or a broker default change.
    """

    __slots__ = ("topic_name", "index", "log", "settings", "leader_epoch", "producer_state", "_listeners",
                 "_active_segment", "deleted", "background", "_watchers", "_rules_of", "_log_append", "_compacted",
                 "_plain", "appended")

    def __init__(self, topic_name: str, index: int, partition_log: PartitionLog, settings: TopicConfig, *,
                 producer_id_expiration_ms: int, background: Background | None = None) -> None:
        self.topic_name = topic_name
        self.index = index
        self.log = partition_log
        self.settings = settings
        self.leader_epoch = LEADER_EPOCH
        self.deleted = False  # its topic was deleted: waiters woken by that must not touch the log
        self.background = background  # where producer state snapshots are written (None: at once)
        self._listeners: list[Listener] = []
        self._watchers: dict[Watcher, None] = {}
        self.appended: RecordBatch | None = None  # the batch just stored, while its listeners are told
        partition_log.on_log_start_moved = self.offsets_moved
        self.producer_state = ProducerStateManager(f"{topic_name}-{index}", partition_log.directory)
        self.producer_state.load(partition_log, wall_clock_ms(), producer_id_expiration_ms)
        self._active_segment = partition_log.active_segment_base_offset
        self._read_rules(settings)

    def _read_rules(self, settings: TopicConfig) -> None:
        """What appends need of the topic's configs, worked out once per ``settings`` (the topic
        manager replaces the object when a config changes)."""
        self._rules_of = settings
        self._log_append = settings.message_timestamp_type == "LogAppendTime"
        self._compacted = "compact" in settings.cleanup_policy
        # CreateTime, no key required, the producer's codec kept, no lower bound on timestamps
        self._plain = (not self._log_append and not self._compacted and settings.compression_type == "producer"
                       and settings.message_timestamp_before_max_ms >= _LONG_MAX)

    def __repr__(self) -> str:
        return f"Partition({self.topic_name}-{self.index})"

    # offsets ---------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark when none is open."""
        first_unstable = self.producer_state.first_unstable_offset
        high_watermark = self.log.log_end_offset
        return high_watermark if first_unstable is None or first_unstable > high_watermark else first_unstable

    # appends ---------------------------------------------------------------------------------
    def append_from_client(self, records: memoryview | bytes | bytearray, now_ms: int,
                           verify_transaction: TransactionVerifier | None = None) -> AppendInfo:
        """Validate the single batch of a Produce request's partition and append it.

        A duplicate of a recent batch of the same producer is not appended: its original offsets
        are returned.
        """
        # The batch is rewritten in place (base offset, leader epoch), so it must be writable:
        # a view of the connection's receive buffer is; anything else is copied once here.
        if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
            data: bytearray | memoryview = records
        else:
            data = bytearray(records)
        try:
            batch = RecordBatch(data)
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        size = batch.batch_length + LOG_OVERHEAD
        if size != len(records):
            raise KafkaError(ErrorCode.INVALID_RECORD,
                              "Produce requests with version 3+ must have exactly one record batch per partition")
        try:
            batch.validate_crc()
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        settings = self.settings
        if settings is not self._rules_of:
            self._read_rules(settings)
        max_message_bytes = settings.max_message_bytes
        if size > max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                              f"The batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
        count = batch.records_count
        last_offset_delta = batch.last_offset_delta
        if last_offset_delta < 0 or count <= 0 or last_offset_delta + 1 != count:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                              f"Inconsistent batch offset range (last offset delta {last_offset_delta}) "
                              f"and record count {count}")
        attributes = batch.attributes
        if attributes & _CONTROL_BIT:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        producer_id = batch.producer_id
        log_append = self._log_append
        if (producer_id < 0 and not attributes & (_TRANSACTIONAL_BIT | _TIMESTAMP_TYPE_BIT) and self._plain
                and 0 <= batch.base_timestamp <= batch.max_timestamp and (
                    batch.max_timestamp == batch.base_timestamp or count > 1)
                and batch.max_timestamp - now_ms <= settings.message_timestamp_after_max_ms):
            # The common batch (no producer id, CreateTime with a plausible header, a topic that keeps
            # the producer's codec and bounds no timestamp from below), checked as the general path
            # below checks it, without its look-ups: nothing is rewritten but the offsets and the epoch.
            return AppendInfo(self._append(batch, now_ms), -1, self.log.log_start_offset)
        if producer_id >= 0:
            if batch.base_sequence < 0:
                raise KafkaError(ErrorCode.INVALID_RECORD, "Invalid sequence number for a batch with a producer id")
            producer_state = self.producer_state
            duplicate = producer_state.check_client_batch(batch)
            if duplicate is not None:
                log.debug("%s: duplicate batch of producer %d (sequences %d-%d) at offset %d", self, producer_id,
                          duplicate.first_seq, duplicate.last_seq, duplicate.first_offset)
                return AppendInfo(duplicate.first_offset, duplicate.timestamp if log_append else -1,
                                  self.log.log_start_offset)
            if batch.is_transactional and verify_transaction is not None and not producer_state.has_open_transaction(
                    producer_id):
                error = verify_transaction(producer_id, batch.producer_epoch, self)
                if error:
                    raise KafkaError(error, f"Transaction verification of producer {producer_id} epoch "
                                            f"{batch.producer_epoch} for {self} failed: {error.name}")
        elif batch.is_transactional:
            raise KafkaError(ErrorCode.INVALID_RECORD, "A transactional batch needs a producer id")
        client_log_append = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        if client_log_append and (log_append or batch.max_timestamp == NO_TIMESTAMP):
            raise _refuse_records(batch, lambda record: (
                f"Invalid timestamp type in message {_describe(record)}. Producer should not set timestamp "
                "type to LogAppendTime."))
        if self._compacted:
            self._require_keys(batch)
        max_timestamp = NO_TIMESTAMP if log_append else self._create_time_max_timestamp(batch, now_ms, settings)
        target = settings.compression_type
        if target != "producer" and _TOPIC_CODECS.get(target, batch.compression) != batch.compression:
            data = self._recompress(batch, _TOPIC_CODECS[target], now_ms if log_append else None)
            batch = RecordBatch(data)
        elif log_append:
            batch.set_log_append_time(now_ms)
        else:  # a no-op (no CRC to recompute) when the client's header was right
            batch.set_max_timestamp(TimestampType.CREATE_TIME, max_timestamp)
        base_offset = self._append(batch, now_ms)
        return AppendInfo(base_offset, now_ms if log_append else -1, self.log.log_start_offset)

    def _require_keys(self, batch: RecordBatch) -> None:
        """Kafka's LogValidator on a compacted topic: every record needs a key (the cleaner keeps the
        latest record per key, and has nothing to keep a keyless one by). Reads the records."""
        message = f"Compacted topic cannot accept message without key in topic partition {self}."
        try:
            refused = [(index, message) for index, record in enumerate(batch.records()) if record.key is None]
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if refused:
            shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in refused[:3])
            raise RecordValidationError(
                ErrorCode.INVALID_RECORD, f"One or more records have been rejected due to {len(refused)} record "
                f"errors in total, and only showing the first three errors at most: [{shown}]", refused)

    def append_internal(self, data: bytearray, now_ms: int) -> int:
        """Append a batch the broker built itself (coordinator records, possibly transactional)."""
        batch = RecordBatch(data)
        if batch.is_control:
            raise ValueError("control batches are written with append_marker")
        return self._append(batch, now_ms)

    def _append(self, batch: RecordBatch, now_ms: int) -> int:
        """Stamp the leader epoch, append, record the producer's batch, wake waiting fetches."""
        batch.set_partition_leader_epoch(self.leader_epoch)
        result = self.log.append(batch, now_ms)
        if batch.producer_id >= 0:
            self.producer_state.on_data_batch(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                              batch.last_sequence, result.base_offset, result.last_offset,
                                              batch.max_timestamp, batch.is_transactional)
        if result.segment_base_offset != self._active_segment:
            self._on_roll(result.segment_base_offset)
        self.appended = batch  # what a woken fetch may answer with (``read_appended``)
        try:
            self._notify(batch.size)
        finally:
            self.appended = None
        return result.base_offset

    def append_marker(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                      now_ms: int) -> int:
        """Write a COMMIT or ABORT marker for the producer's transaction; return its offset.

        Raises :class:`KafkaError` when the producer state refuses it (an epoch older than the
        producer's, or a fenced coordinator epoch).
        """
        from kafkalite.protocol.records import EndTransactionMarker  # (made on first use, as records decode)

        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        marker = EndTransactionMarker(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
                                      coordinator_epoch)
        data = build_end_transaction_marker(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                                            timestamp=now_ms, partition_leader_epoch=self.leader_epoch)
        result = self.log.append(data, now_ms)
        self.producer_state.on_marker(producer_id, producer_epoch, committed, coordinator_epoch, result.base_offset,
                                      now_ms, result.segment_base_offset)
        if result.segment_base_offset != self._active_segment:
            self._on_roll(result.segment_base_offset)
        self._notify(len(data))
        return result.base_offset

    def _on_roll(self, segment_base_offset: int) -> None:
        """The log rolled: snapshot the producer state, so a restart replays at most one segment. The
        snapshot is taken now and written off the event loop."""
        self._active_segment = segment_base_offset
        pending = self.producer_state.prepare_snapshot(self.log.log_end_offset)
        if pending is None:
            return

        def written(exc: BaseException | None) -> None:
            if exc is not None:
                self.producer_state.snapshot_failed(pending)
                log.warning("%s: could not write a producer state snapshot: %s", self, exc)

        if self.background is None:
            try:
                pending.run()
            except OSError as exc:
                written(exc)
        else:
            self.background.submit(pending.run, written)

    # producer state housekeeping --------------------------------------------------------------
    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle past ``producer.id.expiration.ms``; trim what retention removed."""
        last_stable = self.last_stable_offset
        self.producer_state.on_log_start_offset(self.log.log_start_offset, self.log.segment_base_offsets())
        removed = self.producer_state.remove_expired(now_ms, expiration_ms)
        if self.last_stable_offset != last_stable:
            self.offsets_moved()
        return removed

    def snapshot_producer_state(self) -> None:
        """Write a producer state snapshot at the log end offset (a clean shutdown)."""
        self.producer_state.take_snapshot(self.log.log_end_offset)

    def topic_config(self, key: str) -> str:
        """The effective value of a topic config as Kafka shows it (the override, else the broker default)."""
        known = TOPIC_KEYS[key]
        return known.format(getattr(self.settings, key.replace(".", "_"))) or ""

    def _create_time_max_timestamp(self, batch: RecordBatch, now_ms: int, settings: TopicConfig) -> int:
        """The max timestamp Kafka stores for a CreateTime batch, once every record timestamp (other
        than -1) is checked against ``message.timestamp.before.max.ms`` and ``after.max.ms``.

        The header's value stands when it is plausible and no lower bound is set (the module
        docstring says why); otherwise the records' timestamps are read."""
        before = settings.message_timestamp_before_max_ms
        after = settings.message_timestamp_after_max_ms
        if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:  # every record reads as the header's
            earliest = latest = batch.max_timestamp
        elif before < _LONG_MAX or not _max_timestamp_is_plausible(batch):
            try:
                earliest, latest = batch.timestamp_bounds()
            except CorruptRecordError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        else:
            earliest, latest = NO_TIMESTAMP, batch.max_timestamp
        if ((latest != NO_TIMESTAMP and latest - now_ms > after)
                or (earliest != NO_TIMESTAMP and now_ms - earliest > before)):
            low, high = _java_long(now_ms - before), _java_long(now_ms + after)

            def out_of_range(record: Record) -> str | None:
                if record.timestamp == NO_TIMESTAMP or -before <= record.timestamp - now_ms <= after:
                    return None
                return (f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range. "
                        f"The timestamp should be within [{low}, {high}]")

            raise _refuse_records(batch, out_of_range)
        return latest

    def _recompress(self, batch: RecordBatch, codec: Compression, log_append_time: int | None) -> bytearray:
        """Rebuild a batch with the topic's codec (the one path that decodes produced records)."""
        try:
            records = list(batch.records())
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        return build_record_batch(
            records,
            base_offset=batch.base_offset,
            compression=codec,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            is_transactional=batch.is_transactional,
            timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time is not None else TimestampType.CREATE_TIME,
            log_append_time=log_append_time,
        )

    # reads -----------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's check of the leader epoch a client believes in (-1: the client did not say)."""
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if 0 <= current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool, read_committed: bool = False,
             file_regions: bool = False) -> ReadInfo:
        """Stored batches from ``offset`` (raises the log's OffsetOutOfRange when outside the log, and
        UNKNOWN_TOPIC_OR_PARTITION once the topic was deleted); with ``file_regions``, large runs on
        disk as ``FileRegion`` objects (``log.region``) for a writer that can send them."""
        if self.deleted:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{self} was deleted")
        last_stable = self.last_stable_offset
        upper = last_stable if read_committed else self.high_watermark
        if offset == upper and self.log.log_start_offset <= offset:  # caught up (a long poll's first read)
            return ReadInfo([], 0, self.high_watermark, last_stable, self.log.log_start_offset,
                            [] if read_committed else None)
        result = self.log.read(offset, max_bytes, min_one_batch=min_one_batch, upper_bound=upper,
                               file_regions=file_regions)
        aborted: list[AbortedTxn] | None = None
        if read_committed:
            aborted = self.producer_state.aborted_transactions(offset, result.next_offset) if result.size else []
        return ReadInfo(result.chunks, result.size, self.high_watermark, last_stable, self.log.log_start_offset,
                        aborted)

    def read_appended(self, appended: AppendedBatch, offset: int, max_bytes: int, *, min_one_batch: bool,
                      read_committed: bool = False) -> ReadInfo | None:
        """What ``read`` would return, from the batch an append handed to its waiters (``appended``,
        kept by a listener while it was told), without a log read; None when that may not be exactly it
        (the batch is no longer the log's last, not at ``offset``, beyond the limits, above the last
        stable offset, or large enough for the disk log to answer with a file region)."""
        last_offset = appended.last_offset
        if (offset != appended.base_offset or self.deleted or last_offset + 1 != self.log.log_end_offset
                or offset < self.log.log_start_offset):
            return None
        size = len(appended.records)
        if size >= REGION_MIN_BYTES or (size > max_bytes and not min_one_batch):
            return None
        last_stable = self.last_stable_offset
        if read_committed and last_offset >= last_stable:
            return None
        aborted = self.producer_state.aborted_transactions(offset, last_offset + 1) if read_committed else None
        return ReadInfo([appended.records], size, last_offset + 1, last_stable, self.log.log_start_offset, aborted)

    # waiting fetches -------------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    def add_watcher(self, watcher: Watcher) -> None:
        self._watchers[watcher] = None

    def remove_watcher(self, watcher: Watcher) -> None:
        self._watchers.pop(watcher, None)

    def offsets_moved(self) -> None:
        """The log start offset (retention, DeleteRecords) or the last stable offset moved without an
        append: tell the watchers (waiting fetches are not woken by it)."""
        for watcher in list(self._watchers):
            watcher(self, OFFSETS_MOVED)

    def close_waiters(self) -> None:
        """The partition is going away: mark it deleted and wake every waiting fetch."""
        self.deleted = True
        self._notify(0)
        self._listeners.clear()

    def _notify(self, size: int) -> None:
        if self._listeners:
            for listener in list(self._listeners):
                listener(self, size)
        if self._watchers:
            for watcher in list(self._watchers):
                watcher(self, size)


def _max_timestamp_is_plausible(batch: RecordBatch) -> bool:
    """Whether a CreateTime header's max timestamp can stand without reading the records: a first
    timestamp of 0 or more and a max timestamp not below it (equal to it in a one-record batch)."""
    first, latest = batch.base_timestamp, batch.max_timestamp
    return 0 <= first <= latest and (latest == first or batch.records_count > 1)


def _refuse_records(batch: RecordBatch, check: Callable[[Record], str | None]) -> RecordValidationError:
    """INVALID_TIMESTAMP for a batch whose records ``check`` refuses, with a message per refused
    record, as Kafka's log validator reports them."""
    try:
        refused = [(index, message) for index, record in enumerate(batch.records())
                   if (message := check(record)) is not None]
    except CorruptRecordError as exc:
        return RecordValidationError(ErrorCode.CORRUPT_MESSAGE, str(exc), [])
    return RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                 "One or more records have been rejected due to invalid timestamp", refused)


def _describe(record: Record) -> str:
    """A record as Kafka's messages name it."""
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    return f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, key={key} bytes, value={value} bytes)"


def _java_long(value: int) -> int:
    """``value`` wrapped to a signed 64-bit integer, as Java's long arithmetic leaves it."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)
