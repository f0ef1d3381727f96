"""A consumer's Fetch of one partition without a session takes paths of its own (the plan, the read):
what they give is what the general paths give, on every version, for every outcome of a read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.core.fetch_sessions import WantedPartition, plan_fetch
from kafkalite.broker.handlers.fetch import _read_all, handle_fetch
from kafkalite.broker.handlers.registry import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.fetch_codec import NO_CURRENT_LEADER, NO_DIVERGING_EPOCH, NO_SNAPSHOT_ID
from kafkalite.protocol.messages import FetchRequest, FetchResponse
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.records import RecordBatchBuilder

VERSIONS = range(4, 18)
NOW_MS = 1_700_000_000_000


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster(BrokerConfig({"log.storage": "memory"}))
    made.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    made.open()
    made.topics.create("orders", 3)
    made.topics.create("gone", 1)
    for index, count in ((0, 3), (1, 1)):
        builder = RecordBatchBuilder()
        for value in range(count):
            builder.append(timestamp=NOW_MS, key=None, value=b"v%d" % value)
        partition = made.topics.partition("orders", index)
        assert partition is not None
        partition.append_internal(builder.build(), NOW_MS)
    yield made
    made.close()


def fetch_topic(cluster: Cluster, name: str, version: int, *partitions: FetchPartition) -> FetchTopic:
    found = cluster.topics.get(name)
    topic_id = found.topic_id if found is not None else uuid.UUID(int=77)
    return FetchTopic(topic=name if version <= 12 else "", topic_id=topic_id if version >= 13 else uuid.UUID(int=0),
                      partitions=list(partitions))


# (topic, partition index, fetch offset, current leader epoch): every outcome of one partition's read
CASES = [("orders", 0, 0, -1), ("orders", 0, 2, -1), ("orders", 0, 3, -1), ("orders", 1, 0, 0), ("orders", 2, 0, -1),
         ("orders", 0, 99, -1), ("orders", 0, 0, 5), ("orders", 7, 0, -1), ("nowhere", 0, 0, -1), ("gone", 0, 0, -1)]


def one_request(cluster: Cluster, version: int, case: tuple[str, int, int, int], *, session_id: int = 0,
                epoch: int = -1, max_bytes: int = 1 << 20, extra: FetchTopic | None = None) -> FetchRequest:
    name, index, offset, leader_epoch = case
    topics = [fetch_topic(cluster, name, version, FetchPartition(
        partition=index, current_leader_epoch=leader_epoch, fetch_offset=offset, partition_max_bytes=1 << 20))]
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, session_id=session_id,
                        session_epoch=epoch, topics=topics + ([extra] if extra is not None else []))


def fields(wanted: WantedPartition) -> tuple[Any, ...]:
    return tuple(getattr(wanted, name) for name in WantedPartition.__slots__)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_sessionless_plan_lists_the_request_s_partitions(cluster: Cluster, version: int) -> None:
    by_id = version >= 13
    for case in CASES:
        name, index, offset, _ = case
        plan = plan_fetch(cluster.fetch_sessions, cluster.topics, one_request(cluster, version, case), version, NOW_MS)
        assert (plan.error, plan.session, plan.session_id, plan.incremental) == (ErrorCode.NONE, None, 0, False)
        [wanted] = plan.partitions
        topic = cluster.topics.get(name)
        partition = topic.partitions[index] if topic is not None and index < len(topic.partitions) else None
        if partition is not None:
            error = ErrorCode.NONE
        elif topic is None and by_id:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fields(wanted) == (
            (topic.topic_id if topic is not None else uuid.UUID(int=77)) if by_id else name,
            topic.name if topic is not None else (None if by_id else name),
            topic.topic_id if topic is not None else (uuid.UUID(int=77) if by_id else uuid.UUID(int=0)),
            index, offset, 1 << 20, case[3], partition, error, None)


def test_a_sessionless_fetch_naming_a_session_still_closes_it(cluster: Cluster) -> None:
    opened = plan_fetch(cluster.fetch_sessions, cluster.topics, one_request(cluster, 12, CASES[0], epoch=0), 12, NOW_MS)
    assert opened.session is not None and len(cluster.fetch_sessions) == 1
    closing = one_request(cluster, 12, CASES[0], session_id=opened.session_id, epoch=-1)
    plan = plan_fetch(cluster.fetch_sessions, cluster.topics, closing, 12, NOW_MS)
    assert plan.session is None and plan.session_id == 0 and len(cluster.fetch_sessions) == 0


def outcome(result: Any) -> tuple[Any, ...]:
    read = result.read
    return (result.wanted, result.error, None if read is None else (
        [bytes(piece) for piece in read.records], read.size, read.high_watermark, read.last_stable_offset,
        read.log_start_offset, read.aborted_transactions))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("max_bytes", [0, 10, 1 << 20])
def test_one_partition_reads_as_the_first_of_several(cluster: Cluster, version: int, max_bytes: int) -> None:
    """The read of a lone partition is the loop's read of the first partition, for every outcome."""
    other = fetch_topic(cluster, "orders", version, FetchPartition(partition=1, fetch_offset=0))
    plans = [(plan_fetch(cluster.fetch_sessions, cluster.topics, one_request(cluster, version, case), version,
                         NOW_MS).partitions,
              plan_fetch(cluster.fetch_sessions, cluster.topics, one_request(cluster, version, case, extra=other),
                         version, NOW_MS).partitions) for case in CASES]
    cluster.topics.delete("gone")  # its partition stays in the plans: read as deleted while the fetch waited
    for alone, pair in plans:
        for read_committed in (False, True):
            [single] = _read_all(alone, max_bytes, read_committed, False)
            first = _read_all(pair, max_bytes, read_committed, False)[0]
            single.wanted = first.wanted
            assert outcome(single) == outcome(first)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_answers_as_in_a_fetch_of_several(cluster: Cluster, version: int) -> None:
    other = fetch_topic(cluster, "orders", version, FetchPartition(partition=1, fetch_offset=0))
    for case in CASES:
        for isolation_level in (0, 1):
            answers = []
            for extra in (None, other):
                fetch_request = one_request(cluster, version, case, extra=extra)
                fetch_request.isolation_level = isolation_level
                context = RequestContext(cluster, 1, version, 7, "test-client", "127.0.0.1:5555")
                response = handle_fetch(context, fetch_request)
                assert isinstance(response, FetchResponse)
                for partition in response.responses[0].partitions:  # no tagged struct of its own to build
                    assert partition.diverging_epoch is NO_DIVERGING_EPOCH
                    assert partition.current_leader is NO_CURRENT_LEADER and partition.snapshot_id is NO_SNAPSHOT_ID
                answers.append(FetchResponse.decode(response.encode(version), version))
            alone, together = answers
            assert alone.responses[0].partitions[0] == together.responses[0].partitions[0]
            assert (alone.error_code, alone.session_id) == (together.error_code, together.session_id)
