"""The admin APIs a one-broker Kafka 4 cluster answers, driven without sockets: an in-memory (or
on-disk) Cluster, each request round-tripped through the codec at every version served.
ElectLeaders, partition reassignments, DescribeQuorum,
DescribeTopicPartitions and its cursor, client-metrics resources, AlterReplicaLogDirs and the log
directories, and the registry that says why every other API is not served."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.registry import HANDLERS, NOT_SERVED, RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    REQUESTS,
    AlterPartitionReassignmentsRequest,
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListClientMetricsResourcesRequest,
    ListPartitionReassignmentsRequest,
)
from kafkalite.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from kafkalite.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDir, AlterReplicaLogDirTopic
from kafkalite.protocol.messages.describe_quorum_request import PartitionData, TopicData
from kafkalite.protocol.messages.describe_topic_partitions_request import Cursor, TopicRequest
from kafkalite.protocol.messages.elect_leaders_request import TopicPartitions
from kafkalite.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
from kafkalite.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsTopics
from kafkalite.protocol.primitives import ZERO_UUID
from kafkalite.protocol.records import Record, RecordBatch, build_record_batch, iter_batches

NODE = 1


def open_cluster(**settings: str) -> Cluster:
    config = BrokerConfig({"log.storage": "memory", "node.id": str(NODE), **settings})
    cluster = Cluster(config)
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    return cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = open_cluster()
    cluster.topics.create("alpha", 3)
    cluster.topics.create("beta", 2)
    cluster.topics.create("gamma", 1)
    yield cluster
    cluster.close()


def call(cluster: Cluster, request: Message, version: int) -> Any:
    handler = HANDLERS[request.API_KEY]
    assert handler.supports(version)
    decoded = handler.request_type.decode(request.encode(version), version)
    response = handler.handle(RequestContext(cluster, request.API_KEY, version, 7, "test", "127.0.0.1:1"), decoded)
    assert isinstance(response, handler.response_type)
    return handler.response_type.decode(response.encode(version), version)


def served(api_key: int) -> range:
    handler = HANDLERS[api_key]
    return range(handler.min_version, handler.max_version + 1)


# ElectLeaders -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", served(43))
def test_elect_leaders_is_never_needed(cluster: Cluster, version: int) -> None:
    request = ElectLeadersRequest(election_type=0, topic_partitions=[
        TopicPartitions(topic="alpha", partitions=[0, 2, 3]), TopicPartitions(topic="nope", partitions=[0])])
    response = call(cluster, request, version)
    assert [(result.topic, [(partition.partition_id, partition.error_code, partition.error_message)
                            for partition in result.partition_result])
            for result in response.replica_election_results] == [
        ("alpha", [(0, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
                   (2, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
                   (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as alpha-3")]),
        ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")])]
    everything = call(cluster, ElectLeadersRequest(election_type=1, topic_partitions=None), version)
    assert {result.topic: result.partition_result for result in everything.replica_election_results} == {
        "alpha": [], "beta": [], "gamma": []}  # Kafka leaves out what needed no election


def test_elect_leaders_refuses_an_unknown_election_type(cluster: Cluster) -> None:
    response = call(cluster, ElectLeadersRequest(election_type=5, topic_partitions=None), 2)
    assert response.error_code == ErrorCode.INVALID_REQUEST


# partition reassignments --------------------------------------------------------------------------

def test_alter_partition_reassignments_accepts_only_this_broker(cluster: Cluster) -> None:
    request = AlterPartitionReassignmentsRequest(topics=[
        ReassignableTopic(name="alpha", partitions=[
            ReassignablePartition(partition_index=0, replicas=[NODE]),
            ReassignablePartition(partition_index=1, replicas=[NODE, 2]),
            ReassignablePartition(partition_index=2, replicas=[NODE, NODE]),
            ReassignablePartition(partition_index=5, replicas=[NODE])]),
        ReassignableTopic(name="beta", partitions=[ReassignablePartition(partition_index=0, replicas=[]),
                                                   ReassignablePartition(partition_index=1, replicas=None)]),
        ReassignableTopic(name="nope", partitions=[ReassignablePartition(partition_index=0, replicas=[NODE])])])
    response = call(cluster, request, 0)
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert {(topic.name, partition.partition_index): (partition.error_code, partition.error_message)
            for topic in response.responses for partition in topic.partitions} == {
        ("alpha", 0): (ErrorCode.NONE, None),
        ("alpha", 1): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes broker 2, but no such broker is registered."),
        ("alpha", 2): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "The manual partition assignment includes the broker 1 more than once."),
        ("alpha", 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition alpha:5."),
        ("beta", 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes an empty replica list."),
        ("beta", 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
    }


@pytest.mark.parametrize("topics", [None, [ListPartitionReassignmentsTopics(name="alpha", partition_indexes=[0])]])
def test_list_partition_reassignments_is_empty(cluster: Cluster,
                                               topics: list[ListPartitionReassignmentsTopics] | None) -> None:
    response = call(cluster, ListPartitionReassignmentsRequest(topics=topics), 0)
    assert (response.error_code, response.error_message, response.topics) == (ErrorCode.NONE, None, [])


# DescribeQuorum -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", served(55))
def test_describe_quorum_has_this_node_as_leader_and_only_voter(cluster: Cluster, version: int) -> None:
    before = int(time.time() * 1000)
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData(partition_index=0)])])
    response = call(cluster, request, version)
    [topic] = response.topics
    [partition] = topic.partitions
    assert (topic.topic_name, partition.error_code, partition.leader_id, partition.leader_epoch) == (
        "__cluster_metadata", ErrorCode.NONE, NODE, 1)
    [voter] = partition.current_voters
    assert (voter.replica_id, partition.observers) == (NODE, [])
    if version >= 1:
        assert voter.last_fetch_timestamp >= before and voter.last_caught_up_timestamp >= before
    if version >= 2:
        [node] = response.nodes
        assert node.node_id == NODE
        assert [(listener.name, listener.host, listener.port) for listener in node.listeners] == [
            ("PLAINTEXT", "127.0.0.1", 9092)]


def test_describe_quorum_knows_only_the_metadata_partition(cluster: Cluster) -> None:
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="alpha", partitions=[
        PartitionData(partition_index=0), PartitionData(partition_index=1)])])
    [topic] = call(cluster, request, 2).topics
    assert [(partition.partition_index, partition.error_code) for partition in topic.partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


# DescribeTopicPartitions --------------------------------------------------------------------------

def page(cluster: Cluster, names: list[str], limit: int, cursor: tuple[str, int] | None = None
         ) -> tuple[list[tuple[str, list[int]]], tuple[str, int] | None]:
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=name) for name in names], response_partition_limit=limit,
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    response = call(cluster, request, 0)
    listed = [(topic.name, [partition.partition_index for partition in topic.partitions])
              for topic in response.topics if topic.error_code == ErrorCode.NONE and not topic.name.startswith("__")]
    following = response.next_cursor
    return listed, None if following is None else (following.topic_name, following.partition_index)


def test_describe_topic_partitions_pages_with_a_cursor(cluster: Cluster) -> None:
    names = ["gamma", "alpha", "beta"]
    assert page(cluster, names, 2) == ([("alpha", [0, 1])], ("alpha", 2))
    assert page(cluster, names, 2, ("alpha", 2)) == ([("alpha", [2]), ("beta", [0])], ("beta", 1))
    assert page(cluster, names, 2, ("beta", 1)) == ([("beta", [1]), ("gamma", [0])], None)
    assert page(cluster, names, 3) == ([("alpha", [0, 1, 2])], ("beta", 0))  # the limit ends at a topic boundary
    assert page(cluster, names, 100) == ([("alpha", [0, 1, 2]), ("beta", [0, 1]), ("gamma", [0])], None)
    everything, cursor = page(cluster, [], 100)
    assert (everything, cursor) == ([("alpha", [0, 1, 2]), ("beta", [0, 1]), ("gamma", [0])], None)


def test_describe_topic_partitions_fields_errors_and_the_broker_limit(cluster: Cluster) -> None:
    request = DescribeTopicPartitionsRequest(topics=[TopicRequest(name=name) for name in ("beta", "nope", "bad/")])
    response = call(cluster, request, 0)
    by_name = {topic.name: topic for topic in response.topics}
    beta = by_name["beta"]
    topic = cluster.topics.get("beta")
    assert topic is not None and (beta.topic_id, beta.is_internal) == (topic.topic_id, False)
    partition = beta.partitions[0]
    assert (partition.leader_id, partition.leader_epoch, partition.replica_nodes, partition.isr_nodes,
            partition.offline_replicas) == (NODE, 0, [NODE], [NODE], [])
    assert beta.topic_authorized_operations > 0
    assert (by_name["nope"].error_code, by_name["nope"].topic_id) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID)
    assert by_name["bad/"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    bad_cursor = call(cluster, DescribeTopicPartitionsRequest(topics=[TopicRequest(name="beta")],
                                                              cursor=Cursor(topic_name="alpha")), 0)
    assert [(topic.name, topic.error_code) for topic in bad_cursor.topics] == [("beta", ErrorCode.INVALID_REQUEST)]
    capped = open_cluster(**{"max.request.partition.size.limit": "2"})
    try:
        capped.topics.create("wide", 5)
        assert page(capped, ["wide"], 2000) == ([("wide", [0, 1])], ("wide", 2))
        assert page(capped, ["wide"], 0) == ([("wide", [0])], ("wide", 1))  # at least one
    finally:
        capped.close()


# client-metrics resources -------------------------------------------------------------------------

def test_list_client_metrics_resources_lists_the_subscriptions(cluster: Cluster) -> None:
    assert call(cluster, ListClientMetricsResourcesRequest(), 0).client_metrics_resources == []
    for name in ("producers", "all"):
        request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
            resource_type=16, resource_name=name, configs=[AlterableConfig(name="metrics", config_operation=0,
                                                                           value="*")])])
        assert call(cluster, request, 1).responses[0].error_code == ErrorCode.NONE
    response = call(cluster, ListClientMetricsResourcesRequest(), 0)
    assert (response.error_code, [item.name for item in response.client_metrics_resources]) == (
        ErrorCode.NONE, ["all", "producers"])


# AlterReplicaLogDirs and the log directories -------------------------------------------------------

def alter_log_dirs(cluster: Cluster, moves: dict[str, list[tuple[str, int]]], version: int = 2) -> dict[Any, int]:
    request = AlterReplicaLogDirsRequest(dirs=[
        AlterReplicaLogDir(path=path, topics=[AlterReplicaLogDirTopic(name=name, partitions=[index])
                                              for name, index in partitions])
        for path, partitions in moves.items()])
    response = call(cluster, request, version)
    return {(topic.topic_name, partition.partition_index): partition.error_code
            for topic in response.results for partition in topic.partitions}


@pytest.mark.parametrize("version", served(34))
def test_alter_replica_log_dirs_in_memory(cluster: Cluster, version: int) -> None:
    assert alter_log_dirs(cluster, {"memory": [("alpha", 0), ("nope", 0)], "/elsewhere": [("beta", 0)]},
                          version) == {("alpha", 0): ErrorCode.NONE, ("nope", 0): ErrorCode.REPLICA_NOT_AVAILABLE,
                                       ("beta", 0): ErrorCode.LOG_DIR_NOT_FOUND}


def produce(cluster: Cluster, topic: str, partition: int, values: list[bytes]) -> None:
    now = int(time.time() * 1000)
    target = cluster.topics.partition(topic, partition)
    assert target is not None
    target.append_from_client(build_record_batch([Record(offset=i, timestamp=now, key=None, value=value)
                                                  for i, value in enumerate(values)]), now)


def values_of(cluster: Cluster, topic: str, partition: int) -> list[bytes | None]:
    target = cluster.topics.partition(topic, partition)
    assert target is not None
    read = target.read(target.log_start_offset, 1 << 20, min_one_batch=True)
    return [record.value for batch in iter_batches(b"".join(read.records)) if isinstance(batch, RecordBatch)
            for record in batch.records()]


def where(cluster: Cluster) -> dict[str, list[tuple[str, list[int]]]]:
    response = call(cluster, DescribeLogDirsRequest(topics=None), 4)
    return {result.log_dir: sorted((topic.name, sorted(partition.partition_index for partition in topic.partitions))
                                   for topic in result.topics if not topic.name.startswith("__"))
            for result in response.results}


def test_partitions_spread_over_log_dirs_and_move_between_them(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    settings = {"log.storage": "disk", "log.dirs": f"{first},{second}", "log.segment.bytes": "150"}
    cluster = open_cluster(**settings)
    try:
        cluster.topics.create("orders", 2)
        placed = {index: cluster.log_manager.log_dir_of("orders", index) for index in (0, 1)}
        assert {placed[0], placed[1]} == {first, second}  # new partitions go where there are fewest
        produce(cluster, "orders", 0, [b"a", b"b"])
        produce(cluster, "orders", 0, [b"c"])  # a second segment
        source = placed[0]
        assert source is not None
        target = second if source == first else first
        assert alter_log_dirs(cluster, {str(target.resolve()): [("orders", 0)]}) == {("orders", 0): ErrorCode.NONE}
        assert cluster.log_manager.log_dir_of("orders", 0) == target
        assert not (source / "orders-0").exists() and (target / "orders-0").is_dir()
        listed = where(cluster)
        assert 0 in dict(listed[str(target.resolve())])["orders"]
        assert 0 not in dict(listed[str(source.resolve())]).get("orders", [])
        produce(cluster, "orders", 0, [b"d"])  # appends go on in the new directory
        assert values_of(cluster, "orders", 0) == [b"a", b"b", b"c", b"d"]
        assert alter_log_dirs(cluster, {str(target.resolve()): [("orders", 0)]}) == {("orders", 0): ErrorCode.NONE}
        assert alter_log_dirs(cluster, {str(tmp_path / "three"): [("orders", 0)]}) == {
            ("orders", 0): ErrorCode.LOG_DIR_NOT_FOUND}
    finally:
        cluster.close()
    reopened = open_cluster(**settings)
    try:
        assert reopened.log_manager.log_dir_of("orders", 0) == target
        assert values_of(reopened, "orders", 0) == [b"a", b"b", b"c", b"d"]
    finally:
        reopened.close()


def test_a_move_interrupted_by_a_crash_is_completed_or_dropped(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    settings = {"log.storage": "disk", "log.dirs": f"{first},{second}"}
    cluster = open_cluster(**settings)
    cluster.topics.create("orders", 2)
    produce(cluster, "orders", 0, [b"kept"])
    produce(cluster, "orders", 1, [b"moved"])
    dirs = {index: cluster.log_manager.log_dir_of("orders", index) for index in (0, 1)}
    cluster.close()
    import shutil

    for index, source in dirs.items():
        assert source is not None
        other = second if source == first else first
        token = uuid.uuid4().hex
        shutil.copytree(source / f"orders-{index}", other / f"orders-{index}.{token}-future")
        if index == 1:  # the crash came after the source was renamed: the move completes
            (source / f"orders-{index}").rename(source / f"orders-{index}.{token}-delete")
    reopened = open_cluster(**settings)
    try:
        assert reopened.log_manager.log_dir_of("orders", 0) == dirs[0]  # the copy was dropped
        assert reopened.log_manager.log_dir_of("orders", 1) != dirs[1]
        assert values_of(reopened, "orders", 0) == [b"kept"] and values_of(reopened, "orders", 1) == [b"moved"]
        assert not [path for root in (first, second) for path in root.iterdir()
                    if path.name.endswith(("-future", "-delete"))]
    finally:
        reopened.close()


# the registry ------------------------------------------------------------------------------------

def test_every_api_is_served_or_says_why_not() -> None:
    assert not set(HANDLERS) & set(NOT_SERVED)
    assert set(REQUESTS) == set(HANDLERS) | set(NOT_SERVED)
    for key in (29, 30, 31, 34, 43, 45, 46, 55, 74, 75):
        assert key in HANDLERS
