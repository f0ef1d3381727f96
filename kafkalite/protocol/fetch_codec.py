"""The Fetch response encoded by hand: the answer a consumer waits for, written once per poll.

``encode_fetch_response`` gives exactly the buffers' bytes that ``framing.encode_response`` gives
through the generated ``FetchResponse.write`` (size prefix, header, body), with one ``struct``
call per partition's fixed fields. Record sets of ``ZERO_COPY_BYTES`` or more stay buffers of their
own, so stored batches are not copied. What it does not take on it leaves to the generated code
(it answers None): a ``diverging_epoch``, ``current_leader`` or ``snapshot_id`` other than the
default, ``node_endpoints``, or unknown tagged fields. A unit test checks it against the generated
encoder on every version.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kafkalite.protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)

__all__ = ["ZERO_COPY_BYTES", "encode_fetch_response"]

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
_Buffer = bytes | bytearray | memoryview


def encode_fetch_response(response: FetchResponse, version: int, correlation_id: int) -> list[_Buffer] | None:
    """The whole response frame as buffers for ``writelines``, or None (see the module)."""
    if response.node_endpoints or response.unknown_tagged_fields is not None or not 0 <= version <= 17:
        return None
    flexible = version >= 12
    buffers: list[_Buffer] = []
    out = bytearray(8)  # size and correlation id, packed last
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
                _uvarint(out, len(name) + 1)
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
    total = sum(len(buffer) for buffer in buffers)
    _SIZE_CORRELATION.pack_into(buffers[0], 0, total - 4, correlation_id)
    return buffers


def _defaults_only(partition: PartitionData) -> bool:
    """Whether the partition's tagged fields are all at their defaults (so none is written)."""
    epoch, leader, snapshot = partition.diverging_epoch, partition.current_leader, partition.snapshot_id
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


def _records(out: bytearray, buffers: list[_Buffer], records: object, flexible: bool) -> bytearray:
    """Write a records value; a large chunk becomes a buffer of its own. Returns the buffer to go on with."""
    if records is None:
        _length(out, -1, flexible)
        return out
    chunks: Sequence[_Buffer] = (records,) if isinstance(records, (bytes, bytearray, memoryview)) else (
        records)  # type: ignore[assignment]
    _length(out, sum(len(chunk) for chunk in chunks), flexible)
    for chunk in chunks:
        if len(chunk) >= ZERO_COPY_BYTES:
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
        _uvarint(out, size + 1)
    else:
        out += _INT32.pack(size)


def _uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
