"""The values the admin client takes and returns: plain frozen dataclasses, an error per resource.

A call about several resources (topics, groups, partitions, config resources) returns a dict keyed
by resource; each value carries ``error`` (``None`` on success, else a
:class:`~kafkalite.protocol.errors.KafkaError` naming the resource), so one failed topic does not hide
what happened to the others. ``result.raise_for_error()`` raises it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.client.metadata import BrokerInfo, PartitionInfo, TopicPartition
from kafkalite.protocol.errors import KafkaError

__all__ = [
    "AlterConfigOp", "ClusterDescription", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigResult",
    "DeleteRecordsResult", "GroupDescription", "GroupListing", "ListOffsetsResult", "MemberDescription", "NewTopic",
    "OffsetAndMetadata", "OffsetSpec", "PartitionInfo", "PartitionProducers", "ProducerStateInfo", "ResourceResult",
    "TopicDescription", "TopicResult", "TransactionDescription", "TransactionListing",
]  # fmt: skip


class _HasError:
    __slots__ = ()
    error: KafkaError | None

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise self.error


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 partitions or replication factor: the broker's default."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class TopicResult(_HasError):
    name: str
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class TopicDescription(_HasError):
    """A topic as the cluster reports it: each partition's leader, replicas and in-sync replicas."""

    name: str
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    is_internal: bool = False
    partitions: tuple[PartitionInfo, ...] = ()

    @property
    def replication_factor(self) -> int:
        """The replica count of the first partition (-1 for a topic without partitions)."""
        return len(self.partitions[0].replicas) if self.partitions else -1


@dataclass(frozen=True, slots=True)
class ResourceResult(_HasError):
    """The outcome for one resource of a call that returns nothing else."""

    name: str
    error: KafkaError | None


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int | str = "") -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(node_id))


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change of ``incremental_alter_configs``."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int = -1
    is_default: bool = False
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    documentation: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigResult(_HasError):
    resource: ConfigResource
    error: KafkaError | None
    entries: Mapping[str, ConfigEntry] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription(_HasError):
    group_id: str
    error: KafkaError | None
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


class OffsetSpec(enum.IntEnum):
    """Special timestamps of ``list_offsets``; any other int is a timestamp in ms."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class ListOffsetsResult(_HasError):
    error: KafkaError | None
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult(_HasError):
    error: KafkaError | None
    low_watermark: int = -1


@dataclass(frozen=True, slots=True)
class ProducerStateInfo:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionProducers(_HasError):
    error: KafkaError | None
    active_producers: tuple[ProducerStateInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionDescription(_HasError):
    transactional_id: str
    error: KafkaError | None
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = -1
    transaction_start_time_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
