"""Reading and writing Kafka's primitive wire types.

The generated message classes (``protocol.messages``) are written in terms of ``Reader`` and
``Writer``. Both know the two encodings Kafka uses:

* classic: int16-length strings, int32-length bytes and arrays, -1 for null;
* flexible (KIP-482): unsigned-varint ``length + 1`` for strings, bytes and arrays (0 for null),
  and a tagged-field section closing every struct.

``Reader`` never trusts a length: every length is checked against the bytes that remain before
anything is sliced or allocated, and any shortfall raises ``ProtocolError``. Fixed-width reads
rely on ``struct.error`` for truncation; ``decode_message`` turns those into ``ProtocolError``.

``Writer`` collects small fields in a ``bytearray`` and keeps large ``records``/``bytes`` values as
separate buffers, so a Fetch response can leave with ``transport.writelines(writer.buffers())``
without copying the stored batches.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, Self, TypeAlias, TypeVar
from uuid import UUID

from kafkalite.protocol.exceptions import ProtocolError


class _Readable(Protocol):
    @classmethod
    def read(cls, reader: Reader, version: int) -> Self: ...


class _Writable(Protocol):
    def write(self, writer: Writer, version: int) -> None: ...


_S = TypeVar("_S", bound=_Readable)
_T = TypeVar("_T")

__all__ = [
    "append_uvarint",
    "Reader",
    "Writer",
    "Records",
    "TaggedFields",
    "UNSET",
    "ZERO_UUID",
    "keep_unknown_tag",
    "not_null",
]

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")

ZERO_UUID = UUID(int=0)

# Marks a constructor argument left out, for fields whose default is a fresh list or struct.
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET", "__slots__": ()})()

# A ``records`` value: bytes-like, or a sequence of bytes-like chunks sent one after another
# (a Fetch response built from several stored slices without joining them).
Records: TypeAlias = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]

# Tagged fields the schema does not know, kept as (tag, raw value) so they survive a round trip.
TaggedFields = list[tuple[int, bytes]]

# Buffers at least this large are kept by reference instead of copied into the frame.
_ZERO_COPY_THRESHOLD = 16 * 1024

_MAX_INT16_STRING = 0x7FFF


class Reader:
    """A cursor over an immutable buffer. Only ``ProtocolError`` (or ``struct.error``) leaves it."""

    __slots__ = ("view", "pos")

    def __init__(self, buffer: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.view = view
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.view) - self.pos

    def _need(self, size: int) -> int:
        """Reserve ``size`` bytes and return where they start."""
        pos = self.pos
        if size < 0 or pos + size > len(self.view):
            raise ProtocolError(
                f"length {size} at byte {pos} exceeds the {len(self.view) - pos} bytes that remain"
            )
        self.pos = pos + size
        return pos

    # fixed width -----------------------------------------------------------------------------
    def int8(self) -> int:
        value: int = _INT8.unpack_from(self.view, self.pos)[0]
        self.pos += 1
        return value

    def bool_(self) -> bool:
        value = self.int8()
        return value != 0

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.view, self.pos)[0]
        self.pos += 2
        return value

    def uint16(self) -> int:
        value: int = _UINT16.unpack_from(self.view, self.pos)[0]
        self.pos += 2
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.view, self.pos)[0]
        self.pos += 4
        return value

    def uint32(self) -> int:
        value: int = _UINT32.unpack_from(self.view, self.pos)[0]
        self.pos += 4
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack_from(self.view, self.pos)[0]
        self.pos += 8
        return value

    def float64(self) -> float:
        value: float = _FLOAT64.unpack_from(self.view, self.pos)[0]
        self.pos += 8
        return value

    def uuid(self) -> UUID:
        start = self._need(16)
        return UUID(bytes=bytes(self.view[start : start + 16]))

    # varints ---------------------------------------------------------------------------------
    def uvarint(self) -> int:
        """Unsigned base-128 varint of at most 5 bytes (a uint32)."""
        view = self.view
        pos = self.pos
        if pos < len(view) and view[pos] < 0x80:  # one byte: most lengths and counts
            self.pos = pos + 1
            return view[pos]
        result = 0
        shift = 0
        end = len(view)
        while True:
            if pos >= end:
                raise ProtocolError("truncated varint")
            byte = view[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 28:
                raise ProtocolError("varint longer than 5 bytes")
        if result > 0xFFFFFFFF:
            raise ProtocolError("varint exceeds 32 bits")
        self.pos = pos
        return result

    # lengths ---------------------------------------------------------------------------------
    def _length(self, flexible: bool) -> int:
        """Length prefix of a bytes-like or array value: -1 for null."""
        if flexible:
            return self.uvarint() - 1
        return self.int32()

    def array_length(self, flexible: bool) -> int:
        """Element count of an array (-1 for null), checked against what remains."""
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < -1 or count > self.remaining:
            raise ProtocolError(f"array length {count} is impossible with {self.remaining} bytes left")
        return count

    # strings ---------------------------------------------------------------------------------
    def _string_length(self, flexible: bool) -> int:
        if flexible:
            return self.uvarint() - 1
        return self.int16()

    def _utf8(self, size: int) -> str:
        start = self._need(size)
        try:
            return str(self.view[start : start + size], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string is not valid UTF-8: {exc}") from None

    def string(self, flexible: bool) -> str:
        size = self._string_length(flexible)
        if size < 0:
            raise ProtocolError("null value in a non-nullable string")
        return self._utf8(size)

    def nullable_string(self, flexible: bool) -> str | None:
        size = self._string_length(flexible)
        if size < 0:
            if size != -1:
                raise ProtocolError(f"negative string length {size}")
            return None
        return self._utf8(size)

    # bytes and records -----------------------------------------------------------------------
    def bytes_(self, flexible: bool) -> bytes:
        size = self._length(flexible)
        if size < 0:
            raise ProtocolError("null value in a non-nullable bytes field")
        start = self._need(size)
        return bytes(self.view[start : start + size])

    def nullable_bytes(self, flexible: bool) -> bytes | None:
        size = self._length(flexible)
        if size < 0:
            if size != -1:
                raise ProtocolError(f"negative bytes length {size}")
            return None
        start = self._need(size)
        return bytes(self.view[start : start + size])

    def records(self, flexible: bool) -> memoryview:
        """A record set: a view into the frame, never a copy."""
        size = self._length(flexible)
        if size < 0:
            raise ProtocolError("null value in a non-nullable records field")
        start = self._need(size)
        return self.view[start : start + size]

    def nullable_records(self, flexible: bool) -> memoryview | None:
        size = self._length(flexible)
        if size < 0:
            if size != -1:
                raise ProtocolError(f"negative records length {size}")
            return None
        start = self._need(size)
        return self.view[start : start + size]

    # arrays of primitives --------------------------------------------------------------------
    def _fixed_array(self, flexible: bool, code: str, width: int) -> list[int] | None:
        count = self.array_length(flexible)
        if count < 0:
            return None
        start = self._need(count * width)
        return list(struct.unpack_from(f">{count}{code}", self.view, start))

    def int8_array(self, flexible: bool) -> list[int] | None:
        return self._fixed_array(flexible, "b", 1)

    def int16_array(self, flexible: bool) -> list[int] | None:
        return self._fixed_array(flexible, "h", 2)

    def int32_array(self, flexible: bool) -> list[int] | None:
        return self._fixed_array(flexible, "i", 4)

    def int64_array(self, flexible: bool) -> list[int] | None:
        return self._fixed_array(flexible, "q", 8)

    # arrays of strings, uuids and structs ----------------------------------------------------
    def string_array(self, flexible: bool) -> list[str]:
        count = self.array_length(flexible)
        if count < 0:
            raise ProtocolError("null value in a non-nullable array")
        return [self.string(flexible) for _ in range(count)]

    def nullable_string_array(self, flexible: bool) -> list[str] | None:
        count = self.array_length(flexible)
        if count < 0:
            return None
        return [self.string(flexible) for _ in range(count)]

    def uuid_array(self, flexible: bool) -> list[UUID]:
        count = self.array_length(flexible)
        if count < 0:
            raise ProtocolError("null value in a non-nullable array")
        return [self.uuid() for _ in range(count)]

    def nullable_uuid_array(self, flexible: bool) -> list[UUID] | None:
        count = self.array_length(flexible)
        if count < 0:
            return None
        return [self.uuid() for _ in range(count)]

    def struct_array(self, cls: type[_S], version: int, flexible: bool) -> list[_S]:
        count = self.array_length(flexible)
        if count < 0:
            raise ProtocolError(f"null value in a non-nullable array of {cls.__name__}")
        read = cls.read
        return [read(self, version) for _ in range(count)]

    def nullable_struct_array(self, cls: type[_S], version: int, flexible: bool) -> list[_S] | None:
        count = self.array_length(flexible)
        if count < 0:
            return None
        read = cls.read
        return [read(self, version) for _ in range(count)]

    def nullable_struct(self, cls: type[_S], version: int) -> _S | None:
        marker = self.int8()
        if marker < 0:
            return None
        return cls.read(self, version)

    # tagged fields ---------------------------------------------------------------------------
    def tagged_fields(self) -> Iterator[tuple[int, Reader]]:
        """Yield ``(tag, reader over the value)`` for each field of a tagged-field section."""
        count = self.uvarint()
        if count > self.remaining:
            raise ProtocolError(f"{count} tagged fields cannot fit in {self.remaining} bytes")
        previous = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= previous:
                raise ProtocolError(f"tagged field {tag} out of order after {previous}")
            previous = tag
            size = self.uvarint()
            start = self._need(size)
            yield tag, Reader(self.view[start : start + size])

    def skip_tagged_fields(self) -> TaggedFields | None:
        """Read a tagged-field section whose tags are all unknown; keep them."""
        view, pos = self.view, self.pos
        if pos < len(view) and view[pos] == 0:  # no tagged fields: nearly every section
            self.pos = pos + 1
            return None
        unknown: TaggedFields | None = None
        for tag, value in self.tagged_fields():
            unknown = keep_unknown_tag(unknown, tag, value)
        return unknown


def append_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (compact lengths, tag counts) to ``out``: the hand-written codecs' writer."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def keep_unknown_tag(unknown: TaggedFields | None, tag: int, value: Reader) -> TaggedFields:
    """Remember a tagged field the schema does not define, to write it back unchanged."""
    if unknown is None:
        unknown = []
    unknown.append((tag, bytes(value.view)))
    return unknown


class Writer:
    """Accumulates an encoded message. ``getvalue()`` joins it; ``buffers()`` avoids the join."""

    __slots__ = ("buf", "_chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._chunks: list[bytes | bytearray | memoryview] = []

    def __len__(self) -> int:
        return len(self.buf) + sum(len(chunk) for chunk in self._chunks)

    def buffers(self) -> list[bytes | bytearray | memoryview]:
        """Every piece of the message in order, large values by reference."""
        if not self._chunks:
            return [self.buf]
        return [*self._chunks, self.buf]

    def getvalue(self) -> bytes:
        if not self._chunks:
            return bytes(self.buf)
        return b"".join([*self._chunks, self.buf])

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes as they are; large buffers are kept by reference."""
        if len(data) >= _ZERO_COPY_THRESHOLD:
            if self.buf:
                self._chunks.append(self.buf)
                self.buf = bytearray()
            self._chunks.append(data)
        else:
            self.buf += data

    # fixed width -----------------------------------------------------------------------------
    def int8(self, value: int) -> None:
        self.buf += _INT8.pack(value)

    def bool_(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def int16(self, value: int) -> None:
        self.buf += _INT16.pack(value)

    def uint16(self, value: int) -> None:
        self.buf += _UINT16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _INT32.pack(value)

    def uint32(self, value: int) -> None:
        self.buf += _UINT32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _INT64.pack(value)

    def float64(self, value: float) -> None:
        self.buf += _FLOAT64.pack(value)

    def uuid(self, value: UUID) -> None:
        self.buf += value.bytes

    def uvarint(self, value: int) -> None:
        buf = self.buf
        while value > 0x7F:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    # lengths ---------------------------------------------------------------------------------
    def _length(self, size: int, flexible: bool) -> None:
        if flexible:
            self.uvarint(size + 1)
        else:
            self.buf += _INT32.pack(size)

    def array_length(self, items: Sequence[object] | None, flexible: bool) -> None:
        self._length(-1 if items is None else len(items), flexible)

    # strings ---------------------------------------------------------------------------------
    def string(self, value: str, flexible: bool) -> None:
        data = value.encode("utf-8")
        if flexible:
            self.uvarint(len(data) + 1)
        else:
            if len(data) > _MAX_INT16_STRING:
                raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
            self.buf += _INT16.pack(len(data))
        self.buf += data

    def nullable_string(self, value: str | None, flexible: bool) -> None:
        if value is None:
            if flexible:
                self.buf.append(0)
            else:
                self.buf += b"\xff\xff"
            return
        self.string(value, flexible)

    # bytes and records -----------------------------------------------------------------------
    def bytes_(self, value: bytes | bytearray | memoryview | None, flexible: bool) -> None:
        if value is None:
            self._length(-1, flexible)
            return
        self._length(len(value), flexible)
        self.raw(value)

    nullable_bytes = bytes_

    def records(self, value: Records | None, flexible: bool) -> None:
        if value is None:
            self._length(-1, flexible)
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            self._length(len(value), flexible)
            self.raw(value)
            return
        self._length(sum(len(chunk) for chunk in value), flexible)
        for chunk in value:
            self.raw(chunk)

    nullable_records = records

    # arrays of primitives --------------------------------------------------------------------
    def _fixed_array(self, values: Sequence[int] | None, flexible: bool, code: str) -> None:
        if values is None:
            self._length(-1, flexible)
            return
        self._length(len(values), flexible)
        self.buf += struct.pack(f">{len(values)}{code}", *values)

    def int8_array(self, values: Sequence[int] | None, flexible: bool) -> None:
        self._fixed_array(values, flexible, "b")

    def int16_array(self, values: Sequence[int] | None, flexible: bool) -> None:
        self._fixed_array(values, flexible, "h")

    def int32_array(self, values: Sequence[int] | None, flexible: bool) -> None:
        self._fixed_array(values, flexible, "i")

    def int64_array(self, values: Sequence[int] | None, flexible: bool) -> None:
        self._fixed_array(values, flexible, "q")

    # arrays of strings, uuids and structs ----------------------------------------------------
    def string_array(self, values: Sequence[str] | None, flexible: bool) -> None:
        if values is None:
            self._length(-1, flexible)
            return
        self._length(len(values), flexible)
        for value in values:
            self.string(value, flexible)

    def uuid_array(self, values: Sequence[UUID] | None, flexible: bool) -> None:
        if values is None:
            self._length(-1, flexible)
            return
        self._length(len(values), flexible)
        for value in values:
            self.buf += value.bytes

    def struct_array(self, items: Sequence[_Writable] | None, version: int, flexible: bool) -> None:
        if items is None:
            self._length(-1, flexible)
            return
        self._length(len(items), flexible)
        for item in items:
            item.write(self, version)

    def nullable_struct(self, item: _Writable | None, version: int) -> None:
        if item is None:
            self.buf += b"\xff"
        else:
            self.buf.append(1)
            item.write(self, version)

    # tagged fields ---------------------------------------------------------------------------
    def tagged_fields(self, known: list[tuple[int, bytes]] | None, unknown: TaggedFields | None) -> None:
        """Write a tagged-field section: known and kept-unknown fields, in ascending tag order."""
        if not known and not unknown:
            self.buf.append(0)
            return
        fields = sorted([*(known or ()), *(unknown or ())], key=lambda item: item[0])
        self.uvarint(len(fields))
        for tag, value in fields:
            self.uvarint(tag)
            self.uvarint(len(value))
            self.buf += value


def not_null(value: _T | None, name: str) -> _T:
    """Reject a null where the schema does not allow one."""
    if value is None:
        raise ProtocolError(f"null value in non-nullable field {name}")
    return value
