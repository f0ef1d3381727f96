"""IncrementalAlterConfigs (API key 44), v0-1: change single config keys of topics, this broker, its
loggers, client-metrics subscriptions or groups.

Each key carries an operation: SET (0) gives it a value, DELETE (1) removes the override (the
default applies again), APPEND (2) and SUBTRACT (3) add or remove comma-separated items of a LIST
key such as ``cleanup.policy``. Keys not named keep their values. TOPIC resources change the
topic's overrides (effective at once on every partition log); APPEND/SUBTRACT start from the
current override or, without one, the effective default, and are INVALID_CONFIG on other types.
BROKER resources change this node's dynamic configs (or, with the empty name, the cluster-wide
defaults), kept in the data directory; APPEND/SUBTRACT start from the dynamic value or the key's
default and are INVALID_CONFIG ("Config value append is not allowed for config key: ...") on keys
that are not lists; the resulting set is checked as AlterConfigs checks it (see ``alter_configs``).
BROKER_LOGGER resources (named after this node) set or reset the level of the root logger or a
``kafkalite.*`` logger, in log4j level names. CLIENT_METRICS resources create, change or delete a
client-metrics subscription (``metrics`` and ``match`` are lists). GROUP resources set a group's
configs (``share.auto.offset.reset``, ``share.isolation.level``, ``share.record.lock.duration.ms``,
``share.delivery.count.limit``, ``share.partition.max.record.locks``, ``share.session.timeout.ms``,
``share.heartbeat.interval.ms``), whether or not the group exists, checked as Kafka checks them
(INVALID_CONFIG for an unknown key, a bad value, or one outside the broker's ``group.share.*`` bounds);
they are kept in the data directory and apply from the group's next fetch or heartbeat. Validation and errors are those
of AlterConfigs, plus INVALID_REQUEST for an unknown operation and, on loggers, for APPEND/SUBTRACT
or for removing the root logger's level. ``validate_only`` checks without changing anything; each
resource is all-or-nothing.

Not implemented: the consumer group configs (``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms``: INVALID_CONFIG) and alter-config policies.
"""

from __future__ import annotations

import logging
from enum import IntEnum
from typing import TYPE_CHECKING

from kafkalite.broker.config import BROKER_KEYS, TOPIC_KEYS, ConfigType
from kafkalite.broker.core.dynamic_configs import CLIENT_METRICS_KEYS
from kafkalite.broker.core.share.config import check_group_configs
from kafkalite.broker.handlers.alter_configs import alter_each_resource, check_config_keys
from kafkalite.broker.handlers.describe_configs import (
    LOG4J_LEVELS,
    ROOT_LOGGER,
    ResourceType,
    broker_loggers,
    check_broker_resource,
)
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkalite.protocol.messages.incremental_alter_configs_response import AlterConfigsResourceResponse

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

__all__ = ["OpType", "handle_incremental_alter_configs"]


class OpType(IntEnum):
    """Kafka's ``AlterConfigOp.OpType`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_OPERATIONS = frozenset(int(operation) for operation in OpType)


@handles(api_key=44, min_version=0, max_version=1)
def handle_incremental_alter_configs(
    context: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=alter_each_resource(
        request.resources, AlterConfigsResourceResponse,
        lambda resource: _alter(context.cluster, resource, request.validate_only)))


def _alter(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    check_config_keys([config.name for config in resource.configs])
    for config in resource.configs:
        if config.config_operation not in _OPERATIONS:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {config.config_operation}")
    null_keys = [config.name for config in resource.configs
                 if config.value is None and config.config_operation != OpType.DELETE]
    if null_keys:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_keys)}")
    if resource.resource_type == ResourceType.TOPIC:
        _alter_topic(cluster, resource, validate_only)
    elif resource.resource_type == ResourceType.BROKER:
        _alter_broker(cluster, resource, validate_only)
    elif resource.resource_type == ResourceType.CLIENT_METRICS:
        _alter_client_metrics(cluster, resource, validate_only)
    elif resource.resource_type == ResourceType.GROUP:
        _alter_group(cluster, resource, validate_only)
    elif resource.resource_type == ResourceType.BROKER_LOGGER:
        check_broker_resource(resource.resource_name, cluster.node_id, allow_cluster_default=False)
        _alter_loggers(resource.configs, validate_only)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


def _alter_topic(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    topic = cluster.topics.get(resource.resource_name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    overrides = dict(topic.configs)
    for config in resource.configs:
        operation = OpType(config.config_operation)
        if operation is OpType.SET:
            overrides[config.name] = config.value or ""
        elif operation is OpType.DELETE:
            overrides.pop(config.name, None)
        else:
            known = TOPIC_KEYS.get(config.name)
            if known is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {config.name}")
            _require_list(config, known.type)
            current = overrides.get(config.name)
            if current is None:
                current = cluster.config.topic_config_default(config.name)
            overrides[config.name] = _apply_list_operation(operation, current, config.value or "")
    cluster.topics.set_configs(topic.name, overrides, validate_only=validate_only)


def _alter_broker(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    cluster_default = check_broker_resource(resource.resource_name, cluster.node_id)
    current = cluster.dynamic_configs.broker_configs(cluster_default)
    changes: dict[str, str | None] = {}
    for config in resource.configs:
        operation = OpType(config.config_operation)
        if operation is OpType.SET:
            changes[config.name] = config.value
        elif operation is OpType.DELETE:
            changes[config.name] = None
        else:  # Kafka's broker: lists only, from the dynamic value or the key's default
            known = BROKER_KEYS.get(config.name)
            if known is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {config.name}")
            if known.type is not ConfigType.LIST:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value {operation.name.lower()} is not allowed "
                                                           f"for config key: {config.name}")
            base = current.get(config.name)
            if base is None:
                base = known.format(known.default) or ""
            changes[config.name] = _apply_list_operation(operation, base, config.value or "")
            current[config.name] = changes[config.name] or ""
    cluster.dynamic_configs.alter_broker(changes, cluster_default=cluster_default, validate_only=validate_only)


def _alter_client_metrics(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    values = cluster.dynamic_configs.client_metrics(resource.resource_name)
    for config in resource.configs:
        operation = OpType(config.config_operation)
        if operation is OpType.SET:
            values[config.name] = config.value or ""
        elif operation is OpType.DELETE:
            values.pop(config.name, None)
        else:
            if not CLIENT_METRICS_KEYS.get(config.name, False):
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Can't {operation.name} to key {config.name} because its type is not LIST.")
            values[config.name] = _apply_list_operation(operation, values.get(config.name, ""), config.value or "")
    cluster.dynamic_configs.set_client_metrics(resource.resource_name, values, validate_only=validate_only)


def _alter_group(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    if not resource.resource_name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    values = cluster.dynamic_configs.group_configs(resource.resource_name)
    for config in resource.configs:
        operation = OpType(config.config_operation)
        if operation is OpType.SET:
            values[config.name] = config.value or ""
        elif operation is OpType.DELETE:
            values.pop(config.name, None)
        else:
            check_group_configs(cluster.share_partitions.settings, {config.name: config.value or ""})
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Can't {operation.name} to key {config.name} because its type is not LIST.")
    check_group_configs(cluster.share_partitions.settings, values)
    if not validate_only:
        cluster.dynamic_configs.set_group_configs(resource.resource_name, values)


def _require_list(config: AlterableConfig, config_type: ConfigType) -> None:
    if config_type is not ConfigType.LIST:
        operation = OpType(config.config_operation).name
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                            f"Can't {operation} to key {config.name} because its type is not LIST.")


def _apply_list_operation(operation: OpType, current: str, value: str) -> str:
    """APPEND adds the items not yet present; SUBTRACT removes every given item."""
    items = [item for item in current.split(",") if item]
    changes = [item.strip() for item in value.split(",") if item.strip()]
    if operation is OpType.APPEND:
        items += [item for item in dict.fromkeys(changes) if item not in items]
    else:
        items = [item for item in items if item not in changes]
    return ",".join(items)


def _alter_loggers(configs: list[AlterableConfig], validate_only: bool) -> None:
    """Set or reset logger levels (BROKER_LOGGER); every change is checked before any is made."""
    loggers = broker_loggers()
    levels: dict[str, int] = {}
    for config in configs:
        operation = OpType(config.config_operation)
        if operation in (OpType.APPEND, OpType.SUBTRACT):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                                f"{operation.name} operation is not allowed for the BROKER_LOGGER resource")
        if config.name not in loggers:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {config.name} does not exist!")
        if operation is OpType.DELETE:
            if config.name == ROOT_LOGGER:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
            levels[config.name] = logging.NOTSET
            continue
        level = (config.value or "").upper()
        if level not in LOG4J_LEVELS:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                                f"Cannot set the log level of {config.name} to {config.value} as it is not a "
                                f"supported log level. Valid log levels are {', '.join(sorted(LOG4J_LEVELS))}")
        levels[config.name] = LOG4J_LEVELS[level]
    if validate_only:
        return
    for name, numeric_level in levels.items():
        loggers[name].setLevel(numeric_level)
