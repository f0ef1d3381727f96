"""Where ``groups reset-offsets`` moves each partition, as kafka-consumer-groups decides it (no I/O).

Every new offset lies within the partition's log: ``--to-offset`` and ``--shift-by`` past either end
are clamped to the log start or the log end offset. ``--to-datetime`` takes the first offset whose
timestamp is at or after the time, or the log end offset when no record is that recent.
``--shift-by`` moves from the committed offset, so a partition without one cannot be shifted.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["PartitionOffsets", "ResetKind", "ResetStrategy", "new_offset", "plan"]

_K = TypeVar("_K")


class ResetKind(enum.Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    DATETIME = "to-datetime"
    SHIFT = "shift-by"


@dataclass(frozen=True, slots=True)
class ResetStrategy:
    """One of ``--to-earliest``, ``--to-latest``, ``--to-offset N``, ``--to-datetime T``, ``--shift-by N``;
    ``value`` is the offset, the time in ms since the epoch, or the shift."""

    kind: ResetKind
    value: int = 0


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """What is known of one partition: its log start and end offsets, the group's committed offset and,
    for ``--to-datetime``, the first offset at or after the time (``None``: no record is that recent)."""

    earliest: int
    latest: int
    committed: int | None = None
    by_time: int | None = None


def new_offset(strategy: ResetStrategy, offsets: PartitionOffsets, partition: str) -> int:
    """The offset ``strategy`` gives ``partition``; ``ValueError`` if it cannot be computed."""
    kind = strategy.kind
    if kind is ResetKind.EARLIEST:
        return offsets.earliest
    if kind is ResetKind.LATEST:
        return offsets.latest
    if kind is ResetKind.DATETIME:
        return offsets.latest if offsets.by_time is None or offsets.by_time < 0 else offsets.by_time
    if kind is ResetKind.OFFSET:
        target = strategy.value
    else:
        if offsets.committed is None:
            raise ValueError(f"partition {partition} has no committed offset to shift from")
        target = offsets.committed + strategy.value
    return min(max(target, offsets.earliest), offsets.latest)


def plan(strategy: ResetStrategy, partitions: Mapping[_K, PartitionOffsets]) -> dict[_K, int]:
    """The new offset of every partition, in the order given."""
    return {key: new_offset(strategy, offsets, str(key)) for key, offsets in partitions.items()}
