"""CreateTopics (API key 19), v0-7: create topics, or with ``validate_only`` (v1+) only check them.

Each topic is judged on its own, in Kafka's order: the name (INVALID_TOPIC_EXCEPTION, or
INVALID_REQUEST for ``__cluster_metadata``), TOPIC_ALREADY_EXISTS, the configs (INVALID_CONFIG),
then the layout. ``num_partitions`` -1 takes ``num.partitions``; 0 or below -1 is INVALID_PARTITIONS.
This is a single-broker cluster, so ``replication_factor`` must be -1 or 1 (anything else is
INVALID_REPLICATION_FACTOR), and a manual ``assignments`` list may only place each partition on
this broker, with partitions numbered 0..n-1 and ``num_partitions``/``replication_factor`` left at -1
(else INVALID_REPLICA_ASSIGNMENT or INVALID_REQUEST, as Kafka answers). A name given twice in one
request is refused for that name with INVALID_REQUEST. Errors carry a message from v1.

v5+ answers with the partition count, the replication factor (1) and every topic config with its
effective value and source; v7 adds the topic id (a fresh id also for ``validate_only``, like Kafka).
Not implemented: ``timeout_ms`` (creation is immediate), create-topic policies and quotas.
v0-1 (removed in Kafka 4) are served: they only lack fields the codec leaves out.
"""

from __future__ import annotations

from collections import Counter

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.topics import validate_topic_name
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from kafkalite.protocol.messages.create_topics_request import CreatableTopic
from kafkalite.protocol.messages.create_topics_response import CreatableTopicConfigs, CreatableTopicResult

__all__ = ["handle_create_topics", "topic_config_rows"]

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_DEFAULT = -1


@handles(api_key=19, min_version=0, max_version=7)
def handle_create_topics(context: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    validate_only = context.api_version >= 1 and request.validate_only
    counts = Counter(topic.name for topic in request.topics)
    response = CreateTopicsResponse()
    reported: set[str] = set()
    for creatable in request.topics:
        if creatable.name in reported:
            continue
        if counts[creatable.name] > 1:
            reported.add(creatable.name)
            response.topics.append(_failed(creatable.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        try:
            response.topics.append(_create(context, creatable, validate_only))
        except KafkaError as exc:
            response.topics.append(_failed(creatable.name, exc.error_code, exc.message))
    return response


def _create(context: RequestContext, creatable: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    topics = context.cluster.topics
    name = creatable.name
    if name == CLUSTER_METADATA_TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
    validate_topic_name(name)
    if topics.get(name) is not None:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    configs: dict[str, str] = {}
    for config in creatable.configs:
        if config.value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {config.name}")
        configs[config.name] = config.value
    topics.validate_configs(configs)
    num_partitions = _partition_count(context, creatable)
    topic = topics.create(name, num_partitions, configs, validate_only=validate_only)
    return CreatableTopicResult(
        name=name,
        topic_id=topic.topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=num_partitions,
        replication_factor=1,
        configs=topic_config_rows(context.cluster.config, configs),
    )


def _partition_count(context: RequestContext, creatable: CreatableTopic) -> int:
    """How many partitions to create, after checking the requested layout fits one broker."""
    node_id = context.cluster.node_id
    if creatable.assignments:
        if creatable.replication_factor != _DEFAULT:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but replication factor was not set to -1.")
        if creatable.num_partitions != _DEFAULT:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but numPartitions was not set to -1.")
        indexes: set[int] = set()
        for assignment in creatable.assignments:
            if assignment.partition_index in indexes:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Found multiple manual partition assignments for partition "
                                 f"{assignment.partition_index}")
            check_replicas(assignment.broker_ids, node_id)
            indexes.add(assignment.partition_index)
        if indexes != set(range(len(indexes))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        return len(indexes)
    replication_factor = creatable.replication_factor
    if replication_factor < _DEFAULT or replication_factor == 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if replication_factor > 1:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): this is a single-broker "
                         "cluster, so the replication factor can only be 1 (or -1 for the default).")
    num_partitions = creatable.num_partitions
    if num_partitions < _DEFAULT or num_partitions == 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    return context.cluster.config.get_int("num.partitions") if num_partitions == _DEFAULT else num_partitions


def check_replicas(broker_ids: list[int], node_id: int) -> None:
    """A manual replica list must be exactly this broker (INVALID_REPLICA_ASSIGNMENT otherwise)."""
    if not broker_ids:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    for broker_id in broker_ids:
        if broker_id != node_id:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, but this is a "
                             f"single-broker cluster whose only broker is {node_id}.")
    if len(broker_ids) > 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes the broker {node_id} more than once.")


def topic_config_rows(config: BrokerConfig, overrides: dict[str, str]) -> list[CreatableTopicConfigs]:
    """Every topic config of a topic with these overrides, sorted by name (CreateTopics v5+)."""
    entries = sorted(config.describe_topic(overrides), key=lambda entry: entry.name)
    return [
        CreatableTopicConfigs(name=entry.name, value=None if entry.sensitive else entry.value,
                              read_only=entry.read_only, config_source=int(entry.source),
                              is_sensitive=entry.sensitive)
        for entry in entries
    ]


def _failed(name: str, error_code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=error_code, error_message=message,
                                num_partitions=-1, replication_factor=-1, configs=[])
