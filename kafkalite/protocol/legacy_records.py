"""Legacy message sets (magic 0 and 1): read, and write for clients that only speak them.

Before Kafka 0.11, a ``records`` field was a *message set*: log entries of
``offset int64, message_size int32, message``, where a message is::

    crc uint32 | magic int8 | attributes int8 | timestamp int64 (magic 1 only)
    | key_length int32 | key | value_length int32 | value

The CRC is CRC-32 (IEEE, as ``zlib.crc32``) over magic .. end of message. Attributes bits 0-2 are the
codec (gzip, snappy, lz4; zstd is not allowed), bit 3 the timestamp type (magic 1).

Compression wraps a whole inner message set, compressed, in the value of one *wrapper* message:

* magic 1: inner offsets are relative (0 .. n-1) and the wrapper's offset is the absolute offset of
  the **last** inner message, so ``absolute = wrapper_offset - last_inner_offset + inner_offset``.
  A wrapper offset of 0 (written by some producers, who leave offsets to the broker) means the inner
  offsets are taken as they are.
* magic 0: inner offsets are absolute.
* A LogAppendTime wrapper gives its timestamp to every inner message.
* Inner messages must not be compressed again, and must have the wrapper's magic.
* LZ4 under magic 0 carries Kafka 0.8-0.9's broken frame header checksum; reading accepts the broken
  and the correct form under either magic, writing uses the broken one for magic 0 only (as Java
  and librdkafka do).

:class:`LegacyRecordBatch` is one log entry (a plain message or a wrapper) as a view over its bytes;
:func:`protocol.records.iter_batches` yields it for magic 0/1 entries. :func:`build_legacy_message_set`
writes a message set, for instance to down-convert stored batches for Fetch v0-3. Layouts are in
``docs/record-batch.md``.

This module does not import :mod:`protocol.records` (which imports it): what both need lives in
``protocol._record_common`` (such as :class:`~protocol.records.TimestampType`) and
``protocol.decoded_records`` (:class:`~protocol.records.Record`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from itertools import pairwise
from typing import Final

from kafkalite.protocol._record_common import LOG_OVERHEAD, NO_SEQUENCE, NO_TIMESTAMP, Buffer, TimestampType
from kafkalite.protocol.compression import DEFAULT_MAX_OUTPUT, Compression, compress, decompress
from kafkalite.protocol.decoded_records import Record
from kafkalite.protocol.exceptions import CorruptRecordError

__all__ = [
    "LEGACY_RECORD_OVERHEAD_V0",
    "LEGACY_RECORD_OVERHEAD_V1",
    "LegacyRecordBatch",
    "build_legacy_message_set",
]

LEGACY_RECORD_OVERHEAD_V0: Final = 14
"""Smallest magic-0 message (crc, magic, attributes, key length, value length): its ``message_size`` floor."""
LEGACY_RECORD_OVERHEAD_V1: Final = 22
"""Smallest magic-1 message, which adds an int64 timestamp."""

_ENTRY_HEADER_V0: Final = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_ENTRY_HEADER_V1: Final = struct.Struct(">qiIbbq")  # ... timestamp
_ENTRY_PREFIX: Final = struct.Struct(">qi")  # offset, message_size
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_CRC_OFFSET: Final = LOG_OVERHEAD
_MAGIC_OFFSET: Final = LOG_OVERHEAD + 4

_COMPRESSION_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_LEGACY_CODECS: Final = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4)


class LegacyRecordBatch:
    """One magic 0/1 log entry (a message, or a compressed wrapper message) over a view of its bytes.

    ``buffer`` is a ``memoryview`` of exactly this entry; ``key`` and ``value`` are views into it (or
    ``None`` when null). ``offset`` is the entry's offset field, which for a wrapper is the offset of
    its last inner message, hence also :attr:`last_offset`. Construction checks the framing (magic,
    sizes, key and value lengths); :meth:`validate_crc` checks the CRC.
    """

    __slots__ = ("buffer", "offset", "message_size", "crc", "magic", "attributes", "timestamp", "key", "value")

    buffer: memoryview
    offset: int
    message_size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None

    def __init__(self, buffer: Buffer) -> None:
        """Parse the entry at the start of ``buffer``; bytes after the entry are ignored."""
        view = memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        available = len(view)
        if available < _MAGIC_OFFSET + 1:
            raise CorruptRecordError(f"legacy message needs {_MAGIC_OFFSET + 1} bytes to be framed, got {available}")
        magic = view[_MAGIC_OFFSET]
        if magic == 0:
            header, overhead = _ENTRY_HEADER_V0, LEGACY_RECORD_OVERHEAD_V0
        elif magic == 1:
            header, overhead = _ENTRY_HEADER_V1, LEGACY_RECORD_OVERHEAD_V1
        else:
            raise CorruptRecordError(f"legacy message magic is {magic}, expected 0 or 1")
        offset, message_size = _ENTRY_PREFIX.unpack_from(view)
        if message_size < overhead:
            raise CorruptRecordError(f"magic {magic} message size {message_size} is below the minimum {overhead}")
        size = message_size + LOG_OVERHEAD
        if size > available:
            raise CorruptRecordError(f"legacy message of {size} bytes is truncated to {available}")
        view = view if size == available else view[:size]
        if magic == 0:
            _, _, self.crc, self.magic, self.attributes = header.unpack_from(view)
            self.timestamp = NO_TIMESTAMP
        else:
            _, _, self.crc, self.magic, self.attributes, self.timestamp = header.unpack_from(view)
        self.buffer = view
        self.offset = offset
        self.message_size = message_size
        self.key, position = _slice_nullable(view, header.size, "key")
        self.value, position = _slice_nullable(view, position, "value")
        if position != size:
            raise CorruptRecordError(f"legacy message has {size - position} bytes after its value")

    def __repr__(self) -> str:
        return (
            f"LegacyRecordBatch(offset={self.offset}, magic={self.magic}, size={self.size}, "
            f"attributes={self.attributes:#x}, timestamp={self.timestamp})"
        )

    @property
    def size(self) -> int:
        """Total bytes of the entry, ``LOG_OVERHEAD`` included."""
        return self.message_size + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def compression(self) -> Compression:
        """The wrapper's codec (``NONE`` for a plain message); zstd or ids 5-7 are :class:`CorruptRecordError`."""
        codec_id = self.attributes & _COMPRESSION_MASK
        if codec_id >= len(_LEGACY_CODECS):
            raise CorruptRecordError(f"legacy message has invalid compression codec {codec_id}")
        return _LEGACY_CODECS[codec_id]

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    def compute_crc(self) -> int:
        """CRC-32 (IEEE) over magic .. end of the message."""
        return zlib.crc32(self.buffer[_MAGIC_OFFSET:])

    def validate_crc(self) -> None:
        """Raise :class:`CorruptRecordError` unless the stored CRC matches the message's bytes."""
        computed = zlib.crc32(self.buffer[_MAGIC_OFFSET:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"legacy message at offset {self.offset} has CRC {self.crc:#010x}, computed {computed:#010x}"
            )

    def records(self, *, max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[Record]:
        """Decode the entry: one record for a plain message, the inner messages for a wrapper.

        Inner messages' CRCs are checked here (nothing else can check them); the wrapper's own CRC is
        left to :meth:`validate_crc`. ``max_output`` caps the decompressed size.
        """
        compression = self.compression
        if compression is Compression.NONE:
            return iter((Record(self.offset, self.timestamp, _to_bytes(self.key), _to_bytes(self.value)),))
        return iter(self._inner_records(compression, max_output))

    def _inner_records(self, compression: Compression, max_output: int) -> list[Record]:
        if self.value is None:
            raise CorruptRecordError(f"compressed wrapper message at offset {self.offset} has a null value")
        data = memoryview(decompress(compression, self.value, legacy_lz4=True, max_output=max_output))
        inner: list[LegacyRecordBatch] = []
        position = 0
        while position < len(data):
            entry = LegacyRecordBatch(data[position:])
            if entry.attributes & _COMPRESSION_MASK:
                raise CorruptRecordError(f"wrapper message at offset {self.offset} holds a compressed message")
            if entry.magic != self.magic:
                raise CorruptRecordError(f"magic {entry.magic} message inside a magic {self.magic} wrapper")
            entry.validate_crc()
            inner.append(entry)
            position += entry.size
        if not inner:
            raise CorruptRecordError(f"compressed wrapper message at offset {self.offset} holds no messages")
        shift = 0
        if self.magic == 1 and self.offset != 0:
            shift = self.offset - inner[-1].offset
        log_append_time = self.timestamp if self.timestamp_type is TimestampType.LOG_APPEND_TIME else None
        return [
            Record(
                entry.offset + shift,
                entry.timestamp if log_append_time is None else log_append_time,
                _to_bytes(entry.key),
                _to_bytes(entry.value),
                (),
                NO_SEQUENCE,
            )
            for entry in inner
        ]


def _slice_nullable(view: memoryview, position: int, what: str) -> tuple[memoryview | None, int]:
    if position + 4 > len(view):
        raise CorruptRecordError(f"legacy message is too short for its {what} length")
    (length,) = _INT32.unpack_from(view, position)
    position += 4
    if length == -1:
        return None, position
    if length < 0 or length > len(view) - position:
        raise CorruptRecordError(f"legacy message {what} length {length} does not fit")
    return view[position : position + length], position + length


def _to_bytes(view: memoryview | None) -> bytes | None:
    return None if view is None else view.tobytes()


# --------------------------------------------------------------------------------------------------
# Writing


def build_legacy_message_set(
    records: Iterable[Record],
    *,
    magic: int,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
) -> bytearray:
    """Write ``records`` as a magic 0 or 1 message set, keeping their offsets.

    Uncompressed, each record becomes one message. Compressed, they become one wrapper message whose
    offset is the last record's, holding inner offsets relative to the first record (magic 1) or
    absolute (magic 0); a magic-1 wrapper's timestamp is the max record timestamp, or the log append
    time. Magic 0 has no timestamps. Headers are dropped: these formats cannot carry them (Java's
    down-conversion drops them too). With ``LOG_APPEND_TIME``, ``log_append_time`` is required and
    becomes every message's timestamp.

    ``ValueError`` for an empty input, decreasing offsets, zstd, or LogAppendTime under magic 0.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy message sets are magic 0 or 1, not {magic}")
    compression = Compression(compression)
    if compression is Compression.ZSTD:
        raise ValueError("zstd needs magic 2")
    log_append = timestamp_type is TimestampType.LOG_APPEND_TIME
    if log_append and (magic == 0 or log_append_time is None):
        raise ValueError("LogAppendTime needs magic 1 and a log_append_time")
    timestamp_bit = _TIMESTAMP_TYPE_BIT if log_append else 0

    entries = list(records)
    if not entries:
        raise ValueError("a message set needs at least one record")
    for previous, current in pairwise(entries):
        if current.offset <= previous.offset:
            raise ValueError(f"offset {current.offset} does not follow {previous.offset}")

    def timestamp_of(record: Record) -> int:
        if log_append_time is not None and log_append:
            return log_append_time
        return record.timestamp

    if compression is Compression.NONE:
        out = bytearray()
        for record in entries:
            _append_message(out, record.offset, magic, timestamp_bit, timestamp_of(record), record.key, record.value)
        return out

    base_offset = entries[0].offset
    inner = bytearray()
    for record in entries:
        inner_offset = record.offset - base_offset if magic == 1 else record.offset
        _append_message(inner, inner_offset, magic, timestamp_bit, timestamp_of(record), record.key, record.value)
    payload = compress(compression, inner, legacy_lz4=magic == 0, level=compression_level)
    if log_append and log_append_time is not None:
        wrapper_timestamp = log_append_time
    else:
        wrapper_timestamp = max(record.timestamp for record in entries)
    out = bytearray()
    _append_message(out, entries[-1].offset, magic, compression.value | timestamp_bit, wrapper_timestamp, None, payload)
    return out


def _append_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
) -> None:
    start = len(out)
    header = _ENTRY_HEADER_V0 if magic == 0 else _ENTRY_HEADER_V1
    out += bytes(header.size)
    for data in (key, value):
        if data is None:
            out += _INT32.pack(-1)
        else:
            out += _INT32.pack(len(data))
            out += data
    message_size = len(out) - start - LOG_OVERHEAD
    if magic == 0:
        header.pack_into(out, start, offset, message_size, 0, 0, attributes)
    else:
        header.pack_into(out, start, offset, message_size, 0, 1, attributes, timestamp)
    _UINT32.pack_into(out, start + _CRC_OFFSET, zlib.crc32(memoryview(out)[start + _MAGIC_OFFSET :]))
