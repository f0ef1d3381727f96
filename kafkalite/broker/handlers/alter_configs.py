"""AlterConfigs (API key 33), v0-2: replace the dynamic configuration of topics, of this broker or of
client-metrics subscriptions.

This is Kafka's legacy form: the configs given become the resource's whole set of overrides, and
every override not given is removed (IncrementalAlterConfigs changes single keys). A TOPIC
resource sets the topic's overrides and takes effect at once on every partition log (retention,
segment size and age, ``max.message.bytes``, timestamps, compression, cleanup policy); an unknown
key or a bad value is INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. A BROKER
resource named after this node sets its dynamic broker configs, the empty name the cluster-wide
defaults; they are kept in the data directory (they survive a restart) and log defaults flow on to
every topic that does not override them. Broker keys are checked as Kafka checks them, each refusal
INVALID_REQUEST with Kafka's message: a key Kafka cannot update dynamically ("Cannot update these
configs dynamically: Set(...)"), a TLS store key without a listener prefix, a value of the wrong
type, a per-broker key on the cluster-wide resource; keys Kafka does not know are kept, as Kafka
keeps custom keys. A CLIENT_METRICS resource sets a client-metrics subscription (``metrics``,
``interval.ms``, ``match``), created by its first key and deleted with its last. With
``validate_only`` everything is checked and nothing changes. Each resource is all-or-nothing.

Also as Kafka: a resource named twice is INVALID_REQUEST for both, as are a key named twice in one
resource and a null value. BROKER_LOGGER (IncrementalAlterConfigs only) and other resource types
are INVALID_REQUEST. Not implemented: alter-config policies and Kafka's further checks of some
dynamic values against each other (thread pool sizes, listener changes), which have no effect here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kafkalite.broker.handlers.describe_configs import ResourceType, check_broker_resource
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from kafkalite.protocol.messages.alter_configs_request import AlterConfigsResource
from kafkalite.protocol.messages.alter_configs_response import AlterConfigsResourceResponse

if TYPE_CHECKING:
    from kafkalite.broker.core.cluster import Cluster

__all__ = ["alter_each_resource", "check_config_keys", "handle_alter_configs"]


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
        cluster.dynamic_configs.alter_broker(configs, cluster_default=cluster_default, validate_only=validate_only,
                                             replace=True)
    elif resource.resource_type == ResourceType.CLIENT_METRICS:
        cluster.dynamic_configs.set_client_metrics(resource.resource_name, configs, validate_only=validate_only)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")


def check_config_keys(names: list[str]) -> None:
    """Kafka refuses a resource that names a key twice."""
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
