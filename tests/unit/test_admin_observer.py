"""The admin endpoint's hook and views without sockets: a real in-memory cluster and the real handlers
behind a ``KafkaConnection`` on a fake transport; faults applied, requests counted and logged, and
the JSON views read from the cluster's state."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator

import pytest

from kafkalite.broker.admin import parse_address
from kafkalite.broker.admin.endpoint import HTTP_PACKAGES, check_installed
from kafkalite.broker.admin.observer import RequestObserver
from kafkalite.broker.admin.records import browse, describe_bytes
from kafkalite.broker.admin.stats import LATENCY_BUCKETS, RequestStats, first_error
from kafkalite.broker.admin.views import (
    connections_view,
    producers_view,
    requests_view,
    stats_view,
    topic_view,
    topics_view,
)
from kafkalite.broker.config import BrokerConfig, ConfigError
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.net import KafkaConnection
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request
from kafkalite.protocol.messages import (
    ApiVersionsRequest,
    HeartbeatRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from kafkalite.protocol.records import Record, build_record_batch
from tests.unit.test_net import FakeTransport


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = Cluster(BrokerConfig({"log.storage": "memory"}))
    cluster.open()
    cluster.endpoints[:] = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.topics.create("orders", 2)
    yield cluster
    cluster.close()


def batch(*values: bytes | None, key: bytes | None = b"k", headers: tuple[tuple[str, bytes | None], ...] = ()
          ) -> bytes:
    now = int(time.time() * 1000)
    return bytes(build_record_batch([Record(offset=i, timestamp=now, key=key, value=value, headers=headers)
                                     for i, value in enumerate(values)]))


def produce_frame(correlation_id: int, partitions: list[int], client_id: str = "app") -> bytes:
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[TopicProduceData(name="orders", partition_data=[
        PartitionProduceData(index=index, records=batch(b"v%d" % index)) for index in partitions])])
    return encode_request(request, 9, correlation_id, client_id)


class Client:
    """A connection with the observer, fed whole frames; answers decoded by correlation id."""

    def __init__(self, cluster: Cluster, observer: RequestObserver) -> None:
        self.transport = FakeTransport()
        self.connection = KafkaConnection(cluster, max_request_bytes=2**20, idle_ms=0, observer=observer)
        self.connection.connection_made(self.transport)

    def send(self, frame: bytes) -> None:
        self.connection.get_buffer(-1)[:len(frame)] = frame
        self.connection.buffer_updated(len(frame))

    def produce_answer(self, index: int = -1) -> ProduceResponse:
        return ProduceResponse.decode(self.transport.frames()[index][5:], 9)  # correlation id, tagged fields


def offsets(cluster: Cluster) -> list[int]:
    return [partition.high_watermark for partition in cluster.topics.get("orders").partitions]


@pytest.mark.asyncio
async def test_requests_are_counted_timed_and_logged_with_the_client_software(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    client = Client(cluster, observer)
    client.send(encode_request(ApiVersionsRequest(client_software_name="librdkafka", client_software_version="2.5.0"),
                               3, 1, "app"))
    client.send(produce_frame(2, [0, 1]))
    assert offsets(cluster) == [1, 1]
    produce_stats = observer.stats.apis[0]
    assert produce_stats.errors == {0: 1} and produce_stats.count == 1
    assert produce_stats.bytes_in > 0 and observer.stats.bytes_out[0] > 0
    assert observer.connections[client.connection].requests == 2
    (row,) = connections_view([client.connection], observer)
    assert (row["client_software_name"], row["client_software_version"], row["client_id"]) == (
        "librdkafka", "2.5.0", "app")
    assert row["api_versions"] == [{"api": "Produce", "api_key": 0, "versions": [9]},
                                   {"api": "ApiVersions", "api_key": 18, "versions": [3]}]
    logged = requests_view(observer)
    assert [(entry["api"], entry["correlation_id"], entry["error"]) for entry in logged] == [
        ("Produce", 2, "NONE"), ("ApiVersions", 1, "NONE")]
    stats = stats_view(cluster, observer, connections=1)
    assert stats["produce_requests"] == 1 and stats["records"] == 2


@pytest.mark.asyncio
async def test_an_error_fault_answers_for_the_handler_and_nothing_is_written(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    fault = observer.faults.add({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 1})
    client = Client(cluster, observer)
    client.send(produce_frame(1, [0, 1]))
    errors = [p.error_code for t in client.produce_answer().responses for p in t.partition_responses]
    assert errors == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2 and offsets(cluster) == [0, 0]
    client.send(produce_frame(2, [0, 1]))  # the fault was for one request
    assert offsets(cluster) == [1, 1]
    assert [(e["error"], e["fault_id"]) for e in requests_view(observer, api=0)] == [
        ("NONE", None), ("NOT_LEADER_OR_FOLLOWER", fault.fault_id)]
    assert observer.stats.apis[0].errors == {0: 1, 6: 1}


@pytest.mark.asyncio
async def test_a_fault_on_one_partition_lets_the_others_be_written(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    observer.faults.add({"kind": "disk_full", "topic": "orders", "partition": 1})
    client = Client(cluster, observer)
    client.send(produce_frame(1, [0, 1]))
    answer = {p.index: p.error_code for t in client.produce_answer().responses for p in t.partition_responses}
    assert answer == {0: 0, 1: ErrorCode.KAFKA_STORAGE_ERROR}
    assert offsets(cluster) == [1, 0]


@pytest.mark.asyncio
async def test_drop_before_closes_without_handling_and_drop_after_handles_first(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    observer.faults.add({"kind": "drop_before", "api": "Produce", "count": 1})
    client = Client(cluster, observer)
    client.send(produce_frame(1, [0]))
    assert client.transport.closed and client.transport.frames() == [] and offsets(cluster) == [0, 0]
    observer.faults.add({"kind": "drop_after", "api": "Produce", "count": 1})
    client = Client(cluster, observer)
    client.send(produce_frame(1, [0]))
    assert client.transport.closed and client.transport.frames() == [] and offsets(cluster) == [1, 0]


@pytest.mark.asyncio
async def test_latency_waits_before_handling_and_stall_holds_the_answer(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    observer.faults.add({"kind": "latency", "api": "Produce", "delay_ms": 30, "count": 1})
    client = Client(cluster, observer)
    client.send(produce_frame(1, [0]))
    assert offsets(cluster) == [0, 0] and observer.parked == {0: 1}
    await wait_until(lambda: client.transport.frames())
    assert offsets(cluster) == [1, 0] and observer.parked == {0: 0}
    observer.faults.add({"kind": "stall", "api": "Produce", "delay_ms": 30, "count": 1})
    client.send(produce_frame(2, [0]))
    assert offsets(cluster) == [2, 0] and len(client.transport.frames()) == 1  # written, not yet answered
    await wait_until(lambda: len(client.transport.frames()) == 2)
    assert requests_view(observer, limit=1)[0]["latency_ms"] >= 30


@pytest.mark.asyncio
async def test_leader_unavailable_shows_in_metadata_and_refuses_the_partition(cluster: Cluster) -> None:
    observer = RequestObserver(cluster)
    observer.faults.add({"kind": "leader_unavailable", "topic": "orders", "partition": 1, "duration_ms": 60_000})
    client = Client(cluster, observer)
    client.send(encode_request(MetadataRequest(topics=[MetadataRequestTopic(name="orders")]), 12, 1, "app"))
    metadata = MetadataResponse.decode(client.transport.frames()[0][5:], 12)
    leaders = {p.partition_index: (p.leader_id, p.error_code) for p in metadata.topics[0].partitions}
    assert leaders == {0: (1, 0), 1: (-1, ErrorCode.LEADER_NOT_AVAILABLE)}
    client.send(produce_frame(2, [0, 1]))
    answer = {p.index: p.error_code for t in client.produce_answer().responses for p in t.partition_responses}
    assert answer == {0: 0, 1: ErrorCode.NOT_LEADER_OR_FOLLOWER} and offsets(cluster) == [1, 0]
    client.send(encode_request(HeartbeatRequest(group_id="g"), 4, 3, "app"))  # names no partition: untouched
    assert observer.faults.as_json()[0]["applied"] == 2


async def wait_until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


# views ------------------------------------------------------------------------------------------
def test_topic_and_partition_views_read_the_offsets_and_the_segments(cluster: Cluster) -> None:
    partition = cluster.topics.partition("orders", 0)
    partition.append_from_client(bytearray(batch(b"a", b"b")), int(time.time() * 1000))
    (summary,) = topics_view(cluster, include_internal=False)
    assert summary["name"] == "orders" and summary["partitions"] == 2 and summary["records"] == 2
    view = topic_view(cluster, "orders")
    first = view["partition_details"][0]
    assert (first["log_start_offset"], first["high_watermark"], first["last_stable_offset"], first["segments"]) == (
        0, 2, 2, 1)
    assert first["size_bytes"] == summary["size_bytes"] > 0
    assert topic_view(cluster, "nope") is None
    assert producers_view(cluster) == []
    json.dumps(view)


def test_browsing_shows_text_json_and_binary_safely_from_an_offset_or_a_time(cluster: Cluster) -> None:
    partition = cluster.topics.partition("orders", 0)
    now = int(time.time() * 1000)
    partition.append_from_client(bytearray(batch(b'{"id": 1}', b"<img src=x onerror=alert(1)>", b"\xff\xfe\x00",
                                                 None, headers=(("trace", b"abc"),))), now)
    page = browse(partition)
    values = [record["value"] for record in page["records"]]
    assert values[0] == {"size": 9, "truncated": False, "text": '{"id": 1}', "base64": None, "json": True}
    assert values[1]["text"] == "<img src=x onerror=alert(1)>" and not values[1]["json"]
    assert values[2] == {"size": 3, "truncated": False, "text": None, "base64": "//4A", "json": False}
    assert values[3] is None
    assert page["records"][0]["headers"] == [{"key": "trace", "value": describe_bytes(b"abc")}]
    assert [r["offset"] for r in browse(partition, offset=2, limit=1)["records"]] == [2]
    assert browse(partition, timestamp=now + 60_000)["records"] == []
    assert len(browse(partition, timestamp=now)["records"]) == 4
    assert describe_bytes(b"x" * 70_000)["truncated"] and len(describe_bytes(b"x" * 70_000)["text"]) == 65_536


def test_the_first_error_of_an_answer_is_found_where_it_is() -> None:
    answer = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[
        PartitionProduceResponse(index=0), PartitionProduceResponse(index=1, error_code=56)])])
    assert first_error(answer) == 56
    assert first_error(ProduceResponse()) == 0


def test_latencies_fall_in_cumulative_buckets() -> None:
    stats = RequestStats()
    for seconds in (0.0001, 0.003, 0.003, 20.0):
        stats.record(0, 0, seconds, 100)
    buckets = dict(stats.apis[0].cumulative_buckets())
    assert buckets[str(LATENCY_BUCKETS[0])] == 1 and buckets["0.005"] == 3 and buckets["+Inf"] == 4
    assert stats.totals() == (4, 400, 0)


def test_the_admin_address_is_host_and_port() -> None:
    assert parse_address("127.0.0.1:9644") == ("127.0.0.1", 9644)
    assert parse_address("[::1]:0") == ("::1", 0)
    for wrong in ("9644", "localhost", "host:port", ":9644", "h:70000"):
        with pytest.raises(ConfigError):
            parse_address(wrong)


@pytest.mark.parametrize("package", HTTP_PACKAGES)
def test_a_missing_admin_extra_is_found_without_importing_it(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check_installed()  # installed here
    monkeypatch.setitem(sys.modules, package, None)  # as if it were not: find_spec finds nothing
    with pytest.raises(ConfigError, match=rf"needs the admin extra \(pip install 'kafkalite\[admin\]'\): .*{package}"):
        check_installed()
