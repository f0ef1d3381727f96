"""The one table of config keys: ``CONFIG_KEYS`` (broker keys, then topic keys), indexed as
``BROKER_KEYS`` and ``TOPIC_KEYS``, and ``TopicConfig``, a topic's effective values as attributes;
and ``GROUP_KEYS``, the configs of a group (IncrementalAlterConfigs and DescribeConfigs on GROUP
resources), which are not broker keys and so stand apart.

The broker keys are defined by section in ``broker_keys`` (what kafkalite does) and ``kafka_keys``
(what it accepts without effect); the topic and group keys are here.

The table is built in two steps, so that a start does not pay for keys it never reads. Importing
this module builds ``START_KEYS`` (``broker_keys``' sections: every broker key the broker reads to
start and serve), ``TOPIC_KEYS`` and ``GROUP_KEYS``. The whole table, ``CONFIG_KEYS`` and
``BROKER_KEYS`` (with ``kafka_keys``' security, quota, replication, quorum, tiered storage and
metrics keys), is built on first use: the first look-up of a key outside ``START_KEYS``
(``find_broker_key``: a configured key that is not a start key, DescribeConfigs, AlterConfigs, the
security room) or the first access to either name. Both hold the same ``ConfigKey`` objects, in
the same order, as a table built in one step.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from kafkalite.broker.config.broker_keys import BROKER_SECTIONS, CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES
from kafkalite.broker.config.keys import (
    NO_DOWNCONVERSION,
    NO_JITTER,
    NO_PREALLOCATION,
    ONE_REPLICA,
    ConfigKey,
    ConfigType,
    index_keys,
    section_table,
)

__all__ = ["BROKER_KEYS", "CONFIG_KEYS", "GROUP_KEYS", "START_KEYS", "TOPIC_KEYS", "TopicConfig", "all_broker_keys",
           "find_broker_key"]

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000
_B, _S, _I, _L, _D, _LIST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                             ConfigType.DOUBLE, ConfigType.LIST)
_CLEANUP_POLICIES, _COMPRESSION_TYPES, _TIMESTAMP_TYPES = CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES
_NO_DOWNCONVERSION, _NO_JITTER, _NO_PREALLOCATION, _ONE_REPLICA = (
    NO_DOWNCONVERSION, NO_JITTER, NO_PREALLOCATION, ONE_REPLICA)
_table = section_table

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
              at_least=0, synonyms=(("log.cleaner.delete.retention.ms", 1),)),
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
              at_least=0, synonyms=(("log.cleaner.min.compaction.lag.ms", 1),)),
    ConfigKey("max.compaction.lag.ms", _L, None,
              "Most time a record stays uncompacted.",
              at_least=1, synonyms=(("log.cleaner.max.compaction.lag.ms", 1),)),
    ConfigKey("min.cleanable.dirty.ratio", _D, None,
              "Least dirty ratio before the log is compacted.",
              at_least=0, at_most=1, synonyms=(("log.cleaner.min.cleanable.ratio", 1),)),
    ConfigKey("unclean.leader.election.enable", _B, None,
              "Allow out-of-sync replicas to become leader.",
              synonyms=(("unclean.leader.election.enable", 1),), inert=_ONE_REPLICA),
    ConfigKey("preallocate", _B, None, "Preallocate segment files.", synonyms=(("log.preallocate", 1),),
              inert=_NO_PREALLOCATION),
)


_START_TABLE: tuple[ConfigKey, ...] = section_table(False, *BROKER_SECTIONS)
START_KEYS: dict[str, ConfigKey] = index_keys(_START_TABLE)
"""The broker keys of ``broker_keys``' sections, by name: what a start reads (the rest load on first use)."""
TOPIC_KEYS: dict[str, ConfigKey] = index_keys(_TOPIC_TABLE)

if TYPE_CHECKING:
    CONFIG_KEYS: tuple[ConfigKey, ...]
    """Every key kafkalite knows: the broker keys, then the per-topic keys (``per_topic``)."""
    BROKER_KEYS: dict[str, ConfigKey]
    """Every broker key, by name."""


@cache
def _whole_table() -> tuple[tuple[ConfigKey, ...], dict[str, ConfigKey]]:
    """``CONFIG_KEYS`` and ``BROKER_KEYS``, built once, on first use."""
    from kafkalite.broker.config.kafka_keys import KAFKA_SECTIONS

    config_keys = _START_TABLE + section_table(False, *KAFKA_SECTIONS) + _TOPIC_TABLE
    return config_keys, index_keys(key for key in config_keys if not key.per_topic)


def all_broker_keys() -> dict[str, ConfigKey]:
    """``BROKER_KEYS``: every broker key by name (the whole table is built on the first call)."""
    return _whole_table()[1]


def find_broker_key(name: str) -> ConfigKey | None:
    """The broker key ``name`` (None for a key nobody knows). A start key is found without building the
    whole table; any other name builds it, once."""
    known = START_KEYS.get(name)
    return known if known is not None else _whole_table()[1].get(name)


def __getattr__(name: str) -> Any:
    """``CONFIG_KEYS`` and ``BROKER_KEYS``, built on first access."""
    if name == "CONFIG_KEYS":
        return _whole_table()[0]
    if name == "BROKER_KEYS":
        return _whole_table()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# The group keys (Kafka's GroupConfig): a share group's own values for the share.* broker keys named
# as their defaults, and two without a broker key. Checked against the broker keys' bounds by
# ``kafkalite.broker.core.share.config.check_group_configs``.
_GROUP_TABLE: tuple[ConfigKey, ...] = _table(
    False,
    "Group configs",
    ConfigKey("share.auto.offset.reset", _S, "latest",
              "Where a share group starts in a partition it has no state for: earliest, latest, or "
              "by_duration:<ISO-8601 duration> (the first record at most that old)."),
    ConfigKey("share.isolation.level", _S, "read_uncommitted",
              "read_committed delivers only committed transactional records and none of an aborted transaction.",
              valid=("read_committed", "read_uncommitted")),
    ConfigKey("share.record.lock.duration.ms", _I, None,
              "How long a delivered record stays acquired before it is released again (ms).",
              at_least=1000, synonyms=(("group.share.record.lock.duration.ms", 1),)),
    ConfigKey("share.delivery.count.limit", _I, None,
              "Deliveries of one record before it is archived instead of released again.",
              synonyms=(("group.share.delivery.count.limit", 1),)),
    ConfigKey("share.partition.max.record.locks", _I, None,
              "Most in-flight records of one share partition.",
              synonyms=(("group.share.partition.max.record.locks", 1),)),
    ConfigKey("share.session.timeout.ms", _I, None,
              "Session timeout of the group's members (ms).",
              at_least=1, synonyms=(("group.share.session.timeout.ms", 1),)),
    ConfigKey("share.heartbeat.interval.ms", _I, None,
              "Heartbeat interval given to the group's members (ms).",
              at_least=1, synonyms=(("group.share.heartbeat.interval.ms", 1),)),
)
GROUP_KEYS: dict[str, ConfigKey] = index_keys(_GROUP_TABLE)


class TopicConfig:
    """Every per-topic key's effective, typed value for one topic: ``max.message.bytes`` is
    ``max_message_bytes``. Long.MAX_VALUE stays as it is (Kafka's "never"); lists are tuples.

    Immutable, made with every attribute by keyword, and compared by identity. A slotted class
    rather than a dataclass: a start makes this class, and a frozen dataclass of 24 fields compiles
    four methods to make it."""

    __slots__ = ("cleanup_policy", "compression_type", "delete_retention_ms", "file_delete_delay_ms", "flush_messages",
                 "flush_ms", "index_interval_bytes", "max_message_bytes", "message_downconversion_enable",
                 "message_timestamp_type", "message_timestamp_before_max_ms", "message_timestamp_after_max_ms",
                 "min_insync_replicas", "retention_bytes", "retention_ms", "segment_bytes", "segment_index_bytes",
                 "segment_ms", "segment_jitter_ms", "min_compaction_lag_ms", "max_compaction_lag_ms",
                 "min_cleanable_dirty_ratio", "unclean_leader_election_enable", "preallocate")

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

    def __init__(self, **values: Any) -> None:
        """``values``: every attribute by name, no more, no less."""
        if len(values) != len(TopicConfig.__slots__) or not values.keys() <= set(TopicConfig.__slots__):
            wrong = sorted(set(values).symmetric_difference(TopicConfig.__slots__))
            raise TypeError(f"TopicConfig takes every topic config and nothing else: {', '.join(wrong)}")
        for name in TopicConfig.__slots__:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in TopicConfig.__slots__)
        return f"TopicConfig({fields})"
