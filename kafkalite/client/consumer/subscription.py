"""What the consumer reads: its subscription or manual assignment, and each partition's position (sans-io).

A consumer either *subscribes* (topics, or a pattern; the group decides which partitions it gets)
or is *assigned* partitions by the application (``assign()``); the two do not mix, as in the Java
client. Each assigned partition has a :class:`PartitionState`:

* ``position`` -- the offset of the next record the application gets (None until known: it comes from
  the committed offset, a seek, or a reset by ``auto.offset.reset``);
* ``reset_strategy`` -- set while the position is to be looked up (earliest/latest/a timestamp);
* ``paused`` -- no fetching and no records returned until ``resume()``;
* ``fetch_offset`` -- where the next Fetch of the partition starts. Fetched data waits in the fetch
  buffer until polled, so ``fetch_offset`` runs ahead of ``position`` by what is buffered; a seek
  or a reset sets both and drops what was buffered;
* ``high_watermark``, ``last_stable_offset``, ``log_start_offset`` -- as of the last Fetch response.

A :class:`PartitionState` object lives as long as its partition stays assigned; anything fetched for
a state object that is no longer the current one (the partition was revoked, or assigned again) is
dropped.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import Any

from kafkalite.client.metadata import TopicPartition

__all__ = ["OffsetResetStrategy", "PartitionState", "SubscriptionState", "SubscriptionType"]


class SubscriptionType(enum.Enum):
    NONE = "none"
    AUTO_TOPICS = "topics"
    AUTO_PATTERN = "pattern"
    USER_ASSIGNED = "assigned"


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"

    @property
    def timestamp(self) -> int:
        """The ListOffsets timestamp that finds this offset."""
        return -2 if self is OffsetResetStrategy.EARLIEST else -1


class PartitionState:
    """One assigned partition: position, fetch position, pause, pending reset, last watermarks."""

    __slots__ = ("topic_partition", "position", "position_leader_epoch", "fetch_offset", "paused",
                 "reset_strategy", "reset_timestamp", "reset_in_flight", "high_watermark", "last_stable_offset",
                 "log_start_offset", "buffered", "next_reset_ms")

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.position: int | None = None
        self.position_leader_epoch: int | None = None
        self.fetch_offset: int | None = None
        self.paused = False
        self.reset_strategy: OffsetResetStrategy | None = None
        self.reset_timestamp: int | None = None  # a reset to the first offset at or after a time
        self.reset_in_flight = False
        self.next_reset_ms = 0.0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.buffered = 0  # completed fetches waiting in the fetch buffer

    def __repr__(self) -> str:
        return (f"PartitionState({self.topic_partition}, position={self.position}, fetch_offset={self.fetch_offset}, "
                f"paused={self.paused}, reset={self.reset_strategy})")

    @property
    def has_position(self) -> bool:
        return self.position is not None and self.reset_strategy is None

    @property
    def awaiting_reset(self) -> bool:
        return self.reset_strategy is not None

    def seek(self, offset: int, leader_epoch: int | None = None) -> None:
        self.position = offset
        self.position_leader_epoch = leader_epoch
        self.fetch_offset = offset
        self.reset_strategy = None
        self.reset_timestamp = None

    def request_reset(self, strategy: OffsetResetStrategy, timestamp: int | None = None) -> None:
        self.reset_strategy = strategy
        self.reset_timestamp = timestamp
        self.next_reset_ms = 0.0

    def lag(self) -> int | None:
        """Records between the position and the high watermark (None until both are known)."""
        if self.position is None or self.high_watermark < 0:
            return None
        return max(0, self.high_watermark - self.position)


class SubscriptionState:
    """The consumer's subscription or manual assignment and the state of each assigned partition."""

    def __init__(self, default_reset: OffsetResetStrategy) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.topics: frozenset[str] = frozenset()  # subscribed topics (or those the pattern matches now)
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0  # bumped when the assignment changes

    # --- subscribing -----------------------------------------------------------------------------

    def _set_type(self, wanted: SubscriptionType) -> None:
        if self.type is SubscriptionType.NONE:
            self.type = wanted
        elif self.type is not wanted:
            raise ValueError("subscribe() and assign() do not mix: call unsubscribe() first")

    def subscribe(self, topics: Iterable[str], listener: Any = None) -> bool:
        """Subscribe to these topics; True if the subscription changed."""
        self._set_type(SubscriptionType.AUTO_TOPICS)
        self.listener = listener
        return self.change_topics(topics)

    def subscribe_pattern(self, pattern: re.Pattern[str], listener: Any = None) -> None:
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.listener = listener
        self.pattern = pattern

    def change_topics(self, topics: Iterable[str]) -> bool:
        topics = frozenset(topics)
        if topics == self.topics:
            return False
        self.topics = topics
        return True

    def matches(self, topic: str) -> bool:
        assert self.pattern is not None
        return self.pattern.fullmatch(topic) is not None

    @property
    def is_subscribed(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    @property
    def is_user_assigned(self) -> bool:
        return self.type is SubscriptionType.USER_ASSIGNED

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.topics = frozenset()
        self.pattern = None
        self.listener = None
        self.set_assignment(())

    # --- assignment ------------------------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        self._set_type(SubscriptionType.USER_ASSIGNED)
        partitions = list(dict.fromkeys(partitions))
        self.topics = frozenset(partition.topic for partition in partitions)
        self.set_assignment(partitions)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Assign exactly these partitions; those kept keep their state, new ones start without a position."""
        assignment: dict[TopicPartition, PartitionState] = {}
        for partition in partitions:
            state = self.assignment.get(partition)
            assignment[partition] = state if state is not None else PartitionState(partition)
        if list(assignment) != list(self.assignment):
            self.version += 1
        self.assignment = assignment

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        self.set_assignment([*self.assignment, *partitions])

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        removed = set(partitions)
        self.set_assignment([partition for partition in self.assignment if partition not in removed])

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self.assignment)

    def state(self, topic_partition: TopicPartition) -> PartitionState:
        state = self.assignment.get(topic_partition)
        if state is None:
            raise ValueError(f"{topic_partition} is not assigned to this consumer")
        return state

    # --- positions -------------------------------------------------------------------------------

    def fetchable(self) -> list[PartitionState]:
        """Partitions a Fetch may include now: positioned, not paused, not holding two buffered fetches."""
        return [state for state in self.assignment.values()
                if state.fetch_offset is not None and state.reset_strategy is None and not state.paused
                and state.buffered < 2]

    def missing_positions(self) -> list[PartitionState]:
        """Partitions with neither a position nor a reset underway."""
        return [state for state in self.assignment.values() if state.position is None and state.reset_strategy is None]

    def awaiting_reset(self) -> list[PartitionState]:
        return [state for state in self.assignment.values() if state.reset_strategy is not None]

    def consumed_offsets(self) -> dict[TopicPartition, tuple[int, int | None]]:
        """Each positioned partition's position and its leader epoch: what a commit of "everything read" sends."""
        return {partition: (state.position, state.position_leader_epoch) for partition, state in self.assignment.items()
                if state.position is not None and state.reset_strategy is None}
