"""Dynamic configs that belong to no topic: the broker's, the client-metrics subscriptions and the groups'.

AlterConfigs and IncrementalAlterConfigs on a BROKER resource change this node's dynamic broker
configs (resource name: the node id) or the cluster-wide defaults (resource name ""); the checks
and the precedence are ``BrokerConfig``'s (``alter_dynamic``), and ``on_broker_change`` tells the
cluster to re-derive what it resolved from them. On a CLIENT_METRICS resource they create, change or
delete a client-metrics subscription (KIP-714): ``metrics`` (metric name prefixes, ``*`` for all),
``interval.ms`` (push interval, 100 ms to 1 hour) and ``match`` (``<selector>=<regex>`` items), checked
as Kafka checks them; a subscription whose last key is deleted no longer exists. On a GROUP
resource they set a group's configs (``GROUP_KEYS``, checked by the caller), whether or not the
group exists yet; a group that unsets its last key has none.

A broker change is also offered to the ``reconfigurables`` (the TLS listeners' key stores): each one
checks the new values before anything is stored, and a ConfigError from it refuses the change, which
is then undone; once the change is stored, each applies what it prepared.

All three kinds survive a restart, as Kafka keeps them in its metadata log: every change is written to
``<data dir>/dynamic-configs.json`` atomically (a temporary file is written and fsynced, renamed over
the old one, and the directory fsynced), and ``load`` reads it back at start-up. Without a data
directory (``log.storage=memory``) they live as long as the process. The file holds the strings as
they were set::

    {"version": 1,
     "broker": {"": {cluster-wide defaults}, "<node id>": {this node's values}},
     "client_metrics": {"<subscription>": {"metrics": "...", "interval.ms": "...", "match": "..."}},
     "groups": {"<group id>": {"share.auto.offset.reset": "earliest", ...}}}
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Protocol

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.durable import write_durably as _write_atomically
from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["CLIENT_METRICS_KEYS", "DYNAMIC_CONFIGS_FILE", "DynamicConfigs", "Reconfigurable", "check_client_metrics"]

log = logging.getLogger("kafkalite.dynamic_configs")

DYNAMIC_CONFIGS_FILE: Final = "dynamic-configs.json"
_FORMAT_VERSION: Final = 1

# The keys of a client-metrics subscription: name -> whether it is a comma-separated list.
CLIENT_METRICS_KEYS: Final = {"metrics": True, "interval.ms": False, "match": True}
_MATCH_SELECTORS: Final = frozenset({"client_instance_id", "client_id", "client_software_name",
                                     "client_software_version", "client_source_address", "client_source_port"})
_INTERVAL_BOUNDS: Final = (100, 3_600_000)


class Reconfigurable(Protocol):
    """Something built from broker configs that a dynamic change may rebuild (Kafka's Reconfigurable)."""

    def prepare_reconfiguration(self) -> Callable[[], None] | None:
        """Check the config as it now reads (ConfigError refuses the change); what applies it, if anything."""
        ...


class DynamicConfigs:
    """The broker's dynamic configs and the client-metrics subscriptions, kept in the data directory."""

    def __init__(self, config: BrokerConfig, node_id: int, data_dir: Path | None,
                 on_broker_change: Callable[[], None]) -> None:
        self.config = config
        self.node_id = node_id
        self.path = None if data_dir is None else data_dir / DYNAMIC_CONFIGS_FILE
        self._on_broker_change = on_broker_change
        self._client_metrics: dict[str, dict[str, str]] = {}
        self._groups: dict[str, dict[str, str]] = {}
        self.reconfigurables: list[Reconfigurable] = []

    def load(self) -> None:
        """Install what the file holds (at start-up, before topics derive their settings)."""
        if self.path is None or not self.path.exists():
            return
        try:
            content = json.loads(self.path.read_text(encoding="utf-8"))
            broker = content.get("broker", {})
            client_metrics = content.get("client_metrics", {})
            groups = content.get("groups", {})
        except (OSError, ValueError, AttributeError) as exc:
            log.error("cannot read %s, starting without dynamic configs: %s", self.path, exc)
            return
        self.config.load_dynamic(_strings(broker.get("", {})), cluster_default=True)
        self.config.load_dynamic(_strings(broker.get(str(self.node_id), {})))
        self._client_metrics = {str(name): _strings(values) for name, values in client_metrics.items() if values}
        self._groups = {str(name): _strings(values) for name, values in groups.items() if values}
        log.info("loaded dynamic configs from %s", self.path)

    # broker ----------------------------------------------------------------------------------
    def broker_configs(self, cluster_default: bool) -> dict[str, str]:
        """The dynamic values of this node, or the cluster-wide defaults, as they were set."""
        return self.config.dynamic_configs(cluster_default)

    def alter_broker(self, changes: Mapping[str, str | None], *, cluster_default: bool, validate_only: bool,
                     replace: bool = False) -> None:
        """Change dynamic broker configs (None deletes; ``replace``: the given values become the
        whole set, as legacy AlterConfigs does). Raises ``ConfigError`` with Kafka's code and message."""
        previous = self.config.dynamic_configs(cluster_default)
        if replace:
            changes = {**dict.fromkeys(previous), **changes}
        back = {key: previous.get(key) for key in {*changes, *previous}}
        self.config.alter_dynamic(changes, cluster_default=cluster_default, validate_only=validate_only)
        appliers = []
        if self.reconfigurables:
            if validate_only:  # tried on the config, then undone
                self.config.alter_dynamic(changes, cluster_default=cluster_default, validate_only=False)
            try:
                appliers = [reconfigurable.prepare_reconfiguration() for reconfigurable in self.reconfigurables]
            except KafkaError:
                if not validate_only:
                    self.config.alter_dynamic(back, cluster_default=cluster_default, validate_only=False)
                raise
            finally:
                if validate_only:
                    self.config.alter_dynamic(back, cluster_default=cluster_default, validate_only=False)
        if validate_only:
            return
        try:
            self._save()
        except KafkaError:
            self.config.alter_dynamic(back, cluster_default=cluster_default, validate_only=False)
            raise
        for apply in appliers:
            if apply is not None:
                apply()
        self._on_broker_change()

    # client metrics --------------------------------------------------------------------------
    def client_metrics_names(self) -> list[str]:
        """The subscriptions that exist, by name."""
        return sorted(self._client_metrics)

    def client_metrics(self, name: str) -> dict[str, str]:
        """A subscription's keys as set (empty when there is no such subscription)."""
        return dict(self._client_metrics.get(name, {}))

    def set_client_metrics(self, name: str, values: Mapping[str, str], *, validate_only: bool) -> None:
        """Make ``values`` the whole set of a subscription (none left deletes it), after Kafka's checks."""
        check_client_metrics(name, values)
        if validate_only:
            return
        previous = self._client_metrics.get(name)
        if values:
            self._client_metrics[name] = dict(values)
        else:
            self._client_metrics.pop(name, None)
        try:
            self._save()
        except KafkaError:
            self._restore(self._client_metrics, name, previous)
            raise

    # groups ----------------------------------------------------------------------------------
    def group_configs(self, group_id: str) -> dict[str, str]:
        """A group's configs as set (empty when it set none)."""
        return dict(self._groups.get(group_id, {}))

    def set_group_configs(self, group_id: str, values: Mapping[str, str]) -> None:
        """Make ``values`` the whole set of a group's configs (checked by the caller; none left deletes them)."""
        previous = self._groups.get(group_id)
        if values:
            self._groups[group_id] = dict(values)
        else:
            self._groups.pop(group_id, None)
        try:
            self._save()
        except KafkaError:
            self._restore(self._groups, group_id, previous)
            raise

    # the file --------------------------------------------------------------------------------
    @staticmethod
    def _restore(table: dict[str, dict[str, str]], name: str, previous: dict[str, str] | None) -> None:
        if previous is None:
            table.pop(name, None)
        else:
            table[name] = previous

    def _save(self) -> None:
        """Write the file; a write the disk refuses is KAFKA_STORAGE_ERROR (the caller undoes its change)."""
        if self.path is None:
            return
        content = {
            "version": _FORMAT_VERSION,
            "broker": {"": self.config.dynamic_configs(cluster_default=True),
                       str(self.node_id): self.config.dynamic_configs()},
            "client_metrics": self._client_metrics,
            "groups": self._groups,
        }
        try:
            _write_atomically(self.path, json.dumps(content, indent=1, sort_keys=True).encode("utf-8"))
        except OSError as exc:
            log.error("cannot write %s, the change is not made: %s", self.path, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"the dynamic configs could not be written: {exc}") from None


def check_client_metrics(name: str, values: Mapping[str, str]) -> None:
    """Kafka's checks of a client-metrics subscription; KafkaError with Kafka's code and message."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in values:
        if key not in CLIENT_METRICS_KEYS:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval = values.get("interval.ms")
    if interval is not None:
        try:
            milliseconds = int(interval.strip())
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {interval} for configuration interval.ms: Not a number of type INT"
                             ) from None
        if not _INTERVAL_BOUNDS[0] <= milliseconds <= _INTERVAL_BOUNDS[1]:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid value {milliseconds} for interval.ms, interval must be between 100 and "
                             "3600000 (1 hour)")
    for pattern in _items(values.get("match", "")):
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in _MATCH_SELECTORS or not _compiles(parts[1].strip()):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _compiles(expression: str) -> bool:
    try:
        re.compile(expression)
    except re.error:
        return False
    return True


def _strings(values: object) -> dict[str, str]:
    return {str(key): str(value) for key, value in values.items()} if isinstance(values, dict) else {}


