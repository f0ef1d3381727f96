"""The composition root: builds the broker's state rooms and wires each to the few others it uses.

``Cluster`` is what every handler reaches through ``RequestContext.cluster``: the configuration,
this node's identity and advertised address, and the managers, each built here with exactly its
collaborators (nothing below this module imports it):

* ``log_manager`` (``log.manager.LogManager``): every partition log of the data directory;
* ``topics`` (``topics.TopicManager``): topics and their partitions, on the log manager;
* ``log_cleaner`` (``log_cleaner.LogCleaner``): compaction of the partitions of compacted topics,
  in slices the server runs between requests;
* ``fetch_sessions`` (``fetch_sessions.FetchSessionCache``): incremental fetch sessions;
* ``group_coordinator`` (``group.coordinator.GroupCoordinator``): groups and committed offsets,
  written to ``__consumer_offsets`` (``offsets_log``); it tells ``share_partitions`` what share group
  membership changes mean to delivery;
* ``share_partitions`` (``share.manager.SharePartitionManager``): share partitions and share sessions
  of share groups (KIP-932), written to ``__share_group_state`` (``share_state_log``), with each
  group's configs from ``dynamic_configs``;
* ``transactions`` (``txn.coordinator.TransactionCoordinator``): producer ids and transactions,
  written to ``__transaction_state`` (``transaction_log``); it tells the group coordinator when a
  transaction's offsets commit or abort;
* the partitions' producer state, kept here: idle producers are forgotten every
  ``producer.id.expiration.check.interval.ms`` and a clean ``close`` snapshots every partition's
  producer state, whether or not a transaction coordinator was ever built;
* ``dynamic_configs`` (``dynamic_configs.DynamicConfigs``): dynamic broker configs, client-metrics
  subscriptions and group configs, kept in the data directory; a broker config change calls
  ``broker_config_changed``;
* ``scram_credentials`` and ``acls`` (``kafkalite.broker.security``): users' SCRAM credentials and the
  ACL bindings, each kept in a file of the data directory.

Built when first used: the group coordinator, the share partitions, the transaction coordinator,
the SCRAM credentials, the ACLs, the fetch session cache (the first Fetch) and the log cleaner (its
first slice, which the server runs a moment after it listens), with their modules, so that a broker
answers its first requests without loading rooms no client has used yet. ``open`` builds the group
coordinator, the share partitions and the transaction coordinator at once when their internal topic
exists (the transaction coordinator also when ``producer-id-block`` does), so what was stored is
read, replayed (a prepared transaction completed) and its timers armed at start, with the same
warnings, as before; without them there is nothing to read or replay and no timer to arm, and the
first request that reaches one builds it (empty) then: the transaction coordinator is built by the
first InitProducerId, transactional request or transactional batch to verify, and then reserves
producer ids above every one the partitions still remember, as it did at start. ``periodic`` and
``close`` leave alone what was never built.

Nothing here touches sockets; ``kafkalite.broker.server`` opens and closes it and calls ``periodic``
from a timer. Settings that requests read on every call are resolved here once (``flush_on_ack``,
``fetch_max_bytes``, ``verify_transactions``); a dynamic broker config change calls
``broker_config_changed``, which resolves what may change again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kafkalite.broker.config import BrokerConfig, read_properties
from kafkalite.broker.core.coordinator_log import (
    OFFSETS_TOPIC,
    PRODUCER_ID_FILE,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorLog,
)
from kafkalite.broker.core.dynamic_configs import DynamicConfigs
from kafkalite.broker.core.log.files import OpenFiles
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.topics import TopicManager, log_config
from kafkalite.broker.limits import segment_file_budget

if TYPE_CHECKING:
    from kafkalite.broker.core.fetch_sessions import FetchSessionCache
    from kafkalite.broker.core.group.coordinator import GroupCoordinator
    from kafkalite.broker.core.group.share_rebalance import ShareStateListener
    from kafkalite.broker.core.group.store import GroupSettings
    from kafkalite.broker.core.group.timers import Timers
    from kafkalite.broker.core.log_cleaner import LogCleaner
    from kafkalite.broker.core.partition import Partition
    from kafkalite.broker.core.share.config import ShareSettings
    from kafkalite.broker.core.share.manager import SharePartitionManager
    from kafkalite.broker.core.txn.coordinator import TransactionCoordinator
    from kafkalite.broker.security.acls import AclStore
    from kafkalite.broker.security.scram import ScramCredentials
    from kafkalite.protocol.errors import ErrorCode

log = logging.getLogger("kafkalite.cluster")

__all__ = ["Cluster", "Endpoint"]


class Endpoint:
    """An advertised listener: what Metadata and FindCoordinator tell clients to connect to."""

    __slots__ = ("name", "host", "port")

    name: Final[str]
    host: Final[str]
    port: Final[int]

    def __init__(self, name: str, host: str, port: int) -> None:
        self.name = name  # "PLAINTEXT"
        self.host = host
        self.port = port


class Cluster:
    """All broker state. Touch it only from the event loop thread."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.get_int("node.id")
        data_dir = config.data_dir()
        self.data_dir: Path | None = data_dir
        self.cluster_id: str = ""
        self.endpoints: list[Endpoint] = []
        self.flush_on_ack = config.get_bool("log.flush.on.ack")
        self.fetch_max_bytes = config.get_int("fetch.max.bytes")
        self.verify_transactions = config.get_bool("transaction.partition.verification.enable")
        self.log_dirs: list[Path] = config.log_dirs()
        self._opened = False  # open() has run: a manager built from now on replays its state as it is built
        self.log_manager = LogManager(data_dir, log_config(config.topic_settings()), extra_dirs=self.log_dirs[1:],
                                      retention_check_interval_ms=config.get_int("log.retention.check.interval.ms"),
                                      initial_task_delay_ms=config.get_int("log.initial.task.delay.ms"),
                                      files=OpenFiles(segment_file_budget()))
        self.topics = TopicManager(self.log_manager, config, data_dir)
        self.offsets_log = CoordinatorLog(self.topics, OFFSETS_TOPIC, config.get_int("offsets.topic.num.partitions"),
                                          config.get_int("offsets.topic.segment.bytes"))
        self.transaction_log = CoordinatorLog(self.topics, TRANSACTION_STATE_TOPIC,
                                              config.get_int("transaction.state.log.num.partitions"),
                                              config.get_int("transaction.state.log.segment.bytes"))
        self._producer_expiration_ms = self._producers_check_interval_ms = 0  # (broker_config_changed)
        self._producers_checked_ms = 0  # when idle producers were last looked for
        self.dynamic_configs = DynamicConfigs(config, self.node_id, data_dir, self.broker_config_changed)

    # built when first used (see the module docstring) -----------------------------------------
    @cached_property
    def fetch_sessions(self) -> FetchSessionCache:
        from kafkalite.broker.core.fetch_sessions import FetchSessionCache

        return FetchSessionCache(self.config.get_int("max.incremental.fetch.session.cache.slots"))

    @cached_property
    def log_cleaner(self) -> LogCleaner:
        from kafkalite.broker.core.log_cleaner import CleanerSettings, LogCleaner

        return LogCleaner(self.topics, self.log_manager, self.config.settings(CleanerSettings))

    @cached_property
    def group_coordinator(self) -> GroupCoordinator:
        coordinator = self.build_group_coordinator()
        if self._opened:
            coordinator.open()
        return coordinator

    @cached_property
    def transactions(self) -> TransactionCoordinator:
        coordinator = self.build_transaction_coordinator()
        if self._opened:
            coordinator.open()
        return coordinator

    def verify_transaction(self, producer_id: int, producer_epoch: int, partition: Partition) -> ErrorCode:
        """May a transaction's first batch land in ``partition``? (the transaction coordinator's
        ``verify_partition``, for Produce: a broker no transactional producer has used yet builds the
        coordinator only when a transactional batch arrives.)"""
        return self.transactions.verify_partition(producer_id, producer_epoch, partition)

    @cached_property
    def share_state_log(self) -> CoordinatorLog:
        """``__share_group_state``, as the share settings shape it."""
        from kafkalite.broker.core.share.config import ShareSettings

        share_settings = self.config.settings(ShareSettings)
        return CoordinatorLog(self.topics, SHARE_GROUP_STATE_TOPIC, share_settings.state_topic_partitions,
                              share_settings.state_topic_segment_bytes)

    @cached_property
    def share_partitions(self) -> SharePartitionManager:
        manager = self.build_share_partition_manager()
        if self._opened:
            manager.open()
        return manager

    @cached_property
    def scram_credentials(self) -> ScramCredentials:
        """Users' SCRAM credentials (scram-credentials.json)."""
        from kafkalite.broker.security.scram import ScramCredentials

        credentials = ScramCredentials(self.data_dir)
        credentials.load()
        return credentials

    @cached_property
    def acls(self) -> AclStore:
        """The ACL bindings (acls.json)."""
        from kafkalite.broker.security.acls import AclStore

        store = AclStore(self.data_dir)
        store.load()
        return store

    def _built(self, name: str) -> bool:
        """Whether the manager ``name`` (a cached property above) was built."""
        return name in self.__dict__

    def build_group_coordinator(self, timers: Timers | None = None, settings: GroupSettings | None = None,
                                share_state: ShareStateListener | None = None) -> GroupCoordinator:
        """A group coordinator on this cluster's topics, telling ``share_partitions`` about share group
        membership (tests pass a manual clock, settings and another share-state listener)."""
        from kafkalite.broker.core.group.coordinator import GroupCoordinator
        from kafkalite.broker.core.group.store import GroupSettings

        if share_state is None:
            share_state = _ShareStateOf(lambda: self.share_partitions)
        return GroupCoordinator(self.topics, self.offsets_log,
                                settings if settings is not None else self.config.settings(GroupSettings), timers,
                                share_state)

    def build_share_partition_manager(self, timers: Timers | None = None,
                                      settings: ShareSettings | None = None) -> SharePartitionManager:
        """Share partitions on this cluster's topics, with each group's configs from ``dynamic_configs``
        (tests pass a manual clock and settings)."""
        from kafkalite.broker.core.share.config import ShareSettings
        from kafkalite.broker.core.share.manager import SharePartitionManager

        return SharePartitionManager(self.topics, self.share_state_log,
                                     settings if settings is not None else self.config.settings(ShareSettings),
                                     lambda group_id: self.dynamic_configs.group_configs(group_id), timers)

    def build_transaction_coordinator(self, *, clock: Callable[[], int] | None = None,
                                      schedule: Callable[[Callable[[], None]], None] | None = None
                                      ) -> TransactionCoordinator:
        """A transaction coordinator on this cluster's topics, telling ``group_coordinator`` about
        transactional offsets (tests pass a manual clock and marker scheduler)."""
        from kafkalite.broker.core.txn.coordinator import TransactionCoordinator, TransactionSettings
        from kafkalite.broker.core.txn.producer_ids import ProducerIdAllocator

        return TransactionCoordinator(self.topics, self.transaction_log, ProducerIdAllocator(self.data_dir),
                                      self.config.settings(TransactionSettings), offsets_log=self.offsets_log,
                                      complete_offsets=lambda producer_id, commit: self.group_coordinator
                                      .complete_transaction(producer_id, commit),
                                      clock=clock, schedule=schedule)

    @property
    def endpoint(self) -> Endpoint:
        """The first advertised listener."""
        return self.endpoints[0]

    def endpoint_for(self, listener_name: str) -> Endpoint:
        """What a client that connected to ``listener_name`` is told to connect to: that listener's
        advertised address, as Kafka answers (the first one when the name is unknown or empty)."""
        for endpoint in self.endpoints:
            if endpoint.name == listener_name:
                return endpoint
        return self.endpoints[0]

    def open(self) -> None:
        """Load the data directory: identity, logs, topics, and replay the internal topics that exist.
        Recovery happens here."""
        self.cluster_id = self._load_identity()
        self.dynamic_configs.load()
        self.broker_config_changed()
        self.log_manager.open()
        self.topics.load()
        self._producers_checked_ms = int(time.time() * 1000)
        self._opened = True
        if self._built("share_partitions"):
            self.share_partitions.open()
        elif self.topics.get(SHARE_GROUP_STATE_TOPIC) is not None:
            _ = self.share_partitions  # built and replayed now
        if self._built("group_coordinator"):
            self.group_coordinator.open()
        elif self.topics.get(OFFSETS_TOPIC) is not None:
            _ = self.group_coordinator
        if self._built("transactions"):
            self.transactions.open()
        elif self.topics.get(TRANSACTION_STATE_TOPIC) is not None or (
                self.data_dir is not None and (self.data_dir / PRODUCER_ID_FILE).exists()):
            _ = self.transactions  # built, its producer ids read and its log replayed now

    def stop_log_cleaner(self) -> None:
        """Stop compacting (nothing to do when no cleaning ever ran)."""
        if self._built("log_cleaner"):
            self.log_cleaner.stop()

    def close(self, clean: bool = True) -> None:
        self.stop_log_cleaner()
        if self._built("group_coordinator"):
            self.group_coordinator.close()
        if self._built("share_partitions"):
            self.share_partitions.close()
        if clean:  # the next start replays no producer state
            for partition in self.topics.partitions():
                try:
                    partition.snapshot_producer_state()
                except OSError as exc:
                    log.warning("%s: could not write a producer state snapshot: %s", partition, exc)
        self.log_manager.close(clean=clean)

    def broker_config_changed(self) -> None:
        """A dynamic broker config changed: re-derive what was resolved from it."""
        self.log_manager.default_config = log_config(self.config.topic_settings())
        self.topics.refresh_settings()
        if self._built("transactions"):
            from kafkalite.broker.core.txn.coordinator import TransactionSettings

            self.transactions.settings = self.config.settings(TransactionSettings)
        self._producer_expiration_ms = self.config.get_int("producer.id.expiration.ms")
        self._producers_check_interval_ms = self.config.get_int("producer.id.expiration.check.interval.ms")
        if self._built("log_cleaner"):
            from kafkalite.broker.core.log_cleaner import CleanerSettings

            self.log_cleaner.settings = self.config.settings(CleanerSettings)
        self.verify_transactions = self.config.get_bool("transaction.partition.verification.enable")

    def periodic_interval_ms(self) -> int:
        """How often ``periodic`` should run: every second, or more often when the retention check
        interval or initial delay is shorter (tests that want fast retention set them so)."""
        delays = [1000, self.log_manager.retention_check_interval_ms]
        if self.log_manager.initial_task_delay_ms > 0:
            delays.append(self.log_manager.initial_task_delay_ms)
        return max(1, min(delays))

    def periodic(self, now_ms: int) -> None:
        """Timer work: retention (when its check is due), time-based segment rolls and flushes, group,
        share-partition and transaction timers, and forgetting idle producers."""
        self.log_manager.run_periodic(now_ms)
        if self._built("group_coordinator"):
            self.group_coordinator.periodic(now_ms)
        if self._built("share_partitions"):
            self.share_partitions.periodic(now_ms)
        if self._built("transactions"):
            self.transactions.periodic(now_ms)
        if now_ms - self._producers_checked_ms >= self._producers_check_interval_ms:
            self._producers_checked_ms = now_ms
            for partition in self.topics.partitions():
                partition.remove_expired_producers(now_ms, self._producer_expiration_ms)

    # identity --------------------------------------------------------------------------------
    def _load_identity(self) -> str:
        """The cluster id from ``meta.properties`` (Kafka's file), created on first start."""
        if self.data_dir is None:
            return _new_cluster_id()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "meta.properties"
        if path.exists():
            values = read_properties(path)
            stored_node = values.get("node.id")
            if stored_node is not None and int(stored_node) != self.node_id:
                log.warning("meta.properties has node.id=%s, configured %s; using the configured id",
                            stored_node, self.node_id)
            if values.get("cluster.id"):
                return values["cluster.id"]
        cluster_id = _new_cluster_id()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n", encoding="utf-8")
        tmp.replace(path)
        return cluster_id


def _new_cluster_id() -> str:
    """A random cluster id in Kafka's form: a UUID in URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class _ShareStateOf:
    """The group coordinator's ``ShareStateListener``: the cluster's share partitions, built on the first
    call (only share groups make one)."""

    __slots__ = ("_listener",)

    def __init__(self, listener: Callable[[], ShareStateListener]) -> None:
        self._listener = listener

    def initialize(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> None:
        self._listener().initialize(group_id, partitions)

    def member_fenced(self, group_id: str, member_id: str) -> None:
        self._listener().member_fenced(group_id, member_id)

    def group_deleted(self, group_id: str) -> None:
        self._listener().group_deleted(group_id)

    def group_timeouts(self, group_id: str) -> tuple[int, int]:
        return self._listener().group_timeouts(group_id)
