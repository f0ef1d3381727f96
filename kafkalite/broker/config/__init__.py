"""Broker and topic configuration: one table of keys with Apache Kafka's names, types and defaults.

Modules:

* ``keys``: what a key is (``ConfigKey``: type, default, bounds, documentation, update mode, and
  ``inert``, why a key kafkalite accepts has no effect), the config types and sources Kafka numbers
  on the wire, ``ConfigError``, and the reasons keys are inert;
* ``broker_keys`` and ``kafka_keys``: the broker keys by section (Apache Kafka 4.0's whole list:
  ``broker_keys`` has the sections where keys change what kafkalite does, ``kafka_keys`` security,
  quotas, replication, the KRaft quorum, tiered storage and metrics);
* ``table``: the one table, ``CONFIG_KEYS`` (broker keys, then topic keys), indexed as
  ``BROKER_KEYS`` and ``TOPIC_KEYS``, and ``TopicConfig``; and ``GROUP_KEYS``, a group's configs.
  A start builds only ``START_KEYS`` (``broker_keys``' sections), the topic and the group keys; the
  whole table is built on first use (a key outside them, DescribeConfigs, AlterConfigs, the docs);
* ``broker_config``: ``BrokerConfig`` (sources and precedence, typed access, dynamic broker configs,
  DescribeConfigs), listeners, the properties file reader; ``entries``: DescribeConfigs' rows.

Everything reads the table: the properties parser and the ``KAFKALITE_*`` environment overrides,
DescribeConfigs and the AlterConfigs APIs, the per-topic configs, the group and transaction
settings (``config_field``), and the generated ``config/server.properties`` and
``docs/configuration.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.broker.config.broker_config import (
    ENV_PREFIX,
    BrokerConfig,
    Listener,
    config_field,
    parse_listener,
    read_properties,
)
from kafkalite.broker.config.keys import (
    INT_MAX,
    LONG_MAX,
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigType,
    listener_base_key,
)
from kafkalite.broker.config.table import GROUP_KEYS, START_KEYS, TOPIC_KEYS, TopicConfig

if TYPE_CHECKING:
    from kafkalite.broker.config.entries import ConfigEntry, ConfigSynonym
    from kafkalite.broker.config.kafka_keys import PER_LISTENER_KEYS
    from kafkalite.broker.config.table import BROKER_KEYS, CONFIG_KEYS

# Built or imported on first use (see ``table``): a start reads none of them.
_LAZY = {"BROKER_KEYS": "table", "CONFIG_KEYS": "table", "PER_LISTENER_KEYS": "kafka_keys",
         "ConfigEntry": "entries", "ConfigSynonym": "entries"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = [
    "BROKER_KEYS",
    "CONFIG_KEYS",
    "ENV_PREFIX",
    "GROUP_KEYS",
    "INT_MAX",
    "LONG_MAX",
    "PER_LISTENER_KEYS",
    "START_KEYS",
    "TOPIC_KEYS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Listener",
    "TopicConfig",
    "config_field",
    "listener_base_key",
    "parse_listener",
    "read_properties",
]
