"""Fetch answers served from the segment files (sent with ``os.sendfile`` on a plaintext listener).

* Records written before a clean restart (so every read comes from the files, none from the broker's
  memory of recent appends) reach confluent-kafka and kafka-python byte for byte: key, value,
  headers, timestamp and offset of every record, over several segments and partitions.
* An answer holding a region of a segment that retention deletes while the answer waits (queued
  behind a parked long poll on the same connection) still carries the bytes that were read: the
  same bytes as a Fetch of that range before the deletion.
* A slow reader (a small receive buffer, reading a little at a time) of several pipelined Fetch
  answers larger than the sockets' buffers, so the socket takes each only in part, gets every byte
  in order, and the answers that follow them (ApiVersions) after them.
* Over TLS (where the bytes are read and encrypted, never sent from the file) and SASL_PLAINTEXT
  (sent from the file after authentication), confluent-kafka reads the same records it wrote.
"""

from __future__ import annotations

import functools
import random
import socket
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches
from kafkalite.testing.process import BrokerProcess as SecuredBroker

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0
FETCH_VERSION = 12
_M = TypeVar("_M", bound=Message)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(timeout=TIMEOUT_S)
    return topic


class RawClient:
    """One connection sending generated request classes; answers read as whole frames."""

    def __init__(self, address: tuple[str, int], receive_buffer: int | None = None) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # before connecting, so the window is small from the start
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.socket.settimeout(TIMEOUT_S)
        self.socket.connect(address)
        self._correlation_ids = iter(range(1, 1 << 31))

    def close(self) -> None:
        self.socket.close()

    def send(self, request: Message, version: int) -> int:
        correlation_id = next(self._correlation_ids)
        self.socket.sendall(encode_request(request, version, correlation_id, "kafkalite-tests"))
        return correlation_id

    def read_exactly(self, size: int, step: int | None = None) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.socket.recv(min(size - len(data), step or size))
            assert chunk, "the broker closed the connection"
            data += chunk
        return bytes(data)

    def receive(self, response_type: type[_M], version: int, correlation_id: int, step: int | None = None) -> _M:
        (size,) = struct.unpack(">i", self.read_exactly(4, step))
        frame = self.read_exactly(size, step)
        assert struct.unpack_from(">i", frame)[0] == correlation_id
        return response_type.decode_from(parse_response_header(frame, response_type.API_KEY, version), version)

    def request(self, request: Message, response_type: type[_M], version: int) -> _M:
        return self.receive(response_type, version, self.send(request, version))

    def unread_by_broker(self) -> int:
        """Bytes sent that the broker has not read yet: the receive queue of its end of the connection,
        from /proc/net/tcp (Linux, IPv4)."""
        def hex_address(address: tuple[str, int]) -> str:
            return f"{socket.inet_aton(address[0])[::-1].hex().upper()}:{address[1]:04X}"

        local, remote = hex_address(self.socket.getpeername()), hex_address(self.socket.getsockname())
        with open("/proc/net/tcp", encoding="ascii") as table:
            for line in table.readlines()[1:]:
                fields = line.split()
                if fields[1] == local and fields[2] == remote:
                    return int(fields[4].split(":")[1], 16)
        raise AssertionError("the broker's end of the connection is not in /proc/net/tcp")

    def produce(self, topic: str, partition: int, batch: bytes | bytearray) -> int:
        request = ProduceRequest(acks=-1, timeout_ms=int(TIMEOUT_S * 1000), topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])])
        response = self.request(request, ProduceResponse, 9)
        [[answer]] = [topic_response.partition_responses for topic_response in response.responses]
        assert answer.error_code == ErrorCode.NONE, answer
        return answer.base_offset


def fetch(positions: dict[tuple[str, int], int], *, max_wait_ms: int = 0, min_bytes: int = 1,
          partition_max_bytes: int = 1024 * 1024) -> FetchRequest:
    topics: dict[str, FetchTopic] = {}
    for (topic, partition), offset in positions.items():
        topics.setdefault(topic, FetchTopic(topic=topic)).partitions.append(
            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=64 * 1024 * 1024,
                        topics=list(topics.values()))


def records_of(response: FetchResponse) -> dict[tuple[str, int], bytes]:
    found = {}
    for topic in response.responses:
        for partition in topic.partitions:
            assert partition.error_code == ErrorCode.NONE, partition
            assert partition.records is not None
            found[(topic.topic, partition.partition_index)] = bytes(partition.records)  # type: ignore[arg-type]
    return found


def batch_of(values: list[bytes], timestamp: int) -> bytearray:
    builder = RecordBatchBuilder()
    for index, value in enumerate(values):
        builder.append(timestamp=timestamp, key=b"key-%d" % index, value=value)
    return builder.build()


def checked_batches(records: bytes) -> list[RecordBatch]:
    """Every batch of a record set, CRC checked; the set ends on a batch boundary."""
    batches = [batch for batch in iter_batches(records) if isinstance(batch, RecordBatch)]
    assert sum(batch.size for batch in batches) == len(records)
    for batch in batches:
        batch.validate_crc()
    return batches


# records from disk to real clients -----------------------------------------------------------------

def test_records_written_before_a_restart_reach_both_clients_byte_for_byte(
        fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()
    topic = create_topic(broker.bootstrap, unique("from-disk"), 2, {"segment.bytes": str(1024 * 1024)})
    generator = random.Random(16)
    produced: dict[tuple[int, int], tuple[bytes, bytes, list[tuple[str, bytes]], int]] = {}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 256 * 1024,
                         "acks": "all"})

    def delivered(headers: list[tuple[str, bytes]], error: Any, message: Any) -> None:
        assert error is None, error
        produced[(message.partition(), message.offset())] = (
            message.key(), message.value(), headers, message.timestamp()[1])

    for number in range(3000):
        size = generator.choice((10, 100, 1000, 1024, 5000))
        headers = [("n", b"%d" % number)]
        producer.produce(topic, key=b"k%d" % number, value=generator.randbytes(size), partition=number % 2,
                         headers=headers, timestamp=1_700_000_000_000 + number,
                         on_delivery=functools.partial(delivered, headers))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    del producer
    assert len(produced) == 3000
    broker.restart()

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 * 1024 * 1024})
    try:
        consumer.assign([ConfluentTopicPartition(topic, partition, OFFSET_BEGINNING) for partition in (0, 1)])
        seen: dict[tuple[int, int], tuple[bytes, bytes, list[tuple[str, bytes]], int]] = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < len(produced) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                seen[(message.partition(), message.offset())] = (
                    message.key(), message.value(), list(message.headers() or []), message.timestamp()[1])
    finally:
        consumer.close()
    assert seen == produced

    kafka_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                   auto_offset_reset="earliest", check_crcs=True)
    try:
        kafka_consumer.assign([TopicPartition(topic, partition) for partition in (0, 1)])
        seen = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < len(produced) and time.monotonic() < deadline:
            for batch in kafka_consumer.poll(timeout_ms=500).values():
                for record in batch:
                    seen[(record.partition, record.offset)] = (
                        record.key, record.value, [(key, bytes(value)) for key, value in record.headers],
                        record.timestamp)
    finally:
        kafka_consumer.close()
    assert seen == produced
    assert " ERROR " not in broker.log_text()


# a segment deleted while an answer holding it waits -----------------------------------------------

def test_a_segment_deleted_by_retention_while_its_answer_waits_sends_the_bytes_read(
        fresh_broker: Callable[..., BrokerProcess], wait_until: WaitUntil) -> None:
    broker = fresh_broker("log.retention.check.interval.ms=100", "log.initial.task.delay.ms=0")
    old = create_topic(broker.bootstrap, unique("retained"), 1,
                       {"segment.bytes": str(256 * 1024), "retention.ms": str(7 * 24 * 3_600_000)})
    idle = create_topic(broker.bootstrap, unique("idle"))
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    writer = RawClient(broker.address)
    waiting = RawClient(broker.address)
    try:
        for number in range(24):  # 24 x 48 KiB: several segments, every record an hour old
            writer.produce(old, 0, batch_of([bytes([number]) * 1024] * 48, an_hour_ago))
        before = records_of(writer.request(fetch({(old, 0): 0}), FetchResponse, FETCH_VERSION))[(old, 0)]
        assert len(before) > 256 * 1024

        parked = waiting.send(fetch({(idle, 0): 0}, max_wait_ms=120_000, min_bytes=1), FETCH_VERSION)
        queued = waiting.send(fetch({(old, 0): 0}), FETCH_VERSION)  # answered now, written after the long poll
        versions = waiting.send(ApiVersionsRequest(), 0)

        def start_offset() -> int:
            answer = writer.request(fetch({(old, 0): 0}), FetchResponse, FETCH_VERSION)
            return answer.responses[0].partitions[0].log_start_offset

        assert start_offset() == 0
        # once the broker has read the three requests it has answered the second (held behind the long
        # poll); retention then deletes every segment that answer reads
        wait_until(lambda: waiting.unread_by_broker() == 0, TIMEOUT_S, "the broker did not read the requests")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ResourceType.TOPIC, old, incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
        wait_until(lambda: start_offset() > 0, TIMEOUT_S, "retention did not delete the old segments")
        assert list((broker.data_dir / f"{old}-0").glob("00000000000000000000.log")) == []

        writer.produce(idle, 0, batch_of([b"wake up"], int(time.time() * 1000)))  # completes the long poll
        woken = waiting.receive(FetchResponse, FETCH_VERSION, parked)
        assert checked_batches(records_of(woken)[(idle, 0)])[0].records_count == 1
        after = records_of(waiting.receive(FetchResponse, FETCH_VERSION, queued))[(old, 0)]
        assert after == before
        assert checked_batches(after)[0].base_offset == 0
        assert waiting.receive(ApiVersionsResponse, 0, versions).error_code == ErrorCode.NONE
    finally:
        writer.close()
        waiting.close()


# a slow reader -------------------------------------------------------------------------------------

def test_a_slow_reader_gets_every_byte_in_order_with_the_answers_that_follow(
        fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()
    topic = create_topic(broker.bootstrap, unique("slow-reader"), 3, {"segment.bytes": str(2 * 1024 * 1024)})
    writer = RawClient(broker.address)
    generator = random.Random(7)
    try:
        now = int(time.time() * 1000)
        for number in range(60):  # 3 partitions x 20 batches of 200 KiB
            writer.produce(topic, number % 3, batch_of([generator.randbytes(1024) for _ in range(200)], now))
        positions = [{(topic, partition): offset} for offset in (0, 1000, 2000) for partition in range(3)]
        expected = [records_of(writer.request(fetch(position, partition_max_bytes=4 * 1024 * 1024), FetchResponse,
                                              FETCH_VERSION)) for position in positions]
    finally:
        writer.close()
    assert sum(len(records) for answer in expected for records in answer.values()) > 8 * 1024 * 1024

    reader = RawClient(broker.address, receive_buffer=4096)
    try:
        sent = [reader.send(fetch(position, partition_max_bytes=4 * 1024 * 1024), FETCH_VERSION)
                for position in positions]
        versions = reader.send(ApiVersionsRequest(), 0)
        for correlation_id, wanted in zip(sent, expected, strict=True):
            answer = reader.receive(FetchResponse, FETCH_VERSION, correlation_id, step=4096)
            records = records_of(answer)
            assert records == wanted
            for record_set in records.values():
                checked_batches(record_set)
        assert reader.receive(ApiVersionsResponse, 0, versions, step=4096).error_code == ErrorCode.NONE
    finally:
        reader.close()
    assert " ERROR " not in broker.log_text()


# secured listeners -----------------------------------------------------------------------------------

@pytest.mark.parametrize("security", ["SSL", "SASL_PLAINTEXT:PLAIN"])
def test_secured_listeners_deliver_records_from_disk(tmp_path: Path, security: str) -> None:
    broker = SecuredBroker(tmp_path / "data", security=security)
    try:
        broker.start()
        config = broker.confluent_config()
        topic = unique("secured")
        admin = AdminClient(config)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT_S)
        values = [random.Random(number).randbytes(1024) for number in range(2000)]
        producer = Producer({**config, "linger.ms": 20, "batch.size": 256 * 1024})
        for value in values:
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        del producer
        consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
        try:
            consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
            seen: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(seen) < len(values) and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=1000, timeout=0.5):
                    assert message.error() is None, message.error()
                    seen.append(message.value())
        finally:
            consumer.close()
        assert seen == values
        assert " ERROR " not in broker.log_text()
    finally:
        broker.close()
