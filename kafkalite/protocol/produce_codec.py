"""Produce, decoded and encoded by hand: the codec of the one request every producer sends most.

``decode_produce_request`` and ``encode_produce_response`` give exactly what the generated
``ProduceRequest.decode_from`` and ``ProduceResponse.encode_into`` (behind ``framing.encode_response``)
give, with fewer calls per field: the fixed-width fields of a struct are read or written with one
``struct`` call, one-byte varints and empty tagged-field sections are taken inline, and the
response frame (size, header, body) is one ``bytes``. Records stay a view into the request frame.
What almost every producer sends, a flexible request for one partition of one topic, is read by a
path of its own (one check per length, no loops), and its answer without an error message is one
``struct`` call of a layout kept per topic name and version.

What they do not take on they hand to the generated code: a response with record errors, an error
message longer than a one-byte length, a ``current_leader``, ``node_endpoints`` or unknown tagged
fields is encoded by ``ProduceResponse`` itself (``encode_produce_response`` answers None); a
request with tagged fields is read by ``ProduceRequest.read`` from the start. A unit test checks
both against the generated code on every version.
"""

from __future__ import annotations

import struct

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkalite.protocol.messages.produce_response import ProduceResponse, TopicProduceResponse
from kafkalite.protocol.primitives import Reader, append_uvarint

__all__ = ["decode_produce_request", "encode_produce_response"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_SIZE_CORRELATION = struct.Struct(">ii")
_PARTITION = {  # index, error code, base offset, [log append time (v2+)], [log start offset (v5+)]
    version: struct.Struct(">ihq" + "q" * ((version >= 2) + (version >= 5))) for version in range(12)
}
_NO_RECORD_ERRORS_AND_MESSAGE = {False: b"\x00\x00\x00\x00\xff\xff", True: b"\x01\x00"}  # v8+: [], null


class _Fallback(Exception):
    """Something the hand-written reader leaves to the generated one."""


def decode_produce_request(reader: Reader, version: int) -> ProduceRequest:
    """``ProduceRequest.decode_from(reader, version)``, faster; ``reader`` ends at the body's end."""
    ProduceRequest.check_version(version)
    start = reader.pos
    if version >= 9:
        try:
            request = _read_one_partition(reader.view, start)
        except (ProtocolError, struct.error, IndexError, ValueError, OverflowError):
            request = None  # the general reader says what is wrong with it
        if request is not None:
            reader.pos = len(reader.view)
            return request
    try:
        request, reader.pos = _read(reader.view, start, version)
        return request
    except _Fallback:
        reader.pos = start
    except ProtocolError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"malformed ProduceRequest v{version}: {exc}") from None
    return ProduceRequest.decode_from(reader, version)


def _read_one_partition(view: memoryview, pos: int) -> ProduceRequest | None:
    """A flexible request for one partition of one topic whose lengths but the records' are one
    byte, without tagged fields (what almost every producer sends), or None for anything else."""
    end = len(view)
    byte = view[pos]
    if byte == 0:
        transactional_id, pos = None, pos + 1
    elif byte < 0x80:
        transactional_id, pos = _utf8(view, pos + 1, byte - 1), pos + byte
    else:
        return None
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    size = view[pos + 7] - 1
    if view[pos + 6] != 2 or not 0 <= size < 0x7F:  # one topic; its name
        return None
    name, pos = _utf8(view, pos + 8, size), pos + 8 + size
    if view[pos] != 2:  # one partition
        return None
    index = _INT32.unpack_from(view, pos + 1)[0]
    size, pos = _length(view, pos + 5, True, 4)
    after = pos + size
    if size < 0 or after + 3 != end or view[after] or view[after + 1] or view[after + 2]:  # no tagged fields
        return None
    return ProduceRequest(transactional_id, acks, timeout_ms,
                          [TopicProduceData(name, [PartitionProduceData(index, view[pos:after])])])


def _read(view: memoryview, pos: int, version: int) -> tuple[ProduceRequest, int]:
    # A flexible version's one-byte lengths and counts and its empty tagged-field sections are read
    # inline (as _length and _count read them), longer ones through those helpers: this runs for
    # every Produce request.
    flexible = version >= 9
    end = len(view)
    transactional_id: str | None = None
    if version >= 3:
        if flexible and view[pos] < 0x80:
            size, pos = view[pos] - 1, pos + 1
        else:
            size, pos = _length(view, pos, flexible, 2)
        if size >= 0:
            transactional_id, pos = _utf8(view, pos, size), pos + size
        elif size != -1:
            raise ProtocolError(f"negative string length {size}")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += 6
    if flexible and view[pos] < 0x80:
        topic_count, pos = view[pos] - 1, pos + 1
        if not 0 <= topic_count <= end - pos:
            _refuse_count(topic_count, end - pos)
    else:
        topic_count, pos = _count(view, pos, flexible)
    topics = []
    for _ in range(topic_count):
        if flexible and view[pos] < 0x80:
            size, pos = view[pos] - 1, pos + 1
        else:
            size, pos = _length(view, pos, flexible, 2)
        if size < 0:
            raise ProtocolError("null value in a non-nullable string")
        name, pos = _utf8(view, pos, size), pos + size
        if flexible and view[pos] < 0x80:
            partition_count, pos = view[pos] - 1, pos + 1
            if not 0 <= partition_count <= end - pos:
                _refuse_count(partition_count, end - pos)
        else:
            partition_count, pos = _count(view, pos, flexible)
        partitions = []
        for _ in range(partition_count):
            index = _INT32.unpack_from(view, pos)[0]
            size, pos = _length(view, pos + 4, flexible, 4)
            records: memoryview | None = None
            if size >= 0:
                if pos + size > end:
                    raise ProtocolError(f"length {size} at byte {pos} exceeds the {end - pos} bytes that remain")
                records, pos = view[pos:pos + size], pos + size
            elif size != -1:
                raise ProtocolError(f"negative records length {size}")
            if flexible:
                if view[pos] != 0:
                    raise _Fallback
                pos += 1
            partitions.append(PartitionProduceData(index, records))
        if flexible:
            if view[pos] != 0:
                raise _Fallback
            pos += 1
        topics.append(TopicProduceData(name, partitions))
    if flexible:
        if view[pos] != 0:
            raise _Fallback
        pos += 1
    return ProduceRequest(transactional_id, acks, timeout_ms, topics), pos


def _length(view: memoryview, pos: int, flexible: bool, width: int) -> tuple[int, int]:
    """A string's (``width`` 2) or a bytes value's (4) length, -1 for null, and the position after it."""
    if flexible:
        byte = view[pos]
        if byte < 0x80:
            return byte - 1, pos + 1
        second = view[pos + 1]
        if second < 0x80:  # two bytes: up to 16 KiB, a small record batch's size
            return (byte & 0x7F | second << 7) - 1, pos + 2
        reader = Reader(view, pos)
        value = reader.uvarint() - 1
        return value, reader.pos
    if width == 2:
        return _INT16.unpack_from(view, pos)[0], pos + 2
    return _INT32.unpack_from(view, pos)[0], pos + 4


def _count(view: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count, checked against what remains; arrays here are never null."""
    count, pos = _length(view, pos, flexible, 4)
    if count < -1 or count > len(view) - pos:
        raise ProtocolError(f"array length {count} is impossible with {len(view) - pos} bytes left")
    if count < 0:
        raise ProtocolError("null value in a non-nullable array")
    return count, pos


def _refuse_count(count: int, remaining: int) -> None:
    """Raise what ``_count`` raises for a count that is null or larger than what remains."""
    if count < -1 or count > remaining:
        raise ProtocolError(f"array length {count} is impossible with {remaining} bytes left")
    raise ProtocolError("null value in a non-nullable array")


def _utf8(view: memoryview, pos: int, size: int) -> str:
    if pos + size > len(view):
        raise ProtocolError(f"length {size} at byte {pos} exceeds the {len(view) - pos} bytes that remain")
    try:
        return str(view[pos:pos + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"string is not valid UTF-8: {exc}") from None


def encode_produce_response(response: ProduceResponse, version: int, correlation_id: int) -> bytes | None:
    """The whole response frame (size prefix, header, body) as ``framing.encode_response`` makes it,
    or None when the response holds something left to the generated encoder (see the module)."""
    if response.node_endpoints or response.unknown_tagged_fields is not None or not 0 <= version <= 11:
        return None
    topics = response.responses
    if len(topics) == 1 and len(topics[0].partition_responses) == 1:  # what almost every producer sends
        frame = _one_partition(topics[0], response.throttle_time_ms, version, correlation_id)
        if frame is not None:
            return frame
    flexible = version >= 9
    partition_struct = _PARTITION[version]
    pack = partition_struct.pack
    out = bytearray(8)  # size and correlation id, packed last
    if flexible:
        out.append(0)  # response header v1: no tagged fields
        count = len(response.responses) + 1  # compact lengths: one byte below 128
        if count < 0x80:
            out.append(count)
        else:
            append_uvarint(out, count)
    else:
        out += _INT32.pack(len(response.responses))
    two_fields = version >= 5
    for topic in response.responses:
        if topic.unknown_tagged_fields is not None:
            return None
        name = topic.name.encode("utf-8")
        partitions = topic.partition_responses
        if flexible:
            if len(name) < 0x7F and len(partitions) < 0x7F:
                out.append(len(name) + 1)
                out += name
                out.append(len(partitions) + 1)
            else:
                append_uvarint(out, len(name) + 1)
                out += name
                append_uvarint(out, len(partitions) + 1)
        else:
            if len(name) > 0x7FFF:
                return None
            out += _INT16.pack(len(name))
            out += name
            out += _INT32.pack(len(partitions))
        for partition in partitions:
            leader = partition.current_leader
            if (partition.record_errors or partition.unknown_tagged_fields is not None
                    or leader.leader_id != -1 or leader.leader_epoch != -1 or leader.unknown_tagged_fields is not None):
                return None
            if two_fields:
                out += pack(partition.index, partition.error_code, partition.base_offset,
                            partition.log_append_time_ms, partition.log_start_offset)
            elif version >= 2:
                out += pack(partition.index, partition.error_code, partition.base_offset,
                            partition.log_append_time_ms)
            else:
                out += pack(partition.index, partition.error_code, partition.base_offset)
            if version >= 8:
                message = partition.error_message
                if message is None:
                    out += _NO_RECORD_ERRORS_AND_MESSAGE[flexible]
                else:
                    text = message.encode("utf-8")
                    if flexible:
                        if len(text) + 1 >= 0x80:
                            return None
                        out += b"\x01"
                        out.append(len(text) + 1)
                    else:
                        if len(text) > 0x7FFF:
                            return None
                        out += b"\x00\x00\x00\x00"
                        out += _INT16.pack(len(text))
                    out += text
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if version >= 1:
        out += _INT32.pack(response.throttle_time_ms)
    if flexible:
        out.append(0)
    _SIZE_CORRELATION.pack_into(out, 0, len(out) - 4, correlation_id)
    return bytes(out)


class _OnePartitionLayout:
    """The frame of an answer for one partition of one topic, without an error message, as one
    ``struct``: size, correlation id, the bytes up to the partition's fields (header, counts, the
    topic's name), those fields, the bytes up to the throttle time, [throttle time], the last bytes."""

    __slots__ = ("struct", "before", "between", "after")

    def __init__(self, name: bytes, version: int) -> None:
        partition = _PARTITION[version].format[1:]
        if version >= 9:
            self.before = b"\x00\x02" + bytes((len(name) + 1,)) + name + b"\x02"
            self.between = b"\x01\x00\x00\x00"  # no record errors, a null message, no tags (partition, topic)
            self.after = b"\x00"
        else:
            self.before = _INT32.pack(1) + _INT16.pack(len(name)) + name + _INT32.pack(1)
            self.between = _NO_RECORD_ERRORS_AND_MESSAGE[False] if version >= 8 else b""
            self.after = b""
        self.struct = struct.Struct(f">ii{len(self.before)}s{partition}{len(self.between)}s"
                                    f"{'i' if version >= 1 else ''}{len(self.after)}s")


_LAYOUTS: dict[tuple[str, int], _OnePartitionLayout] = {}
_MAX_LAYOUTS = 4096  # topics' names times versions; beyond that, forgotten and made again


def _one_partition(topic: TopicProduceResponse, throttle_time_ms: int, version: int,
                   correlation_id: int) -> bytes | None:
    """The frame of the usual answer (one topic, one partition, no error message), or None."""
    partition = topic.partition_responses[0]
    leader = partition.current_leader
    if (partition.error_message is not None or partition.record_errors or topic.unknown_tagged_fields is not None
            or partition.unknown_tagged_fields is not None or leader.leader_id != -1 or leader.leader_epoch != -1
            or leader.unknown_tagged_fields is not None):
        return None
    layout = _LAYOUTS.get((topic.name, version))
    if layout is None:
        name = topic.name.encode("utf-8")
        if len(name) >= 0x7F:
            return None
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        layout = _LAYOUTS[(topic.name, version)] = _OnePartitionLayout(name, version)
    pack, size = layout.struct.pack, layout.struct.size - 4
    if version >= 5:
        return pack(size, correlation_id, layout.before, partition.index, partition.error_code, partition.base_offset,
                    partition.log_append_time_ms, partition.log_start_offset, layout.between, throttle_time_ms,
                    layout.after)
    if version >= 2:
        return pack(size, correlation_id, layout.before, partition.index, partition.error_code, partition.base_offset,
                    partition.log_append_time_ms, layout.between, throttle_time_ms, layout.after)
    if version >= 1:
        return pack(size, correlation_id, layout.before, partition.index, partition.error_code, partition.base_offset,
                    layout.between, throttle_time_ms, layout.after)
    return pack(size, correlation_id, layout.before, partition.index, partition.error_code, partition.base_offset,
                layout.between, layout.after)
