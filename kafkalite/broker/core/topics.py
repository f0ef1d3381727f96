"""Topics: names, ids, partition counts and per-topic configuration.

A topic is a name, a UUID (Kafka's topic id, KIP-516), its partitions and its configuration
overrides. Partition logs live in the log manager; which topics exist, with which id and which
overrides, is kept in ``topics.json`` at the root of the data directory (written atomically on
every change) and cross-checked against the ``partition.metadata`` files of the partition
directories on start. With in-memory storage nothing is written.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path

from kafkalite.broker.config import LONG_MAX, BrokerConfig, TopicConfig
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.log.partition_log import LogConfig, PartitionLog
from kafkalite.broker.core.partition import Partition
from kafkalite.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkalite.topics")

__all__ = ["INTERNAL_TOPICS", "Topic", "TopicManager", "log_config", "validate_topic_name"]

_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})  # coordinator_log's
_METADATA_FILE = "topics.json"


def _storage_error(what: str, exc: OSError) -> KafkaError:
    """A file-system failure while changing topics: one log line, and KAFKA_STORAGE_ERROR for the client."""
    log.error("%s: %s", what, exc)
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc.strerror or exc}")


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``)."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL_NAME.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def log_config(settings: TopicConfig) -> LogConfig:
    """The storage layer's settings for a topic with these effective configs."""
    return LogConfig(
        segment_bytes=settings.segment_bytes,
        segment_ms=settings.segment_ms,
        retention_ms=settings.retention_ms,
        retention_bytes=settings.retention_bytes,
        index_interval_bytes=settings.index_interval_bytes,
        segment_index_bytes=settings.segment_index_bytes,
        flush_messages=None if settings.flush_messages == LONG_MAX else settings.flush_messages,  # Kafka's "never"
        flush_ms=None if settings.flush_ms == LONG_MAX else settings.flush_ms,
        cleanup_policy=",".join(settings.cleanup_policy),
        file_delete_delay_ms=settings.file_delete_delay_ms,
        delete_retention_ms=settings.delete_retention_ms,
        min_compaction_lag_ms=settings.min_compaction_lag_ms,
        max_compaction_lag_ms=settings.max_compaction_lag_ms,
        min_cleanable_dirty_ratio=settings.min_cleanable_dirty_ratio,
    )


class Topic:
    """A topic: its id, effective configs and overrides, and its partitions."""

    __slots__ = ("name", "topic_id", "settings", "partitions", "configs", "answers")

    def __init__(self, name: str, topic_id: uuid.UUID, settings: TopicConfig, partitions: list[Partition] | None = None,
                 configs: dict[str, str] | None = None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.settings = settings  # every topic config's effective value (the override, else the broker default)
        self.partitions: list[Partition] = [] if partitions is None else partitions
        self.configs: dict[str, str] = {} if configs is None else configs  # the overrides only
        # Answers derived from the topic's partitions (the Metadata handler's encoded topic, by version and
        # the like): dropped whenever partitions are added or removed. Leader epochs never change here.
        self.answers: dict[Hashable, object] = {}

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicManager:
    """Every topic of the broker, by name and by id.

    ``data_dir`` holds ``topics.json`` (None: in memory); ``config`` gives the broker defaults of the
    topic configs, ``num.partitions``, ``delete.topic.enable`` and ``producer.id.expiration.ms``.
    """

    def __init__(self, log_manager: LogManager, config: BrokerConfig, data_dir: Path | None) -> None:
        self.log_manager = log_manager
        self.config = config
        self.data_dir = data_dir
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # lookups ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def partitions(self) -> Iterator[Partition]:
        """Every partition of every topic (internal ones included)."""
        for topic in self:
            yield from topic.partitions

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def name_of(self, topic_id: uuid.UUID) -> str:
        """The name of the topic with this id ("" when there is none)."""
        topic = self._by_id.get(topic_id)
        return "" if topic is None else topic.name

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._by_name.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    # lifecycle -------------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild the topic table from ``topics.json`` and the logs the log manager found."""
        stored = self._read_metadata()
        found: dict[str, dict[int, PartitionLog]] = {}
        for (name, index), partition_log in self.log_manager.logs.items():
            found.setdefault(name, {})[index] = partition_log
        for name, entry in stored.items():
            configs = entry.get("configs", {})
            overrides = {str(key): str(value) for key, value in configs.items()} if isinstance(configs, dict) else {}
            topic = self._new_topic(name, uuid.UUID(str(entry["id"])), overrides)
            logs = found.pop(name, {})
            for index in range(int(str(entry["partitions"]))):
                stored_log = logs.get(index)
                if stored_log is None:
                    log.warning("topic %s partition %d had no log directory; starting it empty", name, index)
                self._add_partition(topic, stored_log)
            self._add(topic)
        for name, logs in found.items():
            # Partition directories without a topics.json entry (a copied data dir, or a crash
            # between creating logs and writing the file): adopt them with default configs.
            topic = self._new_topic(name, self.log_manager.topic_ids.get(name) or uuid.uuid4(), {})
            count = max(logs) + 1
            for index in range(count):
                self._add_partition(topic, logs.get(index))
            log.info("adopted topic %s (%d partitions) found on disk", name, count)
            self._add(topic)
        if found:
            self._write_metadata()

    def create(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> Topic:
        """Create a topic (or only check that it could be created)."""
        validate_topic_name(name)
        if name in self._by_name:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = self._colliding_name(name)
        if collision is not None:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {collision}")
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        overrides = dict(configs or {})
        self.validate_configs(overrides)
        topic = self._new_topic(name, topic_id or uuid.uuid4(), overrides)
        if validate_only:
            return topic
        try:
            for _ in range(num_partitions):
                self._add_partition(topic)
            self._add(topic)
            self._write_metadata()
        except OSError as exc:  # a full disk, no descriptor left...: nothing of the topic stays
            self._forget_partitions(topic, 0)
            self._by_name.pop(name, None)
            self._by_id.pop(topic.topic_id, None)
            raise _storage_error(f"cannot create topic {name}", exc) from None
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def auto_create(self, name: str) -> Topic:
        """Create ``name`` with the broker defaults (Metadata / Produce auto-creation)."""
        return self.create(name, self.config.get_int("num.partitions"))

    def delete(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.config.get_bool("delete.topic.enable"):
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        try:  # the topic leaves topics.json first: if that fails, nothing changed
            self._write_metadata()
        except OSError as exc:
            self._by_name[name] = topic
            self._by_id[topic.topic_id] = topic
            raise _storage_error(f"cannot delete topic {name}", exc) from None
        for partition in topic.partitions:
            partition.close_waiters()
            self.log_manager.delete_log(name, partition.index)
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = len(topic.partitions)
        if total < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {total}.")
        if total == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if validate_only:
            return topic
        try:
            for _ in range(current, total):
                self._add_partition(topic)
            self._write_metadata()
        except OSError as exc:
            self._forget_partitions(topic, current)
            raise _storage_error(f"cannot add partitions to topic {name}", exc) from None
        log.info("topic %s now has %d partitions", name, total)
        return topic

    def set_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> Topic:
        """Replace a topic's overrides with ``configs`` (AlterConfigs and the incremental form)."""
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        overrides = dict(configs)
        self.validate_configs(overrides)
        if validate_only:
            return topic
        previous = topic.configs
        topic.configs = overrides
        try:
            self._write_metadata()
        except OSError as exc:
            topic.configs = previous
            raise _storage_error(f"cannot change the configs of topic {name}", exc) from None
        self._apply_configs(topic)
        return topic

    def move_partition(self, name: str, index: int, log_dir: Path) -> None:
        """Move a partition's log to another log directory (AlterReplicaLogDirs); its producer state
        snapshots move with it."""
        partition = self.partition(name, index)
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        try:
            moved = self.log_manager.move_log(name, index, log_dir)
        except OSError:
            reopened = self.log_manager.get_log(name, index)
            if reopened is not None:
                partition.log = reopened
                reopened.on_log_start_moved = partition.offsets_moved
            raise
        partition.log = moved
        moved.on_log_start_moved = partition.offsets_moved
        partition.producer_state.directory = moved.directory

    def validate_configs(self, configs: Mapping[str, str]) -> None:
        """Raise ``ConfigError`` (INVALID_CONFIG) for an unknown key or a bad value."""
        for key, value in configs.items():
            self.config.validate_topic_config(key, value)

    def refresh_settings(self) -> None:
        """Re-derive every topic's effective configs (after a broker default changed)."""
        for topic in self._by_name.values():
            self._apply_configs(topic)

    # internals -------------------------------------------------------------------------------
    def _new_topic(self, name: str, topic_id: uuid.UUID, overrides: dict[str, str]) -> Topic:
        return Topic(name, topic_id, self.config.topic_settings(overrides), configs=overrides)

    def _add_partition(self, topic: Topic, partition_log: PartitionLog | None = None) -> Partition:
        """The topic's next partition, on ``partition_log`` (a new log when None)."""
        index = len(topic.partitions)
        if partition_log is None:
            partition_log = self.log_manager.create_log(topic.name, index, topic.topic_id, log_config(topic.settings))
        partition = Partition(topic.name, index, partition_log, topic.settings,
                              producer_id_expiration_ms=self.config.get_int("producer.id.expiration.ms"),
                              background=self.log_manager.background)
        topic.partitions.append(partition)
        topic.answers.clear()
        return partition

    def _forget_partitions(self, topic: Topic, keep: int) -> None:
        """Undo a creation that failed half-way: the topic's partitions from ``keep`` on, and their logs."""
        for partition in topic.partitions[keep:]:
            try:
                self.log_manager.delete_log(topic.name, partition.index)
            except OSError as exc:  # its directory stays: a restart finds it and says so
                log.error("cannot remove partition %s-%d after a failed creation: %s", topic.name, partition.index, exc)
        del topic.partitions[keep:]
        topic.answers.clear()

    def _add(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._apply_configs(topic)

    def _apply_configs(self, topic: Topic) -> None:
        """Derive a topic's effective configs and its partitions' log config from its overrides
        and the broker defaults: the one place a config change reaches the partitions."""
        topic.settings = self.config.topic_settings(topic.configs)
        storage = log_config(topic.settings)
        for partition in topic.partitions:
            partition.settings = topic.settings
            partition.log.update_config(storage)

    def _colliding_name(self, name: str) -> str | None:
        """Kafka refuses names that differ only by '.' versus '_' (they collide in metric names)."""
        normalized = name.replace(".", "_")
        for existing in self._by_name:
            if existing.replace(".", "_") == normalized:
                return existing
        return None

    def _metadata_path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / _METADATA_FILE

    def _read_metadata(self) -> dict[str, dict[str, object]]:
        path = self._metadata_path()
        if path is None or not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
        return dict(content.get("topics", {}))

    def _write_metadata(self) -> None:
        path = self._metadata_path()
        if path is None:
            return
        content = {
            "version": 1,
            "topics": {
                topic.name: {"id": str(topic.topic_id), "partitions": len(topic.partitions), "configs": topic.configs}
                for topic in self._by_name.values()
            },
        }
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
