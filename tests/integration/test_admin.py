"""Admin APIs against a real broker with real clients: kafka-python's KafkaAdminClient and confluent-kafka's
AdminClient (librdkafka) create, describe, alter and delete topics, partitions, configs and records,
and the effects are checked through producers and consumers where a user would notice them."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, AlterConfigOpType, ConfigEntry, ConfigSource, ResourceType
from confluent_kafka.admin import ConfigResource as ConfluentConfigResource
from confluent_kafka.admin import NewPartitions as ConfluentNewPartitions
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka.structs import TopicPartition

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 20.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def settle(futures: dict[Any, Future[Any]]) -> dict[Any, Any]:
    """Each future's result (raising the first failure)."""
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


def failure(future: Future[Any]) -> KafkaError:
    """The KafkaError a future failed with."""
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    return raised.value.args[0]  # type: ignore[no-any-return]


@pytest.fixture
def kafka_python_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        yield admin
    finally:
        admin.close()


@pytest.fixture
def confluent_admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def confluent_topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfluentConfigResource(ResourceType.TOPIC, topic)
    return settle(admin.describe_configs([resource]))[resource]  # type: ignore[no-any-return]


def confluent_alter(admin: AdminClient, restype: ResourceType, name: str,
                    *changes: tuple[str, str | None, AlterConfigOpType]) -> Future[Any]:
    entries = [ConfigEntry(key, value, incremental_operation=operation) for key, value, operation in changes]
    resource = ConfluentConfigResource(restype, name, incremental_configs=entries)
    return admin.incremental_alter_configs([resource])[resource]  # type: ignore[no-any-return]


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> list[KafkaError | None]:
    """Produce with librdkafka; each delivery's error (None when it was written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False})
    outcomes: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value, partition=partition,
                         on_delivery=lambda error, message: outcomes.append(error))
        producer.flush(TIMEOUT_S)
    assert len(outcomes) == len(values), "not every delivery was reported"
    return outcomes


# kafka-python --------------------------------------------------------------------------------------

def test_kafka_python_topic_lifecycle(kafka_python_admin: KafkaAdminClient, wait_until: WaitUntil) -> None:
    admin = kafka_python_admin
    topic = unique("kp-life")
    created = admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "3600000"})])
    [result] = created["topics"]
    assert result["error_code"] == 0 and result["num_partitions"] == 3 and result["replication_factor"] == 1
    assert result["configs"]["retention.ms"]["value"] == "3600000"
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic in admin.list_topics()

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert described["topic"][topic] == {"retention.ms": described["topic"][topic]["retention.ms"]}  # only modified
    assert described["topic"][topic]["retention.ms"]["value"] == "3600000"

    admin.create_partitions({topic: NewPartitions(5)})
    [description] = admin.describe_topics([topic])
    assert len(description["partitions"]) == 5

    admin.delete_topics([topic])
    wait_until(lambda: topic not in admin.list_topics(), TIMEOUT_S, f"{topic} still listed")


def test_kafka_python_refusals(kafka_python_admin: KafkaAdminClient) -> None:
    admin = kafka_python_admin
    topic = unique("kp-refused")
    with pytest.raises(kafka_errors.InvalidReplicationFactorError):
        admin.create_topics([NewTopic(topic, 1, 3)])
    answer = admin.create_topics([NewTopic(topic, 1, 3)], raise_errors=False)
    assert "single-broker" in answer["topics"][0]["error_message"]
    assert topic not in admin.list_topics()

    admin.create_topics([NewTopic(topic, 2, 1)])
    with pytest.raises(kafka_errors.TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 2, 1)])
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        admin.create_partitions({topic: NewPartitions(1)})
    with pytest.raises(kafka_errors.InvalidReplicationAssignmentError):
        admin.create_partitions({topic: {"count": 3, "assignments": [[42]]}})
    with pytest.raises(kafka_errors.InvalidConfigurationError):
        admin.create_topics([NewTopic(unique("kp-badconfig"), 1, 1, topic_configs={"retention.ms": "soon"})])
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        admin.delete_topics([unique("kp-never")])

    checked = admin.create_topics([NewTopic(unique("kp-dry"), 4, 1)], validate_only=True)
    assert checked["topics"][0]["error_code"] == 0
    assert checked["topics"][0]["name"] not in admin.list_topics()


def test_kafka_python_delete_by_topic_id(kafka_python_admin: KafkaAdminClient, wait_until: WaitUntil) -> None:
    admin = kafka_python_admin
    topic = unique("kp-by-id")
    created = admin.create_topics([NewTopic(topic, 1, 1)])
    topic_id = uuid.UUID(str(created["topics"][0]["topic_id"]))
    assert topic_id.int != 0
    answer = admin.delete_topics([topic_id])
    assert answer["topics"][0]["name"] == topic and answer["topics"][0]["error_code"] == 0
    wait_until(lambda: topic not in admin.list_topics(), TIMEOUT_S, f"{topic} still listed")
    with pytest.raises(kafka_errors.UnknownTopicIdError):
        admin.delete_topics([topic_id])


def test_kafka_python_alter_configs(kafka_python_admin: KafkaAdminClient) -> None:
    admin = kafka_python_admin
    topic = unique("kp-configs")
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "600000"})])

    # Incremental (the default on this broker): the other override stays.
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                 {"retention.bytes": "1048576", "segment.bytes": "2097152"})])
    assert result == {"topic": {topic: "OK"}}
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert {key: entry["value"] for key, entry in configs.items()} == {
        "retention.ms": "600000", "retention.bytes": "1048576", "segment.bytes": "2097152"}

    # Legacy AlterConfigs (kafka-python fills in the other modified keys itself).
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "700000"})],
                               incremental=False) == {"topic": {topic: "OK"}}
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert configs["retention.ms"]["value"] == "700000" and configs["segment.bytes"]["value"] == "2097152"

    admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, topic, ["retention.bytes", "segment.bytes"])])
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], include_synonyms=True,
                                     config_filter="all")["topic"][topic]
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [synonym["name"] for synonym in configs["retention.ms"]["synonyms"]][0] == "retention.ms"


def test_kafka_python_describe_broker_and_log_dirs(kafka_python_admin: KafkaAdminClient,
                                                    broker: BrokerProcess) -> None:
    admin = kafka_python_admin
    cluster = admin.describe_cluster()
    node_id = cluster["controller_id"]
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node_id))],
                                     config_filter="all")["broker"][str(node_id)]
    assert configs["log.retention.hours"]["value"] == "168"
    assert configs["num.partitions"]["read_only"]

    topic = unique("kp-dirs")
    admin.create_topics([NewTopic(topic, 2, 1)])
    assert produce(broker.bootstrap, topic, [b"x" * 100] * 3, partition=1) == [None] * 3
    [per_broker] = admin.describe_log_dirs({topic: [0, 1]})
    [log_dir] = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker.data_dir.resolve())
    sizes = {partition["partition_index"]: partition["partition_size"]
             for described in log_dir["topics"] if described["name"] == topic for partition in described["partitions"]}
    assert sizes[0] == 0 and sizes[1] > 300
    assert log_dir["total_bytes"] > 0 and log_dir["usable_bytes"] > 0


def test_kafka_python_delete_records(kafka_python_admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    admin = kafka_python_admin
    topic = unique("kp-purge")
    admin.create_topics([NewTopic(topic, 1, 1)])
    produce(broker.bootstrap, topic, [b"%d" % i for i in range(8)])
    partition = TopicPartition(topic, 0)
    result = admin.delete_records({partition: 5})
    assert result[partition]["low_watermark"] == 5
    with pytest.raises(kafka_errors.OffsetOutOfRangeError):
        admin.delete_records({partition: 50})


# confluent-kafka (librdkafka) ----------------------------------------------------------------------

def test_confluent_topic_lifecycle(confluent_admin: AdminClient, wait_until: WaitUntil) -> None:
    admin = confluent_admin
    topic = unique("cf-life")
    settle(admin.create_topics([ConfluentNewTopic(topic, num_partitions=2, replication_factor=1,
                                                  config={"cleanup.policy": "delete"})]))
    assert topic in admin.list_topics(timeout=TIMEOUT_S).topics

    [description] = settle(admin.describe_topics(TopicCollection([topic]))).values()
    assert len(description.partitions) == 2 and not description.is_internal

    settle(admin.create_partitions([ConfluentNewPartitions(topic, 4)]))
    [description] = settle(admin.describe_topics(TopicCollection([topic]))).values()
    assert len(description.partitions) == 4

    settle(admin.delete_topics([topic]))
    wait_until(lambda: topic not in admin.list_topics(timeout=TIMEOUT_S).topics, TIMEOUT_S, f"{topic} still listed")


def test_confluent_create_topics_defaults_and_refusals(confluent_admin: AdminClient) -> None:
    admin = confluent_admin
    default = unique("cf-default")
    settle(admin.create_topics([ConfluentNewTopic(default)]))  # -1 partitions, -1 replication factor
    assert len(admin.list_topics(default, timeout=TIMEOUT_S).topics[default].partitions) == 1  # num.partitions

    dry = unique("cf-dry")
    settle(admin.create_topics([ConfluentNewTopic(dry, 3, 1)], validate_only=True))
    assert dry not in admin.list_topics(timeout=TIMEOUT_S).topics

    refused = admin.create_topics([ConfluentNewTopic(unique("cf-rf3"), 1, 3)])
    assert failure(next(iter(refused.values()))).code() == KafkaError.INVALID_REPLICATION_FACTOR
    refused = admin.create_topics([ConfluentNewTopic(unique("cf-other-broker"), 1, replica_assignment=[[7]])])
    assert failure(next(iter(refused.values()))).code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    refused = admin.create_topics([ConfluentNewTopic(unique("cf-config"), 1, 1, config={"no.such.key": "1"})])
    assert failure(next(iter(refused.values()))).code() == KafkaError.INVALID_CONFIG
    refused = admin.create_topics([ConfluentNewTopic(default, 1, 1)])
    assert failure(refused[default]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    refused = admin.delete_topics([unique("cf-never")])
    assert failure(next(iter(refused.values()))).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    assigned = unique("cf-assigned")
    node_id = settle({"cluster": admin.describe_cluster()})["cluster"].controller.id
    settle(admin.create_topics([ConfluentNewTopic(assigned, 2, replica_assignment=[[node_id], [node_id]])]))
    assert len(admin.list_topics(assigned, timeout=TIMEOUT_S).topics[assigned].partitions) == 2


def test_confluent_describe_configs(confluent_admin: AdminClient) -> None:
    admin = confluent_admin
    topic = unique("cf-describe")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1, config={"retention.ms": "120000"})]))
    configs = confluent_topic_configs(admin, topic)
    retention = configs["retention.ms"]
    assert retention.value == "120000" and not retention.is_default
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].is_default and configs["segment.bytes"].value == str(1024**3)
    assert configs["cleanup.policy"].value == "delete"

    missing = ConfluentConfigResource(ResourceType.TOPIC, unique("cf-missing"))
    assert failure(admin.describe_configs([missing])[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    node_id = settle({"cluster": admin.describe_cluster()})["cluster"].controller.id
    broker_resource = ConfluentConfigResource(ResourceType.BROKER, str(node_id))
    broker_configs = settle(admin.describe_configs([broker_resource]))[broker_resource]
    assert broker_configs["log.retention.hours"].value == "168"
    assert broker_configs["num.partitions"].is_read_only


def test_confluent_incremental_alter_configs(confluent_admin: AdminClient) -> None:
    admin = confluent_admin
    topic = unique("cf-incremental")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1, config={"retention.ms": "120000"})]))

    confluent_alter(admin, ResourceType.TOPIC, topic, ("retention.bytes", "4194304", AlterConfigOpType.SET),
                    ("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(TIMEOUT_S)
    configs = confluent_topic_configs(admin, topic)
    assert configs["retention.bytes"].value == "4194304"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "120000"  # untouched

    confluent_alter(admin, ResourceType.TOPIC, topic, ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
                    ("retention.ms", None, AlterConfigOpType.DELETE)).result(TIMEOUT_S)
    configs = confluent_topic_configs(admin, topic)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].is_default and configs["retention.ms"].value == "604800000"

    refused = confluent_alter(admin, ResourceType.TOPIC, topic, ("retention.ms", "1", AlterConfigOpType.APPEND))
    assert failure(refused).code() == KafkaError.INVALID_CONFIG
    refused = confluent_alter(admin, ResourceType.TOPIC, topic, ("segment.bytes", "tiny", AlterConfigOpType.SET))
    assert failure(refused).code() == KafkaError.INVALID_CONFIG


def test_confluent_legacy_alter_configs_replaces(confluent_admin: AdminClient) -> None:
    admin = confluent_admin
    topic = unique("cf-legacy")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1, config={"retention.ms": "120000"})]))
    resource = ConfluentConfigResource(ResourceType.TOPIC, topic, set_config={"segment.bytes": "1048576"})
    settle(admin.alter_configs([resource]))
    configs = confluent_topic_configs(admin, topic)
    assert configs["segment.bytes"].value == "1048576" and not configs["segment.bytes"].is_default
    assert configs["retention.ms"].is_default  # the legacy API replaced the whole set

    dry = ConfluentConfigResource(ResourceType.TOPIC, topic, set_config={"segment.bytes": "2097152"})
    settle(admin.alter_configs([dry], validate_only=True))
    assert confluent_topic_configs(admin, topic)["segment.bytes"].value == "1048576"


def test_confluent_describe_cluster(confluent_admin: AdminClient, broker: BrokerProcess) -> None:
    admin = confluent_admin
    description = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert description.cluster_id
    assert [(node.id, node.host, node.port) for node in description.nodes] == [
        (description.controller.id, "127.0.0.1", broker.port)]
    assert AclOperation.DESCRIBE_CONFIGS in description.authorized_operations
    assert AclOperation.ALTER_CONFIGS in description.authorized_operations
    assert admin.list_topics(timeout=TIMEOUT_S).cluster_id == description.cluster_id


def test_confluent_delete_records_then_consume(confluent_admin: AdminClient, broker: BrokerProcess) -> None:
    admin = confluent_admin
    topic = unique("cf-purge")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1)]))
    assert produce(broker.bootstrap, topic, [b"record-%d" % i for i in range(10)]) == [None] * 10

    [deleted] = settle(admin.delete_records([ConfluentTopicPartition(topic, 0, 6)])).values()
    assert deleted.low_watermark == 6
    refused = admin.delete_records([ConfluentTopicPartition(topic, 0, 99)])
    assert failure(next(iter(refused.values()))).code() == KafkaError.OFFSET_OUT_OF_RANGE

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("cf-purge-group"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), timeout=TIMEOUT_S) == (6, 10)
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        message = consumer.poll(TIMEOUT_S)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (6, b"record-6")
    finally:
        consumer.close()

    # -1 means "up to the high watermark": nothing is left.
    [deleted] = settle(admin.delete_records([ConfluentTopicPartition(topic, 0, -1)])).values()
    assert deleted.low_watermark == 10


def test_lowered_max_message_bytes_refuses_large_batches(confluent_admin: AdminClient, broker: BrokerProcess) -> None:
    admin = confluent_admin
    topic = unique("cf-small")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1)]))
    assert produce(broker.bootstrap, topic, [b"x" * 5000]) == [None]

    confluent_alter(admin, ResourceType.TOPIC, topic,
                    ("max.message.bytes", "2000", AlterConfigOpType.SET)).result(TIMEOUT_S)
    [refused, accepted] = produce(broker.bootstrap, topic, [b"x" * 5000, b"small"])
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert accepted is None


def test_broker_level_configs_flow_to_topics(fresh_broker: Callable[..., BrokerProcess]) -> None:
    """A dynamic broker default (AlterConfigs on the BROKER resource) changes every topic that does not
    override it. Its own broker: the change would leak into other tests."""
    process = fresh_broker()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topic = unique("cf-inherits")
    settle(admin.create_topics([ConfluentNewTopic(topic, 1, 1)]))
    node = str(admin.describe_cluster().result(TIMEOUT_S).controller.id)

    confluent_alter(admin, ResourceType.BROKER, node, ("log.retention.bytes", "123456", AlterConfigOpType.SET),
                    ("message.max.bytes", "3000", AlterConfigOpType.SET)).result(TIMEOUT_S)
    retention = confluent_topic_configs(admin, topic)["retention.bytes"]
    assert retention.value == "123456"
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    broker_resource = ConfluentConfigResource(ResourceType.BROKER, node)
    broker_configs = settle(admin.describe_configs([broker_resource]))[broker_resource]
    assert broker_configs["message.max.bytes"].value == "3000"
    [refused] = produce(process.bootstrap, topic, [b"y" * 6000])
    assert refused is not None and refused.code() == KafkaError.MSG_SIZE_TOO_LARGE

    refused_change = confluent_alter(admin, ResourceType.BROKER, node, ("num.partitions", "4", AlterConfigOpType.SET))
    assert failure(refused_change).code() == KafkaError.INVALID_REQUEST

    confluent_alter(admin, ResourceType.BROKER, node,
                    ("message.max.bytes", None, AlterConfigOpType.DELETE)).result(TIMEOUT_S)
    assert produce(process.bootstrap, topic, [b"y" * 6000]) == [None]
