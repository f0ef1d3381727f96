"""The key/value records the group coordinator writes to ``__consumer_offsets``.

Every key and value starts with an int16 version, as in Kafka. Committed offsets and classic group
metadata use Kafka's own layouts (non-flexible versions), so the topic reads like Kafka's:

* ``OffsetCommitKey`` v1: group, topic, partition -> ``OffsetCommitValue`` v3 (offset, leader epoch,
  metadata, commit timestamp), or v1 (offset, metadata, commit and expire timestamps) when an
  OffsetCommit v2-4 asked for a retention time.
* ``GroupMetadataKey`` v2: group -> ``GroupMetadataValue`` v3 (protocol type, generation, protocol,
  leader, state timestamp, members with subscription and assignment bytes).

Three layouts are this broker's own, with key versions Kafka does not use, so they are never mistaken
for Kafka's: ``CONSUMER_GROUP_KEY`` (1000) holds a whole KIP-848 group in one value (Kafka spreads it
over six record types; the value layout is in ``consumer_group``), ``PENDING_TXN_OFFSET_KEY``
(1001) holds an offset staged by TxnOffsetCommit until its transaction ends (Kafka writes those as
transactional records resolved by a marker; the coordinator log has no transactional batches), and
``SHARE_GROUP_KEY`` (1002) holds a whole share group's membership (layout in ``share_group``).
A null value is a tombstone. Keys of unknown versions are skipped on replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.protocol.primitives import Reader, Writer

__all__ = [
    "CONSUMER_GROUP_KEY",
    "ClassicGroupRecord",
    "ClassicMemberRecord",
    "ConsumerGroupKey",
    "GroupMetadataKey",
    "OffsetAndMetadata",
    "OffsetCommitKey",
    "PENDING_TXN_OFFSET_KEY",
    "PendingTxnOffsetKey",
    "SHARE_GROUP_KEY",
    "ShareGroupKey",
    "decode_key",
]

OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
CONSUMER_GROUP_KEY = 1000
PENDING_TXN_OFFSET_KEY = 1001
SHARE_GROUP_KEY = 1002


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as stored: what OffsetFetch returns and what expiry looks at."""

    offset: int
    leader_epoch: int = -1  # -1: unknown
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-4 retention_time_ms


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(OFFSET_COMMIT_KEY)
        writer.string(self.group_id, False)
        writer.string(self.topic, False)
        writer.int32(self.partition)
        return writer.getvalue()


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(GROUP_METADATA_KEY)
        writer.string(self.group_id, False)
        return writer.getvalue()


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    group_id: str

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(CONSUMER_GROUP_KEY)
        writer.string(self.group_id, False)
        return writer.getvalue()


@dataclass(frozen=True, slots=True)
class PendingTxnOffsetKey:
    producer_id: int
    group_id: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(PENDING_TXN_OFFSET_KEY)
        writer.int64(self.producer_id)
        writer.string(self.group_id, False)
        writer.string(self.topic, False)
        writer.int32(self.partition)
        return writer.getvalue()


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    group_id: str

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(SHARE_GROUP_KEY)
        writer.string(self.group_id, False)
        return writer.getvalue()


Key = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | PendingTxnOffsetKey | ShareGroupKey


def decode_key(data: bytes | bytearray | memoryview) -> Key | None:
    """The key of a ``__consumer_offsets`` record, or None for versions this broker does not know."""
    reader = Reader(data)
    version = reader.int16()
    if version in (0, OFFSET_COMMIT_KEY):
        return OffsetCommitKey(reader.string(False), reader.string(False), reader.int32())
    if version == GROUP_METADATA_KEY:
        return GroupMetadataKey(reader.string(False))
    if version == CONSUMER_GROUP_KEY:
        return ConsumerGroupKey(reader.string(False))
    if version == PENDING_TXN_OFFSET_KEY:
        return PendingTxnOffsetKey(reader.int64(), reader.string(False), reader.string(False), reader.int32())
    if version == SHARE_GROUP_KEY:
        return ShareGroupKey(reader.string(False))
    return None


# committed offsets ---------------------------------------------------------------------------
def encode_offset_value(value: OffsetAndMetadata) -> bytes:
    writer = Writer()
    if value.expire_timestamp_ms is not None:
        writer.int16(1)
        writer.int64(value.offset)
        writer.string(value.metadata, False)
        writer.int64(value.commit_timestamp_ms)
        writer.int64(value.expire_timestamp_ms)
    else:
        writer.int16(3)
        writer.int64(value.offset)
        writer.int32(value.leader_epoch)
        writer.string(value.metadata, False)
        writer.int64(value.commit_timestamp_ms)
    return writer.getvalue()


def _read_offset_value(reader: Reader) -> OffsetAndMetadata:
    version = reader.int16()
    if version not in (0, 1, 2, 3):
        raise ValueError(f"OffsetCommitValue version {version} is not supported")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string(False)
    commit_timestamp = reader.int64()
    expire = reader.int64() if version == 1 else None
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp,
                             None if expire is None or expire < 0 else expire)


def decode_offset_value(data: bytes | bytearray | memoryview) -> OffsetAndMetadata:
    return _read_offset_value(Reader(data))


def encode_pending_txn_offset_value(producer_epoch: int, value: OffsetAndMetadata) -> bytes:
    writer = Writer()
    writer.int16(0)
    writer.int16(producer_epoch)
    writer.raw(encode_offset_value(value))
    return writer.getvalue()


def decode_pending_txn_offset_value(data: bytes | bytearray | memoryview) -> tuple[int, OffsetAndMetadata]:
    reader = Reader(data)
    if reader.int16() != 0:
        raise ValueError("unknown pending transactional offset value version")
    producer_epoch = reader.int16()
    return producer_epoch, _read_offset_value(reader)


# classic group metadata ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClassicMemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicGroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[ClassicMemberRecord, ...]

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(3)
        writer.string(self.protocol_type, False)
        writer.int32(self.generation)
        writer.nullable_string(self.protocol, False)
        writer.nullable_string(self.leader, False)
        writer.int64(self.current_state_timestamp_ms)
        writer.int32(len(self.members))
        for member in self.members:
            writer.string(member.member_id, False)
            writer.nullable_string(member.group_instance_id, False)
            writer.string(member.client_id, False)
            writer.string(member.client_host, False)
            writer.int32(member.rebalance_timeout_ms)
            writer.int32(member.session_timeout_ms)
            writer.bytes_(member.subscription, False)
            writer.bytes_(member.assignment, False)
        return writer.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> ClassicGroupRecord:
        reader = Reader(data)
        version = reader.int16()
        if version not in (0, 1, 2, 3):
            raise ValueError(f"GroupMetadataValue version {version} is not supported")
        protocol_type = reader.string(False)
        generation = reader.int32()
        protocol = reader.nullable_string(False)
        leader = reader.nullable_string(False)
        timestamp = reader.int64() if version >= 2 else -1
        members = []
        for _ in range(reader.int32()):
            member_id = reader.string(False)
            instance_id = reader.nullable_string(False) if version >= 3 else None
            client_id = reader.string(False)
            client_host = reader.string(False)
            rebalance_timeout = reader.int32() if version >= 1 else -1
            session_timeout = reader.int32()
            subscription = reader.bytes_(False)
            assignment = reader.bytes_(False)
            members.append(ClassicMemberRecord(member_id, instance_id, client_id, client_host,
                                               session_timeout if rebalance_timeout < 0 else rebalance_timeout,
                                               session_timeout, bytes(subscription), bytes(assignment)))
        return cls(protocol_type, generation, protocol, leader, timestamp, tuple(members))
