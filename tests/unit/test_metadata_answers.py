"""Metadata answers written from a topic's kept encoding: byte for byte the field-by-field answer at
every version, refreshed when partitions are added, and built in full for whoever reads or changes
the partitions of an answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.handlers.metadata import TOPIC_OPERATIONS, handle_metadata
from kafkalite.broker.handlers.registry import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import MetadataRequest, MetadataResponse
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic

NODE = 3


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster(BrokerConfig({"log.storage": "memory", "node.id": str(NODE)}))
    made.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    made.open()
    made.topics.create("orders", 5)
    made.topics.create("audit", 2)
    yield made
    made.close()


def metadata(cluster: Cluster, version: int, names: list[str] | None = None,
             operations: bool = False) -> MetadataResponse:
    request = MetadataRequest(topics=None if names is None else [MetadataRequestTopic(name=name) for name in names],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=operations)
    response = handle_metadata(RequestContext(cluster, 3, version, 7, "test-client", "127.0.0.1:5555"), request)
    assert isinstance(response, MetadataResponse)
    return response


def field_by_field(response: MetadataResponse, version: int) -> bytes:
    """The answer encoded after every topic's partitions were read (so written field by field)."""
    for topic in response.topics:
        assert len(topic.partitions) >= 0
    return response.encode(version)


@pytest.mark.parametrize("version", range(1, 13))
def test_kept_encodings_are_the_field_by_field_answer(cluster: Cluster, version: int) -> None:
    for names in (None, ["orders"], ["audit", "orders"]):
        for operations in (False, True):
            kept = metadata(cluster, version, names, operations).encode(version)
            again = metadata(cluster, version, names, operations).encode(version)  # from the kept bytes
            assert kept == again == field_by_field(metadata(cluster, version, names, operations), version)
    assert cluster.topics.get("orders").answers  # type: ignore[union-attr]  # the kept encodings
    decoded = MetadataResponse.decode(metadata(cluster, version, ["orders"]).encode(version), version)
    (orders,) = decoded.topics
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in orders.partitions] == \
           [(index, NODE, [NODE], [NODE]) for index in range(5)]


def test_added_partitions_are_in_the_next_answer(cluster: Cluster) -> None:
    assert len(MetadataResponse.decode(metadata(cluster, 12, ["orders"]).encode(12), 12).topics[0].partitions) == 5
    cluster.topics.create_partitions("orders", 8)
    answer = MetadataResponse.decode(metadata(cluster, 12, ["orders"]).encode(12), 12)
    assert [p.partition_index for p in answer.topics[0].partitions] == list(range(8))


def test_an_answer_changed_after_the_handler_is_written_as_changed(cluster: Cluster) -> None:
    metadata(cluster, 12).encode(12)  # the kept encodings exist
    response = metadata(cluster, 12, ["orders", "audit"])
    orders, audit = response.topics
    orders.partitions[2].error_code = ErrorCode.LEADER_NOT_AVAILABLE  # as a fault injection does
    orders.partitions[2].leader_id = -1
    audit.topic_authorized_operations = TOPIC_OPERATIONS  # as the authorizer does
    decoded = MetadataResponse.decode(response.encode(12), 12)
    assert [(p.error_code, p.leader_id) for p in decoded.topics[0].partitions] == \
           [(0, NODE), (0, NODE), (ErrorCode.LEADER_NOT_AVAILABLE, -1), (0, NODE), (0, NODE)]
    assert decoded.topics[1].topic_authorized_operations == TOPIC_OPERATIONS
    fresh = MetadataResponse.decode(metadata(cluster, 12, ["orders"]).encode(12), 12)
    assert all(p.error_code == 0 for p in fresh.topics[0].partitions)  # the kept encoding did not change
