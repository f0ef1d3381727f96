"""Broker and topic configuration: one table of known keys, with Kafka's names, types and defaults.

Where a value comes from, lowest precedence first (later wins):

1. the key's default in ``BROKER_KEYS``;
2. the properties file (``--config``, Kafka's ``server.properties`` format);
3. ``KAFKALITE_*`` environment variables (``KAFKALITE_LOG_RETENTION_HOURS=1`` sets ``log.retention.hours``);
4. overrides (command-line flags and ``key=value`` arguments);
5. dynamic broker configs set at run time by AlterConfigs (the cluster-wide default, then this node's).

Sources 2-4 are "static" (``STATIC_BROKER_CONFIG`` in DescribeConfigs). Values are validated when they
are loaded or set, so a bad value fails at start-up with a message naming the key. Keys this table
does not know are kept as strings (logged once at debug level), so a Kafka ``server.properties`` with
thread-pool sizes, ZooKeeper or KRaft quorum settings loads unchanged.

Topic configs (``TOPIC_KEYS``: ``retention.ms``, ``segment.bytes``...) take their default from broker
keys, in Kafka's precedence and with unit translation: ``retention.ms`` comes from ``log.retention.ms``,
else ``log.retention.minutes`` x 60 000, else ``log.retention.hours`` x 3 600 000.
``topic_settings(topic_overrides)`` gives the merged result as a typed :class:`TopicConfig`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BROKER_KEYS",
    "CONFIG_KEYS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ENV_PREFIX",
    "Listener",
    "TOPIC_KEYS",
    "TopicConfig",
    "parse_listener",
    "read_properties",
]

log = logging.getLogger("kafkalite.config")

ENV_PREFIX = "KAFKALITE_"
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("compact", "delete")


class ConfigType(IntEnum):
    """Kafka's config types, numbered as in DescribeConfigs v3+ ``config_type``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value comes from, numbered as in DescribeConfigs v1+ ``config_source``."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1  # Kafka's DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigError(KafkaError):
    """An unknown key or a bad value; ``error_code`` is what a Kafka response carries (INVALID_CONFIG unless said)."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.INVALID_CONFIG) -> None:
        super().__init__(error_code, message)


_INTEGER_RANGES = {ConfigType.SHORT: 2**15, ConfigType.INT: 2**31, ConfigType.LONG: 2**63}


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One known key: its type, default (a parsed value; None = no value), checks and documentation.

    Every key lives in one table, ``CONFIG_KEYS``: the properties parser, DescribeConfigs, the
    per-topic configs, the group and transaction settings and ``config/server.properties`` all read it.

    Topic keys name their broker-level defaults in ``synonyms``: ``(broker key, multiplier)`` pairs in
    precedence order; the first broker key that has a value, times its multiplier, is the default.
    """

    name: str
    type: ConfigType
    default: Any
    doc: str
    at_least: float | None = None
    at_most: float | None = None
    valid: tuple[str, ...] | None = None  # allowed values (for a LIST: allowed items)
    dynamic: bool = False  # may be changed at run time by AlterConfigs on the broker resource
    sensitive: bool = False
    alias_of: str | None = None
    synonyms: tuple[tuple[str, int], ...] = ()
    per_topic: bool = False  # a topic config (CreateTopics, AlterConfigs on a topic) rather than a broker key
    section: str = ""  # its heading in config/server.properties
    kafka_default: str | None = None  # Apache Kafka's default, where kafkalite's differs (``doc`` says why)
    inert: str | None = None  # accepted for compatibility but without effect here, and why
    shipped: bool = False  # set (to its default) in the shipped config/server.properties

    def parse(self, raw: str) -> Any:
        """The typed value of ``raw``; ConfigError names the key when it is not valid."""
        text = raw.strip()
        value: Any
        if self.type is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise self._invalid(raw, "Expected value to be either true or false")
            value = text.lower() == "true"
        elif self.type in _INTEGER_RANGES:
            limit = _INTEGER_RANGES[self.type]
            try:
                value = int(text)
            except ValueError:
                raise self._invalid(raw, f"Not a number of type {self.type.name}") from None
            if not -limit <= value < limit:
                raise self._invalid(raw, f"Not a number of type {self.type.name}")
        elif self.type is ConfigType.DOUBLE:
            try:
                value = float(text)
            except ValueError:
                raise self._invalid(raw, "Not a number of type DOUBLE") from None
        elif self.type is ConfigType.LIST:
            value = [item.strip() for item in text.split(",") if item.strip()]
        else:
            value = text
        self.check(value, raw)
        return value

    def check(self, value: Any, raw: str) -> None:
        if value is None:
            return
        if self.at_least is not None and value < self.at_least:
            raise self._invalid(raw, f"Value must be at least {_number(self.at_least)}")
        if self.at_most is not None and value > self.at_most:
            raise self._invalid(raw, f"Value must be no more than {_number(self.at_most)}")
        if self.valid is not None:
            items = value if isinstance(value, list) else [value]
            if not items or any(item not in self.valid for item in items):
                raise self._invalid(raw, f"String must be one of: {', '.join(self.valid)}")

    def format(self, value: Any) -> str | None:
        """The value as Kafka shows it in DescribeConfigs."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(value)
        return str(value)

    def _invalid(self, raw: str, reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {raw} for configuration {self.name}: {reason}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# Why some keys are accepted (a Kafka server.properties loads unchanged) and do nothing here.
_NO_JITTER = "segments roll at segment.ms exactly, without jitter"
_CHECKPOINTS = "the periodic task writes the checkpoints whenever a recovery point or log start offset moved"
_NO_PREALLOCATION = "segment files grow as they are written"
_NO_COMPACTION = "nothing compacts logs yet: a compacted topic keeps every record"
_NO_DOWNCONVERSION = "Fetch v0-3 are not served, so nothing is ever down-converted"
_ONE_REPLICA = "a single node holds the only replica"
_LOCAL_COMMIT = "an offset commit is a local append, answered as soon as it is written"

_B, _S, _I, _L, _D, _LIST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                             ConfigType.DOUBLE, ConfigType.LIST)


def _table(per_topic: bool, *items: str | ConfigKey) -> tuple[ConfigKey, ...]:
    """Keys in order; a string starts a section (a heading of ``config/server.properties``)."""
    section = ""
    keys: list[ConfigKey] = []
    for item in items:
        if isinstance(item, str):
            section = item
        else:
            keys.append(replace(item, per_topic=per_topic, section=section))
    return tuple(keys)


# The broker keys. `dynamic=True` marks what AlterConfigs may change at run time (Kafka's
# dynamically updatable log and broker defaults); everything else is read-only once started.
_BROKER_TABLE: tuple[ConfigKey, ...] = _table(
    False,  # broker keys
    "Identity and listeners",
    ConfigKey("node.id", _I, 1,
              "The id of this node (KRaft name; broker.id is accepted as an alias).",
              at_least=0, shipped=True),
    ConfigKey("broker.id", _I, None, "Alias of node.id (the ZooKeeper-era name).", alias_of="node.id"),
    ConfigKey("broker.rack", _S, None, "The rack of this broker, reported in Metadata."),
    ConfigKey("listeners", _LIST, ["PLAINTEXT://localhost:9092"],
              "Addresses to listen on, NAME://host:port; an empty host or 0.0.0.0 binds every interface; port 0 picks "
              "a free port. kafkalite listens on localhost unless told otherwise.",
              kafka_default="PLAINTEXT://:9092", shipped=True),
    ConfigKey("advertised.listeners", _LIST, None,
              "Addresses given to clients in Metadata and FindCoordinator; default: listeners, with a wildcard host "
              "replaced by this machine's host name."),
    ConfigKey("listener.security.protocol.map", _LIST,
              ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
              "Security protocol of each listener name, NAME:PROTOCOL; only PLAINTEXT is served."),
    ConfigKey("controller.listener.names", _LIST, None,
              "KRaft controller listener names; accepted for compatibility and not served (there is no controller "
              "quorum)."),
    "Storage",
    ConfigKey("log.dirs", _LIST, None, "Data directories; the first one is used. Default: log.dir."),
    ConfigKey("log.dir", _S, "./data", "The data directory, used when log.dirs is not set.", shipped=True),
    ConfigKey("log.storage", _S, "disk",
              "kafkalite: 'disk' keeps Kafka's on-disk layout in log.dirs; 'memory' keeps everything in memory (lost "
              "at exit).",
              valid=("disk", "memory"), shipped=True),
    ConfigKey("log.segment.bytes", _I, 1024**3,
              "Largest size of one log segment file.",
              at_least=14, dynamic=True, shipped=True),
    ConfigKey("log.roll.ms", _L, None,
              "Roll a new segment after this time (ms); overrides log.roll.hours.",
              at_least=1, dynamic=True),
    ConfigKey("log.roll.hours", _I, 168, "Roll a new segment after this time (hours).", at_least=1, dynamic=True),
    ConfigKey("log.roll.jitter.ms", _L, None,
              "Largest random jitter subtracted from the roll time (ms).",
              at_least=0, dynamic=True, inert=_NO_JITTER),
    ConfigKey("log.roll.jitter.hours", _I, 0,
              "Largest random jitter subtracted from the roll time (hours).",
              at_least=0, dynamic=True, inert=_NO_JITTER),
    ConfigKey("log.retention.ms", _L, None,
              "Delete segments older than this (ms; -1 = keep forever); overrides minutes and hours.",
              at_least=-1, dynamic=True),
    ConfigKey("log.retention.minutes", _I, None,
              "Delete segments older than this (minutes); overrides hours.",
              at_least=-1, dynamic=True),
    ConfigKey("log.retention.hours", _I, 168,
              "Delete segments older than this (hours).",
              at_least=-1, dynamic=True, shipped=True),
    ConfigKey("log.retention.bytes", _L, -1,
              "Delete old segments while a partition is larger than this (-1 = no limit).",
              dynamic=True),
    ConfigKey("log.retention.check.interval.ms", _L, 300_000,
              "How often retention deletes segments past retention.ms or retention.bytes (ms).",
              at_least=1, shipped=True),
    ConfigKey("log.initial.task.delay.ms", _L, 30_000,
              "Delay from start-up to the first retention check (ms); Kafka meant it for tests.",
              at_least=0),
    ConfigKey("log.segment.delete.delay.ms", _L, 60_000,
              "Delay before a deleted segment's files are removed (ms).",
              at_least=0, dynamic=True),
    ConfigKey("log.index.interval.bytes", _I, 4096,
              "Bytes of records between two offset-index entries.",
              at_least=0, dynamic=True),
    ConfigKey("log.index.size.max.bytes", _I, 10 * 1024**2,
              "Largest size of an offset or time index file.",
              at_least=12, dynamic=True),
    ConfigKey("log.flush.interval.messages", _L, LONG_MAX,
              "fsync a partition after this many records.",
              at_least=1, dynamic=True),
    ConfigKey("log.flush.interval.ms", _L, None,
              "fsync a partition after this time (ms); default: log.flush.scheduler.interval.ms.",
              at_least=0, dynamic=True),
    ConfigKey("log.flush.scheduler.interval.ms", _L, LONG_MAX,
              "How often the flush timer checks partitions (ms).",
              dynamic=True),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", _I, 60_000,
              "How often the recovery point is checkpointed (ms).",
              at_least=0, inert=_CHECKPOINTS),
    ConfigKey("log.flush.on.ack", _B, False,
              "kafkalite: fsync the partition before answering a Produce with acks=all (Kafka relies on replication "
              "instead; a single node has none).",
              shipped=True),
    ConfigKey("log.preallocate", _B, False, "Preallocate segment files.", dynamic=True, inert=_NO_PREALLOCATION),
    ConfigKey("log.cleanup.policy", _LIST, ["delete"],
              "Default cleanup policy: delete, compact or both.",
              valid=_CLEANUP_POLICIES, dynamic=True),
    ConfigKey("log.cleaner.enable", _B, True, "Run the log cleaner for compacted topics.", inert=_NO_COMPACTION),
    ConfigKey("log.cleaner.delete.retention.ms", _L, 86_400_000,
              "How long tombstones are kept on compacted topics (ms).",
              at_least=0, dynamic=True, inert=_NO_COMPACTION),
    ConfigKey("log.cleaner.min.compaction.lag.ms", _L, 0,
              "Least time a record stays uncompacted (ms).",
              at_least=0, dynamic=True, inert=_NO_COMPACTION),
    ConfigKey("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX,
              "Most time a record stays uncompacted (ms).",
              at_least=1, dynamic=True, inert=_NO_COMPACTION),
    ConfigKey("log.cleaner.min.cleanable.ratio", _D, 0.5,
              "Least dirty ratio before a log is compacted.",
              at_least=0, at_most=1, dynamic=True, inert=_NO_COMPACTION),
    "Records",
    ConfigKey("message.max.bytes", _I, 1_048_588,
              "Largest record batch the broker accepts (bytes).",
              at_least=0, dynamic=True),
    ConfigKey("compression.type", _S, "producer",
              "Compression of stored batches: 'producer' keeps the producer's codec.",
              valid=_COMPRESSION_TYPES, dynamic=True),
    ConfigKey("log.message.timestamp.type", _S, "CreateTime",
              "Record timestamps: the producer's or the append time.",
              valid=_TIMESTAMP_TYPES, dynamic=True),
    ConfigKey("log.message.timestamp.before.max.ms", _L, LONG_MAX,
              "Reject batches whose timestamp is further than this in the past (ms; CreateTime only).",
              at_least=0, dynamic=True),
    ConfigKey("log.message.timestamp.after.max.ms", _L, 3_600_000,
              "Reject batches whose timestamp is further than this in the future (ms; CreateTime only).",
              at_least=0, dynamic=True),
    ConfigKey("log.message.downconversion.enable", _B, True,
              "Down-convert batches for old Fetch versions.",
              dynamic=True, inert=_NO_DOWNCONVERSION),
    ConfigKey("min.insync.replicas", _I, 1,
              "Replicas that must acknowledge acks=all writes.",
              at_least=1, dynamic=True, inert=_ONE_REPLICA),
    ConfigKey("unclean.leader.election.enable", _B, False,
              "Allow out-of-sync replicas to become leader.",
              dynamic=True, inert=_ONE_REPLICA),
    "Topics",
    ConfigKey("num.partitions", _I, 1, "Partitions of an auto-created topic.", at_least=1, shipped=True),
    ConfigKey("default.replication.factor", _I, 1, "Replication factor of an auto-created topic.", at_least=1,
              inert=_ONE_REPLICA),
    ConfigKey("auto.create.topics.enable", _B, True,
              "Create a topic when Metadata or Produce names an unknown one.",
              shipped=True),
    ConfigKey("delete.topic.enable", _B, True, "Allow DeleteTopics."),
    "Network and requests",
    ConfigKey("socket.request.max.bytes", _I, 104_857_600,
              "Largest request frame; a bigger one closes the connection.",
              at_least=1, shipped=True),
    ConfigKey("connections.max.idle.ms", _L, 600_000,
              "Close connections idle for this long (ms; 0 or less never closes them).",
              shipped=True),
    ConfigKey("fetch.max.bytes", _I, 57_671_680, "Largest Fetch response (bytes).", at_least=1024),
    ConfigKey("max.incremental.fetch.session.cache.slots", _I, 1000,
              "Most incremental fetch sessions kept.",
              at_least=0),
    "Groups and committed offsets",
    ConfigKey("group.initial.rebalance.delay.ms", _I, 0,
              "Wait this long for more members before the first rebalance of a new group (ms). A development broker "
              "answers the first consumer at once, as Kafka's own container images do.",
              at_least=0, kafka_default="3000", shipped=True),
    ConfigKey("group.min.session.timeout.ms", _I, 6000, "Smallest session timeout a member may ask for (ms)."),
    ConfigKey("group.max.session.timeout.ms", _I, 1_800_000, "Largest session timeout a member may ask for (ms)."),
    ConfigKey("group.max.size", _I, INT_MAX, "Most members in one consumer group.", at_least=1),
    ConfigKey("group.consumer.session.timeout.ms", _I, 45_000,
              "Session timeout of KIP-848 consumer group members (ms).",
              at_least=1),
    ConfigKey("group.consumer.heartbeat.interval.ms", _I, 5000,
              "Heartbeat interval given to KIP-848 consumer group members (ms).",
              at_least=1),
    ConfigKey("group.consumer.max.size", _I, INT_MAX, "Most members in one KIP-848 consumer group.", at_least=1),
    ConfigKey("group.consumer.assignors", _LIST, ["uniform", "range"],
              "Server-side assignors for KIP-848 groups; the first is the default."),
    ConfigKey("offsets.retention.minutes", _I, 10080,
              "Keep committed offsets of an empty group this long (minutes).",
              at_least=1),
    ConfigKey("offsets.retention.check.interval.ms", _L, 600_000,
              "How often stale committed offsets are removed (ms).",
              at_least=1),
    ConfigKey("offsets.topic.num.partitions", _I, 50, "Partitions of __consumer_offsets.", at_least=1),
    ConfigKey("offsets.topic.replication.factor", ConfigType.SHORT, 1,
              "Replication factor of __consumer_offsets (Kafka defaults to 3; a single node holds 1).",
              at_least=1, kafka_default="3", shipped=True, inert=_ONE_REPLICA),
    ConfigKey("offsets.topic.segment.bytes", _I, 104_857_600, "Segment size of __consumer_offsets.", at_least=14),
    ConfigKey("offsets.commit.timeout.ms", _I, 5000,
              "How long an offset commit may wait for its write (ms).",
              at_least=1, inert=_LOCAL_COMMIT),
    ConfigKey("offset.metadata.max.bytes", _I, 4096, "Largest metadata string of a committed offset."),
    "Transactions and producer ids",
    ConfigKey("transaction.max.timeout.ms", _I, 900_000,
              "Largest transaction timeout a producer may ask for (ms).",
              at_least=1),
    ConfigKey("transactional.id.expiration.ms", _I, 604_800_000,
              "Forget a transactional id unused for this long (ms).",
              at_least=1),
    ConfigKey("producer.id.expiration.ms", _I, 86_400_000,
              "Forget an idempotent producer's state after this long without writes (ms).",
              at_least=1, dynamic=True),
    ConfigKey("producer.id.expiration.check.interval.ms", _I, 600_000,
              "How often expired producer ids are removed (ms).",
              at_least=1),
    ConfigKey("transaction.state.log.num.partitions", _I, 50, "Partitions of __transaction_state.", at_least=1),
    ConfigKey("transaction.state.log.replication.factor", ConfigType.SHORT, 1,
              "Replication factor of __transaction_state (Kafka defaults to 3; a single node holds 1).",
              at_least=1, kafka_default="3", shipped=True, inert=_ONE_REPLICA),
    ConfigKey("transaction.state.log.min.isr", _I, 1,
              "min.insync.replicas of __transaction_state (a single node holds 1 replica).",
              at_least=1, kafka_default="2", shipped=True, inert=_ONE_REPLICA),
    ConfigKey("transaction.state.log.segment.bytes", _I, 104_857_600, "Segment size of __transaction_state.",
              at_least=14),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10_000,
              "How often timed-out transactions are aborted (ms).",
              at_least=1),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3_600_000,
              "How often expired transactional ids are removed (ms).",
              at_least=1),
)

# The topic keys (CreateTopics, AlterConfigs, IncrementalAlterConfigs, DescribeConfigs on topics).
_TOPIC_TABLE: tuple[ConfigKey, ...] = _table(
    True,  # per-topic keys
    "Topic configs",
    ConfigKey("cleanup.policy", _LIST, None,
              "delete, compact, or compact,delete.",
              valid=_CLEANUP_POLICIES, synonyms=(("log.cleanup.policy", 1),)),
    ConfigKey("compression.type", _S, None,
              "Codec of stored batches; 'producer' keeps the producer's.",
              valid=_COMPRESSION_TYPES, synonyms=(("compression.type", 1),)),
    ConfigKey("delete.retention.ms", _L, None,
              "How long tombstones are kept on compacted topics.",
              at_least=0, synonyms=(("log.cleaner.delete.retention.ms", 1),), inert=_NO_COMPACTION),
    ConfigKey("file.delete.delay.ms", _L, None,
              "Delay before a deleted segment's files are removed.",
              at_least=0, synonyms=(("log.segment.delete.delay.ms", 1),)),
    ConfigKey("flush.messages", _L, None,
              "fsync after this many records.",
              at_least=1, synonyms=(("log.flush.interval.messages", 1),)),
    ConfigKey("flush.ms", _L, None,
              "fsync after this much time.",
              at_least=0, synonyms=(("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))),
    ConfigKey("index.interval.bytes", _I, None,
              "Bytes of records between two offset-index entries.",
              at_least=0, synonyms=(("log.index.interval.bytes", 1),)),
    ConfigKey("max.message.bytes", _I, None,
              "Largest record batch accepted.",
              at_least=0, synonyms=(("message.max.bytes", 1),)),
    ConfigKey("message.downconversion.enable", _B, None,
              "Down-convert batches for old Fetch versions.",
              synonyms=(("log.message.downconversion.enable", 1),), inert=_NO_DOWNCONVERSION),
    ConfigKey("message.timestamp.type", _S, None,
              "CreateTime or LogAppendTime.",
              valid=_TIMESTAMP_TYPES, synonyms=(("log.message.timestamp.type", 1),)),
    ConfigKey("message.timestamp.before.max.ms", _L, None,
              "Reject timestamps further than this in the past.",
              at_least=0, synonyms=(("log.message.timestamp.before.max.ms", 1),)),
    ConfigKey("message.timestamp.after.max.ms", _L, None,
              "Reject timestamps further than this in the future.",
              at_least=0, synonyms=(("log.message.timestamp.after.max.ms", 1),)),
    ConfigKey("min.insync.replicas", _I, None,
              "Replicas that must acknowledge acks=all writes.",
              at_least=1, synonyms=(("min.insync.replicas", 1),), inert=_ONE_REPLICA),
    ConfigKey("retention.bytes", _L, None,
              "Delete old segments while a partition is larger than this (-1 = no limit).",
              synonyms=(("log.retention.bytes", 1),)),
    ConfigKey("retention.ms", _L, None,
              "Delete segments older than this (-1 = keep forever).",
              at_least=-1,
              synonyms=(("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                        ("log.retention.hours", _HOUR_MS))),
    ConfigKey("segment.bytes", _I, None,
              "Largest size of one segment file.",
              at_least=14, synonyms=(("log.segment.bytes", 1),)),
    ConfigKey("segment.index.bytes", _I, None,
              "Largest size of an index file (Kafka allows 4; one time-index entry is 12).",
              at_least=12, synonyms=(("log.index.size.max.bytes", 1),)),
    ConfigKey("segment.ms", _L, None,
              "Roll a new segment after this time.",
              at_least=1, synonyms=(("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS))),
    ConfigKey("segment.jitter.ms", _L, None,
              "Largest random jitter subtracted from segment.ms.",
              at_least=0, synonyms=(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)), inert=_NO_JITTER),
    ConfigKey("min.compaction.lag.ms", _L, None,
              "Least time a record stays uncompacted.",
              at_least=0, synonyms=(("log.cleaner.min.compaction.lag.ms", 1),), inert=_NO_COMPACTION),
    ConfigKey("max.compaction.lag.ms", _L, None,
              "Most time a record stays uncompacted.",
              at_least=1, synonyms=(("log.cleaner.max.compaction.lag.ms", 1),), inert=_NO_COMPACTION),
    ConfigKey("min.cleanable.dirty.ratio", _D, None,
              "Least dirty ratio before the log is compacted.",
              at_least=0, at_most=1, synonyms=(("log.cleaner.min.cleanable.ratio", 1),), inert=_NO_COMPACTION),
    ConfigKey("unclean.leader.election.enable", _B, None,
              "Allow out-of-sync replicas to become leader.",
              synonyms=(("unclean.leader.election.enable", 1),), inert=_ONE_REPLICA),
    ConfigKey("preallocate", _B, None, "Preallocate segment files.", synonyms=(("log.preallocate", 1),),
              inert=_NO_PREALLOCATION),
)


def _index(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    table: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in table:
            raise ValueError(f"config key {key.name} defined twice")
        table[key.name] = key
    return table


CONFIG_KEYS: tuple[ConfigKey, ...] = _BROKER_TABLE + _TOPIC_TABLE
"""Every key kafkalite honours: the broker keys, then the per-topic keys (``per_topic``)."""
BROKER_KEYS: dict[str, ConfigKey] = _index(key for key in CONFIG_KEYS if not key.per_topic)
TOPIC_KEYS: dict[str, ConfigKey] = _index(key for key in CONFIG_KEYS if key.per_topic)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Every per-topic key's effective, typed value for one topic: ``max.message.bytes`` is
    ``max_message_bytes``. Long.MAX_VALUE stays as it is (Kafka's "never"); lists are tuples."""

    cleanup_policy: tuple[str, ...]
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    index_interval_bytes: int
    max_message_bytes: int
    message_downconversion_enable: bool
    message_timestamp_type: str
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    min_insync_replicas: int
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    unclean_leader_election_enable: bool
    preallocate: bool


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A lower-precedence source of the same setting (DescribeConfigs v1+ ``synonyms``)."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None  # None when unset or sensitive
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    documentation: str = ""
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class Listener:
    """A listener or advertised listener: ``NAME://host:port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%\w]*\]|[^:/\[\]]*):(\d{1,5})$")
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def parse_listener(text: str) -> Listener:
    """Parse ``NAME://host:port`` (IPv6 hosts in brackets); ConfigError when malformed."""
    match = _LISTENER.match(text.strip())
    if match is None or int(match.group(3)) > 65535:
        raise ConfigError(f"Invalid listener {text!r}: expected NAME://host:port, for example PLAINTEXT://localhost:9092")
    name, host, port = match.groups()
    return Listener(name.upper(), host.strip("[]"), int(port))


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file: ``#``/``!`` comments, ``key=value``, ``key: value`` or
    ``key value``, backslash line continuations and escapes (``\\t``, ``\\n``, ``\\uXXXX``, ``\\=``...).
    Later keys win. The file is read as UTF-8 (a superset of the ASCII Kafka's files use)."""
    values: dict[str, str] = {}
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].lstrip()
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_property(line)
        values[key] = value
    return values


def _continues(line: str) -> bool:
    """A line continues when it ends with an odd number of backslashes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _split_property(line: str) -> tuple[str, str]:
    """Split one logical line at the first unescaped '=', ':' or whitespace; unescape both halves."""
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            break
        position += 1
    key, rest = line[:position], line[position:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 >= len(text):
            out.append(char)
            position += 1
            continue
        escaped = text[position + 1]
        if escaped == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[position + 2:position + 6]):
            out.append(chr(int(text[position + 2:position + 6], 16)))
            position += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        position += 2
    return "".join(out)


def _keys_from_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``KAFKALITE_LOG_RETENTION_HOURS=1`` -> ``{"log.retention.hours": "1"}``."""
    return {name[len(ENV_PREFIX):].lower().replace("_", "."): value
            for name, value in environ.items() if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)}


_reported_unknown: set[str] = set()
_Settings = TypeVar("_Settings")


def config_field(key: str, scale: int = 1) -> Any:
    """A settings dataclass field that mirrors broker key ``key`` (times ``scale``, for unit changes):
    its default is the table's, and :meth:`BrokerConfig.settings` fills it from the configuration."""
    default = BROKER_KEYS[key].default
    default = tuple(default) if isinstance(default, list) else default * scale
    return field(default=default, metadata={"config_key": key, "scale": scale})


class BrokerConfig:
    """The broker's configuration: static values (file, environment, overrides) plus dynamic ones.

    Read with ``get`` and the typed ``get_int``/``get_bool``/``get_str``/``get_list``; derived values
    with ``data_dir``, ``listeners``, ``advertised_listeners`` and ``topic_settings``.
    """

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        self._static_raw: dict[str, str] = {}
        self._values: dict[str, Any] = {}  # parsed static values of known keys
        self._dynamic_default: dict[str, Any] = {}  # AlterConfigs on the cluster-wide default ("")
        self._dynamic_node: dict[str, Any] = {}  # AlterConfigs on this node
        for key, raw in (static or {}).items():
            self._set_static(key.strip(), raw)
        self._check()

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> BrokerConfig:
        """The properties file, then ``KAFKALITE_*`` environment variables, then overrides; later wins."""
        merged: dict[str, str] = {}
        if path is not None:
            merged.update(read_properties(path))
        merged.update(_keys_from_environ(environ))
        merged.update(overrides or {})
        return cls(merged)

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        """A new config with these static values added (dynamic values are not carried over)."""
        return BrokerConfig({**self._static_raw, **overrides})

    def _set_static(self, key: str, raw: str) -> None:
        self._static_raw[key] = raw
        known = BROKER_KEYS.get(key)
        if known is None:
            if key not in _reported_unknown:
                _reported_unknown.add(key)
                log.debug("keeping unknown config key %s", key)
            return
        self._values[key] = known.parse(raw)

    def _check(self) -> None:
        """Cross-key checks, done once at load."""
        node_id, broker_id = self._values.get("node.id"), self._values.get("broker.id")
        if node_id is not None and broker_id is not None and node_id != broker_id:
            raise ConfigError(f"node.id={node_id} and broker.id={broker_id} disagree; set only one")
        self.listeners()
        self.advertised_listeners(resolve_wildcards=False)

    # typed access ----------------------------------------------------------------------------
    def get(self, key: str) -> Any:
        """The effective value of a key: dynamic, then static, then the default; typed for known keys.

        Unknown keys that were configured return their string; other unknown keys raise KeyError.
        """
        known = BROKER_KEYS.get(key)
        if known is None:
            return self._static_raw[key]
        if known.alias_of is not None:
            return self.get(known.alias_of)
        for layer in (self._dynamic_node, self._dynamic_default, self._values):
            if key in layer:
                return layer[key]
        if key == "node.id" and "broker.id" in self._values:
            return self._values["broker.id"]
        return known.default

    def is_set(self, key: str) -> bool:
        """Whether a key was given a value (statically or dynamically) rather than left at its default."""
        return key in self._static_raw or key in self._dynamic_node or key in self._dynamic_default

    def get_int(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or value is None:
            raise ConfigError(f"{key} is {value!r}, not an integer")
        return int(value)

    def get_bool(self, key: str) -> bool:
        value = self.get(key)
        if isinstance(value, str):  # an unknown key, kept as text
            return bool(ConfigKey(key, _B, None, "").parse(value))
        return bool(value)

    def get_str(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise ConfigError(f"{key} has no value")
        return ",".join(value) if isinstance(value, list) else str(value)

    def get_list(self, key: str) -> list[str]:
        value = self.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return list(value)

    def settings(self, cls: type[_Settings]) -> _Settings:
        """An instance of a settings dataclass whose fields are made with :func:`config_field`, holding
        this configuration's values (lists as tuples; an empty list keeps the default)."""
        values: dict[str, Any] = {}
        for item in fields(cls):  # type: ignore[arg-type]  # cls is a dataclass, which a TypeVar cannot say
            key = item.metadata.get("config_key")
            if key is None:
                continue
            value = self.get(key)
            if isinstance(value, list):
                if value:
                    values[item.name] = tuple(value)
            elif value is not None:
                values[item.name] = value * item.metadata["scale"]
        return cls(**values)

    # derived values --------------------------------------------------------------------------
    def data_dir(self) -> Path | None:
        """The data directory (the first of log.dirs, else log.dir); None when log.storage=memory."""
        if self.get("log.storage") == "memory":
            return None
        dirs = self.get_list("log.dirs")
        return Path(dirs[0] if dirs else self.get_str("log.dir")).expanduser()

    def listeners(self) -> list[Listener]:
        """The listeners to bind, controller listeners left out; only PLAINTEXT is served."""
        protocols = {}
        for item in self.get_list("listener.security.protocol.map"):
            name, _, mapped = item.partition(":")
            protocols[name.strip().upper()] = mapped.strip().upper()
        controller_names = {name.upper() for name in self.get_list("controller.listener.names")}
        listeners = [parse_listener(text) for text in self.get_list("listeners")]
        _check_unique(listeners, "listeners")
        served = [listener for listener in listeners if listener.name not in controller_names]
        if not served:
            raise ConfigError("listeners has no listener to serve clients on")
        for listener in served:
            protocol = protocols.get(listener.name)
            if protocol is None:
                raise ConfigError(f"listener {listener} is not in listener.security.protocol.map")
            if protocol != "PLAINTEXT":
                raise ConfigError(f"listener {listener} uses {protocol}; kafkalite serves PLAINTEXT only")
        return served

    def advertised_listeners(self, resolve_wildcards: bool = True) -> list[Listener]:
        """What clients are told to connect to. Port 0 means "the port its listener bound"."""
        if self.is_set("advertised.listeners"):
            advertised = [parse_listener(text) for text in self.get_list("advertised.listeners")]
            _check_unique(advertised, "advertised.listeners")
            for listener in advertised:
                if listener.host in _WILDCARD_HOSTS:
                    raise ConfigError(f"advertised.listeners cannot use the wildcard address in {listener}")
            return advertised
        listeners = self.listeners()
        if not resolve_wildcards:
            return listeners
        return [Listener(item.name, _advertised_host() if item.host in _WILDCARD_HOSTS else item.host, item.port)
                for item in listeners]

    # topic configs ---------------------------------------------------------------------------
    def validate_topic_config(self, key: str, value: str | None) -> Any:
        """Check one topic config from CreateTopics/AlterConfigs; return its typed value (None deletes)."""
        known = TOPIC_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        return None if value is None else known.parse(value)

    def topic_config(self, key: str, topic_overrides: Mapping[str, str] | None = None) -> Any:
        """The typed effective value of a topic key: the override, else the broker default."""
        known = TOPIC_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        if topic_overrides and topic_overrides.get(key) is not None:
            return known.parse(topic_overrides[key])
        for broker_key, multiplier in known.synonyms:
            value = self.get(broker_key)
            if value is not None:
                return value * multiplier if multiplier != 1 else value
        return known.default

    def topic_config_default(self, key: str) -> str:
        """The broker default of a topic key, as Kafka shows it (``retention.ms`` -> "604800000")."""
        return TOPIC_KEYS[key].format(self.topic_config(key)) or ""

    def effective_topic_config(self, topic_overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Every topic key's typed value for a topic with these overrides (unknown keys are ignored)."""
        return {key: self.topic_config(key, topic_overrides) for key in TOPIC_KEYS}

    def topic_settings(self, topic_overrides: Mapping[str, str] | None = None) -> TopicConfig:
        """A topic's effective configs as typed attributes (the override, else the broker default).

        Built once when a topic's overrides or a broker default change, so that the produce and fetch
        paths read attributes rather than looking keys up."""
        values: dict[str, Any] = {key.replace(".", "_"): tuple(value) if isinstance(value, list) else value
                                  for key, value in self.effective_topic_config(topic_overrides).items()}
        return TopicConfig(**values)

    # dynamic broker configs ------------------------------------------------------------------
    def set_broker_config(self, key: str, value: str | None, cluster_default: bool = False) -> None:
        """AlterConfigs on the broker resource (this node, or the cluster default when the resource
        name is empty). ``None`` deletes. Read-only or unknown keys raise ConfigError."""
        known = BROKER_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown broker config name: {key}", ErrorCode.INVALID_REQUEST)
        if not known.dynamic:
            raise ConfigError(f"Cannot update {key} dynamically: it is read-only", ErrorCode.INVALID_REQUEST)
        layer = self._dynamic_default if cluster_default else self._dynamic_node
        if value is None:
            layer.pop(key, None)
        else:
            layer[key] = known.parse(value)

    def delete_broker_config(self, key: str, cluster_default: bool = False) -> None:
        """Remove a dynamic value; the static or default value applies again."""
        self.set_broker_config(key, None, cluster_default)

    def validate_broker_config(self, key: str, value: str | None) -> None:
        """The checks of ``set_broker_config`` without changing anything (AlterConfigs validate_only)."""
        known = BROKER_KEYS.get(key)
        if known is None:
            raise ConfigError(f"Unknown broker config name: {key}", ErrorCode.INVALID_REQUEST)
        if not known.dynamic:
            raise ConfigError(f"Cannot update {key} dynamically: it is read-only", ErrorCode.INVALID_REQUEST)
        if value is not None:
            known.parse(value)

    # DescribeConfigs -------------------------------------------------------------------------
    def describe(self, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """The broker resource: every known key (or those asked for), with value and source."""
        names = list(BROKER_KEYS) if keys is None else [key for key in keys if key in BROKER_KEYS]
        entries = []
        for name in names:
            known = BROKER_KEYS[name]
            canonical = known.alias_of or name
            synonyms = self._broker_synonyms(canonical)
            value, source = (synonyms[0].value, synonyms[0].source) if synonyms else (None, ConfigSource.DEFAULT_CONFIG)
            entries.append(ConfigEntry(name, None if known.sensitive else value, source, not known.dynamic,
                                       known.sensitive, known.type, known.doc, tuple(synonyms)))
        return entries

    def describe_topic(self, topic_overrides: Mapping[str, str] | None = None,
                       keys: Iterable[str] | None = None) -> list[ConfigEntry]:
        """A topic resource: every topic key (or those asked for), its override or the broker default."""
        names = list(TOPIC_KEYS) if keys is None else [key for key in keys if key in TOPIC_KEYS]
        entries = []
        for name in names:
            known = TOPIC_KEYS[name]
            synonyms: list[ConfigSynonym] = []
            if topic_overrides and topic_overrides.get(name) is not None:
                synonyms.append(ConfigSynonym(name, known.format(known.parse(topic_overrides[name])),
                                              ConfigSource.TOPIC_CONFIG))
            for broker_key, _ in known.synonyms:
                synonyms.extend(self._broker_synonyms(broker_key))
            value = known.format(self.topic_config(name, topic_overrides))
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source, False, known.sensitive, known.type, known.doc,
                                       tuple(synonyms)))
        return entries

    def _broker_synonyms(self, key: str) -> list[ConfigSynonym]:
        """The values a broker key has in each layer, highest precedence first."""
        known = BROKER_KEYS[key]
        found = []
        for layer, source in ((self._dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (self._dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self._values, ConfigSource.STATIC_BROKER_CONFIG)):
            if key in layer:
                found.append(ConfigSynonym(key, known.format(layer[key]), source))
        if key == "node.id" and "broker.id" in self._values and "node.id" not in self._values:
            found.append(ConfigSynonym("broker.id", known.format(self._values["broker.id"]),
                                       ConfigSource.STATIC_BROKER_CONFIG))
        if known.default is not None:
            found.append(ConfigSynonym(key, known.format(known.default), ConfigSource.DEFAULT_CONFIG))
        return found

    def __repr__(self) -> str:
        return f"BrokerConfig({self._static_raw!r})"


def _check_unique(listeners: list[Listener], key: str) -> None:
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key} names a listener twice: {', '.join(names)}")


def _advertised_host() -> str:
    """This machine's host name when it resolves, else localhost (for wildcard listeners)."""
    hostname = socket.gethostname()
    try:
        socket.getaddrinfo(hostname, None)
    except OSError:
        return "localhost"
    return hostname
