"""Choosing a partition for a record (sans-io).

* A record with an explicit partition goes there.
* A record with a key goes to ``murmur2(key) % partitions`` (positive part), the Java client's choice
  and librdkafka's ``murmur2_random``, so the same key lands in the same partition whichever of these
  clients wrote it (:func:`kafkalite.protocol.murmur2.default_partition`).
* A keyless record (or any record with ``partitioner.ignore.keys``) follows the ``partitioner.class``:
  ``sticky`` (the default, KIP-480) sends to one partition until a batch for it is completed, then
  switches to another one at random, so batches fill up instead of a record or two going to every
  partition; ``round_robin`` goes through the partitions in turn, one record each.
* A callable ``partitioner.class`` is called as ``partitioner(topic, key, partition_count)``.

Only partitions with a leader are chosen for keyless records while any has one; keys are hashed over
all partitions (a key's partition must not change when a leader is briefly missing).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from kafkalite.protocol.murmur2 import default_partition

__all__ = ["Partitioner"]


class Partitioner:
    """The producer's partition choice (see the module docstring)."""

    def __init__(self, kind: str | Callable[..., int] = "sticky", ignore_keys: bool = False,
                 rng: random.Random | None = None) -> None:
        self.custom = kind if callable(kind) else None
        self.kind = "custom" if callable(kind) else kind
        self.ignore_keys = ignore_keys
        self._random = rng or random.Random()
        self.sticky: dict[str, int] = {}  # topic -> its current sticky partition (only kept for "sticky")
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partition_count: int,
                  available: Sequence[int] = ()) -> int:
        """The partition for a record of ``topic`` with ``key`` (no explicit partition given)."""
        if self.custom is not None:
            chosen = int(self.custom(topic, key, partition_count))
            if not 0 <= chosen < partition_count:
                raise ValueError(f"the partitioner chose partition {chosen} of {topic!r}, which has {partition_count}")
            return chosen
        if key is not None and not self.ignore_keys:
            return default_partition(key, partition_count)
        if self.kind == "round_robin":
            counter = self._counters.get(topic, -1) + 1
            self._counters[topic] = counter
            if available:
                return available[counter % len(available)]
            return counter % partition_count
        partition = self.sticky.get(topic)
        if partition is None or partition >= partition_count:
            partition = self._choose(partition_count, available, None)
            self.sticky[topic] = partition
        return partition

    def uses_sticky(self, key: bytes | None) -> bool:
        """Whether a record with this key follows the sticky partition (and may switch on a new batch)."""
        return self.kind == "sticky" and self.custom is None and (key is None or self.ignore_keys)

    def next_sticky(self, topic: str, previous: int, partition_count: int, available: Sequence[int] = ()) -> int:
        """A batch for the sticky partition is complete: switch to another one (KIP-480)."""
        current = self.sticky.get(topic)
        if current is not None and current != previous:
            return current  # already switched by another record
        partition = self._choose(partition_count, available, previous)
        self.sticky[topic] = partition
        return partition

    def _choose(self, partition_count: int, available: Sequence[int], previous: int | None) -> int:
        candidates = list(available) if available else list(range(partition_count))
        if previous is not None and len(candidates) > 1:
            candidates = [partition for partition in candidates if partition != previous]
        return self._random.choice(candidates)
