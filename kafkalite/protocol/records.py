"""Record batches (magic 2), their records, transaction markers, and walking a ``records`` blob.

Two kinds of object:

* **Raw batches.** :class:`RecordBatch` is the 61-byte magic-2 header parsed over the batch's bytes; it
  holds a ``memoryview`` and never copies the records area. This is what the broker's hot paths use:
  check the header and the CRC-32C, rewrite the base offset or partition leader epoch in place (both
  lie outside the CRC), or stamp LogAppendTime (which is inside it, so the CRC is recomputed).
  :func:`iter_batches` walks a blob of batches placed one after another, as found in Produce and Fetch,
  yielding :class:`RecordBatch` for magic 2 and :class:`~protocol.legacy_records.LegacyRecordBatch` for
  magic 0/1, and stops quietly at the partial batch a Fetch response may end with.
* **Decoded records.** :class:`Record` values, from :meth:`RecordBatch.records` (which decompresses),
  and :class:`RecordBatchBuilder` / :func:`build_record_batch` to write a batch from records.

Transaction markers are control batches holding one record; :func:`build_end_transaction_marker` and
:meth:`RecordBatch.end_transaction_marker` write and read them.

Layouts are in ``docs/record-batch.md``. Records use zig-zag varints (at most 5 bytes) and varlongs
(at most 10), exposed here as :func:`encode_varint` and friends. Anything malformed raises
:class:`~protocol.exceptions.CorruptRecordError`; no length read from the input is trusted before it is
checked against the bytes actually present.

Imports point one way: this module imports :mod:`protocol.legacy_records` (in :func:`iter_batches`,
at its first legacy batch: a broker whose clients all write magic 2 never loads it) and
:mod:`protocol.decoded_records` (:class:`Record` and :class:`EndTransactionMarker`, at the first
record or marker decoded, or the first import of either name from here: appending and reading
batches decode no record, so a broker starts without making those classes), and all three import
what they share (:class:`TimestampType`, :class:`ControlRecordType`, ``LOG_OVERHEAD``,
``NO_SEQUENCE``, ``NO_TIMESTAMP``) from ``protocol._record_common``; neither of the other two
imports this module. Those names are re-exported here, where callers import them from.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final

from kafkalite.protocol._crc32c import crc32c
from kafkalite.protocol._record_common import (
    LOG_OVERHEAD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Buffer,
    ControlRecordType,
    Header,
    TimestampType,
)
from kafkalite.protocol.compression import DEFAULT_MAX_OUTPUT, Compression, compress, decompress
from kafkalite.protocol.exceptions import CorruptRecordError

if TYPE_CHECKING:
    from kafkalite.protocol.decoded_records import EndTransactionMarker, Record
    from kafkalite.protocol.legacy_records import LegacyRecordBatch

__all__ = [
    "LOG_OVERHEAD", "RECORD_BATCH_OVERHEAD", "NO_PARTITION_LEADER_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID",
    "NO_SEQUENCE", "NO_TIMESTAMP",
    "ControlRecordType", "EndTransactionMarker", "Record", "RecordBatch", "RecordBatchBuilder", "TimestampType",
    "build_empty_batch",
    "build_end_transaction_marker", "build_record_batch", "iter_batches",
    "decode_varint", "decode_varlong", "encode_varint", "encode_varlong",
]  # fmt: skip

RECORD_BATCH_OVERHEAD: Final = 61
"""Size of the magic-2 batch header, ``LOG_OVERHEAD`` included."""
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

_INT32_MAX: Final = 2**31 - 1
_INT32_MIN: Final = -(2**31)
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)

# The whole header in one unpack: base_offset, batch_length, partition_leader_epoch, magic, crc,
# attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
# base_sequence, records_count.
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")
_PARTITION_LEADER_EPOCH_OFFSET: Final = 12
_MAGIC_OFFSET: Final = 16
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21
_MAX_TIMESTAMP_OFFSET: Final = 35
_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_LEGACY_MIN_MESSAGE_SIZE: Final = 14  # a magic-0 message with null key and value
# Smallest possible record: length, attributes, timestamp delta, offset delta, key length, value
# length, header count, one byte each.
_MIN_RECORD_SIZE: Final = 7

_COMPRESSION_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20
_DELETE_HORIZON_BIT: Final = 0x40


def __getattr__(name: str) -> type[Record] | type[EndTransactionMarker]:
    """``Record`` and ``EndTransactionMarker``, from :mod:`protocol.decoded_records` on first use."""
    if name in ("Record", "EndTransactionMarker"):
        from kafkalite.protocol import decoded_records

        value = decoded_records.Record if name == "Record" else decoded_records.EndTransactionMarker
        globals()[name] = value  # later look-ups find it without __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------------
# Varints: protobuf base-128 groups, least significant first, of the zig-zag encoded value.


def encode_varint(value: int) -> bytes:
    """Encode an int32 as a zig-zag varint (1-5 bytes). ``ValueError`` if it does not fit in 32 bits."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{value} does not fit in an int32 varint")
    out = bytearray()
    _append_unsigned_varint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Encode an int64 as a zig-zag varlong (1-10 bytes). ``ValueError`` if it does not fit in 64 bits."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit in an int64 varlong")
    out = bytearray()
    _append_unsigned_varint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
    return bytes(out)


def decode_varint(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Decode a zig-zag varint at ``position``; return ``(value, position after it)``.

    More than 5 bytes, or running off the end of ``buffer``, is :class:`CorruptRecordError`. Bits
    beyond 32 in a 5th byte are dropped, as Java's ``ByteUtils.readVarint`` does.
    """
    try:
        return _read_varint(buffer, position, 5, 0xFFFFFFFF)
    except IndexError:
        raise CorruptRecordError("varint runs past the end of the buffer") from None


def decode_varlong(buffer: Buffer, position: int = 0) -> tuple[int, int]:
    """Decode a zig-zag varlong (at most 10 bytes) at ``position``; see :func:`decode_varint`."""
    try:
        return _read_varint(buffer, position, 10, 0xFFFFFFFFFFFFFFFF)
    except IndexError:
        raise CorruptRecordError("varlong runs past the end of the buffer") from None


def _append_unsigned_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(buffer: Buffer, position: int, max_bytes: int, mask: int) -> tuple[int, int]:
    """Zig-zag varint reader shared by the public decoders and the record parser (raises IndexError at the end)."""
    byte = buffer[position]
    if byte < 0x80:  # one byte: the common case for lengths, deltas and attributes
        return (byte >> 1) ^ -(byte & 1), position + 1
    raw = byte & 0x7F
    shift = 7
    for _ in range(max_bytes - 1):
        position += 1
        byte = buffer[position]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            raw &= mask
            return (raw >> 1) ^ -(raw & 1), position + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


# --------------------------------------------------------------------------------------------------
# The raw batch


class RecordBatch:
    """A magic-2 record batch: its header fields, parsed once, over a view of its bytes.

    ``buffer`` is a ``memoryview`` of exactly this batch (``size`` bytes). Construction parses the
    header with one ``struct.unpack_from`` and checks only what is needed to frame the batch (magic 2,
    a batch length at least the header size and no longer than the bytes given); the CRC is checked
    by :meth:`validate_crc`, the records by :meth:`records`. The ``set_*`` methods write into the
    buffer, so they need a writable one (a ``bytearray`` or a view of one).
    """

    __slots__ = (  # in header order
        "buffer", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
        "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
        "records_count", "size", "last_offset",
    )  # fmt: skip

    buffer: memoryview
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    size: int  # total bytes of the batch, LOG_OVERHEAD included
    last_offset: int  # base offset + last offset delta

    def __init__(self, buffer: Buffer) -> None:
        """Parse the batch at the start of ``buffer``; bytes after the batch are ignored."""
        view = memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        available = len(view)
        if available < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"record batch needs {RECORD_BATCH_OVERHEAD} header bytes, got {available}")
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = _HEADER.unpack_from(view)
        if self.magic != 2:
            raise CorruptRecordError(f"record batch magic is {self.magic}, expected 2")
        if self.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch length {self.batch_length} is below the header size")
        self.size = size = self.batch_length + LOG_OVERHEAD
        if size > available:
            raise CorruptRecordError(f"record batch of {size} bytes is truncated to {available}")
        self.buffer = view if size == available else view[:size]
        self.last_offset = self.base_offset + self.last_offset_delta

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset_delta={self.last_offset_delta}, "
            f"records_count={self.records_count}, size={self.size}, attributes={self.attributes:#x}, "
            f"producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"base_sequence={self.base_sequence})"
        )

    # --- derived header values -------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record, wrapping past int32 max to 0; -1 without a base sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def compression(self) -> Compression:
        """The codec of the records area; an id outside 0-4 is :class:`CorruptRecordError`."""
        codec_id = self.attributes & _COMPRESSION_MASK
        try:
            return Compression(codec_id)
        except ValueError:
            raise CorruptRecordError(f"record batch has unknown compression codec {codec_id}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        """Set by log compaction; ``base_timestamp`` then holds the delete horizon."""
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    # --- CRC -----------------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC-32C of the bytes from ``attributes`` to the end of the batch."""
        return crc32c(self.buffer[_ATTRIBUTES_OFFSET:])

    def validate_crc(self) -> None:
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the batch's bytes."""
        computed = crc32c(self.buffer[_ATTRIBUTES_OFFSET:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch at base offset {self.base_offset} has CRC {self.crc:#010x}, computed {computed:#010x}"
            )

    # --- in-place rewrites -------------------------------------------------------------------------

    def set_base_offset(self, base_offset: int) -> None:
        """Write the base offset into the buffer; the CRC does not cover it, so it stays valid."""
        buffer = self.buffer
        if buffer.readonly:
            self._writable()  # raises
        _INT64.pack_into(buffer, 0, base_offset)
        self.base_offset = base_offset
        self.last_offset = base_offset + self.last_offset_delta

    def set_partition_leader_epoch(self, partition_leader_epoch: int) -> None:
        """Write the partition leader epoch into the buffer; the CRC does not cover it either."""
        buffer = self.buffer
        if buffer.readonly:
            self._writable()  # raises
        _INT32.pack_into(buffer, _PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        self.partition_leader_epoch = partition_leader_epoch

    def set_log_append_time(self, timestamp: int) -> None:
        """Mark the batch LogAppendTime with ``timestamp`` as its max timestamp and recompute the CRC.

        Every record of the batch then reads back with this timestamp. A no-op when already set so.
        """
        self.set_max_timestamp(TimestampType.LOG_APPEND_TIME, timestamp)

    def set_max_timestamp(self, timestamp_type: TimestampType, timestamp: int) -> None:
        """Write the timestamp type and the max timestamp, and recompute the CRC (both are inside it).

        A no-op when the batch already says so, as Kafka's ``DefaultRecordBatch.setMaxTimestamp``.
        """
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            attributes = self.attributes | _TIMESTAMP_TYPE_BIT
        else:
            attributes = self.attributes & ~_TIMESTAMP_TYPE_BIT
        if attributes == self.attributes and timestamp == self.max_timestamp:
            return
        buffer = self._writable()
        _INT16.pack_into(buffer, _ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(buffer, _MAX_TIMESTAMP_OFFSET, timestamp)
        crc = crc32c(buffer[_ATTRIBUTES_OFFSET:])
        _UINT32.pack_into(buffer, _CRC_OFFSET, crc)
        self.attributes = attributes
        self.max_timestamp = timestamp
        self.crc = crc

    def _writable(self) -> memoryview:
        if self.buffer.readonly:
            raise TypeError("record batch buffer is read-only; build the batch over a bytearray to rewrite it")
        return self.buffer

    # --- records -----------------------------------------------------------------------------------

    def records(self, *, max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[Record]:
        """Decode the batch's records, decompressing the records area first if needed.

        ``max_output`` caps the decompressed size. Raises :class:`CorruptRecordError` for a malformed
        record, a record count that cannot fit, or bytes left over after the last record. Does not
        check the CRC; call :meth:`validate_crc` first when the bytes come from outside.
        """
        compression = self.compression
        if self.records_count < 0:
            raise CorruptRecordError(f"record batch has a negative record count {self.records_count}")
        if compression is Compression.NONE:
            data: Buffer = self.buffer
            start = RECORD_BATCH_OVERHEAD
        else:
            data = decompress(compression, self.buffer[RECORD_BATCH_OVERHEAD:], max_output=max_output)
            start = 0
        if self.records_count * _MIN_RECORD_SIZE > len(data) - start:
            raise CorruptRecordError(
                f"record batch claims {self.records_count} records in {len(data) - start} bytes of records"
            )
        return self._iterate_records(data, start)

    def _iterate_records(self, data: Buffer, position: int) -> Iterator[Record]:
        from kafkalite.protocol.decoded_records import Record

        end = len(data)
        base_offset = self.base_offset
        base_sequence = self.base_sequence
        log_append_time = self.max_timestamp if self.attributes & _TIMESTAMP_TYPE_BIT else None
        base_timestamp = self.base_timestamp
        for _ in range(self.records_count):
            try:
                offset_delta, timestamp_delta, key, value, headers, position = _read_record(data, position, end)
            except IndexError:
                raise CorruptRecordError("record runs past the end of the batch") from None
            yield Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
                NO_SEQUENCE if base_sequence == NO_SEQUENCE else _increment_sequence(base_sequence, offset_delta),
            )
        if position != end:
            raise CorruptRecordError(f"{end - position} bytes left over after the last record of the batch")

    def timestamp_bounds(self, *, max_output: int = DEFAULT_MAX_OUTPUT) -> tuple[int, int]:
        """``(earliest, latest)`` of the records' timestamps, as Kafka's log validator sees them.

        ``latest`` is what Kafka stores as a CreateTime batch's max timestamp: the largest record
        timestamp, or ``NO_TIMESTAMP`` (-1) when no record has a larger one. ``earliest`` is the
        smallest timestamp other than ``NO_TIMESTAMP`` (records without a timestamp are not checked
        against ``message.timestamp.before.max.ms``), or ``NO_TIMESTAMP`` when there is none. In a
        LogAppendTime batch every record has the max timestamp. Only each record's length and
        timestamp delta are read (after decompressing); a record area that does not walk to its
        exact end in ``records_count`` steps is :class:`CorruptRecordError`.
        """
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return self.max_timestamp, self.max_timestamp
        compression = self.compression
        count = self.records_count
        if compression is Compression.NONE:
            data: Buffer = bytes(self.buffer[RECORD_BATCH_OVERHEAD:])
        else:
            data = decompress(compression, self.buffer[RECORD_BATCH_OVERHEAD:], max_output=max_output)
        if count < 0 or count * _MIN_RECORD_SIZE > len(data):
            raise CorruptRecordError(f"record batch claims {count} records in {len(data)} bytes of records")
        try:
            lowest, highest, end = _timestamp_delta_bounds(data, count, NO_TIMESTAMP - self.base_timestamp)
        except IndexError:
            raise CorruptRecordError("record runs past the end of the batch") from None
        if end != len(data):
            raise CorruptRecordError(f"the records of the batch take {end} bytes, not {len(data)}")
        base = self.base_timestamp
        latest = max(base + highest, NO_TIMESTAMP) if count else NO_TIMESTAMP
        earliest = base + lowest if lowest is not None else NO_TIMESTAMP
        return earliest, latest

    def end_transaction_marker(self) -> EndTransactionMarker | None:
        """The COMMIT/ABORT marker of a control batch, or ``None`` if this is not one.

        Data batches and control batches of other (or unknown) types give ``None``.
        """
        if not self.is_control:
            return None
        first = next(self.records(), None)
        if first is None:
            raise CorruptRecordError("control batch holds no record")
        if ControlRecordType.from_key(first.key) not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        from kafkalite.protocol.decoded_records import EndTransactionMarker

        return EndTransactionMarker.from_record(first)


def _increment_sequence(sequence: int, increment: int) -> int:
    """Producer sequences wrap from int32 max to 0."""
    return (sequence + increment) & _INT32_MAX


def _timestamp_delta_bounds(data: Buffer, count: int, skipped_delta: int) -> tuple[int | None, int, int]:
    """Walk ``count`` records reading only their lengths and timestamp deltas: the smallest delta
    other than ``skipped_delta`` (None if there is none), the largest delta, and where the walk ended.

    This runs on the produce path for every batch whose header cannot be trusted, so it is written
    for speed: one- and two-byte varints (nearly every record length and delta) are read inline.
    Reads past the end surface as IndexError.
    """
    position = 0
    lowest = none_yet = 1 << 64
    highest = -none_yet
    for _ in range(count):
        byte = data[position]
        if byte < 0x80:
            raw, position = byte, position + 1
        elif data[position + 1] < 0x80:
            raw, position = (byte & 0x7F) | (data[position + 1] << 7), position + 2
        else:
            length, position = _read_varint(data, position, 5, 0xFFFFFFFF)
            raw = length << 1 if length >= 0 else 1
        if raw & 1:
            raise CorruptRecordError("a record has a negative length")
        length = raw >> 1
        delta_byte = data[position + 1]  # after the attributes byte
        if delta_byte < 0x80:
            delta = (delta_byte >> 1) ^ -(delta_byte & 1)
        else:
            delta = _read_varint(data, position + 1, 10, 0xFFFFFFFFFFFFFFFF)[0]
        if delta > highest:
            highest = delta
        if delta < lowest and delta != skipped_delta:
            lowest = delta
        position += length
    return None if lowest == none_yet else lowest, highest, position


def _read_record(
    data: Buffer, position: int, end: int
) -> tuple[int, int, bytes | None, bytes | None, tuple[Header, ...], int]:
    """Parse one record; return its offset delta, timestamp delta, key, value, headers and the next position.

    Reads past ``end`` surface as IndexError, which the caller turns into CorruptRecordError.
    """
    length, position = _read_varint(data, position, 5, 0xFFFFFFFF)
    if length < 0 or length > end - position:
        raise CorruptRecordError(f"record length {length} does not fit in the {end - position} bytes left")
    record_end = position + length
    position += 1  # attributes: unused
    timestamp_delta, position = _read_varint(data, position, 10, 0xFFFFFFFFFFFFFFFF)
    offset_delta, position = _read_varint(data, position, 5, 0xFFFFFFFF)
    key, position = _read_nullable_bytes(data, position, record_end, "key")
    value, position = _read_nullable_bytes(data, position, record_end, "value")
    header_count, position = _read_varint(data, position, 5, 0xFFFFFFFF)
    if header_count < 0:
        raise CorruptRecordError(f"record has a negative header count {header_count}")
    if header_count * 2 > record_end - position:  # a header takes at least two bytes
        raise CorruptRecordError(f"record claims {header_count} headers in {record_end - position} bytes")
    headers: tuple[Header, ...] = ()
    if header_count:
        header_list: list[Header] = []
        for _ in range(header_count):
            key_length, position = _read_varint(data, position, 5, 0xFFFFFFFF)
            if key_length < 0 or key_length > record_end - position:
                raise CorruptRecordError(f"header key length {key_length} is invalid")
            # Java decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we.
            header_key = bytes(data[position : position + key_length]).decode("utf-8", "replace")
            position += key_length
            header_value, position = _read_nullable_bytes(data, position, record_end, "header value")
            header_list.append((header_key, header_value))
        headers = tuple(header_list)
    if position != record_end:
        raise CorruptRecordError(f"record declared {length} bytes but its fields took {length + position - record_end}")
    return offset_delta, timestamp_delta, key, value, headers, position


def _read_nullable_bytes(data: Buffer, position: int, record_end: int, what: str) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position, 5, 0xFFFFFFFF)
    if length == -1:
        return None, position
    if length < 0 or length > record_end - position:
        raise CorruptRecordError(f"record {what} length {length} is invalid")
    return bytes(data[position : position + length]), position + length


# --------------------------------------------------------------------------------------------------
# Building


class RecordBatchBuilder:
    """Accumulates records and writes one magic-2 batch, CRC included.

    Records are encoded as they are appended, after room left for the header, so :meth:`build` of an
    uncompressed batch writes the header in place and copies nothing. The first record's timestamp
    becomes the base timestamp; the max timestamp is the largest record timestamp, or -1 when none
    is larger (Kafka's rule). With ``timestamp_type=LOG_APPEND_TIME`` the max timestamp is
    ``log_append_time`` (or, if not given, that largest record timestamp).
    """

    def __init__(
        self,
        *,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        delete_horizon_ms: int | None = None,
    ) -> None:
        """``delete_horizon_ms`` (log compaction, KIP-534): set the delete-horizon attribute and make
        it the base timestamp, from which the records' timestamp deltas count."""
        if is_transactional and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id")
        if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("magic 2 batches are CreateTime or LogAppendTime")
        self.compression = Compression(compression)
        self.compression_level = compression_level
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self._buffer = bytearray(RECORD_BATCH_OVERHEAD)
        self._records_count = 0
        self._last_offset_delta = -1
        self._base_timestamp = NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP
        self.delete_horizon_ms = delete_horizon_ms

    @property
    def records_count(self) -> int:
        return self._records_count

    @property
    def size_in_bytes(self) -> int:
        """Bytes the batch would take uncompressed (what :meth:`build` returns, before compression)."""
        return len(self._buffer)

    def append(
        self,
        *,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[Header] = (),
        offset_delta: int | None = None,
    ) -> int:
        """Encode one record and return its offset delta.

        ``offset_delta`` defaults to one past the previous record's; given explicitly (to keep the gaps
        of a compacted log) it must keep increasing. Header keys are str, encoded as UTF-8.
        """
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        elif offset_delta <= self._last_offset_delta:
            raise ValueError(f"offset delta {offset_delta} does not follow {self._last_offset_delta}")
        if offset_delta > _INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} does not fit in an int32")
        if self._records_count == 0 and self.delete_horizon_ms is None:
            self._base_timestamp = timestamp
        timestamp_delta = timestamp - self._base_timestamp
        if not _INT64_MIN <= timestamp_delta <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} is too far from the base timestamp")
        if timestamp > self._max_timestamp:  # from NO_TIMESTAMP, as Kafka's MemoryRecordsBuilder
            self._max_timestamp = timestamp

        body = bytearray(b"\x00")  # attributes: unused
        _append_unsigned_varint(body, ((timestamp_delta << 1) ^ (timestamp_delta >> 63)) & 0xFFFFFFFFFFFFFFFF)
        _append_unsigned_varint(body, (offset_delta << 1) ^ (offset_delta >> 31))
        _append_nullable_bytes(body, key)
        _append_nullable_bytes(body, value)
        _append_unsigned_varint(body, len(headers) << 1)
        for header_key, header_value in headers:
            _append_nullable_bytes(body, header_key.encode("utf-8"))
            _append_nullable_bytes(body, header_value)
        _append_unsigned_varint(self._buffer, len(body) << 1)
        self._buffer += body
        self._records_count += 1
        self._last_offset_delta = offset_delta
        return offset_delta

    def build(self, *, last_offset_delta: int | None = None) -> bytearray:
        """Write the header (and compress) and return the finished batch. Needs at least one record.

        ``last_offset_delta`` keeps a larger one than the last record's (log compaction keeps a
        batch's offset range when it removes records from its end, as Kafka's cleaner does)."""
        if self._records_count == 0:
            raise ValueError("a record batch needs at least one record")
        if last_offset_delta is not None and last_offset_delta < self._last_offset_delta:
            raise ValueError(f"last offset delta {last_offset_delta} is below the last record's")
        if self.compression is Compression.NONE:
            batch = self._buffer
        else:
            payload = compress(
                self.compression, memoryview(self._buffer)[RECORD_BATCH_OVERHEAD:], level=self.compression_level
            )
            batch = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
            batch[RECORD_BATCH_OVERHEAD:] = payload
        attributes = self.compression.value
        max_timestamp = self._max_timestamp
        if self.timestamp_type is TimestampType.LOG_APPEND_TIME:
            attributes |= _TIMESTAMP_TYPE_BIT
            if self.log_append_time is not None:
                max_timestamp = self.log_append_time
        if self.is_transactional:
            attributes |= _TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= _CONTROL_BIT
        if self.delete_horizon_ms is not None:
            attributes |= _DELETE_HORIZON_BIT
        _HEADER.pack_into(
            batch,
            0,
            self.base_offset,
            len(batch) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            2,
            0,  # CRC, computed below over what follows it
            attributes,
            self._last_offset_delta if last_offset_delta is None else last_offset_delta,
            self._base_timestamp,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._records_count,
        )
        _UINT32.pack_into(batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))
        return batch


def _append_nullable_bytes(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out.append(0x01)  # zig-zag -1
        return
    _append_unsigned_varint(out, len(data) << 1)
    out += data


def build_record_batch(
    records: Iterable[Record],
    *,
    base_offset: int | None = None,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
) -> bytearray:
    """Build one magic-2 batch from :class:`Record` values, keeping their offsets.

    ``base_offset`` defaults to the first record's offset; each record's offset delta is its offset
    minus the base offset (so offsets must increase). ``Record.sequence`` is ignored: sequences follow
    from ``base_sequence``. For records without meaningful offsets, use :class:`RecordBatchBuilder`.
    """
    builder: RecordBatchBuilder | None = None
    for record in records:
        if builder is None:
            builder = RecordBatchBuilder(
                compression=compression,
                compression_level=compression_level,
                base_offset=record.offset if base_offset is None else base_offset,
                partition_leader_epoch=partition_leader_epoch,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                is_transactional=is_transactional,
                timestamp_type=timestamp_type,
                log_append_time=log_append_time,
            )
        builder.append(
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            headers=record.headers,
            offset_delta=record.offset - builder.base_offset,
        )
    if builder is None:
        raise ValueError("a record batch needs at least one record")
    return builder.build()


def build_end_transaction_marker(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """Build the control batch holding one COMMIT/ABORT marker, as ``MemoryRecords.writeEndTransactionalMarker`` does.

    The batch is transactional and control, uncompressed, CreateTime, with base sequence -1.
    """
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
    )
    builder.append(timestamp=timestamp, key=marker.key, value=marker.value)
    return builder.build()


def build_empty_batch(batch: RecordBatch) -> bytearray:
    """``batch``'s header with no records: its offsets, producer id, epoch and sequence, attributes
    and max timestamp kept, as Kafka's cleaner keeps the last batch of an active producer whose
    records it removed (``MemoryRecords.writeEmptyHeader``), so its producer state survives."""
    empty = bytearray(RECORD_BATCH_OVERHEAD)
    _HEADER.pack_into(
        empty,
        0,
        batch.base_offset,
        RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
        batch.partition_leader_epoch,
        2,
        0,
        batch.attributes & ~(_COMPRESSION_MASK | _DELETE_HORIZON_BIT),
        batch.last_offset_delta,
        batch.max_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        0,
    )
    _UINT32.pack_into(empty, _CRC_OFFSET, crc32c(memoryview(empty)[_ATTRIBUTES_OFFSET:]))
    return empty


# --------------------------------------------------------------------------------------------------
# Walking a records blob


def iter_batches(records: Buffer) -> Iterator[RecordBatch | LegacyRecordBatch]:
    """Yield the batches of a ``records`` field, in order, as views over ``records`` (nothing is copied).

    Magic 2 gives :class:`RecordBatch`, magic 0/1 :class:`~protocol.legacy_records.LegacyRecordBatch`.
    A partial batch at the end (Fetch responses may end with one) ends the iteration quietly. A length
    field below the smallest possible batch, or an unknown magic, is :class:`CorruptRecordError`.
    CRCs are not checked here.
    """
    view = memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    position = 0
    while end - position >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(view, position + 8)
        if length < _LEGACY_MIN_MESSAGE_SIZE:
            raise CorruptRecordError(f"batch at byte {position} has length {length}, below the minimum")
        size = length + LOG_OVERHEAD
        if size > end - position:
            return  # a partial trailing batch
        magic = view[position + _MAGIC_OFFSET]
        if magic == 2:
            yield RecordBatch(view[position : position + size])
        elif magic < 2:
            from kafkalite.protocol.legacy_records import LegacyRecordBatch

            yield LegacyRecordBatch(view[position : position + size])
        else:
            raise CorruptRecordError(f"batch at byte {position} has unknown magic {magic}")
        position += size
