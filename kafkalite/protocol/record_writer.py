"""A lean magic-2 batch writer for producers: records go straight into the batch's bytes.

:class:`~protocol.records.RecordBatchBuilder` is general (explicit offset deltas, any timestamp type,
control batches) and checks every argument. A producer appends many small records to a batch that
is still open and only later learns its producer id, epoch and base sequence (when the batch is
drained for sending, or again after an epoch bump). :class:`RecordBatchWriter` serves exactly that:

* :meth:`RecordBatchWriter.append` encodes one record with one ``bytes.join`` and one ``+=`` into a
  ``bytearray`` that already holds room for the 61-byte header; small varints (lengths, deltas)
  come from a precomputed table, so a 100-byte record costs no per-record objects besides its bytes.
* :meth:`RecordBatchWriter.append_values` appends many records of one timestamp in one call (the
  batch API of the bundled producer).
* :meth:`RecordBatchWriter.build` writes the header (compressing the records area first if asked)
  and hands back the finished batch; :func:`stamp_producer_state` rewrites a finished batch's producer
  id, epoch and base sequence and its CRC, for a retry after an epoch bump.

Offset deltas are 0, 1, 2... in append order; the first record's timestamp is the base timestamp.
Header keys are ``str`` (UTF-8) and values bytes or ``None``, as in :mod:`protocol.records`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from kafkalite.protocol._crc32c import crc32c
from kafkalite.protocol._record_common import NO_SEQUENCE, Buffer, Header
from kafkalite.protocol.compression import Compression, compress

__all__ = ["RecordBatchWriter", "estimate_record_size", "stamp_producer_state"]

_HEADER_SIZE: Final = 61
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_PRODUCER_STATE: Final = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_PRODUCER_STATE_OFFSET: Final = 43
_CRC: Final = struct.Struct(">I")
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21
_TRANSACTIONAL_BIT: Final = 0x10
_INT32_MAX: Final = 2**31 - 1


def _unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag64(value: int) -> bytes:
    return _unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


_TABLE_SIZE: Final = 1 << 14
# _VARINT[n] is the zig-zag varint of the non-negative n (1-3 bytes), for every n below _TABLE_SIZE.
_VARINT: Final[tuple[bytes, ...]] = tuple(_zigzag64(value) for value in range(_TABLE_SIZE))
_NULL: Final = b"\x01"  # zig-zag -1: a null key, value or header value
_NO_HEADERS: Final = b"\x00"
_ATTRIBUTES: Final = b"\x00"


def _varint(value: int) -> bytes:
    """Zig-zag varint of any int64 (the table for small non-negative values)."""
    if 0 <= value < _TABLE_SIZE:
        return _VARINT[value]
    return _zigzag64(value)


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [_varint(len(headers))]
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8")
        parts.append(_varint(len(encoded_key)))
        parts.append(encoded_key)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts.append(_varint(len(header_value)))
            parts.append(bytes(header_value))
    return b"".join(parts)


def estimate_record_size(key: Buffer | None, value: Buffer | None, headers: Sequence[Header] | None = None) -> int:
    """An upper bound of the bytes one record adds to a batch (used to size a batch for a large record)."""
    size = 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for header_key, header_value in headers or ():
        size += 10 + len(header_key) * 4 + (len(header_value) if header_value is not None else 0)
    return size


class RecordBatchWriter:
    """Records appended into one growing ``bytearray``, after room for the batch header.

    ``size_in_bytes`` is the batch size so far, uncompressed. After :meth:`build` the writer is spent.
    """

    __slots__ = ("buffer", "records_count", "base_timestamp", "max_timestamp")

    def __init__(self) -> None:
        self.buffer = bytearray(_HEADER_SIZE)
        self.records_count = 0
        self.base_timestamp = 0
        self.max_timestamp = 0

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[Header] | None = None,
    ) -> int:
        """Encode one record at the end of the batch; return its offset delta."""
        offset_delta = self.records_count
        if offset_delta == 0:
            self.base_timestamp = self.max_timestamp = timestamp
            timestamp_delta = b"\x00"
        else:
            delta = timestamp - self.base_timestamp
            timestamp_delta = _VARINT[delta] if 0 <= delta < _TABLE_SIZE else _zigzag64(delta)
            if timestamp > self.max_timestamp:
                self.max_timestamp = timestamp
        if key is None:
            key_length = _NULL
            key = b""
        else:
            size = len(key)
            key_length = _VARINT[size] if size < _TABLE_SIZE else _zigzag64(size)
        if value is None:
            value_length = _NULL
            value = b""
        else:
            size = len(value)
            value_length = _VARINT[size] if size < _TABLE_SIZE else _zigzag64(size)
        offset_varint = _VARINT[offset_delta] if offset_delta < _TABLE_SIZE else _zigzag64(offset_delta)
        body = b"".join((_ATTRIBUTES, timestamp_delta, offset_varint, key_length, key, value_length, value,
                         _encode_headers(headers) if headers else _NO_HEADERS))
        size = len(body)
        buffer = self.buffer
        buffer += _VARINT[size] if size < _TABLE_SIZE else _zigzag64(size)
        buffer += body
        self.records_count = offset_delta + 1
        return offset_delta

    def append_values(self, timestamp: int, values: Sequence[Buffer | None],
                      keys: Sequence[Buffer | None] | None = None, limit: int = _INT32_MAX) -> int:
        """Append records of one ``timestamp`` from ``values`` (and ``keys``, same length, or all null).

        Stops before the batch would grow past ``limit`` bytes (but always takes at least one record
        into an empty batch). Returns how many records were taken from the front of ``values``.
        """
        if keys is not None:
            taken = 0
            for key, value in zip(keys, values, strict=True):
                if self.records_count and len(self.buffer) + estimate_record_size(key, value) > limit:
                    break
                self.append(timestamp, key, value)
                taken += 1
            return taken
        count = self.records_count
        if count == 0:
            self.base_timestamp = self.max_timestamp = timestamp
            timestamp_delta = b"\x00"
        else:
            delta = timestamp - self.base_timestamp
            timestamp_delta = _varint(delta)
            if timestamp > self.max_timestamp:
                self.max_timestamp = timestamp
        table = _VARINT
        table_size = _TABLE_SIZE
        buffer = self.buffer
        size_now = len(buffer)
        join = b"".join
        prefix = _ATTRIBUTES + timestamp_delta
        fixed = len(prefix) + 2  # plus the null key and the empty header count
        first = count
        for value in values:
            offset_varint = table[count] if count < table_size else _varint(count)
            if value is None:
                value_length = _NULL
                value = b""
            else:
                size = len(value)
                value_length = table[size] if size < table_size else _varint(size)
            body_size = fixed + len(offset_varint) + len(value_length) + len(value)
            record = join((table[body_size] if body_size < table_size else _varint(body_size), prefix,
                           offset_varint, _NULL, value_length, value, _NO_HEADERS))
            if count > 0 and size_now + len(record) > limit:
                break
            buffer += record
            size_now += len(record)
            count += 1
        self.records_count = count
        return count - first

    def build(
        self,
        *,
        compression: Compression = Compression.NONE,
        compression_level: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
    ) -> bytearray:
        """Write the header (compressing the records first if asked) and return the batch's bytes."""
        if self.records_count == 0:
            raise ValueError("a record batch needs at least one record")
        if compression == Compression.NONE:
            batch = self.buffer
        else:
            payload = compress(compression, memoryview(self.buffer)[_HEADER_SIZE:], level=compression_level)
            batch = bytearray(_HEADER_SIZE + len(payload))
            batch[_HEADER_SIZE:] = payload
        attributes = int(compression) | (_TRANSACTIONAL_BIT if is_transactional else 0)
        _HEADER.pack_into(
            batch, 0,
            0,  # base offset: the broker assigns it
            len(batch) - 12, -1, 2, 0, attributes, self.records_count - 1,
            self.base_timestamp, self.max_timestamp, producer_id, producer_epoch, base_sequence, self.records_count,
        )  # fmt: skip
        _CRC.pack_into(batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))
        self.buffer = bytearray()
        return batch


def stamp_producer_state(batch: bytearray, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
    """Rewrite a built batch's producer id, epoch and base sequence, and its CRC (they lie inside it)."""
    _PRODUCER_STATE.pack_into(batch, _PRODUCER_STATE_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(batch, _CRC_OFFSET, crc32c(memoryview(batch)[_ATTRIBUTES_OFFSET:]))

