"""AlterConfigs (API key 33), v0-2: replace the dynamic configuration of topics or of this broker.

This is Kafka's legacy form: the configs given become the resource's whole set of overrides, and
every override not given is removed (IncrementalAlterConfigs changes single keys). A TOPIC
resource sets the topic's overrides and takes effect at once on every partition log (retention,
segment size and age, ``max.message.bytes``, timestamps, compression, cleanup policy); an unknown
key or a bad value is INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. A BROKER
resource named after this node sets its dynamic broker configs, the empty name the cluster-wide
defaults; log defaults flow on to every topic that does not override them. Keys that are not
dynamically updatable are refused with the error ``kafkalite.broker.config`` gives (INVALID_REQUEST, as in
Kafka). With ``validate_only`` everything is checked and nothing changes. Each resource is
all-or-nothing.

Also as Kafka: a resource named twice is INVALID_REQUEST for both, as are a key named twice in one
resource and a null value. BROKER_LOGGER (IncrementalAlterConfigs only) and other resource types
are INVALID_REQUEST. Not implemented: alter-config policies; dynamic broker configs live in
memory and are lost at restart (topic overrides are stored with the topic).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kafkalite.broker.config import ConfigSource
from kafkalite.broker.handlers.describe_configs import ResourceType, check_broker_resource
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from kafkalite.protocol.messages.alter_configs_request import AlterConfigsResource
from kafkalite.protocol.messages.alter_configs_response import AlterConfigsResourceResponse

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

__all__ = ["alter_broker_configs", "alter_each_resource", "check_config_keys", "dynamic_broker_configs",
           "handle_alter_configs"]


@handles(api_key=33, min_version=0, max_version=2)
def handle_alter_configs(context: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=alter_each_resource(
        request.resources, AlterConfigsResourceResponse,
        lambda resource: _alter(context.cluster, resource, request.validate_only)))


class _ResourceResult(Protocol):
    error_code: int
    error_message: str | None


_R = TypeVar("_R", bound=_ResourceResult)


def alter_each_resource(resources: Sequence[Any], result_type: Callable[..., _R],
                        alter: Callable[[Any], None]) -> list[_R]:
    """One result per resource (AlterConfigs and IncrementalAlterConfigs): a resource named twice is
    INVALID_REQUEST; otherwise ``alter`` applies it, and a ``KafkaError`` becomes its error."""
    counts = Counter((resource.resource_type, resource.resource_name) for resource in resources)
    results = []
    for resource in resources:
        result = result_type(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                             resource_name=resource.resource_name)
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            alter(resource)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.error_code, exc.message
        results.append(result)
    return results


def _alter(cluster: Cluster, resource: AlterConfigsResource, validate_only: bool) -> None:
    check_config_keys([config.name for config in resource.configs])
    null_keys = [config.name for config in resource.configs if config.value is None]
    if null_keys:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_keys)}")
    configs = {config.name: config.value for config in resource.configs if config.value is not None}
    if resource.resource_type == ResourceType.TOPIC:
        cluster.topics.set_configs(resource.resource_name, configs, validate_only=validate_only)
    elif resource.resource_type == ResourceType.BROKER:
        cluster_default = check_broker_resource(resource.resource_name, cluster.node_id)
        changes: dict[str, str | None] = dict.fromkeys(dynamic_broker_configs(cluster, cluster_default))
        changes.update(configs)
        alter_broker_configs(cluster, changes, cluster_default, validate_only)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


def check_config_keys(names: list[str]) -> None:
    """Kafka refuses a resource that names a key twice."""
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def dynamic_broker_configs(cluster: Cluster, cluster_default: bool) -> dict[str, str | None]:
    """The dynamic broker configs set on this node (or as cluster-wide defaults), by key."""
    wanted = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if cluster_default else ConfigSource.DYNAMIC_BROKER_CONFIG
    values: dict[str, str | None] = {}
    for entry in cluster.config.describe():
        for synonym in entry.synonyms:
            if synonym.name == entry.name and synonym.source == wanted:
                values[entry.name] = synonym.value
    return values


def alter_broker_configs(cluster: Cluster, changes: Mapping[str, str | None], cluster_default: bool,
                         validate_only: bool) -> None:
    """Check every change, then apply them all (None removes a key) and re-derive the topics' log configs."""
    config = cluster.config
    for key, value in changes.items():
        config.validate_broker_config(key, value)
    if validate_only or not changes:
        return
    for key, value in changes.items():
        config.set_broker_config(key, value, cluster_default)
    cluster.broker_config_changed()
