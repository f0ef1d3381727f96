"""Internal topics that hold coordinator state (``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``).

A coordinator keeps its state in memory and writes every change as a key/value record to a
partition of its internal topic, chosen from the group or transactional id the way Kafka does
(``abs(javaHashCode(id)) % partitions``). On start it replays every partition to rebuild the
state; a null value is a tombstone (the key's state is gone). The record layouts belong to each
coordinator; this module only moves bytes.

The topics are created on first use with ``cleanup.policy=compact``, so retention never deletes
them and the log cleaner (``core/log_cleaner.py``) keeps only the latest record per key once a
segment is full: their size, and the replay at start-up, follow the live keys, not the history.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import Topic, TopicManager
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

if TYPE_CHECKING:
    from kafkalite.protocol.records import Record

log = logging.getLogger("kafkalite.coordinator_log")

__all__ = ["PRODUCER_ID_FILE", "CoordinatorLog", "OFFSETS_TOPIC", "SHARE_GROUP_STATE_TOPIC", "TRANSACTION_STATE_TOPIC",
           "java_string_hash", "partition_for"]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
# The transaction room's one durable file beside its topic: the producer id block (txn/producer_ids.py).
# Named here, so that a start can see whether that room has state to open without importing it.
PRODUCER_ID_FILE = "producer-id-block"

_REPLAY_CHUNK = 4 * 1024 * 1024


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (signed 32-bit) over UTF-16 code units."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(key: str, partitions: int) -> int:
    """Kafka's coordinator partition for a group or transactional id."""
    hashed = java_string_hash(key)
    # Utils.abs: Integer.MIN_VALUE maps to 0 rather than overflowing.
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


class CoordinatorLog:
    """Key/value records in one internal topic: append, and replay at start."""

    def __init__(self, topics: TopicManager, topic_name: str, num_partitions: int,
                 segment_bytes: int | None = None) -> None:
        self.topics = topics
        self.topic_name = topic_name
        self.configured_partitions = num_partitions  # the count the topic is created with
        self.segment_bytes = segment_bytes  # its segment.bytes (the broker default when None)

    def topic(self) -> Topic:
        """The internal topic, created on first use."""
        topic = self.topics.get(self.topic_name)
        if topic is None:
            configs = {"cleanup.policy": "compact"}
            if self.segment_bytes is not None:
                configs["segment.bytes"] = str(self.segment_bytes)
            topic = self.topics.create(self.topic_name, self.configured_partitions, configs)
        return topic

    @property
    def num_partitions(self) -> int:
        """The topic's partition count (the configured one until the topic exists)."""
        topic = self.topics.get(self.topic_name)
        return self.configured_partitions if topic is None else len(topic.partitions)

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def partition(self, index: int) -> Partition:
        return self.topic().partitions[index]

    def append(self, index: int, records: Sequence[tuple[bytes, bytes | None]], now_ms: int | None = None) -> int:
        """Write key/value records as one batch to partition ``index``; return its base offset."""
        if not records:
            raise ValueError("nothing to append")
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        builder = RecordBatchBuilder()
        for key, value in records:
            builder.append(timestamp=now_ms, key=key, value=value)
        return self.partition(index).append_internal(builder.build(), now_ms)

    def replay(self, index: int) -> Iterator[Record]:
        """Every record of partition ``index`` in offset order (control batches skipped)."""
        partition_log = self.partition(index).log
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            result = partition_log.read(offset, _REPLAY_CHUNK, min_one_batch=True)
            if not result.size:
                break
            data = result.to_bytes()
            for batch in iter_batches(data):
                if not isinstance(batch, RecordBatch):
                    continue
                if batch.next_offset <= offset:
                    continue
                if not batch.is_control:
                    for record in batch.records():
                        if record.offset >= offset:
                            yield record
                offset = batch.next_offset

    def replay_all(self) -> Iterator[tuple[int, Record]]:
        """(partition, record) for every partition, if the topic exists; it is not created."""
        topic = self.topics.get(self.topic_name)
        if topic is None:
            return
        for partition in topic.partitions:
            for record in self.replay(partition.index):
                yield partition.index, record
