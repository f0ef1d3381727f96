"""The client's picture of the cluster: brokers, topics, partitions and their leaders (sans-io).

:class:`ClusterMetadata` is filled from Metadata responses and read by the producer (which broker
leads a partition, how many partitions a topic has), the admin client and, later, the consumer. It
does no I/O: :class:`~kafkalite.client.network.NetworkClient` sends the Metadata requests and feeds
the answers in. It decides *when* a refresh is due: after ``metadata.max.age.ms``, at once after
:meth:`ClusterMetadata.request_update` (called on NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
LEADER_NOT_AVAILABLE and other stale-metadata errors, and for a topic seen for the first time), and
never twice within ``retry.backoff.ms``.

A topic the broker reports with an error keeps its error (UNKNOWN_TOPIC_OR_PARTITION while it does
not exist, LEADER_NOT_AVAILABLE while it is being created); its partitions are known only without one.
Leader epochs are kept so that an older answer (from a broker that lags) cannot move a leader back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import MetadataResponse

__all__ = ["BrokerInfo", "ClusterMetadata", "PartitionInfo", "TopicInfo", "TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic and one of its partitions."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    error: ErrorCode
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


_STALE_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.LISTENER_NOT_FOUND,
})  # fmt: skip


def is_stale_metadata_error(code: int) -> bool:
    """Whether an error code means the client's metadata is out of date (refresh, then retry)."""
    return code in _STALE_ERRORS


@dataclass(slots=True)
class ClusterMetadata:
    """Brokers and topics as last reported, and when to ask again."""

    metadata_max_age_ms: int = 300000
    retry_backoff_ms: int = 100
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    interesting_topics: set[str] = field(default_factory=set)
    last_refresh_ms: float = float("-inf")
    last_attempt_ms: float = float("-inf")
    update_requested: bool = True
    version: int = 0  # bumped on every update
    _leaders: dict[TopicPartition, int] = field(default_factory=dict)

    # --- what is known -------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` has, or ``None`` while unknown (or in error)."""
        info = self.topics.get(topic)
        if info is None or info.error is not ErrorCode.NONE or not info.partitions:
            return None
        return len(info.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that currently have a leader."""
        info = self.topics.get(topic)
        if info is None:
            return []
        return [item.partition for item in info.partitions if item.leader >= 0]

    def leader_for(self, topic_partition: TopicPartition) -> int | None:
        """The node id leading a partition, or ``None`` when unknown or leaderless."""
        leader = self._leaders.get(topic_partition)
        return None if leader is None or leader < 0 else leader

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        info = self.topics.get(topic_partition.topic)
        if info is None or topic_partition.partition >= len(info.partitions):
            return -1
        return info.partitions[topic_partition.partition].leader_epoch

    def topic_error(self, topic: str) -> ErrorCode | None:
        info = self.topics.get(topic)
        return None if info is None else info.error

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    # --- when to refresh -----------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Follow these topics from now on; ``True`` (and an update requested) if any was new."""
        new = set(topics) - self.interesting_topics
        if new:
            self.interesting_topics |= new
            self.update_requested = True
        return bool(new)

    def request_update(self) -> None:
        self.update_requested = True

    def time_to_next_update(self, now_ms: float) -> float:
        """Milliseconds until a refresh is due (0: now)."""
        backoff_left = self.last_attempt_ms + self.retry_backoff_ms - now_ms
        if self.update_requested:
            return max(0.0, backoff_left)
        return max(0.0, self.last_refresh_ms + self.metadata_max_age_ms - now_ms, backoff_left)

    def attempted(self, now_ms: float) -> None:
        self.last_attempt_ms = now_ms

    def failed(self, now_ms: float) -> None:
        self.last_attempt_ms = now_ms
        self.update_requested = True

    # --- updating ------------------------------------------------------------------------------

    def update(self, response: MetadataResponse, now_ms: float, requested_topics: Iterable[str] | None) -> None:
        """Install a Metadata response. ``requested_topics`` None means the response lists all topics."""
        self.brokers = {broker.node_id: BrokerInfo(broker.node_id, broker.host, broker.port, broker.rack)
                        for broker in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        requested = None if requested_topics is None else set(requested_topics)
        topics: dict[str, TopicInfo] = {}
        if requested is not None:  # keep what we knew of topics not asked for this time
            topics = {name: info for name, info in self.topics.items() if name not in requested}
        for topic in response.topics:
            if topic.name is None:
                continue
            error = ErrorCode.from_code(topic.error_code)
            previous = self.topics.get(topic.name)
            partitions: list[PartitionInfo] = []
            if error is ErrorCode.NONE:
                for partition in sorted(topic.partitions, key=lambda item: item.partition_index):
                    leader = partition.leader_id
                    epoch = partition.leader_epoch
                    if (previous is not None and previous.topic_id == topic.topic_id
                            and partition.partition_index < len(previous.partitions)):
                        known = previous.partitions[partition.partition_index]
                        if epoch >= 0 and known.leader_epoch > epoch:  # an older answer: keep the newer leader
                            leader, epoch = known.leader, known.leader_epoch
                    partition_error = ErrorCode.from_code(partition.error_code)
                    partitions.append(PartitionInfo(partition.partition_index, leader, epoch,
                                                    tuple(partition.replica_nodes), tuple(partition.isr_nodes),
                                                    tuple(partition.offline_replicas), partition_error))
            topics[topic.name] = TopicInfo(topic.name, topic.topic_id, error, topic.is_internal, tuple(partitions))
        self.topics = topics
        self._leaders = {TopicPartition(info.name, item.partition): item.leader
                         for info in topics.values() for item in info.partitions}
        self.last_refresh_ms = now_ms
        self.last_attempt_ms = now_ms
        # Partitions still without a leader are asked for again by whoever needs them (the sender,
        # wait_for_topic), not here: a deleted topic must not keep the client polling.
        self.update_requested = False
        self.version += 1

    def forget_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self.interesting_topics.discard(topic)
            self.topics.pop(topic, None)
