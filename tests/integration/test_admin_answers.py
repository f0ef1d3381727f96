"""Kafka's answers to admin requests, seen through real admin clients (confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient).

* Dynamic broker configs: a key Kafka updates per broker is accepted for this node and refused for
  the whole cluster with Kafka's message, a cluster-wide default is accepted for "", and both
  survive a broker restart. Neither client lets a user name the cluster-wide resource "", so
  those requests are sent as frames built with kafkalite's codec.
* The ACL APIs answer SECURITY_DISABLED, as Kafka without an authorizer does; confluent-kafka
  no longer reports them as "not supported by broker".
* The admin APIs Kafka serves on a single node are advertised and answered: kafka-python's
  KafkaAdminClient no longer raises IncompatibleBrokerVersion for ElectLeaders,
  AlterReplicaLogDirs, DescribeQuorum, Alter/ListPartitionReassignments, DescribeTopicPartitions
  or ListClientMetricsResources, and gets Kafka's answers.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigSource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import ConfigResource as ConfluentConfigResource
from kafka import errors as kafka_errors
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType
from kafka.structs import TopicPartition, TopicPartitionReplica

from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkalite.protocol.messages.describe_configs_request import DescribeConfigsResource
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

TIMEOUT_S = 20.0
NODE = "1"
BROKER, SET = 4, 0
_M = TypeVar("_M", bound=Message)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent_alter(admin: AdminClient, restype: ResourceType, name: str,
                    *changes: tuple[str, str | None, AlterConfigOpType]) -> Future[Any]:
    entries = [ConfigEntry(key, value, incremental_operation=operation) for key, value, operation in changes]
    resource = ConfluentConfigResource(restype, name, incremental_configs=entries)
    return admin.incremental_alter_configs([resource])[resource]  # type: ignore[no-any-return]


def confluent_broker_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfluentConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)  # type: ignore[no-any-return]


def raw_request(broker: BrokerProcess, request: Message, response_type: type[_M], version: int) -> _M:
    """One request over its own connection, encoded and decoded with kafkalite's codec."""
    with socket.create_connection(broker.address, timeout=TIMEOUT_S) as connection:
        connection.sendall(encode_request(request, version, 1, "kafkalite-tests"))
        frame = b""
        while len(frame) < 4 or len(frame) < 4 + struct.unpack_from(">i", frame)[0]:
            chunk = connection.recv(65536)
            assert chunk, "the broker closed the connection"
            frame += chunk
    return response_type.decode_from(parse_response_header(frame[4:], response_type.API_KEY, version), version)


def alter_cluster_default(broker: BrokerProcess, key: str, value: str) -> tuple[int, str | None]:
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=BROKER, resource_name="",
        configs=[AlterableConfig(name=key, config_operation=SET, value=value)])])
    [result] = raw_request(broker, request, IncrementalAlterConfigsResponse, 1).responses
    return result.error_code, result.error_message


def describe_cluster_default(broker: BrokerProcess) -> dict[str, tuple[str | None, int]]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=BROKER, resource_name="")])
    [result] = raw_request(broker, request, DescribeConfigsResponse, 4).results
    return {entry.name: (entry.value, entry.config_source) for entry in result.configs}


def failure(future: Future[Any]) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT_S)
    return raised.value.args[0]  # type: ignore[no-any-return]


# dynamic broker configs --------------------------------------------------------------------------

def test_dynamic_broker_configs_are_accepted_as_kafka_does_and_survive_a_restart(
        fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    confluent_alter(admin, ResourceType.BROKER, NODE,
                    ("sasl.kerberos.min.time.before.relogin", "58000", AlterConfigOpType.SET)).result(TIMEOUT_S)
    read_only = failure(confluent_alter(admin, ResourceType.BROKER, NODE, ("log.dirs", "/x", AlterConfigOpType.SET)))
    assert read_only.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in read_only.str()

    assert alter_cluster_default(broker, "sasl.kerberos.min.time.before.relogin", "58000") == (
        42, "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(sasl.kerberos.min.time.before.relogin)")
    assert alter_cluster_default(broker, "log.retention.ms", "7200000") == (0, None)
    kafka_python = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:  # kafka-python first checks the key is one DescribeConfigs reports as dynamic
        assert kafka_python.alter_configs([ConfigResource(ConfigResourceType.BROKER, NODE,
                                                          {"log.cleaner.threads": "2"})]) == {"broker": {NODE: "OK"}}
    finally:
        kafka_python.close()

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = confluent_broker_configs(admin, NODE)
    relogin = node["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source) == ("58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    retention = node["log.retention.ms"]
    assert (retention.value, retention.source) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert node["log.cleaner.threads"].value == "2"
    assert describe_cluster_default(broker) == {
        "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)}


# ACLs -----------------------------------------------------------------------------------------------

def test_acl_apis_answer_as_kafka_without_an_authorizer(broker: BrokerProcess) -> None:
    """confluent-kafka no longer says the ACL API is not supported. librdkafka drops DescribeAcls'
    error code (it reports an empty list, as against Kafka without an authorizer) but reports
    SECURITY_DISABLED for each creation and deletion; kafka-python raises SecurityDisabledError."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    any_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                               AclPermissionType.ANY)
    assert admin.describe_acls(any_acl).result(timeout=TIMEOUT_S) == []
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    [created] = admin.create_acls([binding]).values()
    refused = failure(created)
    assert (refused.code(), refused.str()) == (KafkaError.SECURITY_DISABLED, "No Authorizer is configured.")
    [deleted] = admin.delete_acls([any_acl]).values()
    assert failure(deleted).code() == KafkaError.SECURITY_DISABLED

    kafka_python = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        with pytest.raises(kafka_errors.SecurityDisabledError, match="No Authorizer is configured on the broker"):
            kafka_python.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                                 permission_type=ACLPermissionType.ANY,
                                                 resource_pattern=ResourcePatternFilter(
                                                     KafkaResourceType.TOPIC, None, ACLResourcePatternType.ANY)))
    finally:
        kafka_python.close()


# the admin APIs of a single node ----------------------------------------------------------------------

def test_kafka_python_gets_kafkas_single_node_answers(fresh_broker: Callable[..., BrokerProcess],
                                                      tmp_path: Any) -> None:
    first_dir, second_dir = tmp_path / "first-log-dir", tmp_path / "second-log-dir"
    broker = fresh_broker("--data-dir", f"{first_dir},{second_dir}")  # the last --data-dir wins
    topic = unique("single-node")
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    confluent.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=TIMEOUT_S)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        elected = admin.elect_leaders(0, {topic: [0, 1]})  # ELECTION_NOT_NEEDED is not an error to it
        assert [(partition.partition_id, partition.error_code) for result in elected.replica_election_results
                for partition in result.partition_result] == [(0, 84), (1, 84)]
        with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
            admin.elect_leaders(0, {unique("missing"): [0]})

        quorum = admin.describe_metadata_quorum()
        [metadata] = quorum["topics"]
        [partition] = metadata["partitions"]
        assert (metadata["topic_name"], partition["leader_id"], partition["error"]) == ("__cluster_metadata", 1, None)
        assert [voter["replica_id"] for voter in partition["current_voters"]] == [1]

        accepted = admin.alter_partition_reassignments({TopicPartition(topic, 0): [1],
                                                        TopicPartition(topic, 1): [1, 2]})
        assert accepted[TopicPartition(topic, 0)] is None
        assert accepted[TopicPartition(topic, 1)] is kafka_errors.InvalidReplicationAssignmentError
        assert admin.list_partition_reassignments() == {}

        page = admin.describe_topic_partitions([topic], response_partition_limit=2)
        assert [[partition["partition_index"] for partition in described["partitions"]]
                for described in page["topics"]] == [[0, 1]]
        assert page["next_cursor"] == {"topic_name": topic, "partition_index": 2}
        rest = admin.describe_topic_partitions([topic], cursor=page["next_cursor"])
        assert [partition["partition_index"] for partition in rest["topics"][0]["partitions"]] == [2]
        assert rest["next_cursor"] is None

        admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "every-client",
                                            {"metrics": "*", "interval.ms": "60000"})], raise_on_unknown=False)
        assert admin.list_config_resources([ConfigResourceType.CLIENT_METRICS]) == {
            "client_metrics": ["every-client"]}

        target = str(second_dir.resolve())
        moved = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, partition, 1): target
                                              for partition in range(3)})
        assert set(moved.values()) == {kafka_errors.NoError}
        assert sorted(path.name for path in second_dir.iterdir() if path.name.startswith(topic)) == [
            f"{topic}-0", f"{topic}-1", f"{topic}-2"]
        nowhere = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): str(tmp_path / "elsewhere"),
                                                TopicPartitionReplica(unique("missing"), 0, 1): target})
        assert sorted(error.__name__ for error in nowhere.values()) == ["LogDirNotFoundError",
                                                                        "ReplicaNotAvailableError"]
    finally:
        admin.close()
