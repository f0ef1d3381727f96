"""Fetch decoded and its response encoded by hand: what a consumer sends and waits for, once per poll.

``decode_fetch_request`` gives what ``FetchRequest.decode_from`` gives, reading each struct's fixed
fields with one ``struct`` call; a request with tagged fields is read by the generated code from
the start. A consumer's request for one partition of one topic (v12+, forgetting none, no tagged
fields) is read without loops, with two ``struct`` calls; anything else goes the general way.

``encode_fetch_response`` gives exactly the buffers' bytes that ``framing.encode_response`` gives
through the generated ``FetchResponse.write`` (size prefix, header, body), with one ``struct``
call per partition's fixed fields. Record sets of ``ZERO_COPY_BYTES`` or more stay buffers of their
own, so stored batches are not copied. A record set may also hold pieces that are not buffers at all
(any ``Region``: an object with a length, such as the broker's file regions); each stays an item of
its own, in order, for the writer to send, and its length counts in the frame's sizes.
The answer to a consumer of one partition (flexible versions, no aborted transactions, a records
value below 16 KiB: one buffer, or a list of one as the broker reads it) is one ``bytes`` joined
from two ``struct`` calls, the topic and the records. What it does not take on it leaves to the
generated code (it answers None): a ``diverging_epoch``, ``current_leader`` or ``snapshot_id``
other than the default, ``node_endpoints``, or unknown tagged fields. A unit test checks it against
the generated encoder on every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Protocol
from uuid import UUID

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import fetch_response as _fetch_response
from kafkalite.protocol.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from kafkalite.protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from kafkalite.protocol.primitives import ZERO_UUID, Reader, append_uvarint, not_null

__all__ = ["NO_CURRENT_LEADER", "NO_DIVERGING_EPOCH", "NO_SNAPSHOT_ID", "ZERO_COPY_BYTES", "Region",
           "decode_fetch_request", "encode_fetch_response"]

ZERO_COPY_BYTES = 16 * 1024  # as the generic Writer: smaller record sets are copied into the frame
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SIZE_CORRELATION = struct.Struct(">ii")
_TWO_INT64 = struct.Struct(">qq")
_TOP = {version: struct.Struct(">" + "i" * (version >= 1) + "hi" * (version >= 7)) for version in range(18)}
_PARTITION = {  # index, error code, high watermark, [last stable offset (v4+)], [log start offset (v5+)]
    version: struct.Struct(">ihq" + "q" * ((version >= 4) + (version >= 5))) for version in range(18)
}
_EPOCH, _LEADER, _SNAPSHOT = EpochEndOffset(), LeaderIdAndEpoch(), SnapshotId()
# A partition's tagged structs at their defaults: the generated module's own defaults, which its encoder
# leaves unwritten as equal to themselves. An answer may hold them (and then needs no struct of its
# own); nothing may change them in place (an answer that needs another value holds a struct of its
# own). The one-partition path knows them by identity.
NO_DIVERGING_EPOCH: EpochEndOffset = _fetch_response._EpochEndOffset_DEFAULT
NO_CURRENT_LEADER: LeaderIdAndEpoch = _fetch_response._LeaderIdAndEpoch_DEFAULT
NO_SNAPSHOT_ID: SnapshotId = _fetch_response._SnapshotId_DEFAULT
_Buffer = bytes | bytearray | memoryview


class Region(Protocol):
    """A piece of a record set the encoder does not read: its length goes in the frame, the piece
    itself is an item of the answer's list of its own (the writer knows how to send it)."""

    def __len__(self) -> int: ...


_Piece = _Buffer | Region
# replica id (v0-14), max wait, min bytes, max bytes (v3+), isolation level (v4+), session id and epoch (v7+)
_REQUEST = {version: struct.Struct(">" + "i" * (version <= 14) + "ii" + "i" * (version >= 3) + "b" * (version >= 4)
                                   + "ii" * (version >= 7)) for version in range(18)}
# partition, current leader epoch (v9+), fetch offset, last fetched epoch (v12+), log start offset (v5+), max bytes
_FETCH_PARTITION = {version: struct.Struct(">i" + "i" * (version >= 9) + "q" + "i" * (version >= 12)
                                           + "q" * (version >= 5) + "i") for version in range(18)}


class _Fallback(Exception):
    """Something the hand-written reader leaves to the generated one."""


def decode_fetch_request(reader: Reader, version: int) -> FetchRequest:
    """``FetchRequest.decode_from(reader, version)``, faster; ``reader`` ends at the body's end."""
    FetchRequest.check_version(version)
    start = reader.pos
    if version >= 12:
        try:
            request = _read_one_partition(reader.view, start, version)
        except (struct.error, IndexError, ValueError, OverflowError):
            request = None  # the general reader says what is wrong with it
        if request is not None:
            reader.pos = len(reader.view)
            return request
    try:
        return _read_request(reader, version)
    except _Fallback:
        reader.pos = start
    except ProtocolError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"malformed FetchRequest v{version}: {exc}") from None
    return FetchRequest.decode_from(reader, version)


# v12+: replica id (v12-14), max wait, min bytes, max bytes, isolation level, session id and epoch, topics' count
_ONE_REQUEST = {version: struct.Struct(">" + "i" * (version <= 14) + "iiibiiB") for version in range(12, 18)}
# partitions' count, the partition (index, current leader epoch, fetch offset, last fetched epoch, log start
# offset, max bytes), its tagged fields' count, the topic's, the forgotten topics' count
_ONE_FETCH_PARTITION = struct.Struct(">BiiqiqiBBB")


def _read_one_partition(view: memoryview, pos: int, version: int) -> FetchRequest | None:
    """A flexible request for one partition of one topic, forgetting none, with a rack id of a
    one-byte length and no tagged fields (what a consumer of one partition sends on every poll),
    or None for anything else."""
    end = len(view)
    head = _ONE_REQUEST[version]
    values = head.unpack_from(view, pos)
    if values[-1] != 2:  # one topic
        return None
    pos += head.size
    if version == 12:
        size = view[pos]
        if not 0 < size < 0x80:
            return None
        try:
            topic = str(view[pos + 1:pos + size], "utf-8")
        except UnicodeDecodeError:
            return None
        topic_id = ZERO_UUID
        pos += size
    else:
        topic = ""
        topic_id = UUID(bytes=bytes(view[pos:pos + 16]))
        pos += 16
    (count, partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, partition_max_bytes,
     partition_tags, topic_tags, forgotten) = _ONE_FETCH_PARTITION.unpack_from(view, pos)
    if count != 2 or partition_tags or topic_tags or forgotten != 1:
        return None
    pos += _ONE_FETCH_PARTITION.size
    size = view[pos]
    if size == 1:
        rack_id = ""
    elif 0 < size < 0x80:
        try:
            rack_id = str(view[pos + 1:pos + size], "utf-8")
        except UnicodeDecodeError:
            return None
    else:
        return None
    pos += size
    if pos + 1 != end or view[pos]:  # the request's tagged fields: none, and nothing after them
        return None
    if version >= 15:
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch, _ = values
        replica_id = -1
    else:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch, _ = values
    return FetchRequest(None, replica_id, ReplicaState(), max_wait_ms, min_bytes, max_bytes, isolation_level,
                        session_id, session_epoch, [FetchTopic(topic, topic_id, [FetchPartition(
                            partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
                            partition_max_bytes)])], [], rack_id)


def _read_request(reader: Reader, version: int) -> FetchRequest:
    flexible = version >= 12
    view = reader.view
    fixed = _REQUEST[version]
    values = fixed.unpack_from(view, reader.pos)
    reader.pos += fixed.size
    replica_id, max_bytes, isolation_level, session_id, session_epoch = -1, 2147483647, 0, 0, -1
    if version >= 15:
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = values
    elif version >= 7:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = values
    elif version >= 4:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level = values
    elif version >= 3:
        replica_id, max_wait_ms, min_bytes, max_bytes = values
    else:
        replica_id, max_wait_ms, min_bytes = values
    partition_fields = _FETCH_PARTITION[version]
    unpack_partition, partition_size = partition_fields.unpack_from, partition_fields.size
    topics = []
    for _ in range(_count(reader, flexible)):
        topic = _string(reader, flexible) if version <= 12 else ""
        topic_id = reader.uuid() if version >= 13 else ZERO_UUID
        partitions = []
        for _ in range(_count(reader, flexible)):
            pos = reader.pos
            fields = unpack_partition(view, pos)
            pos += partition_size
            if flexible:
                if view[pos] != 0:  # tagged fields: the generated reader's
                    raise _Fallback
                pos += 1
            reader.pos = pos
            if version >= 12:
                partitions.append(FetchPartition(*fields))
                continue
            if version >= 9:
                partition, current_leader_epoch, fetch_offset, log_start_offset, partition_max_bytes = fields
                last_fetched_epoch = -1
            elif version >= 5:
                partition, fetch_offset, log_start_offset, partition_max_bytes = fields
                current_leader_epoch = last_fetched_epoch = -1
            else:
                partition, fetch_offset, partition_max_bytes = fields
                current_leader_epoch = last_fetched_epoch = log_start_offset = -1
            partitions.append(FetchPartition(partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
                                             log_start_offset, partition_max_bytes))
        if flexible:
            _no_tags(reader)
        topics.append(FetchTopic(topic, topic_id, partitions))
    forgotten = []
    if version >= 7:
        for _ in range(_count(reader, flexible)):
            topic = _string(reader, flexible) if version <= 12 else ""
            topic_id = reader.uuid() if version >= 13 else ZERO_UUID
            forgotten_partitions = not_null(reader.int32_array(flexible), "Partitions")
            if flexible:
                _no_tags(reader)
            forgotten.append(ForgottenTopic(topic, topic_id, forgotten_partitions))
    rack_id = _string(reader, flexible) if version >= 11 else ""
    if flexible:
        _no_tags(reader)
    return FetchRequest(None, replica_id, ReplicaState(), max_wait_ms, min_bytes, max_bytes, isolation_level,
                        session_id, session_epoch, topics, forgotten, rack_id)


def _count(reader: Reader, flexible: bool) -> int:
    """A non-null array's element count: a compact one-byte count read here, anything else by the reader
    (with its checks and errors)."""
    if flexible:
        view, pos = reader.view, reader.pos
        if pos < len(view) and 0 < (byte := view[pos]) < 0x80 and byte <= len(view) - pos:
            reader.pos = pos + 1
            return byte - 1
    count = reader.array_length(flexible)
    if count < 0:
        raise ProtocolError("null value in a non-nullable array")
    return count


def _string(reader: Reader, flexible: bool) -> str:
    """A non-null string: a compact one with a one-byte length read here, anything else by the reader."""
    if flexible:
        view, pos = reader.view, reader.pos
        if pos < len(view) and 0 < (byte := view[pos]) < 0x80 and pos + byte <= len(view):
            try:
                text = str(view[pos + 1:pos + byte], "utf-8")
            except UnicodeDecodeError:
                return reader.string(flexible)
            reader.pos = pos + byte
            return text
    return reader.string(flexible)


def _no_tags(reader: Reader) -> None:
    """Step over an empty tagged-field section; any other is left to the generated reader."""
    if reader.view[reader.pos] != 0:
        raise _Fallback
    reader.pos += 1


def encode_fetch_response(response: FetchResponse, version: int, correlation_id: int) -> list[_Piece] | None:
    """The whole response frame as buffers for ``writelines`` (and any ``Region`` pieces of its record
    sets, in place), or None (see the module)."""
    if response.node_endpoints or response.unknown_tagged_fields is not None or not 0 <= version <= 17:
        return None
    topics = response.responses
    if version >= 12 and len(topics) == 1 and len(topics[0].partitions) == 1:  # a consumer of one partition
        frame = _one_partition(response, topics[0], version, correlation_id)
        if frame is not None:
            return [frame]
    flexible = version >= 12
    buffers: list[_Piece] = []
    out = head = bytearray(8)  # size and correlation id, packed last
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    if version >= 7:
        out += _TOP[version].pack(response.throttle_time_ms, response.error_code, response.session_id)
    elif version >= 1:
        out += _TOP[version].pack(response.throttle_time_ms)
    _length(out, len(response.responses), flexible)
    pack = _PARTITION[version].pack
    for topic in response.responses:
        if topic.unknown_tagged_fields is not None:
            return None
        if version <= 12:
            name = topic.topic.encode("utf-8")
            if flexible:
                append_uvarint(out, len(name) + 1)
            elif len(name) > 0x7FFF:
                return None
            else:
                out += _INT16.pack(len(name))
            out += name
        else:
            out += topic.topic_id.bytes
        _length(out, len(topic.partitions), flexible)
        for partition in topic.partitions:
            if flexible and not _defaults_only(partition):
                return None
            if partition.unknown_tagged_fields is not None:
                return None
            if version >= 5:
                out += pack(partition.partition_index, partition.error_code, partition.high_watermark,
                            partition.last_stable_offset, partition.log_start_offset)
            elif version >= 4:
                out += pack(partition.partition_index, partition.error_code, partition.high_watermark,
                            partition.last_stable_offset)
            else:
                out += pack(partition.partition_index, partition.error_code, partition.high_watermark)
            if version >= 4 and not _aborted(out, partition.aborted_transactions, flexible):
                return None
            if version >= 11:
                out += _INT32.pack(partition.preferred_read_replica)
            out = _records(out, buffers, partition.records, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    buffers.append(out)
    total = len(out) if len(buffers) == 1 else sum(map(len, buffers))
    _SIZE_CORRELATION.pack_into(head, 0, total - 4, correlation_id)
    return buffers


_ONE_HEAD = struct.Struct(">iibihiB")  # size, correlation id, no header tags, throttle, error, session, 1 topic
_ONE_PARTITION = struct.Struct(">BihqqqBi")  # 1 partition, its fields, no aborted transactions, read replica
_ONE_TAIL = b"\x00\x00\x00"  # no tagged fields: the partition's, the topic's, the response's


def _one_partition(response: FetchResponse, topic: FetchableTopicResponse, version: int,
                   correlation_id: int) -> bytes | None:
    """The frame of a flexible answer for one partition of one topic without aborted transactions,
    with a small records value, and nothing but defaults in its tagged fields; else None."""
    partition = topic.partitions[0]
    records, aborted = partition.records, partition.aborted_transactions
    if type(records) is list and len(records) == 1:  # what the broker reads: a list of stored batches
        records = records[0]
    if ((aborted is not None and len(aborted) != 0) or topic.unknown_tagged_fields is not None
            or partition.unknown_tagged_fields is not None or not _defaults_only(partition)
            or not isinstance(records, (bytes, bytearray, memoryview)) or len(records) >= 0x3FFF):
        return None
    if version >= 13:
        topic_part = topic.topic_id.bytes
    else:
        name = topic.topic.encode("utf-8")
        if len(name) >= 0x7F:
            return None
        topic_part = bytes((len(name) + 1,)) + name
    size = len(records) + 1
    records_length = bytes((size,)) if size < 0x80 else bytes((size & 0x7F | 0x80, size >> 7))
    tail = _ONE_PARTITION.pack(2, partition.partition_index, partition.error_code, partition.high_watermark,
                               partition.last_stable_offset, partition.log_start_offset, 0 if aborted is None else 1,
                               partition.preferred_read_replica)
    frame_size = _ONE_HEAD.size + len(topic_part) + _ONE_PARTITION.size + len(records_length) + len(records) + 3 - 4
    return b"".join((_ONE_HEAD.pack(frame_size, correlation_id, 0, response.throttle_time_ms, response.error_code,
                                    response.session_id, 2), topic_part, tail, records_length, records, _ONE_TAIL))


def _defaults_only(partition: PartitionData) -> bool:
    """Whether the partition's tagged fields are all at their defaults (so none is written)."""
    epoch, leader, snapshot = partition.diverging_epoch, partition.current_leader, partition.snapshot_id
    if epoch is NO_DIVERGING_EPOCH and leader is NO_CURRENT_LEADER and snapshot is NO_SNAPSHOT_ID:
        return True  # the broker's answers
    return (epoch.epoch == _EPOCH.epoch and epoch.end_offset == _EPOCH.end_offset
            and epoch.unknown_tagged_fields is None
            and leader.leader_id == _LEADER.leader_id and leader.leader_epoch == _LEADER.leader_epoch
            and leader.unknown_tagged_fields is None
            and snapshot.end_offset == _SNAPSHOT.end_offset and snapshot.epoch == _SNAPSHOT.epoch
            and snapshot.unknown_tagged_fields is None)


def _aborted(out: bytearray, aborted: Sequence[AbortedTransaction] | None, flexible: bool) -> bool:
    if aborted is None:
        _length(out, -1, flexible)
        return True
    _length(out, len(aborted), flexible)
    for transaction in aborted:
        if transaction.unknown_tagged_fields is not None:
            return False
        out += _TWO_INT64.pack(transaction.producer_id, transaction.first_offset)
        if flexible:
            out.append(0)
    return True


def _records(out: bytearray, buffers: list[_Piece], records: object, flexible: bool) -> bytearray:
    """Write a records value; a large chunk, or a ``Region``, becomes an item of its own. Returns the
    buffer to go on with."""
    if records is None:
        _length(out, -1, flexible)
        return out
    chunks: Sequence[_Piece] = (records,) if isinstance(records, (bytes, bytearray, memoryview)) else (
        records)  # type: ignore[assignment]
    _length(out, sum(map(len, chunks)), flexible)
    for chunk in chunks:
        if not isinstance(chunk, (bytes, bytearray, memoryview)) or len(chunk) >= ZERO_COPY_BYTES:
            if out:
                buffers.append(out)
                out = bytearray()
            buffers.append(chunk)
        else:
            out += chunk
    return out


def _length(out: bytearray, size: int, flexible: bool) -> None:
    """An array's, a string's or a bytes value's length: -1 for null."""
    if flexible:
        if -1 <= size < 0x7F:
            out.append(size + 1)  # a one-byte varint
        else:
            append_uvarint(out, size + 1)
    else:
        out += _INT32.pack(size)


