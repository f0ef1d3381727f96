"""Fetch and ListOffsets as clients depend on them, against a real broker over real sockets.

Real clients (confluent-kafka, kafka-python) where they expose the behaviour; otherwise raw requests
built with ``protocol.framing`` and the generated message classes (``RawClient`` below), so the
bytes on the wire are exactly what the test says:

* ListOffsets by timestamp (both clients' ``offsets_for_times``), earliest/latest, and the record with
  the largest timestamp (-3, through confluent-kafka's ``AdminClient.list_offsets``);
* a long-poll Fetch (``max_wait_ms`` 10 s, ``min_bytes`` 1) answers as soon as a record arrives, and
  one whose ``min_bytes`` is not reached waits out ``max_wait_ms`` and then returns what there is;
* garbage on one connection closes that connection, with one log line, while a producer on another
  connection gets every acknowledgement;
* "the first batch is always returned" (KIP-74): a batch larger than the fetch limits is still consumed;
* a partition with no data carries empty records, not null (some clients crash on null), and a
  position past the end is OFFSET_OUT_OF_RANGE;
* LogAppendTime topics stamp the broker's time, seen by consumers as LOG_APPEND_TIME;
* fetch sessions (KIP-227): full, incremental, wrong epoch, unknown session, closing.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    DeleteTopicsRequest,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkalite.protocol.messages.fetch_response import PartitionData
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 20.0
# Longer than the socket timeout: a long poll that is not woken by the append fails the test by timing
# out its read, so no test has to compare times.
LONG_POLL_MAX_WAIT_MS = 120_000
_M = TypeVar("_M", bound=Message)


# a raw Kafka client -------------------------------------------------------------------------------

def read_exactly(connection: socket.socket, size: int) -> bytes:
    """``size`` bytes, or b"" if the peer closes the connection first."""
    data = bytearray()
    while len(data) < size:
        try:
            chunk = connection.recv(size - len(data))
        except ConnectionResetError:
            return b""
        if not chunk:
            return b""
        data += chunk
    return bytes(data)


class RawClient:
    """One connection that sends generated request classes and decodes the answers."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.socket = socket.create_connection(address, timeout=TIMEOUT_S)
        self._correlation_ids = iter(range(1, 1 << 31))

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(self, request: Message, version: int) -> int:
        correlation_id = next(self._correlation_ids)
        self.socket.sendall(encode_request(request, version, correlation_id, "kafkalite-tests"))
        return correlation_id

    def receive(self, response_type: type[_M], version: int, correlation_id: int) -> _M:
        frame = self.read_frame()
        assert frame, "the broker closed the connection instead of answering"
        assert struct.unpack_from(">i", frame)[0] == correlation_id
        body = parse_response_header(frame, response_type.API_KEY, version)
        return response_type.decode_from(body, version)

    def request(self, request: Message, response_type: type[_M], version: int) -> _M:
        return self.receive(response_type, version, self.send(request, version))

    def read_frame(self) -> bytes:
        """One response frame without its size; b"" once the broker has closed the connection."""
        size = read_exactly(self.socket, 4)
        return read_exactly(self.socket, struct.unpack(">i", size)[0]) if size else b""

    # requests the tests need -------------------------------------------------------------------------
    def topic_id(self, topic: str) -> uuid.UUID:
        response = self.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), MetadataResponse, 12)
        [described] = response.topics
        assert described.error_code == ErrorCode.NONE
        return described.topic_id

    def produce(self, topic: str, partition: int, batch: bytes | bytearray, version: int = 9) -> int:
        """Append one batch with acks=all; its base offset."""
        request = ProduceRequest(acks=-1, timeout_ms=int(TIMEOUT_S * 1000), topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])])
        response = self.request(request, ProduceResponse, version)
        [[answer]] = [topic_response.partition_responses for topic_response in response.responses]
        assert answer.error_code == ErrorCode.NONE, answer
        return answer.base_offset


def fetch_request(version: int, positions: dict[tuple[str | uuid.UUID, int], int], *, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024, partition_max_bytes: int = 1024 * 1024,
                  session_id: int = 0, session_epoch: int = -1,
                  forgotten: dict[str | uuid.UUID, list[int]] | None = None) -> FetchRequest:
    """A Fetch for ``{(topic name or id, partition): fetch offset}``."""
    def topic_fields(topic: str | uuid.UUID) -> dict[str, Any]:
        return {"topic_id": topic} if isinstance(topic, uuid.UUID) else {"topic": topic}

    topics: dict[str | uuid.UUID, FetchTopic] = {}
    for (topic, partition), offset in positions.items():
        topics.setdefault(topic, FetchTopic(**topic_fields(topic))).partitions.append(
            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        session_id=session_id, session_epoch=session_epoch, topics=list(topics.values()),
                        forgotten_topics_data=[ForgottenTopic(**topic_fields(topic), partitions=partitions)
                                               for topic, partitions in (forgotten or {}).items()])


def unread_by_broker(client: RawClient) -> int:
    """Bytes the client sent that the broker has not read yet: the receive queue of the broker's end
    of the connection, from /proc/net/tcp (Linux)."""
    host, port = client.socket.getsockname()
    peer_host, peer_port = client.socket.getpeername()

    def hex_address(address: str, number: int) -> str:
        return f"{socket.inet_aton(address)[::-1].hex().upper()}:{number:04X}"

    local, remote = hex_address(peer_host, peer_port), hex_address(host, port)
    with open("/proc/net/tcp", encoding="ascii") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2] == remote:
                return int(fields[4].split(":")[1], 16)
    raise AssertionError("the broker's end of the connection is not in /proc/net/tcp")


def fetched(response: FetchResponse) -> dict[int, PartitionData]:
    """The response's partitions by index (the tests fetch one topic at a time)."""
    return {partition.partition_index: partition for topic in response.responses for partition in topic.partitions}


def batch_of(*values: bytes, timestamps: list[int] | None = None) -> bytearray:
    """One uncompressed magic-2 batch of keyed records (timestamps: now unless given)."""
    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for index, value in enumerate(values):
        builder.append(timestamp=timestamps[index] if timestamps else now, key=b"key-%d" % index, value=value)
    return builder.build()


def decoded_values(records: bytes | memoryview | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set."""
    assert records is not None
    return [(record.offset, record.value) for batch in iter_batches(records) for record in batch.records()]


# fixtures and helpers ----------------------------------------------------------------------------

def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(timeout=TIMEOUT_S)
    return topic


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[RawClient]:
    client = RawClient(broker.address)
    try:
        yield client
    finally:
        client.close()


def confluent_consumer(bootstrap: str, **config: Any) -> Consumer:
    # librdkafka wants a group.id to make a Consumer; with assign() and no commits it never joins the group.
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100, **config})


def consume_confluent(consumer: Consumer, topic: str, partition: int, count: int) -> list[Any]:
    consumer.assign([ConfluentTopicPartition(topic, partition, OFFSET_BEGINNING)])
    messages: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(messages) < count and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=count - len(messages), timeout=0.5):
            assert message.error() is None, message.error()
            messages.append(message)
    return messages


def consume_kafka_python(bootstrap: str, topic: str, partition: int, count: int, **config: Any) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", **config)
    messages: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, partition)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                messages.extend(batch)
    finally:
        consumer.close()
    return messages


# ListOffsets ---------------------------------------------------------------------------------------

def test_list_offsets_by_timestamp(broker: BrokerProcess) -> None:
    """Partition 0: 200 records 1 s apart in 40 batches over several segments, so the lookup goes
    through the time indexes and not only the active segment. Partition 1: the largest timestamp is
    in the middle of a batch."""
    topic = create_topic(broker.bootstrap, unique("by-timestamp"), 2,
                         {"segment.bytes": "2048", "index.interval.bytes": "256"})
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside the retention time
    with RawClient(broker.address) as raw:
        for first in range(0, 200, 5):
            raw.produce(topic, 0, batch_of(*(b"value-%d" % index for index in range(first, first + 5)),
                                           timestamps=[base + 1000 * index for index in range(first, first + 5)]))
        raw.produce(topic, 1, batch_of(b"a", b"b", b"c", b"d",
                                       timestamps=[base, base + 5000, base + 1000, base + 2000]))
    segments = [path for path in (broker.data_dir / f"{topic}-0").iterdir() if path.suffix == ".timeindex"]
    assert len(segments) >= 3, "the test wants several segments"

    # (target timestamp, expected offset); None: no record at or after it.
    cases = [(base - 10, 0), (base, 0), (base + 1, 1), (base + 37_000, 37), (base + 36_999, 37),
             (base + 123_456, 124), (base + 199_000, 199), (base + 199_001, None)]

    consumer = confluent_consumer(broker.bootstrap)
    try:
        for target, offset in cases:
            [answer] = consumer.offsets_for_times([ConfluentTopicPartition(topic, 0, target)], timeout=TIMEOUT_S)
            assert answer.error is None and answer.offset == (-1 if offset is None else offset), (target, answer)
        assert consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), timeout=TIMEOUT_S,
                                              cached=False) == (0, 200)
    finally:
        consumer.close()

    kafka_python = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        partition = TopicPartition(topic, 0)
        for target, offset in cases:
            answer = kafka_python.offsets_for_times({partition: target})[partition]
            if offset is None:
                assert answer is None, (target, answer)
            else:  # the offset and the timestamp of the first record at or after the target
                assert (answer.offset, answer.timestamp) == (offset, base + 1000 * offset), (target, answer)
        assert kafka_python.beginning_offsets([partition]) == {partition: 0}
        assert kafka_python.end_offsets([partition]) == {partition: 200}
    finally:
        kafka_python.close()

    # The largest timestamp (-3, KIP-734): the record that has it, not the end of its batch.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    specs = {ConfluentTopicPartition(topic, 0): OffsetSpec.max_timestamp(),
             ConfluentTopicPartition(topic, 1): OffsetSpec.max_timestamp()}
    answers = {partition.partition: future.result(timeout=TIMEOUT_S)
               for partition, future in admin.list_offsets(specs).items()}
    assert (answers[0].offset, answers[0].timestamp) == (199, base + 199_000)
    assert (answers[1].offset, answers[1].timestamp) == (1, base + 5000)


# long poll -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [4, 16])
def test_a_long_poll_fetch_returns_as_soon_as_a_record_arrives(broker: BrokerProcess, raw: RawClient, version: int,
                                                                record_property: Callable[[str, object], None],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    topic = create_topic(broker.bootstrap, unique("long-poll"))
    key: str | uuid.UUID = raw.topic_id(topic) if version >= 13 else topic
    request = fetch_request(version, {(key, 0): 0}, max_wait_ms=LONG_POLL_MAX_WAIT_MS, min_bytes=1)
    sent = time.monotonic()
    correlation_id = raw.send(request, version)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
    producer.produce(topic, key=b"wake", value=b"up", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    acknowledged = time.monotonic()

    response = raw.receive(FetchResponse, version, correlation_id)
    returned = time.monotonic()
    [partition] = fetched(response).values()
    assert partition.error_code == ErrorCode.NONE and partition.high_watermark == 1
    assert decoded_values(partition.records) == [(0, b"up")]

    latency_ms = (returned - acknowledged) * 1000
    record_property("long_poll_wake_ms", round(latency_ms, 1))
    with capsys.disabled():  # reported, never asserted: timings are not test outcomes
        print(f"\n[long poll v{version}] produce acknowledged -> fetch answered: {latency_ms:.1f} ms "
              f"(fetch sent -> answered: {(returned - sent) * 1000:.0f} ms, max_wait_ms {LONG_POLL_MAX_WAIT_MS})")


def test_a_long_poll_waits_for_min_bytes_until_max_wait(broker: BrokerProcess, raw: RawClient) -> None:
    """Fewer bytes than ``min_bytes`` arrive: the fetch waits out ``max_wait_ms``, then returns them."""
    topic = create_topic(broker.bootstrap, unique("min-bytes"))
    max_wait_ms = 1000
    correlation_id = raw.send(fetch_request(12, {(topic, 0): 0}, max_wait_ms=max_wait_ms, min_bytes=64 * 1024), 12)
    sent = time.monotonic()
    with RawClient(broker.address) as producer:
        producer.produce(topic, 0, batch_of(b"not enough"))
    response = raw.receive(FetchResponse, 12, correlation_id)
    waited = time.monotonic() - sent
    assert decoded_values(fetched(response)[0].records) == [(0, b"not enough")]
    assert waited >= 0.9 * max_wait_ms / 1000, f"answered after {waited:.3f} s, before min_bytes or max_wait_ms"


@pytest.mark.parametrize("version", [12, 13])
def test_a_topic_deleted_under_a_parked_fetch_answers_unknown_topic_and_keeps_the_connection(
        broker: BrokerProcess, raw: RawClient, wait_until: WaitUntil, version: int) -> None:
    """A Fetch parks on an empty topic; another connection sends a Produce and a DeleteTopics for it
    in one write. The woken fetch answers the topic as unknown (by id from v13, by name before), the
    connection stays open, and the broker's log has no traceback."""
    topic = create_topic(broker.bootstrap, unique("deleted-under-fetch"))
    key: str | uuid.UUID = raw.topic_id(topic) if version >= 13 else topic
    mark = broker.log_mark()
    correlation_id = raw.send(fetch_request(version, {(key, 0): 0}, max_wait_ms=LONG_POLL_MAX_WAIT_MS), version)
    # The fetch must be parked before the delete arrives: wait until the broker has read it.
    wait_until(lambda: unread_by_broker(raw) == 0, TIMEOUT_S, "the broker did not read the fetch")
    produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch_of(b"last"))])])
    delete = DeleteTopicsRequest(topic_names=[topic], timeout_ms=1000)
    with RawClient(broker.address) as other:
        other.socket.sendall(encode_request(produce, 9, 1, "other") + encode_request(delete, 4, 2, "other"))
        assert other.read_frame() and other.read_frame()  # both answered
    response = raw.receive(FetchResponse, version, correlation_id)
    [partition] = fetched(response).values()
    expected = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition.error_code == expected
    # The connection is still usable.
    again = raw.request(fetch_request(version, {(key, 0): 0}), FetchResponse, version)
    assert next(iter(fetched(again).values())).error_code == expected
    assert "Traceback" not in broker.log_text(since=mark)


# bad input -------------------------------------------------------------------------------------------

def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


GARBAGE = {
    # Someone points a browser at the port: the "size" is 0x47455420, about 1.2 GB.
    "http": b"GET / HTTP/1.1\r\nHost: localhost:9092\r\n\r\n",
    # A well-formed request header (v1: key, version, correlation id, null client id) for API key 32767.
    "unknown-api-key": _framed(struct.pack(">hhih", 0x7FFF, 0, 7, -1)),
    # Produce v9 (header v2) whose body stops one byte into ``acks``.
    "truncated-body": _framed(struct.pack(">hhih", 0, 9, 7, -1) + b"\x00" + b"\x00" + b"\xff"),
}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_on_one_connection_while_another_produces(broker: BrokerProcess, wait_until: WaitUntil,
                                                          garbage: bytes) -> None:
    """The producer runs before, during and after the garbage, and gets an acknowledgement for every record."""
    topic = create_topic(broker.bootstrap, unique("garbage"), 2)
    acknowledged: list[int] = []
    errors: list[KafkaError] = []
    sent = [0]
    garbage_handled = threading.Event()

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            acknowledged.append(message.offset())

    def run_producer() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1})

        def send() -> None:
            producer.produce(topic, key=b"%d" % sent[0], value=b"steady %d" % sent[0], on_delivery=delivered)
            sent[0] += 1
            producer.poll(0)

        while not garbage_handled.is_set() and sent[0] < 200_000:
            send()
            if sent[0] % 100 == 0:
                producer.flush(TIMEOUT_S)  # paced, so that acknowledgements keep coming during the garbage
        for _ in range(1000):
            send()
        producer.flush(TIMEOUT_S)

    mark = broker.log_mark()
    thread = threading.Thread(target=run_producer, name="steady-producer", daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acknowledged) >= 500, TIMEOUT_S, "the producer got no acknowledgements")
        with socket.create_connection(broker.address, timeout=TIMEOUT_S) as connection:
            host, port = connection.getsockname()[:2]
            peer = f"{host}:{port}"
            connection.sendall(garbage)
            assert read_exactly(connection, 1) == b"", "the garbage connection stayed open"
    finally:
        garbage_handled.set()
        thread.join(TIMEOUT_S * 2)
    assert not thread.is_alive()
    assert not errors, errors[:5]
    assert len(acknowledged) == sent[0] >= 1500
    wait_until(lambda: f"from {peer}:" in broker.log_text(since=mark), TIMEOUT_S, "no log line for the garbage")
    lines = [line for line in broker.log_text(since=mark).splitlines() if peer in line]
    assert len(lines) == 1 and "closing connection" in lines[0], lines


# byte limits -----------------------------------------------------------------------------------------

def test_the_first_batch_is_always_returned(broker: BrokerProcess, raw: RawClient) -> None:
    """A batch larger than every fetch limit (KIP-74) still comes back, whole, and only it."""
    topic = create_topic(broker.bootstrap, unique("first-batch"))
    big = bytes(range(256)) * 256  # 64 KiB
    first = batch_of(big)
    raw.produce(topic, 0, first)
    RecordBatch(first).set_partition_leader_epoch(0)  # as the broker stores it (the CRC does not cover it)
    raw.produce(topic, 0, batch_of(b"small"))
    raw.produce(topic, 0, batch_of(big[::-1]))

    for version in (4, 12, 16):
        key: str | uuid.UUID = raw.topic_id(topic) if version >= 13 else topic
        response = raw.request(fetch_request(version, {(key, 0): 0}, max_bytes=100, partition_max_bytes=100),
                               FetchResponse, version)
        [partition] = fetched(response).values()
        assert partition.error_code == ErrorCode.NONE
        assert bytes(partition.records) == bytes(first), f"v{version}: not exactly the first batch"
        RecordBatch(partition.records).validate_crc()

    values = [big, b"small", big[::-1]]
    consumer = confluent_consumer(broker.bootstrap, **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                                                       "message.max.bytes": 1000})
    try:
        assert [message.value() for message in consume_confluent(consumer, topic, 0, 3)] == values
    finally:
        consumer.close()
    consumed = consume_kafka_python(broker.bootstrap, topic, 0, 3, fetch_max_bytes=1024,
                                    max_partition_fetch_bytes=1024)
    assert [message.value for message in consumed] == values


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 17])
def test_an_empty_partition_carries_empty_records_not_null(broker: BrokerProcess, raw: RawClient,
                                                           version: int) -> None:
    topic = create_topic(broker.bootstrap, unique("empty-partition"), 2)
    raw.produce(topic, 0, batch_of(b"only in partition 0"))
    key: str | uuid.UUID = raw.topic_id(topic) if version >= 13 else topic
    response = raw.request(fetch_request(version, {(key, 0): 0, (key, 1): 0}), FetchResponse, version)
    partitions = fetched(response)
    assert decoded_values(partitions[0].records) == [(0, b"only in partition 0")]
    empty = partitions[1]
    assert empty.error_code == ErrorCode.NONE and empty.high_watermark == 0
    assert empty.records is not None, "an empty partition came back with null records"
    assert len(empty.records) == 0

    # Past the end is OFFSET_OUT_OF_RANGE (what makes a consumer apply auto.offset.reset).
    response = raw.request(fetch_request(version, {(key, 1): 5}), FetchResponse, version)
    assert fetched(response)[1].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# timestamps --------------------------------------------------------------------------------------

def test_log_append_time_topics_stamp_the_broker_time(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("append-time"), 1, {"message.timestamp.type": "LogAppendTime"})
    client_time = int(time.time() * 1000) - 86_400_000  # what the producers claim: a day ago
    before = int(time.time() * 1000)

    reports: list[tuple[int, int]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"from librdkafka", timestamp=client_time,
                     on_delivery=lambda error, message: reports.append(message.timestamp()))
    assert producer.flush(TIMEOUT_S) == 0
    kafka_python_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    try:
        metadata = kafka_python_producer.send(topic, value=b"from kafka-python",
                                              timestamp_ms=client_time).get(timeout=TIMEOUT_S)
    finally:
        kafka_python_producer.close(timeout=TIMEOUT_S)
    after = int(time.time() * 1000)

    def broker_time(timestamp: int) -> bool:
        return before - 1000 <= timestamp <= after + 1000  # the broker's clock is this machine's

    # The producers learn the append time from the Produce response.
    [(report_type, report_time)] = reports
    assert report_type == TIMESTAMP_LOG_APPEND_TIME and broker_time(report_time)
    assert broker_time(metadata.timestamp)

    consumer = confluent_consumer(broker.bootstrap)
    try:
        messages = consume_confluent(consumer, topic, 0, 2)
        lookups = {target: consumer.offsets_for_times([ConfluentTopicPartition(topic, 0, target)],
                                                      timeout=TIMEOUT_S)[0].offset
                   for target in (client_time, before - 1000, after + 3_600_000)}
    finally:
        consumer.close()
    assert [message.value() for message in messages] == [b"from librdkafka", b"from kafka-python"]
    for message in messages:
        timestamp_type, timestamp = message.timestamp()
        assert timestamp_type == TIMESTAMP_LOG_APPEND_TIME and broker_time(timestamp)
    assert messages[0].timestamp()[1] == report_time

    # Lookups by time use the broker's stamps: nothing is at or after an hour from now.
    assert lookups == {client_time: 0, before - 1000: 0, after + 3_600_000: -1}

    consumed = consume_kafka_python(broker.bootstrap, topic, 0, 2)
    assert [(message.timestamp_type, message.timestamp) for message in consumed] == \
           [(1, message.timestamp()[1]) for message in messages]


# fetch sessions (KIP-227) --------------------------------------------------------------------------

@pytest.mark.parametrize("version", [7, 12, 16])
def test_incremental_fetch_sessions(broker: BrokerProcess, raw: RawClient, version: int) -> None:
    topic = create_topic(broker.bootstrap, unique("fetch-session"), 2)
    key: str | uuid.UUID = raw.topic_id(topic) if version >= 13 else topic

    def fetch(session_id: int, epoch: int, positions: dict[tuple[str | uuid.UUID, int], int] | None = None,
              **options: Any) -> FetchResponse:
        return raw.request(fetch_request(version, positions or {}, session_id=session_id, session_epoch=epoch,
                                         **options), FetchResponse, version)

    # A full fetch (epoch 0) opens a session and answers for every partition.
    full = fetch(0, 0, {(key, 0): 0, (key, 1): 0})
    assert full.error_code == ErrorCode.NONE and full.session_id != 0
    assert sorted(fetched(full)) == [0, 1]
    session = full.session_id

    # Incremental, nothing new: no partitions at all.
    quiet = fetch(session, 1)
    assert (quiet.error_code, quiet.session_id, fetched(quiet)) == (ErrorCode.NONE, session, {})

    # A record in partition 1: only partition 1 comes back, with it.
    with RawClient(broker.address) as producer:
        producer.produce(topic, 1, batch_of(b"news"))
    news = fetch(session, 2)
    assert sorted(fetched(news)) == [1]
    assert decoded_values(fetched(news)[1].records) == [(0, b"news")] and fetched(news)[1].high_watermark == 1

    # The client moves its position; with nothing new again, nothing comes back.
    moved = fetch(session, 3, {(key, 1): 1})
    assert (moved.error_code, fetched(moved)) == (ErrorCode.NONE, {})

    # A stale or future epoch, and an unknown session id, are refused at the top level.
    for wrong_epoch in (3, 99):
        refused = fetch(session, wrong_epoch)
        assert refused.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH, wrong_epoch
    unknown = fetch(session + 1000, 1)
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # The session survived the refusals: an incremental long poll is woken by an append to it.
    correlation_id = raw.send(fetch_request(version, {}, session_id=session, session_epoch=4,
                                            max_wait_ms=LONG_POLL_MAX_WAIT_MS), version)
    with RawClient(broker.address) as producer:
        producer.produce(topic, 0, batch_of(b"wake"))
    woken = raw.receive(FetchResponse, version, correlation_id)
    assert sorted(fetched(woken)) == [0] and decoded_values(fetched(woken)[0].records) == [(0, b"wake")]

    # Forgotten partitions leave the session: news there is not reported any more.
    forgot = fetch(session, 5, {(key, 1): 1}, forgotten={key: [0]})
    assert fetched(forgot) == {}
    with RawClient(broker.address) as producer:
        producer.produce(topic, 0, batch_of(b"unheard"))
    assert fetched(fetch(session, 6)) == {}

    # Epoch -1 closes the session.
    closed = fetch(session, -1, {(key, 0): 2})
    assert (closed.error_code, closed.session_id) == (ErrorCode.NONE, 0)
    assert fetch(session, 7).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
