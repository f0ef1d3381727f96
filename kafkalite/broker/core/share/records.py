"""The key/value records of ``__share_group_state``: one share partition's whole durable state per record.

* Key, version 0, Kafka's ``ShareSnapshotKey`` layout: group id (string), topic id (uuid), partition
  (int32). The record goes to the partition of ``__share_group_state`` that Kafka's share coordinator
  picks for the key ``"<group id>:<topic id>:<partition>"``.
* Value, this broker's own layout (version 1000, a number Kafka does not use, so no Kafka tool takes it
  for its ``ShareSnapshotValue``): state epoch (int32), share-partition start offset (int64), write
  time (int64, ms), then the state batches (int32 count; each first offset int64, last offset int64,
  delivery state int8, delivery count int16). Delivery states are Kafka's: 0 available, 2
  acknowledged, 4 archived. A null value is a tombstone: the group has no state for the partition.

Kafka writes a snapshot now and then and small update records between; here every change writes
the whole state, which stays small because the window of in-flight records is bounded
(``group.share.partition.max.record.locks``) and written as runs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from kafkalite.broker.core.share.partition import RecordState, StateBatch
from kafkalite.protocol.primitives import Reader, Writer

__all__ = ["ShareStateKey", "ShareStateValue", "SNAPSHOT_KEY_VERSION", "SNAPSHOT_VALUE_VERSION", "state_key"]

SNAPSHOT_KEY_VERSION: Final = 0
SNAPSHOT_VALUE_VERSION: Final = 1000


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(SNAPSHOT_KEY_VERSION)
        writer.string(self.group_id, False)
        writer.uuid(self.topic_id)
        writer.int32(self.partition)
        return writer.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> ShareStateKey | None:
        """The key, or None for a key version this broker does not write."""
        reader = Reader(data)
        if reader.int16() != SNAPSHOT_KEY_VERSION:
            return None
        return cls(reader.string(False), reader.uuid(), reader.int32())

    def coordinator_key(self) -> str:
        """The string Kafka's share coordinator hashes to pick a partition of ``__share_group_state``."""
        return state_key(self.group_id, self.topic_id, self.partition)


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_id}:{topic_id}:{partition}"


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    state_epoch: int
    start_offset: int
    write_timestamp_ms: int
    batches: tuple[StateBatch, ...]

    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(SNAPSHOT_VALUE_VERSION)
        writer.int32(self.state_epoch)
        writer.int64(self.start_offset)
        writer.int64(self.write_timestamp_ms)
        writer.int32(len(self.batches))
        for batch in self.batches:
            writer.int64(batch.first_offset)
            writer.int64(batch.last_offset)
            writer.int8(int(batch.state))
            writer.int16(batch.delivery_count)
        return writer.getvalue()

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> ShareStateValue:
        reader = Reader(data)
        version = reader.int16()
        if version != SNAPSHOT_VALUE_VERSION:
            raise ValueError(f"unknown share state value version {version}")
        state_epoch, start_offset, written = reader.int32(), reader.int64(), reader.int64()
        batches = tuple(StateBatch(reader.int64(), reader.int64(), RecordState(reader.int8()), reader.int16())
                        for _ in range(reader.int32()))
        return cls(state_epoch, start_offset, written, batches)
