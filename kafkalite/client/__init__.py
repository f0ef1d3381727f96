"""The bundled asyncio Kafka client: ``Producer``, ``Consumer`` and ``Admin``.

Every class takes a config dict with Kafka's key names and/or the same keys as keyword arguments
(``Producer({"bootstrap.servers": "localhost:9092"}, linger_ms=5)``). ``kafkalite.client.sync`` has
the same classes with blocking methods. The client imports only ``kafkalite.protocol`` and speaks
the protocol as any Kafka cluster expects it (ApiVersions negotiation, version selection).

Modules: ``config`` (the keys), ``connection`` (one broker connection), ``metadata`` (the cluster
picture), ``network`` (connections, metadata refresh, coordinators), ``producer/`` (accumulator,
partitioner, sender, transactions), ``consumer/`` (fetcher, group membership, assignors), ``admin``,
``sync`` and ``errors``.
"""

from kafkalite.client.admin import Admin
from kafkalite.client.admin_types import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    OffsetAndMetadata,
    OffsetSpec,
)
from kafkalite.client.config import ConfigError
from kafkalite.client.consumer.assignors import ConsumerPartitionAssignor
from kafkalite.client.consumer.consumer import Consumer
from kafkalite.client.consumer.fetcher import OffsetAndTimestamp
from kafkalite.client.consumer.group import ConsumerRebalanceListener
from kafkalite.client.consumer.records import ConsumerRecord, ConsumerRecords
from kafkalite.client.errors import (
    ClientClosedError,
    CommitFailedError,
    FencedInstanceIdError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortableError,
    TransactionStateError,
    UnsupportedVersionError,
)
from kafkalite.client.metadata import TopicPartition
from kafkalite.client.producer.producer import Producer, RecordFuture, RecordMetadata
from kafkalite.client.producer.transactions import ConsumerGroupMetadata
from kafkalite.protocol.records import TimestampType

__all__ = [
    "Admin",
    "AlterConfigOp",
    "ConfigResource",
    "ConfigResourceType",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetSpec",
    "ClientClosedError",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerPartitionAssignor",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerRecords",
    "FencedInstanceIdError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "Producer",
    "ProducerFencedError",
    "RecordFuture",
    "RecordMetadata",
    "RecordTooLargeError",
    "TimestampType",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionStateError",
    "UnsupportedVersionError",
]
