"""What a consumer reads: :class:`ConsumerRecord`, :class:`ConsumerRecords`, and a partition's fetched
data drained lazily (:class:`CompletedFetch`). Sans-io: bytes in, records out.

A Fetch response gives each partition a ``records`` blob: batches one after another, the last one
possibly cut short. :class:`CompletedFetch` keeps that blob and decodes one batch at a time, only as
``poll()`` asks for records, so a large response costs nothing until it is read and ``max.poll.records``
bounds the work of one poll. For each batch, in log order:

* its CRC is checked (``check.crcs``; CRC-32C for magic 2, CRC-32 for the legacy magic 0/1 messages);
* control batches (transaction markers) are skipped, never returned;
* with ``read_committed``, records of aborted transactions are dropped: the response lists each
  aborted transaction as (producer id, first offset). Before a batch is read, every aborted
  transaction starting at or before the batch's last offset marks its producer as aborted; a
  transactional batch of an aborted producer is dropped; the producer's ABORT marker ends it;
* records before the fetch position are skipped (a fetch may start inside a batch, and a compressed
  legacy wrapper holds several offsets);
* the records are decoded in one tight loop (:func:`decode_batch`) into :class:`ConsumerRecord`.

The position advances to the offset after the last record returned, and past skipped batches, so a
consumer that reads everything ends at the offset after the last batch it was sent.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.compression import Compression, decompress
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import CorruptRecordError, ProtocolError
from kafkalite.protocol.legacy_records import LegacyRecordBatch
from kafkalite.protocol.records import ControlRecordType, RecordBatch, TimestampType, iter_batches

__all__ = ["CompletedFetch", "ConsumerRecord", "ConsumerRecords", "decode_batch"]

Deserializer = Callable[[Any], Any]


class ConsumerRecord(NamedTuple):
    """One record as the consumer hands it out.

    ``timestamp`` is ms since the epoch (``timestamp_type`` says whether the producer or the broker set
    it; -1 with ``NO_TIMESTAMP_TYPE`` for magic 0 messages). ``key`` and ``value`` are bytes (or None),
    or what the configured deserializers return. ``headers`` are (str, bytes | None) pairs.
    ``leader_epoch`` is the partition leader epoch the record was written in (None when unknown).

    ``timestamp_type`` is a :class:`~kafkalite.protocol.records.TimestampType` value as a plain int
    (0 create time, 1 log append time, -1 none), equal to the enum's members.

    A named tuple, and so immutable, because a consumer makes hundreds of thousands of them a second
    and a tuple is the cheapest value Python builds (``tuple.__new__``, no Python-level ``__init__``).
    Every field is a plain value (no enum member, no mutable object), so the garbage collector stops
    tracking a record the first time it sees it instead of walking every live record again and again
    (which cost a quarter of the consumer's time).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


_new_record = tuple.__new__
_CREATE_TIME = int(TimestampType.CREATE_TIME)
_LOG_APPEND_TIME = int(TimestampType.LOG_APPEND_TIME)
_TIMESTAMP_TYPE_BIT = 0x08
_COMPRESSION_MASK = 0x07
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()


class ConsumerRecords:
    """The records of one ``poll()``: iterable over every record, partition by partition, in offset order."""

    __slots__ = ("_by_partition", "_count")

    def __init__(self, by_partition: dict[TopicPartition, list[ConsumerRecord]] | None = None) -> None:
        self._by_partition = by_partition if by_partition is not None else {}
        self._count = sum(len(records) for records in self._by_partition.values())

    def __iter__(self) -> Iterator[ConsumerRecord]:
        for records in self._by_partition.values():
            yield from records

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __repr__(self) -> str:
        return f"ConsumerRecords({self._count} records from {len(self._by_partition)} partitions)"

    def count(self) -> int:
        return self._count

    def partitions(self) -> list[TopicPartition]:
        """The partitions that have records here."""
        return list(self._by_partition)

    def records(self, topic_partition: TopicPartition) -> list[ConsumerRecord]:
        """The records of one partition (empty when it has none here)."""
        return self._by_partition.get(topic_partition, [])

    @property
    def by_partition(self) -> Mapping[TopicPartition, list[ConsumerRecord]]:
        return self._by_partition


# --- decoding ------------------------------------------------------------------------------------------


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint (any length up to 10 bytes) at ``position``: (value, next position)."""
    result = 0
    shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint runs past 10 bytes")


def _read_headers(data: bytes, position: int, count: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    headers = []
    for _ in range(count):
        key_length, position = _varint(data, position)
        if key_length < 0:
            raise CorruptRecordError(f"header key length {key_length} is invalid")
        header_key = data[position:position + key_length].decode("utf-8", "replace")
        position += key_length
        value_length, position = _varint(data, position)
        if value_length < 0:
            header_value = None
        else:
            header_value = data[position:position + value_length]
            position += value_length
        headers.append((header_key, header_value))
    return tuple(headers), position


def decode_batch(batch: RecordBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    """Every record of a magic-2 data batch (decompressed first if needed), in offset order.

    The loop reads each field inline; one- and two-byte varints (nearly every length and delta of small
    records) never leave it. Anything that does not walk to exactly the batch's end is
    :class:`CorruptRecordError`.
    """
    codec = batch.attributes & _COMPRESSION_MASK
    if codec == 0:
        data = batch.buffer[61:].tobytes()
    else:
        data = decompress(Compression(codec), batch.buffer[61:])
    count = batch.records_count
    if count < 0 or count * 7 > len(data):
        raise CorruptRecordError(f"record batch claims {count} records in {len(data)} bytes")
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    epoch = batch.partition_leader_epoch
    leader_epoch = epoch if epoch >= 0 else None
    records: list[ConsumerRecord] = []
    append = records.append
    new = _new_record
    record_type = ConsumerRecord
    create_time = _CREATE_TIME
    no_headers = _NO_HEADERS
    varint = _varint
    position = 0
    # Thousands of new objects and no cycles among them: collecting garbage in the middle would walk
    # them again and again (it doubled the cost per record). Collect once afterwards instead.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        for _ in range(count):
            # the record's length (not needed: the fields say where the record ends) and its attributes
            if data[position] < 0x80:
                position += 2
            elif data[position + 1] < 0x80:
                position += 3
            else:
                position = varint(data, position)[1] + 1
            byte = data[position]
            if byte < 0x80:
                timestamp = base_timestamp + ((byte >> 1) ^ -(byte & 1))
                position += 1
            else:
                delta, position = varint(data, position)
                timestamp = base_timestamp + delta
            byte = data[position]
            if byte < 0x80:
                offset = base_offset + (byte >> 1)
                position += 1
            else:
                second = data[position + 1]
                if second < 0x80:
                    offset = base_offset + (((byte & 0x7F) | (second << 7)) >> 1)
                    position += 2
                else:
                    delta, position = varint(data, position)
                    offset = base_offset + delta
            byte = data[position]
            if byte == 1:
                key = None
                position += 1
            else:
                if not byte & 0x81:  # one byte, not negative
                    length = byte >> 1
                    position += 1
                else:
                    length, position = varint(data, position)
                    if length < 0:
                        raise CorruptRecordError(f"record key length {length} is invalid")
                key = data[position:position + length]
                position += length
            byte = data[position]
            if byte == 1:
                value = None
                position += 1
            elif not byte & 0x81:  # one byte, not negative
                end = position + 1 + (byte >> 1)
                value = data[position + 1:end]
                position = end
            else:
                second = data[position + 1]
                if second < 0x80 and not byte & 1:
                    end = position + 2 + (((byte & 0x7F) | (second << 7)) >> 1)
                    value = data[position + 2:end]
                    position = end
                else:
                    length, position = varint(data, position)
                    if length < 0:
                        raise CorruptRecordError(f"record value length {length} is invalid")
                    value = data[position:position + length]
                    position += length
            byte = data[position]
            position += 1
            if byte == 0:
                headers = no_headers
            else:
                if byte >= 0x80 or byte & 1:
                    header_count, position = varint(data, position - 1)
                    if header_count < 0:
                        raise CorruptRecordError(f"record header count {header_count} is invalid")
                else:
                    header_count = byte >> 1
                headers, position = _read_headers(data, position, header_count)
            append(new(record_type, (topic, partition, offset, timestamp, create_time, key, value, headers,
                                     leader_epoch)))
    except IndexError:
        raise CorruptRecordError(f"a record of the batch at offset {base_offset} runs past its end") from None
    finally:
        if collecting:
            gc.enable()
    if position != len(data):
        raise CorruptRecordError(f"{len(data) - position} bytes left over after the records of the batch at offset "
                                 f"{base_offset}")
    if batch.attributes & _TIMESTAMP_TYPE_BIT:  # LogAppendTime: every record has the batch's time
        log_append_time = batch.max_timestamp
        records = [new(record_type, (*record[:3], log_append_time, _LOG_APPEND_TIME, *record[5:]))
                   for record in records]
    return records


def decode_legacy(batch: LegacyRecordBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    """The records of a magic 0/1 message (a compressed wrapper gives its inner messages)."""
    timestamp_type = int(batch.timestamp_type)
    return [_new_record(ConsumerRecord, (topic, partition, record.offset, record.timestamp, timestamp_type,
                                         record.key, record.value, _NO_HEADERS, None))
            for record in batch.records()]


# --- one partition's fetched data ----------------------------------------------------------------------


class CompletedFetch:
    """One partition's data from one Fetch response, decoded a batch at a time as it is drained.

    ``fetch_offset`` is where the fetch started; ``next_offset`` is the position after what has been
    drained so far (records handed out and batches skipped). ``end_offset`` is where the next fetch
    of the partition starts: the offset after the last whole batch of the response.
    """

    __slots__ = ("topic_partition", "state", "fetch_offset", "next_offset", "end_offset", "high_watermark",
                 "last_stable_offset", "log_start_offset", "_batches", "_records", "_index", "_batch_end",
                 "_read_committed", "_check_crcs", "_aborted", "_aborted_producers", "_deserialize",
                 "leader_epoch", "exhausted")

    def __init__(self, topic_partition: TopicPartition, state: Any, fetch_offset: int, records: Any, *,
                 high_watermark: int = -1, last_stable_offset: int = -1, log_start_offset: int = -1,
                 aborted_transactions: list[tuple[int, int]] | None = None, read_committed: bool = False,
                 check_crcs: bool = True, key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None) -> None:
        self.topic_partition = topic_partition
        self.state = state
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._aborted = [(first_offset, producer_id) for producer_id, first_offset in aborted_transactions or ()]
        heapq.heapify(self._aborted)
        self._aborted_producers: set[int] = set()
        self._records: list[ConsumerRecord] = []
        self._index = 0
        self._batch_end = fetch_offset
        self.leader_epoch: int | None = None
        self.exhausted = False
        if key_deserializer is None and value_deserializer is None:
            self._deserialize: Callable[[list[ConsumerRecord]], list[ConsumerRecord]] | None = None
        else:
            self._deserialize = _deserializer(key_deserializer, value_deserializer)
        try:
            batches = list(iter_batches(records)) if records else []
        except ProtocolError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{topic_partition} at offset {fetch_offset}: {exc}") from None
        self._batches = iter(batches)
        self.end_offset = batches[-1].next_offset if batches else fetch_offset

    def __repr__(self) -> str:
        return (f"CompletedFetch({self.topic_partition}, fetch_offset={self.fetch_offset}, "
                f"next_offset={self.next_offset}, end_offset={self.end_offset})")

    @property
    def has_batches(self) -> bool:
        return self.end_offset > self.fetch_offset

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records from the current position; ``exhausted`` once nothing is left."""
        out: list[ConsumerRecord] | None = None
        records = self._records
        index = self._index
        while True:
            left = len(records) - index
            if left:
                wanted = max_records if out is None else max_records - len(out)
                if left <= wanted:
                    taken = records if index == 0 else records[index:]
                    index = len(records)
                    self.next_offset = self._batch_end
                else:
                    taken = records[index:index + wanted]
                    index += wanted
                    self.next_offset = taken[-1].offset + 1
                self.leader_epoch = taken[-1].leader_epoch
                if out is None:
                    out = taken
                else:
                    out.extend(taken)
                if len(out) >= max_records:
                    break
                continue
            following = self._next_records()
            index = 0
            if following is None:
                self.exhausted = True
                records = []
                break
            records = following
        self._records = records
        self._index = index
        return out if out is not None else []

    def _next_records(self) -> list[ConsumerRecord] | None:
        """The records of the next batch that has any at or after the position; None at the end."""
        topic, partition = self.topic_partition.topic, self.topic_partition.partition
        for batch in self._batches:
            batch_end = batch.next_offset
            if batch_end <= self.next_offset:
                continue
            try:
                if self._check_crcs:
                    batch.validate_crc()
                if isinstance(batch, LegacyRecordBatch):
                    records = decode_legacy(batch, topic, partition)
                elif self._skip(batch):
                    self.next_offset = batch_end
                    continue
                else:
                    records = decode_batch(batch, topic, partition)
            except ProtocolError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                                 f"{self.topic_partition} at offset {self.next_offset}: {exc}") from None
            if records and records[0].offset < self.next_offset:
                position = self.next_offset
                records = [record for record in records if record.offset >= position]
            self._batch_end = batch_end
            if not records:
                self.next_offset = batch_end
                continue
            if self._deserialize is not None:
                records = self._deserialize(records)
            return records
        return None

    def _skip(self, batch: RecordBatch) -> bool:
        """Control batches always; with read_committed, the batches of aborted transactions."""
        if self._read_committed and batch.is_transactional:
            aborted = self._aborted
            last_offset = batch.last_offset
            while aborted and aborted[0][0] <= last_offset:
                self._aborted_producers.add(heapq.heappop(aborted)[1])
            if batch.is_control:
                if _is_abort_marker(batch):
                    self._aborted_producers.discard(batch.producer_id)
                return True
            return batch.producer_id in self._aborted_producers
        return batch.is_control


def _is_abort_marker(batch: RecordBatch) -> bool:
    first = next(batch.records(), None)
    if first is None or first.key is None:
        return False
    return ControlRecordType.from_key(first.key) is ControlRecordType.ABORT


def _deserializer(key_deserializer: Deserializer | None,
                  value_deserializer: Deserializer | None) -> Callable[[list[ConsumerRecord]], list[ConsumerRecord]]:
    def deserialize(records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        out = []
        for record in records:
            key, value = record.key, record.value
            if key_deserializer is not None and key is not None:
                key = key_deserializer(key)
            if value_deserializer is not None and value is not None:
                value = value_deserializer(value)
            out.append(record._replace(key=key, value=value))
        return out

    return deserialize
