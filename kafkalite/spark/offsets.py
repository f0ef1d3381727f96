"""Offsets as Spark keeps them, and how a range of offsets becomes tasks. Pure functions, no Spark.

A streaming offset is the JSON Spark's own Kafka source writes to the checkpoint:
``{"topic": {"0": 23, "1": 42}}``, the next offset to read in each partition. The checkpoint holds
one per micro-batch; a restarted query plans the batch after the last committed one from it, so
the offsets are the whole state of the source.

A micro-batch (or a batch read) is a set of :class:`OffsetRange` (one partition, ``[start, end)``).
``minPartitions`` and ``maxRecordsPerPartition`` cut large ranges into consecutive pieces so that
more tasks share one partition; ``maxOffsetsPerTrigger`` caps a micro-batch, spread over the
partitions in proportion to what each has waiting (as Spark's connector does).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.metadata import TopicPartition

__all__ = ["OffsetRange", "limit_offsets", "offsets_from_json", "offsets_to_json", "plan_ranges", "split_ranges"]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """The records of one partition from ``start`` (included) to ``end`` (excluded)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"0": offset}}``, topics and partitions in order (the checkpoint's form)."""
    result: dict[str, dict[str, int]] = {}
    for topic_partition in sorted(offsets, key=lambda item: (item.topic, item.partition)):
        result.setdefault(topic_partition.topic, {})[str(topic_partition.partition)] = int(offsets[topic_partition])
    return result


def offsets_from_json(value: Any) -> dict[TopicPartition, int]:
    """The inverse of :func:`offsets_to_json`; anything else is a ValueError naming what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError(f"an offset is a JSON object of topics, not {value!r}")
    result = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"the offsets of topic {topic!r} are not an object: {partitions!r}")
        for partition, offset in partitions.items():
            result[TopicPartition(str(topic), int(partition))] = int(offset)
    return result


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    """The non-empty ranges from ``start`` to ``end`` (partitions of ``end`` only; a missing start is 0)."""
    ranges = []
    for topic_partition in sorted(end, key=lambda item: (item.topic, item.partition)):
        first = start.get(topic_partition, 0)
        last = end[topic_partition]
        if last > first:
            ranges.append(OffsetRange(topic_partition.topic, topic_partition.partition, first, last))
    return ranges


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Cut ranges so there are at least ``min_partitions`` (big ranges cut first, in proportion to size)
    and none holds more than ``max_records_per_partition`` offsets."""
    ranges = [offset_range for offset_range in ranges if offset_range.size > 0]
    total = sum(offset_range.size for offset_range in ranges)
    result: list[OffsetRange] = []
    for offset_range in ranges:
        pieces = 1
        if min_partitions is not None and len(ranges) < min_partitions and total:
            pieces = max(1, math.ceil(offset_range.size * min_partitions / total))
        if max_records_per_partition is not None:
            pieces = max(pieces, math.ceil(offset_range.size / max_records_per_partition))
        pieces = min(pieces, offset_range.size)
        step = offset_range.size / pieces
        bounds = [offset_range.start + round(step * index) for index in range(pieces)] + [offset_range.end]
        result.extend(OffsetRange(offset_range.topic, offset_range.partition, low, high)
                      for low, high in zip(bounds, bounds[1:], strict=False) if high > low)
    return result


def limit_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                  max_offsets: int) -> dict[TopicPartition, int]:
    """``latest`` capped so that about ``max_offsets`` offsets are read in all, shared in proportion to
    what each partition has waiting (a partition with anything waiting moves by one at least)."""
    waiting = {topic_partition: max(0, offset - start.get(topic_partition, offset))
               for topic_partition, offset in latest.items()}
    total = sum(waiting.values())
    if total <= max_offsets:
        return dict(latest)
    result = {}
    for topic_partition, offset in latest.items():
        share = max_offsets * waiting[topic_partition] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        first = start.get(topic_partition, offset)
        result[topic_partition] = min(offset, first + step) if waiting[topic_partition] else offset
    return result
