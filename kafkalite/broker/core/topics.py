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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalite.broker.core.partition import Partition
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

log = logging.getLogger("kafkalite.topics")

__all__ = ["Topic", "TopicError", "TopicManager", "validate_topic_name", "INTERNAL_TOPICS"]

_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_METADATA_FILE = "topics.json"


class TopicError(Exception):
    """A topic operation refused with a Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``)."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL_NAME.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)  # overrides only
    # Every topic config's typed effective value (override, else broker default), derived by
    # TopicManager whenever either changes, so the produce path reads a dict instead of parsing.
    effective: dict[str, Any] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicManager:
    """Every topic of the broker, by name and by id."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # lookups ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._by_name.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    # lifecycle -------------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild the topic table from ``topics.json`` and the logs the log manager found."""
        stored = self._read_metadata()
        found: dict[str, dict[int, object]] = {}
        ids: dict[str, uuid.UUID] = {}
        for (name, index), partition_log in self.cluster.log_manager.logs.items():
            found.setdefault(name, {})[index] = partition_log
        for name, topic_id in self.cluster.log_manager.topic_ids.items():
            ids[name] = topic_id
        for name, entry in stored.items():
            topic_id = uuid.UUID(entry["id"])
            topic = Topic(name, topic_id, configs=dict(entry.get("configs", {})))
            count = int(entry["partitions"])
            logs = found.pop(name, {})
            log_config = self.cluster.config.log_config(topic.configs)
            for index in range(count):
                partition_log = logs.get(index)
                if partition_log is None:
                    log.warning("topic %s partition %d had no log directory; starting it empty", name, index)
                    partition_log = self.cluster.log_manager.create_log(name, index, topic_id, log_config)
                topic.partitions.append(Partition(topic, index, partition_log, self.cluster.config))  # type: ignore[arg-type]
            self._add(topic)
        for name, logs in found.items():
            # Partition directories without a topics.json entry (a copied data dir, or a crash
            # between creating logs and writing the file): adopt them with default configs.
            topic_id = ids.get(name) or uuid.uuid4()
            topic = Topic(name, topic_id)
            count = max(logs) + 1
            for index in range(count):
                partition_log = logs.get(index) or self.cluster.log_manager.create_log(
                    name, index, topic_id, self.cluster.config.log_config())
                topic.partitions.append(Partition(topic, index, partition_log, self.cluster.config))  # type: ignore[arg-type]
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
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = self._colliding_name(name)
        if collision is not None:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{name}' collides with existing topic: {collision}")
        if num_partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        overrides = dict(configs or {})
        self.validate_configs(overrides)
        topic = Topic(name, topic_id or uuid.uuid4(), configs=overrides)
        if validate_only:
            return topic
        log_config = self.cluster.config.log_config(overrides)
        for index in range(num_partitions):
            partition_log = self.cluster.log_manager.create_log(name, index, topic.topic_id, log_config)
            topic.partitions.append(Partition(topic, index, partition_log, self.cluster.config))
        self._add(topic)
        self._write_metadata()
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def auto_create(self, name: str) -> Topic:
        """Create ``name`` with the broker defaults (Metadata / Produce auto-creation)."""
        return self.create(name, self.cluster.config.get_int("num.partitions"))

    def delete(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.cluster.config.get_bool("delete.topic.enable"):
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        for partition in topic.partitions:
            partition.close_waiters()
            self.cluster.log_manager.delete_log(name, partition.index)
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        self._write_metadata()
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        current = len(topic.partitions)
        if total < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {total}.")
        if total == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if validate_only:
            return topic
        log_config = self.cluster.config.log_config(topic.configs)
        for index in range(current, total):
            partition_log = self.cluster.log_manager.create_log(name, index, topic.topic_id, log_config)
            topic.partitions.append(Partition(topic, index, partition_log, self.cluster.config))
        self._write_metadata()
        log.info("topic %s now has %d partitions", name, total)
        return topic

    def set_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> Topic:
        """Replace a topic's overrides with ``configs`` (AlterConfigs and the incremental form)."""
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        overrides = dict(configs)
        self.validate_configs(overrides)
        if validate_only:
            return topic
        topic.configs = overrides
        self._apply_configs(topic)
        self._write_metadata()
        return topic

    def validate_configs(self, configs: Mapping[str, str]) -> None:
        from kafkalite.broker.config import ConfigError

        for key, value in configs.items():
            try:
                self.cluster.config.validate_topic_config(key, value)
            except ConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def refresh_log_configs(self) -> None:
        """Re-derive every topic's effective configs (after a broker default changed)."""
        for topic in self._by_name.values():
            self._apply_configs(topic)

    # internals -------------------------------------------------------------------------------
    def _add(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._apply_configs(topic)

    def _apply_configs(self, topic: Topic) -> None:
        """Derive a topic's effective configs and its partitions' log config from its overrides
        and the broker defaults: the one place a config change reaches the partitions."""
        topic.effective = self.cluster.config.effective_topic_config(topic.configs)
        log_config = self.cluster.config.log_config(topic.configs)
        for partition in topic.partitions:
            partition.log.update_config(log_config)

    def _colliding_name(self, name: str) -> str | None:
        """Kafka refuses names that differ only by '.' versus '_' (they collide in metric names)."""
        normalized = name.replace(".", "_")
        for existing in self._by_name:
            if existing.replace(".", "_") == normalized:
                return existing
        return None

    def _metadata_path(self) -> os.PathLike[str] | None:
        data_dir = self.cluster.data_dir
        return None if data_dir is None else data_dir / _METADATA_FILE

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
