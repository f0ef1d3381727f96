"""Fault injection without sockets: the fault descriptions, the registry on a manual clock, and the
answers built with an injected error (each encoded at the version asked, as a client would read it)."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.broker.admin.fault_responses import (
    error_response,
    error_response_supported,
    fail_partitions,
    leader_unavailable_metadata,
    request_partitions,
    split_request,
)
from kafkalite.broker.admin.faults import FaultError, FaultKind, FaultRegistry, parse_fault
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import (
    AddPartitionsToTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetFetchRequest,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic
from kafkalite.protocol.messages.metadata_response import MetadataResponsePartition, MetadataResponseTopic
from kafkalite.protocol.messages.offset_fetch_request import OffsetFetchRequestGroup
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse

ORDERS_ID = uuid.UUID(int=7)


class Topics:
    """Two topics: orders (3 partitions, with an id) and audit (1)."""

    counts = {"orders": 3, "audit": 1}

    def name_of(self, topic_id: uuid.UUID) -> str:
        return "orders" if topic_id == ORDERS_ID else ""

    def id_of(self, name: str) -> uuid.UUID:
        return ORDERS_ID if name == "orders" else uuid.UUID(int=0)

    def partition_count(self, name: str) -> int:
        return self.counts.get(name, 0)

    def names(self) -> list[str]:
        return list(self.counts)


TOPICS = Topics()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def produce(*partitions: tuple[str, int]) -> ProduceRequest:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b"x") for i in indexes])
        for topic, indexes in by_topic.items()])


def registry() -> tuple[FaultRegistry, Clock]:
    clock = Clock()
    return FaultRegistry(clock=clock, wall_clock_ms=lambda: 1_000), clock


def match(faults: FaultRegistry, api_key: int, request: object, client_id: str | None = "app", version: int = 9):
    return faults.match(api_key, client_id, request, version,
                        lambda key, v, body: request_partitions(key, v, body, TOPICS))


# descriptions ----------------------------------------------------------------------------------
def test_the_example_of_the_docs_is_an_error_fault_for_the_next_three_produce_requests() -> None:
    spec = parse_fault({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3})
    assert (spec.kind, spec.api_key, spec.error, spec.count) == (FaultKind.ERROR, 0, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                                 3)
    assert spec.duration_ms == 60_000 and spec.probability == 1.0


def test_names_and_numbers_are_both_understood() -> None:
    assert parse_fault({"api": 1, "error": 6}) == parse_fault({"api": "fetch", "error": "not_leader_or_follower"})
    assert parse_fault({"kind": "disk_full"}).error is ErrorCode.KAFKA_STORAGE_ERROR
    assert parse_fault({"kind": "leader_unavailable", "topic": "orders", "partition": 1,
                        "duration_ms": 500}).duration_ms == 500


@pytest.mark.parametrize(("body", "says"), [
    ({"api": "Produce"}, "kind is missing"),
    ({"api": "Produce", "error": "NO_SUCH_ERROR"}, "unknown error"),
    ({"api": "Produsce", "error": 6}, "unknown API"),
    ({"api": "Produce", "error": 6, "colour": "red"}, "unknown field"),
    ({"api": "Produce", "error": "NONE"}, "other than NONE"),
    ({"kind": "latency", "api": "Fetch"}, "needs delay_ms"),
    ({"kind": "leader_unavailable"}, "needs a topic"),
    ({"kind": "leader_unavailable", "topic": "t", "api": "Produce"}, "give no api"),
    ({"kind": "drop_before"}, "needs an api"),
    ({"api": "JoinGroup", "error": 15, "topic": "t"}, "name no partitions"),
    ({"kind": "stall", "api": "Fetch", "delay_ms": 5, "topic": "t"}, "cannot be narrowed"),
    ({"api": "Produce", "error": 6, "partition": 1}, "partition needs a topic"),
    ({"api": "Produce", "error": 6, "count": 0}, "count must be 1 or more"),
    ({"api": "Produce", "error": 6, "duration_ms": 7_200_000}, "at most 3600000"),
    ({"api": "Produce", "error": 6, "probability": 0}, "probability"),
    ({"kind": "disk_full", "api": "Fetch"}, "Produce only"),
    ([1, 2], "JSON object"),
])
def test_a_fault_that_cannot_be_injected_is_refused_with_the_reason(body: object, says: str) -> None:
    with pytest.raises(FaultError, match=says):
        parse_fault(body)


# the registry --------------------------------------------------------------------------------------
def test_a_counted_fault_takes_the_next_n_matching_requests_then_goes() -> None:
    faults, _ = registry()
    fault = faults.add({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2})
    assert faults.active
    assert match(faults, 3, MetadataRequest()) is None  # another API
    assert match(faults, 0, produce(("orders", 0))).fault is fault
    assert faults.as_json()[0]["remaining"] == 1
    assert match(faults, 0, produce(("orders", 0))).fault is fault
    assert match(faults, 0, produce(("orders", 0))) is None
    assert not faults.active and faults.faults() == [] and fault.applied == 2


def test_every_fault_expires_by_itself() -> None:
    faults, clock = registry()
    faults.add({"kind": "latency", "api": "Fetch", "delay_ms": 10, "duration_ms": 2000})
    assert faults.as_json()[0]["expires_in_ms"] == 2000
    clock.now += 1.999
    assert len(faults.faults()) == 1
    clock.now += 0.002
    assert match(faults, 1, FetchRequest()) is None
    assert not faults.active


def test_client_id_topic_and_partition_narrow_a_fault() -> None:
    faults, _ = registry()
    faults.add({"api": "Produce", "error": 6, "client_id": "billing", "topic": "orders", "partition": 1})
    assert match(faults, 0, produce(("orders", 1)), client_id="shipping") is None
    assert match(faults, 0, produce(("orders", 0), ("audit", 0)), client_id="billing") is None
    hit = match(faults, 0, produce(("orders", 0), ("orders", 1)), client_id="billing")
    assert hit is not None and hit.partitions == frozenset({("orders", 1)})


def test_a_fraction_of_requests_with_a_seed_is_the_same_fraction_every_run() -> None:
    def taken() -> list[bool]:
        faults, _ = registry()
        faults.add({"api": "Heartbeat", "error": "REBALANCE_IN_PROGRESS", "probability": 0.3, "seed": 42})
        return [match(faults, 12, object()) is not None for _ in range(200)]

    first = taken()
    assert first == taken()
    assert 30 <= sum(first) <= 90


def test_the_oldest_matching_fault_decides_and_faults_are_listed_removed_and_cleared() -> None:
    faults, _ = registry()
    first = faults.add({"kind": "drop_before", "api": "Produce"})
    faults.add({"api": "Produce", "error": 6})
    assert match(faults, 0, produce(("orders", 0))).fault is first
    assert [item["kind"] for item in faults.as_json()] == ["drop_before", "error"]
    assert faults.remove(first.fault_id) and not faults.remove(first.fault_id)
    assert faults.clear() == 1 and not faults.active


def test_leader_unavailable_takes_every_api_that_names_the_partition_and_metadata() -> None:
    faults, _ = registry()
    faults.add({"kind": "leader_unavailable", "topic": "orders", "partition": 2})
    assert match(faults, 0, produce(("orders", 1))) is None
    assert match(faults, 0, produce(("orders", 2))).partitions == frozenset({("orders", 2)})
    fetch = FetchRequest(topics=[FetchTopic(topic_id=ORDERS_ID, partitions=[FetchPartition(partition=2)])])
    assert match(faults, 1, fetch, version=13).partitions == frozenset({("orders", 2)})
    metadata = MetadataRequest(topics=[MetadataRequestTopic(name="orders")])
    assert match(faults, 3, metadata).partitions == frozenset({("orders", 2)})
    assert match(faults, 3, MetadataRequest(topics=None)).partitions == frozenset({("orders", 2)})
    assert match(faults, 12, object()) is None  # Heartbeat names no partition
    assert len(faults.faults()) == 1  # time-bound, not counted


# answers built with an error -------------------------------------------------------------------
def encodes(message: object, version: int) -> None:
    message.encode(version)  # type: ignore[attr-defined]


def test_a_produce_error_answers_every_partition_and_writes_nothing() -> None:
    request = produce(("orders", 0), ("orders", 2), ("audit", 0))
    response = error_response(0, 9, request, ErrorCode.NOT_LEADER_OR_FOLLOWER, TOPICS)
    assert isinstance(response, ProduceResponse)
    answered = {(t.name, p.index): (p.error_code, p.base_offset) for t in response.responses
                for p in t.partition_responses}
    assert answered == {("orders", 0): (6, -1), ("orders", 2): (6, -1), ("audit", 0): (6, -1)}
    encodes(response, 9)


def test_a_fetch_error_names_topics_by_id_from_v13() -> None:
    request = FetchRequest(topics=[FetchTopic(topic_id=ORDERS_ID, partitions=[FetchPartition(partition=1)])])
    response = error_response(1, 13, request, ErrorCode.NOT_LEADER_OR_FOLLOWER, TOPICS)
    (topic,) = response.responses
    assert topic.topic_id == ORDERS_ID
    (partition,) = topic.partitions
    assert (partition.partition_index, partition.error_code, partition.high_watermark, partition.records) == (
        1, 6, -1, None)
    encodes(response, 13)


@pytest.mark.parametrize(("request_message", "version", "where"), [
    (JoinGroupRequest(group_id="g"), 9, lambda r: r.error_code),
    (FindCoordinatorRequest(key="g"), 3, lambda r: (r.error_code, r.node_id)),
    (FindCoordinatorRequest(coordinator_keys=["g", "h"]), 4, lambda r: [(c.key, c.error_code) for c in r.coordinators]),
    (OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="g")]), 8,
     lambda r: [(g.group_id, g.error_code) for g in r.groups]),
    (MetadataRequest(topics=[MetadataRequestTopic(name="orders")]), 12,
     lambda r: [(t.name, t.error_code) for t in r.topics]),
    (AddPartitionsToTxnRequest(v3_and_below_transactional_id="t", v3_and_below_topics=[
        AddPartitionsToTxnTopic(name="orders", partitions=[0, 1])]), 3,
     lambda r: [(t.name, p.partition_index, p.partition_error_code) for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition]),
])
def test_errors_go_where_each_api_keeps_them(request_message: object, version: int, where: object) -> None:
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    response = error_response(request_message.API_KEY, version, request_message, code, TOPICS)  # type: ignore
    assert response is not None
    expected = {
        11: code, 10: [("g", 15), ("h", 15)] if version >= 4 else (15, -1), 9: [("g", 15)],
        3: [("orders", 15)], 24: [("orders", 0, 15), ("orders", 1, 15)],
    }[request_message.API_KEY]  # type: ignore[attr-defined]
    assert where(response) == expected  # type: ignore[operator]
    encodes(response, version)


def test_every_api_a_client_uses_can_be_given_an_error() -> None:
    for api_key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 19, 20, 22, 24, 25, 26, 28, 60):
        assert error_response_supported(api_key), api_key
    with pytest.raises(FaultError, match="not offered for DescribeConfigs"):  # errors per config resource
        parse_fault({"api": "DescribeConfigs", "error": "UNKNOWN_SERVER_ERROR"})


def test_some_partitions_of_a_write_are_taken_out_and_answered_with_the_error() -> None:
    request = produce(("orders", 0), ("orders", 1), ("audit", 0))
    failing = frozenset({("orders", 1), ("audit", 0)})
    kept = split_request(0, 9, request, failing, TOPICS)
    assert [(t.name, [p.index for p in t.partition_data]) for t in kept.topic_data] == [("orders", [0])]
    assert len(request.topic_data) == 2 and len(request.topic_data[0].partition_data) == 2  # the original stays
    answer = ProduceResponse(responses=[TopicProduceResponse(name="orders", partition_responses=[
        PartitionProduceResponse(index=0, base_offset=41)])])
    fail_partitions(0, 9, request, answer, failing, ErrorCode.KAFKA_STORAGE_ERROR, TOPICS)
    answered = {(t.name, p.index): (p.error_code, p.base_offset) for t in answer.responses
                for p in t.partition_responses}
    assert answered == {("orders", 0): (0, 41), ("orders", 1): (56, -1), ("audit", 0): (56, -1)}


def test_metadata_shows_an_unavailable_leader_as_kafka_does_during_an_election() -> None:
    response = MetadataResponse(topics=[MetadataResponseTopic(name="orders", partitions=[
        MetadataResponsePartition(partition_index=index, leader_id=1, leader_epoch=0, replica_nodes=[1],
                                  isr_nodes=[1]) for index in range(2)])])
    leader_unavailable_metadata(response, frozenset({("orders", 1)}))
    first, second = response.topics[0].partitions
    assert (first.error_code, first.leader_id) == (0, 1)
    assert (second.error_code, second.leader_id, second.isr_nodes) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, [])
