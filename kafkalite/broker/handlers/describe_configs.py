"""DescribeConfigs (API key 32), v0-4: the configuration of topics, of this broker, of its loggers and of groups.

A TOPIC resource lists every topic config with its effective value: the topic's override
(source TOPIC_CONFIG, Kafka's DYNAMIC_TOPIC_CONFIG), else the broker-level default it comes from
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG).
With ``include_synonyms`` (v1+) each entry carries the override and then every broker key it falls
back to, highest precedence first (``retention.ms``, ``log.retention.ms``, ``log.retention.hours``...).
A BROKER resource named after this node lists every broker key; the empty name is the cluster-wide
default and lists only the values set dynamically at that level, as Kafka does. A BROKER_LOGGER
resource lists the root logger and the broker's ``kafkalite.*`` loggers with their levels in log4j
names. Null or empty ``configuration_keys`` means every key; unknown keys are left out silently.
v0 has no source: ``is_default`` is set for values that come from a built-in default. v3+ adds
``config_type`` and, when asked, the documentation. Sensitive values are returned as null.

A BROKER resource also lists the keys the config table does not know that were set (statically or
dynamically), as Kafka lists custom keys: sensitive, so without a value, and of unknown type. A
CLIENT_METRICS resource lists the keys of that client-metrics subscription (none when there is no
such subscription), with source CLIENT_METRICS_CONFIG. A GROUP resource lists every group config
(``share.auto.offset.reset``, ``share.record.lock.duration.ms``...): the group's own value (source
GROUP_CONFIG), else the broker key it defaults to, or the built-in default (DEFAULT_CONFIG); the group
need not exist.

Errors, per resource as Kafka answers them: an illegal topic name is INVALID_TOPIC_EXCEPTION, an
unknown topic UNKNOWN_TOPIC_OR_PARTITION, a broker name that is neither empty nor this node's id
INVALID_REQUEST, an empty client-metrics or group name INVALID_REQUEST.

This module also holds what the three config handlers share: the resource types, the check of a
broker resource name, and the broker's loggers (the BROKER_LOGGER resource).
"""

from __future__ import annotations

import logging
from enum import IntEnum

from kafkalite.broker.config import GROUP_KEYS, BrokerConfig, ConfigEntry, ConfigSource, ConfigSynonym, ConfigType
from kafkalite.broker.core.topics import validate_topic_name
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from kafkalite.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkalite.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)

__all__ = [
    "LOG4J_LEVELS",
    "ROOT_LOGGER",
    "ResourceType",
    "broker_loggers",
    "check_broker_resource",
    "config_result",
    "handle_describe_configs",
    "log4j_level",
]

ROOT_LOGGER = "root"
_BROKER_LOGGER_PREFIX = "kafkalite"

# log4j level names (what Kafka's BROKER_LOGGER resource speaks) and the Python levels they map to.
LOG4J_LEVELS: dict[str, int] = {
    "OFF": logging.CRITICAL + 10,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
    "ALL": 1,
}


class ResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def check_broker_resource(name: str, node_id: int, *, allow_cluster_default: bool = True) -> bool:
    """True when ``name`` is the cluster-wide default (""), False when it is this node's id.

    Anything else is INVALID_REQUEST: there is no other broker to describe or configure.
    """
    if not name:
        if allow_cluster_default:
            return True
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if requested != node_id:
        expected = f"{node_id} or empty string" if allow_cluster_default else str(node_id)
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {expected}, but received {name}")
    return False


def broker_loggers() -> dict[str, logging.Logger]:
    """The loggers the BROKER_LOGGER resource exposes: the root logger and ``kafkalite.*``."""
    found: dict[str, logging.Logger] = {ROOT_LOGGER: logging.getLogger()}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (
                name == _BROKER_LOGGER_PREFIX or name.startswith(_BROKER_LOGGER_PREFIX + ".")):
            found[name] = logger
    return found


def log4j_level(level: int) -> str:
    """The log4j name of a Python level (the most verbose log4j level that is at least as strict)."""
    for name, value in LOG4J_LEVELS.items():
        if level >= value:
            return name
    return "ALL"


@handles(api_key=32, min_version=0, max_version=4)
def handle_describe_configs(context: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = context.api_version
    include_synonyms = version >= 1 and request.include_synonyms
    include_documentation = version >= 3 and request.include_documentation
    response = DescribeConfigsResponse()
    for resource in request.resources:
        result = DescribeConfigsResult(error_code=ErrorCode.NONE, error_message=None,
                                       resource_type=resource.resource_type, resource_name=resource.resource_name)
        try:
            if resource.resource_type == ResourceType.BROKER_LOGGER:
                result.configs = _describe_loggers(context, resource)
            elif resource.resource_type == ResourceType.CLIENT_METRICS:
                result.configs = _describe_client_metrics(context, resource)
            elif resource.resource_type == ResourceType.GROUP:
                result.configs = [config_result(entry, version, include_synonyms, include_documentation)
                                  for entry in _describe_group(context, resource)]
            else:
                result.configs = [config_result(entry, version, include_synonyms, include_documentation)
                                  for entry in _describe(context, resource)]
        except KafkaError as exc:
            result.error_code, result.error_message = exc.error_code, exc.message
        response.results.append(result)
    return response


def _describe(context: RequestContext, resource: DescribeConfigsResource) -> list[ConfigEntry]:
    """The entries of a TOPIC or BROKER resource."""
    cluster = context.cluster
    keys = resource.configuration_keys or None  # null and empty both mean "every key"
    name = resource.resource_name
    resource_type = resource.resource_type
    if resource_type == ResourceType.TOPIC:
        validate_topic_name(name)
        topic = cluster.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        return cluster.config.describe_topic(topic.configs, keys)
    if resource_type == ResourceType.BROKER:
        if check_broker_resource(name, cluster.node_id):
            return _cluster_defaults(cluster.config, keys)
        return cluster.config.describe(keys)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_type_name(resource_type)}")


def _cluster_defaults(config: BrokerConfig, keys: list[str] | None) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults only (the BROKER resource with an empty name)."""
    entries = []
    for entry in config.describe(keys):
        synonyms = [synonym for synonym in entry.synonyms
                    if synonym.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        if synonyms:
            entries.append(ConfigEntry(entry.name, None if entry.sensitive else synonyms[0].value,
                                       ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, entry.read_only, entry.sensitive,
                                       entry.type, entry.documentation, tuple(synonyms)))
    return entries


def _describe_loggers(context: RequestContext,
                      resource: DescribeConfigsResource) -> list[DescribeConfigsResourceResult]:
    """The BROKER_LOGGER resource: each logger's effective level, in log4j names."""
    check_broker_resource(resource.resource_name, context.cluster.node_id, allow_cluster_default=False)
    keys = resource.configuration_keys or None
    return [
        DescribeConfigsResourceResult(name=name, value=log4j_level(logger.getEffectiveLevel()), read_only=False,
                                      config_source=int(ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG),
                                      is_sensitive=False, synonyms=[],
                                      config_type=int(ConfigType.STRING), documentation=None)
        for name, logger in broker_loggers().items() if keys is None or name in keys
    ]


def _describe_client_metrics(context: RequestContext,
                             resource: DescribeConfigsResource) -> list[DescribeConfigsResourceResult]:
    """A CLIENT_METRICS resource: the keys of that subscription, as they were set."""
    if not resource.resource_name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    keys = resource.configuration_keys or None
    return [
        DescribeConfigsResourceResult(name=name, value=value, read_only=False,
                                      config_source=int(ConfigSource.CLIENT_METRICS_CONFIG), is_sensitive=False,
                                      synonyms=[], config_type=int(ConfigType.UNKNOWN), documentation=None)
        for name, value in context.cluster.dynamic_configs.client_metrics(resource.resource_name).items()
        if keys is None or name in keys
    ]


def _describe_group(context: RequestContext, resource: DescribeConfigsResource) -> list[ConfigEntry]:
    """A GROUP resource: each group config, the group's own value or its default."""
    if not resource.resource_name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    config = context.cluster.config
    overrides = context.cluster.dynamic_configs.group_configs(resource.resource_name)
    keys = resource.configuration_keys or None
    entries = []
    for name, known in GROUP_KEYS.items():
        if keys is not None and name not in keys:
            continue
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, known.format(known.parse(overrides[name])), ConfigSource.GROUP_CONFIG))
        for broker_key, _ in known.synonyms:
            synonyms.extend(config.describe([broker_key])[0].synonyms)
        if not synonyms:
            synonyms.append(ConfigSynonym(name, known.format(known.default), ConfigSource.DEFAULT_CONFIG))
        source = ConfigSource.GROUP_CONFIG if name in overrides else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, synonyms[0].value, source, False, False, known.type, known.doc,
                                   tuple(synonyms)))
    return entries


def config_result(entry: ConfigEntry, version: int, include_synonyms: bool,
                  include_documentation: bool) -> DescribeConfigsResourceResult:
    """One ``ConfigEntry`` as a DescribeConfigs row."""
    synonyms = []
    if include_synonyms:
        synonyms = [DescribeConfigsSynonym(name=synonym.name, value=None if entry.sensitive else synonym.value,
                                           source=int(synonym.source)) for synonym in entry.synonyms]
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=None if entry.sensitive else entry.value,
        read_only=entry.read_only,
        is_default=version == 0 and entry.source == ConfigSource.DEFAULT_CONFIG,
        config_source=int(entry.source),
        is_sensitive=entry.sensitive,
        synonyms=synonyms,
        config_type=int(entry.type),
        documentation=(entry.documentation or None) if include_documentation else None,
    )


def _type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return str(resource_type)
