"""The admin handlers driven without sockets: an in-memory Cluster, requests and responses round-tripped
through the codec at the version under test (CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster, DeleteRecords, DescribeLogDirs)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkalite.protocol.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kafkalite.protocol.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kafkalite.protocol.messages.create_partitions_request import CreatePartitionsAssignment, CreatePartitionsTopic
from kafkalite.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)
from kafkalite.protocol.messages.delete_records_request import DeleteRecordsPartition, DeleteRecordsTopic
from kafkalite.protocol.messages.delete_topics_request import DeleteTopicState
from kafkalite.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkalite.protocol.messages.describe_log_dirs_request import DescribableLogDirTopic
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkalite.protocol.primitives import ZERO_UUID
from kafkalite.protocol.records import Record, build_record_batch

NODE = 1
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def make_cluster(**overrides: str) -> Cluster:
    config = BrokerConfig({"log.storage": "memory", "node.id": str(NODE), **overrides})
    cluster = Cluster(config)
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    return cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = make_cluster()
    yield cluster
    cluster.close()


def call(cluster: Cluster, request: Message, version: int) -> Any:
    """Encode the request at ``version``, decode it as the broker would, handle it, round-trip the answer."""
    handler = HANDLERS[request.API_KEY]
    assert handler.supports(version)
    decoded = handler.request_type.decode(request.encode(version), version)
    context = RequestContext(cluster, request.API_KEY, version, 7, "test", "127.0.0.1:1")
    response = handler.handle(context, decoded)
    assert isinstance(response, handler.response_type)
    return handler.response_type.decode(response.encode(version), version)


def create(cluster: Cluster, *topics: CreatableTopic, version: int = 7, validate_only: bool = False) -> dict[str, Any]:
    response = call(cluster, CreateTopicsRequest(topics=list(topics), validate_only=validate_only), version)
    return {result.name: result for result in response.topics}


def new_topic(name: str, partitions: int = 1, replication: int = 1, **configs: str) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication,
                          configs=[CreatableTopicConfig(name=key.replace("_", "."), value=value)
                                   for key, value in configs.items()])


def produce(cluster: Cluster, topic: str, partition: int, count: int) -> None:
    now = int(time.time() * 1000)
    batch = build_record_batch([Record(offset=i, timestamp=now, key=None, value=b"v%d" % i) for i in range(count)])
    target = cluster.topics.partition(topic, partition)
    assert target is not None
    target.append_from_client(batch, now)


def describe(cluster: Cluster, resource_type: int, name: str, keys: list[str] | None = None, *,
             version: int = 4, synonyms: bool = False, documentation: bool = False) -> Any:
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation)
    return call(cluster, request, version).results[0]


def config_values(result: Any) -> dict[str, Any]:
    return {config.name: config for config in result.configs}


def incremental(cluster: Cluster, resource_type: int, name: str, *ops: tuple[str, int, str | None],
                validate_only: bool = False, version: int = 1) -> Any:
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[AlterableConfig(name=key, config_operation=op, value=value) for key, op, value in ops])],
        validate_only=validate_only)
    return call(cluster, request, version).responses[0]


def legacy_alter(cluster: Cluster, resource_type: int, name: str, configs: dict[str, str | None],
                 validate_only: bool = False, version: int = 2) -> Any:
    request = AlterConfigsRequest(resources=[LegacyResource(
        resource_type=resource_type, resource_name=name,
        configs=[LegacyConfig(name=key, value=value) for key, value in configs.items()])],
        validate_only=validate_only)
    return call(cluster, request, version).responses[0]


# CreateTopics --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_every_version(cluster: Cluster, version: int) -> None:
    result = create(cluster, new_topic("orders", 3), version=version)["orders"]
    assert result.error_code == ErrorCode.NONE
    topic = cluster.topics.get("orders")
    assert topic is not None and len(topic.partitions) == 3
    if version >= 5:
        assert result.num_partitions == 3 and result.replication_factor == 1
        assert {config.name for config in result.configs} >= {"retention.ms", "cleanup.policy", "segment.bytes"}
    if version >= 7:
        assert result.topic_id == topic.topic_id


def test_create_topics_defaults_and_configs(cluster: Cluster) -> None:
    cluster = make_cluster(**{"num.partitions": "4"})
    result = create(cluster, new_topic("defaults", -1, -1, retention_ms="60000"))["defaults"]
    assert result.error_code == ErrorCode.NONE and result.num_partitions == 4
    configs = {config.name: config for config in result.configs}
    assert configs["retention.ms"].value == "60000" and configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
    assert [config.name for config in result.configs] == sorted(configs)
    topic = cluster.topics.get("defaults")
    assert topic is not None and topic.configs == {"retention.ms": "60000"}


@pytest.mark.parametrize(("topic", "error"), [
    (new_topic("rf3", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
    (new_topic("rf0", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
    (new_topic("np0", 0, 1), ErrorCode.INVALID_PARTITIONS),
    (new_topic("np-2", -2, 1), ErrorCode.INVALID_PARTITIONS),
    (new_topic("bad name!", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (new_topic("__cluster_metadata", 1, 1), ErrorCode.INVALID_REQUEST),
    (new_topic("badconfig", 1, 1, retention_ms="soon"), ErrorCode.INVALID_CONFIG),
    (new_topic("unknownconfig", 1, 1, no_such_key="1"), ErrorCode.INVALID_CONFIG),
    (CreatableTopic(name="nullconfig", num_partitions=1, replication_factor=1,
                    configs=[CreatableTopicConfig(name="retention.ms", value=None)]), ErrorCode.INVALID_CONFIG),
])
def test_create_topics_refusals(cluster: Cluster, topic: CreatableTopic, error: ErrorCode) -> None:
    result = create(cluster, topic)[topic.name]
    assert result.error_code == error
    assert result.error_message
    assert result.num_partitions == -1 and result.replication_factor == -1
    assert cluster.topics.get(topic.name) is None


def test_create_topics_replication_message_names_the_single_broker(cluster: Cluster) -> None:
    result = create(cluster, new_topic("rf3", 1, 3))["rf3"]
    assert "single-broker" in result.error_message


def test_create_topics_manual_assignments(cluster: Cluster) -> None:
    def assigned(name: str, layout: dict[int, list[int]], partitions: int = -1, replication: int = -1) -> Any:
        topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication,
                               assignments=[CreatableReplicaAssignment(partition_index=index, broker_ids=brokers)
                                            for index, brokers in layout.items()])
        return create(cluster, topic)[name]

    assert assigned("manual", {0: [NODE], 1: [NODE]}).error_code == ErrorCode.NONE
    assert len(cluster.topics.get("manual").partitions) == 2  # type: ignore[union-attr]
    assert assigned("other-broker", {0: [2]}).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert assigned("two-replicas", {0: [NODE, NODE]}).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert assigned("empty", {0: []}).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert assigned("gap", {0: [NODE], 2: [NODE]}).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert assigned("with-count", {0: [NODE]}, partitions=1).error_code == ErrorCode.INVALID_REQUEST
    assert assigned("with-rf", {0: [NODE]}, replication=1).error_code == ErrorCode.INVALID_REQUEST


def test_create_topics_duplicates_exists_and_validate_only(cluster: Cluster) -> None:
    response = call(cluster, CreateTopicsRequest(topics=[new_topic("dup"), new_topic("dup"), new_topic("single")]), 7)
    results = [(result.name, result.error_code) for result in response.topics]
    assert results == [("dup", ErrorCode.INVALID_REQUEST), ("single", ErrorCode.NONE)]
    assert cluster.topics.get("dup") is None
    assert create(cluster, new_topic("single"))["single"].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

    checked = create(cluster, new_topic("dry", 2), validate_only=True)["dry"]
    assert checked.error_code == ErrorCode.NONE and checked.num_partitions == 2
    assert cluster.topics.get("dry") is None


# DeleteTopics --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 7))
def test_delete_topics_by_name(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("gone"))
    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteTopicState(name="gone"), DeleteTopicState(name="never")])
    else:
        request = DeleteTopicsRequest(topic_names=["gone", "never"])
    response = call(cluster, request, version)
    errors = {result.name: result.error_code for result in response.responses}
    assert errors == {"gone": ErrorCode.NONE, "never": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert cluster.topics.get("gone") is None


def test_delete_topics_by_id(cluster: Cluster) -> None:
    create(cluster, new_topic("by-id"), new_topic("both"))
    topic_id = cluster.topics.get("by-id").topic_id  # type: ignore[union-attr]
    other_id = cluster.topics.get("both").topic_id  # type: ignore[union-attr]
    unknown = __import__("uuid").uuid4()
    request = DeleteTopicsRequest(topics=[
        DeleteTopicState(name=None, topic_id=topic_id),
        DeleteTopicState(name=None, topic_id=unknown),
        DeleteTopicState(name="both", topic_id=other_id),
        DeleteTopicState(name=None, topic_id=ZERO_UUID),
    ])
    response = call(cluster, request, 6)
    by_id = {result.topic_id: result for result in response.responses}
    assert by_id[topic_id].error_code == ErrorCode.NONE and by_id[topic_id].name == "by-id"
    assert by_id[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_ID and by_id[unknown].name is None
    assert by_id[other_id].error_code == ErrorCode.INVALID_REQUEST
    assert by_id[ZERO_UUID].error_code == ErrorCode.INVALID_REQUEST
    assert cluster.topics.get("by-id") is None and cluster.topics.get("both") is not None


def test_delete_topics_duplicates_and_internal(cluster: Cluster) -> None:
    create(cluster, new_topic("twice"))
    cluster.topics.create("__consumer_offsets", 1)
    response = call(cluster, DeleteTopicsRequest(topic_names=["twice", "twice", "__consumer_offsets"]), 5)
    errors = [(result.name, result.error_code) for result in response.responses]
    assert errors == [("twice", ErrorCode.INVALID_REQUEST), ("__consumer_offsets", ErrorCode.INVALID_TOPIC_EXCEPTION)]
    assert cluster.topics.get("twice") is not None and cluster.topics.get("__consumer_offsets") is not None


@pytest.mark.parametrize(("version", "error"), [(2, ErrorCode.INVALID_REQUEST), (4, ErrorCode.TOPIC_DELETION_DISABLED)])
def test_delete_topics_disabled(version: int, error: ErrorCode) -> None:
    cluster = make_cluster(**{"delete.topic.enable": "false"})
    create(cluster, new_topic("kept"))
    response = call(cluster, DeleteTopicsRequest(topic_names=["kept"]), version)
    assert [result.error_code for result in response.responses] == [error]
    assert cluster.topics.get("kept") is not None


# CreatePartitions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("grow", 1))
    request = CreatePartitionsRequest(topics=[
        CreatePartitionsTopic(name="grow", count=3, assignments=None),
        CreatePartitionsTopic(name="missing", count=3, assignments=None),
    ])
    response = call(cluster, request, version)
    assert {result.name: result.error_code for result in response.results} == {
        "grow": ErrorCode.NONE, "missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert len(cluster.topics.get("grow").partitions) == 3  # type: ignore[union-attr]


def test_create_partitions_refusals(cluster: Cluster) -> None:
    create(cluster, new_topic("fixed", 2))
    cluster.topics.create("__consumer_offsets", 1)

    def attempt(topic: CreatePartitionsTopic, validate_only: bool = False) -> Any:
        return call(cluster, CreatePartitionsRequest(topics=[topic], validate_only=validate_only), 3).results[0]

    assert attempt(CreatePartitionsTopic(name="fixed", count=2, assignments=None)).error_code == \
        ErrorCode.INVALID_PARTITIONS
    assert attempt(CreatePartitionsTopic(name="fixed", count=1, assignments=None)).error_code == \
        ErrorCode.INVALID_PARTITIONS
    wrong_count = CreatePartitionsTopic(name="fixed", count=4,
                                        assignments=[CreatePartitionsAssignment(broker_ids=[NODE])])
    assert attempt(wrong_count).error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    other_broker = CreatePartitionsTopic(name="fixed", count=3,
                                         assignments=[CreatePartitionsAssignment(broker_ids=[9])])
    result = attempt(other_broker)
    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "single-broker" in result.error_message
    assert attempt(CreatePartitionsTopic(name="__consumer_offsets", count=5, assignments=None)).error_code == \
        ErrorCode.INVALID_TOPIC_EXCEPTION
    assert attempt(CreatePartitionsTopic(name="fixed", count=5, assignments=None), validate_only=True).error_code == \
        ErrorCode.NONE
    assert len(cluster.topics.get("fixed").partitions) == 2  # type: ignore[union-attr]
    manual = CreatePartitionsTopic(name="fixed", count=3, assignments=[CreatePartitionsAssignment(broker_ids=[NODE])])
    assert attempt(manual).error_code == ErrorCode.NONE
    assert len(cluster.topics.get("fixed").partitions) == 3  # type: ignore[union-attr]

    duplicate = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="fixed", count=9, assignments=None)] * 2)
    assert [result.error_code for result in call(cluster, duplicate, 3).results] == [ErrorCode.INVALID_REQUEST]


# DescribeConfigs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 5))
def test_describe_topic_configs(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("described", 1, 1, retention_ms="1234"))
    result = describe(cluster, TOPIC, "described", None, version=version, synonyms=True, documentation=True)
    assert result.error_code == ErrorCode.NONE
    configs = config_values(result)
    assert configs["retention.ms"].value == "1234"
    assert configs["segment.bytes"].value == str(1024**3)
    if version == 0:
        assert not configs["retention.ms"].is_default and configs["segment.bytes"].is_default
    else:
        assert configs["retention.ms"].config_source == 1
        assert configs["segment.bytes"].config_source == 5
        assert [synonym.name for synonym in configs["retention.ms"].synonyms] == ["retention.ms", "log.retention.hours"]
    if version >= 3:
        assert configs["retention.ms"].config_type == 5  # LONG
        assert configs["cleanup.policy"].config_type == 7  # LIST
        assert configs["retention.ms"].documentation


def test_describe_configs_filters_and_errors(cluster: Cluster) -> None:
    create(cluster, new_topic("filtered"))
    assert set(config_values(describe(cluster, TOPIC, "filtered", ["retention.ms", "nope"]))) == {"retention.ms"}
    assert len(describe(cluster, TOPIC, "filtered", []).configs) > 10  # empty list = every key
    plain = config_values(describe(cluster, TOPIC, "filtered", ["retention.ms"]))["retention.ms"]
    assert plain.synonyms == [] and plain.documentation is None
    assert describe(cluster, TOPIC, "unknown").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert describe(cluster, TOPIC, "bad/name").error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert describe(cluster, BROKER, "7").error_code == ErrorCode.INVALID_REQUEST
    assert describe(cluster, BROKER, "seven").error_code == ErrorCode.INVALID_REQUEST
    assert describe(cluster, GROUP, "").error_code == ErrorCode.INVALID_REQUEST
    assert describe(cluster, BROKER_LOGGER, "").error_code == ErrorCode.INVALID_REQUEST


def test_describe_broker_configs(cluster: Cluster) -> None:
    result = describe(cluster, BROKER, str(NODE), synonyms=True)
    configs = config_values(result)
    assert configs["log.storage"].value == "memory" and configs["log.storage"].config_source == 4  # STATIC
    assert configs["log.retention.hours"].value == "168" and configs["log.retention.hours"].config_source == 5
    assert configs["num.partitions"].read_only and not configs["log.retention.bytes"].read_only
    assert describe(cluster, BROKER, "").configs == []  # no cluster-wide dynamic default yet


def test_describe_broker_loggers(cluster: Cluster) -> None:
    logging.getLogger("kafkalite.test_admin").setLevel(logging.DEBUG)
    configs = config_values(describe(cluster, BROKER_LOGGER, str(NODE)))
    assert "root" in configs
    assert configs["kafkalite.test_admin"].value == "DEBUG"
    assert configs["kafkalite.test_admin"].config_source == 6  # DYNAMIC_BROKER_LOGGER_CONFIG


# AlterConfigs --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs_replaces_topic_overrides(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("legacy", 1, 1, retention_ms="1000"))
    result = legacy_alter(cluster, TOPIC, "legacy", {"segment.bytes": "1048576", "max.message.bytes": "2000"},
                          version=version)
    assert result.error_code == ErrorCode.NONE
    topic = cluster.topics.get("legacy")
    assert topic is not None and topic.configs == {"segment.bytes": "1048576", "max.message.bytes": "2000"}
    assert topic.partitions[0].log.config.segment_bytes == 1048576
    assert topic.partitions[0].topic_config("max.message.bytes") == "2000"


def test_alter_configs_refusals(cluster: Cluster) -> None:
    create(cluster, new_topic("strict", 1, 1, retention_ms="1000"))
    assert legacy_alter(cluster, TOPIC, "strict", {"retention.ms": "forever"}).error_code == ErrorCode.INVALID_CONFIG
    assert legacy_alter(cluster, TOPIC, "strict", {"nope": "1"}).error_code == ErrorCode.INVALID_CONFIG
    assert legacy_alter(cluster, TOPIC, "strict", {"retention.ms": None}).error_code == ErrorCode.INVALID_REQUEST
    assert legacy_alter(cluster, TOPIC, "missing", {"retention.ms": "1"}).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert legacy_alter(cluster, TOPIC, "strict", {"retention.ms": "5"}, validate_only=True).error_code == \
        ErrorCode.NONE
    assert cluster.topics.get("strict").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]

    request = AlterConfigsRequest(resources=[LegacyResource(resource_type=TOPIC, resource_name="strict"),
                                             LegacyResource(resource_type=TOPIC, resource_name="strict")])
    assert [result.error_code for result in call(cluster, request, 2).responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert legacy_alter(cluster, BROKER_LOGGER, str(NODE), {"root": "INFO"}).error_code == ErrorCode.INVALID_REQUEST


def test_alter_configs_broker(cluster: Cluster) -> None:
    create(cluster, new_topic("inherits"))
    assert legacy_alter(cluster, BROKER, str(NODE), {"log.retention.bytes": "5000"}).error_code == ErrorCode.NONE
    configs = config_values(describe(cluster, BROKER, str(NODE), ["log.retention.bytes"], synonyms=True))
    assert configs["log.retention.bytes"].value == "5000" and configs["log.retention.bytes"].config_source == 2
    topic_config = config_values(describe(cluster, TOPIC, "inherits", ["retention.bytes"]))["retention.bytes"]
    assert topic_config.value == "5000" and topic_config.config_source == 2  # from DYNAMIC_BROKER_CONFIG
    assert cluster.topics.get("inherits").partitions[0].log.config.retention_bytes == 5000  # type: ignore[union-attr]

    # Legacy semantics: the next call's set replaces this one's.
    assert legacy_alter(cluster, BROKER, str(NODE), {"log.segment.bytes": "2000000"}).error_code == ErrorCode.NONE
    configs = config_values(describe(cluster, BROKER, str(NODE), ["log.retention.bytes", "log.segment.bytes"]))
    assert configs["log.retention.bytes"].value == "-1" and configs["log.segment.bytes"].config_source == 2

    assert legacy_alter(cluster, BROKER, str(NODE), {"num.partitions": "3"}).error_code == ErrorCode.INVALID_REQUEST
    assert legacy_alter(cluster, BROKER, "2", {"log.segment.bytes": "2000000"}).error_code == ErrorCode.INVALID_REQUEST
    assert legacy_alter(cluster, BROKER, "", {"log.retention.bytes": "7000"}).error_code == ErrorCode.NONE
    cluster_default = config_values(describe(cluster, BROKER, ""))
    assert set(cluster_default) == {"log.retention.bytes"}
    assert cluster_default["log.retention.bytes"].config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG


# IncrementalAlterConfigs ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_topic(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("incr", 1, 1, retention_ms="1000", segment_bytes="1048576"))
    result = incremental(cluster, TOPIC, "incr", ("retention.ms", SET, "2000"), ("segment.bytes", DELETE, None),
                         ("cleanup.policy", APPEND, "compact"), version=version)
    assert result.error_code == ErrorCode.NONE
    topic = cluster.topics.get("incr")
    assert topic is not None and topic.configs == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    assert topic.partitions[0].log.config.retention_ms == 2000
    assert incremental(cluster, TOPIC, "incr", ("cleanup.policy", SUBTRACT, "delete")).error_code == ErrorCode.NONE
    assert topic.configs["cleanup.policy"] == "compact"


def test_incremental_alter_refusals(cluster: Cluster) -> None:
    create(cluster, new_topic("picky", 1, 1, retention_ms="1000"))
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", APPEND, "5")).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(cluster, TOPIC, "picky", ("nope", SET, "5")).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", SET, "x")).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", 9, "5")).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", SET, None)).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)
                       ).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, TOPIC, "nowhere", ("retention.ms", SET, "5")).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert incremental(cluster, TOPIC, "picky", ("retention.ms", SET, "5"), validate_only=True).error_code == \
        ErrorCode.NONE
    assert cluster.topics.get("picky").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]
    assert incremental(cluster, GROUP, "g", ("x", SET, "1")).error_code == ErrorCode.INVALID_CONFIG


def test_incremental_alter_broker(cluster: Cluster) -> None:
    create(cluster, new_topic("follows"))
    partition = cluster.topics.partition("follows", 0)
    assert partition is not None
    assert incremental(cluster, BROKER, str(NODE), ("message.max.bytes", SET, "5000")).error_code == ErrorCode.NONE
    assert partition.topic_config("max.message.bytes") == "5000"
    assert incremental(cluster, BROKER, str(NODE), ("log.cleanup.policy", APPEND, "compact")).error_code == \
        ErrorCode.NONE
    assert partition.topic_config("cleanup.policy") == "delete,compact"
    assert incremental(cluster, BROKER, str(NODE), ("message.max.bytes", DELETE, None)).error_code == ErrorCode.NONE
    assert partition.topic_config("max.message.bytes") == "1048588"
    assert incremental(cluster, BROKER, str(NODE), ("message.max.bytes", APPEND, "1")).error_code == \
        ErrorCode.INVALID_CONFIG
    assert incremental(cluster, BROKER, str(NODE), ("node.id", SET, "3")).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, BROKER, "", ("log.retention.ms", SET, "1000")).error_code == ErrorCode.NONE
    assert partition.log.config.retention_ms == 1000


def test_incremental_alter_broker_logger(cluster: Cluster) -> None:
    logger = logging.getLogger("kafkalite.test_admin_logger")
    logger.setLevel(logging.INFO)
    node = str(NODE)
    assert incremental(cluster, BROKER_LOGGER, node, ("kafkalite.test_admin_logger", SET, "DEBUG")).error_code == \
        ErrorCode.NONE
    assert logger.level == logging.DEBUG
    assert incremental(cluster, BROKER_LOGGER, node, ("kafkalite.test_admin_logger", DELETE, None)).error_code == \
        ErrorCode.NONE
    assert logger.level == logging.NOTSET
    assert incremental(cluster, BROKER_LOGGER, node, ("root", DELETE, None)).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, BROKER_LOGGER, node, ("root", SET, "LOUD")).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(cluster, BROKER_LOGGER, node, ("no.such", SET, "INFO")).error_code == ErrorCode.INVALID_CONFIG
    assert incremental(cluster, BROKER_LOGGER, node, ("root", APPEND, "INFO")).error_code == ErrorCode.INVALID_REQUEST
    assert incremental(cluster, BROKER_LOGGER, "", ("root", SET, "INFO")).error_code == ErrorCode.INVALID_REQUEST


# DescribeCluster -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 2))
def test_describe_cluster(cluster: Cluster, version: int) -> None:
    response = call(cluster, DescribeClusterRequest(include_cluster_authorized_operations=False), version)
    assert response.error_code == ErrorCode.NONE
    assert response.cluster_id == cluster.cluster_id and response.controller_id == NODE
    assert [(broker.broker_id, broker.host, broker.port) for broker in response.brokers] == [(NODE, "127.0.0.1", 9092)]
    assert response.cluster_authorized_operations == -(2**31)
    asked = call(cluster, DescribeClusterRequest(include_cluster_authorized_operations=True), version)
    assert asked.cluster_authorized_operations & (1 << 10)  # DESCRIBE_CONFIGS


def test_describe_cluster_endpoint_types(cluster: Cluster) -> None:
    controllers = call(cluster, DescribeClusterRequest(endpoint_type=2), 1)
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and controllers.brokers == []
    unknown = call(cluster, DescribeClusterRequest(endpoint_type=7), 1)
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


# DeleteRecords -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 3))
def test_delete_records(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("purge", 2))
    produce(cluster, "purge", 0, 10)
    produce(cluster, "purge", 1, 4)

    def delete_records(*targets: tuple[str, int, int]) -> dict[tuple[str, int], Any]:
        topics: dict[str, list[DeleteRecordsPartition]] = {}
        for name, index, offset in targets:
            topics.setdefault(name, []).append(DeleteRecordsPartition(partition_index=index, offset=offset))
        request = DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=name, partitions=partitions)
                                               for name, partitions in topics.items()], timeout_ms=1000)
        response = call(cluster, request, version)
        return {(topic.name, result.partition_index): result
                for topic in response.topics for result in topic.partitions}

    results = delete_records(("purge", 0, 6), ("purge", 1, -1), ("purge", 2, 0), ("absent", 0, 0))
    assert (results[("purge", 0)].error_code, results[("purge", 0)].low_watermark) == (ErrorCode.NONE, 6)
    assert (results[("purge", 1)].error_code, results[("purge", 1)].low_watermark) == (ErrorCode.NONE, 4)
    assert results[("purge", 2)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("absent", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.topics.partition("purge", 0).log_start_offset == 6  # type: ignore[union-attr]

    results = delete_records(("purge", 0, 3), ("purge", 1, 5), ("purge", 1, -2))
    assert (results[("purge", 0)].error_code, results[("purge", 0)].low_watermark) == (ErrorCode.NONE, 6)
    assert results[("purge", 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert results[("purge", 1)].low_watermark == -1


def test_delete_records_policy_and_internal(cluster: Cluster) -> None:
    create(cluster, new_topic("compacted", 1, 1, cleanup_policy="compact"))
    cluster.topics.create("__consumer_offsets", 1)
    request = DeleteRecordsRequest(topics=[
        DeleteRecordsTopic(name="compacted", partitions=[DeleteRecordsPartition(partition_index=0, offset=0)]),
        DeleteRecordsTopic(name="__consumer_offsets", partitions=[DeleteRecordsPartition(partition_index=0, offset=0)]),
    ])
    response = call(cluster, request, 2)
    assert [topic.partitions[0].error_code for topic in response.topics] == [
        ErrorCode.POLICY_VIOLATION, ErrorCode.INVALID_TOPIC_EXCEPTION]


# DescribeLogDirs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 5))
def test_describe_log_dirs_in_memory(cluster: Cluster, version: int) -> None:
    create(cluster, new_topic("sized", 2), new_topic("empty"))
    produce(cluster, "sized", 1, 5)
    response = call(cluster, DescribeLogDirsRequest(topics=None), version)
    [result] = response.results
    assert result.error_code == ErrorCode.NONE and result.log_dir == "memory"
    sizes = {(topic.name, partition.partition_index): partition.partition_size
             for topic in result.topics for partition in topic.partitions}
    assert sizes[("sized", 0)] == 0 and sizes[("sized", 1)] > 0 and ("empty", 0) in sizes
    if version >= 4:
        assert result.total_bytes == -1 and result.usable_bytes == -1

    asked = call(cluster, DescribeLogDirsRequest(topics=[
        DescribableLogDirTopic(topic="sized", partitions=[1, 7]),
        DescribableLogDirTopic(topic="nothing", partitions=[0])]), version)
    assert [(topic.name, [p.partition_index for p in topic.partitions]) for topic in asked.results[0].topics] == [
        ("sized", [1])]


def test_describe_log_dirs_on_disk(tmp_path: Path) -> None:
    cluster = make_cluster(**{"log.storage": "disk", "log.dirs": str(tmp_path / "data")})
    try:
        create(cluster, new_topic("ondisk"))
        produce(cluster, "ondisk", 0, 3)
        [result] = call(cluster, DescribeLogDirsRequest(topics=None), 4).results
        assert result.log_dir == str((tmp_path / "data").resolve())
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
        assert result.topics[0].partitions[0].partition_size > 0
    finally:
        cluster.close()
