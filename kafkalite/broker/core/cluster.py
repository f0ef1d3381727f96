"""The broker's state, in one object owned by the event loop.

``Cluster`` is what every handler reaches through ``RequestContext.cluster``: the configuration,
this node's identity and advertised address, the log manager, the topics, and (as they arrive)
the group and transaction coordinators. Nothing here touches sockets; ``broker.server`` opens
and closes it and calls ``periodic`` from a timer.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafkalite.broker.config import read_properties
from kafkalite.broker.core.fetch_sessions import FetchSessionCache
from kafkalite.broker.core.groups import GroupCoordinator
from kafkalite.broker.core.log_manager import LogManager
from kafkalite.broker.core.topics import TopicManager
from kafkalite.broker.core.transactions import TransactionCoordinator

if TYPE_CHECKING:
    from kafkalite.broker.config import BrokerConfig

log = logging.getLogger("kafkalite.cluster")

__all__ = ["Cluster", "Endpoint"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An advertised listener: what Metadata and FindCoordinator tell clients to connect to."""

    name: str  # "PLAINTEXT"
    host: str
    port: int


class Cluster:
    """All broker state. Touch it only from the event loop thread."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.get_int("node.id")
        data_dir = config.data_dir()
        self.data_dir: Path | None = data_dir
        self.cluster_id: str = ""
        self.endpoints: list[Endpoint] = []
        self.log_manager = LogManager(data_dir, config.log_config())
        self.topics = TopicManager(self)
        self.fetch_sessions = FetchSessionCache()
        self.group_coordinator = GroupCoordinator(self)
        self.transactions = TransactionCoordinator(self)

    @property
    def endpoint(self) -> Endpoint:
        """The first advertised listener (the one clients are sent to)."""
        return self.endpoints[0]

    def open(self) -> None:
        """Load the data directory: identity, logs, topics. Recovery happens here."""
        self.cluster_id = self._load_identity()
        self.log_manager.open()
        self.topics.load()
        self.group_coordinator.open()
        self.transactions.open()

    def close(self, clean: bool = True) -> None:
        self.group_coordinator.close()
        self.transactions.close(clean=clean)
        self.log_manager.close(clean=clean)

    def periodic(self, now_ms: int) -> None:
        """Timer work: retention, time-based segment rolls, time-based flushes."""
        self.log_manager.run_periodic(now_ms)
        self.group_coordinator.periodic(now_ms)
        self.transactions.periodic(now_ms)

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
