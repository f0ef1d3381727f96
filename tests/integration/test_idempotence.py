"""Idempotent producers over real sockets: retried batches are written once, even across a broker restart.

Retries are provoked by a TCP proxy between the client and the broker (the broker advertises the
proxy's address, so every connection goes through it): it forwards everything, but for some Produce
requests it drops the connection instead of passing the response on. The client cannot know whether
the batch was written, so it sends it again; the broker must recognise the duplicate by its producer
id, epoch and sequence numbers and answer with the original offsets.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import RESPONSES, InitProducerIdRequest, ProduceRequest
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.records import RecordBatchBuilder
from tests.tools.frame_proxy import FrameProxy

PRODUCE = 0
_SIZE = struct.Struct(">i")


class ResponseDroppingProxy(FrameProxy):
    """A loopback TCP proxy that, for every ``drop_every``-th Produce request (at most ``max_drops``
    times), closes both connections when that request's response arrives instead of forwarding it."""

    def __init__(self, drop_every: int, max_drops: int) -> None:
        super().__init__()
        self.drop_every = drop_every
        self.max_drops = max_drops
        self.produce_requests = 0
        self.drops = 0

    def on_request(self, frame: bytes) -> bool:
        """Whether this request's response is dropped."""
        if struct.unpack_from(">h", frame, 4)[0] != PRODUCE:
            return False
        with self._lock:
            self.produce_requests += 1
            drop = self.produce_requests % self.drop_every == 0 and self.drops < self.max_drops
            self.drops += drop
        return drop

    def on_response(self, frame: bytes, note: Any) -> bytes | None:
        return None if note else frame  # dropped: the batch was written; the client never hears of it


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise OSError("connection closed")
        chunks += chunk
    return bytes(chunks)


def _read_frame(sock: socket.socket) -> bytes:
    """One whole frame, size prefix included."""
    head = _read_exactly(sock, 4)
    return head + _read_exactly(sock, _SIZE.unpack(head)[0])


@pytest.fixture
def proxied_broker(fresh_broker: Callable[..., Any]) -> Iterator[tuple[Any, ResponseDroppingProxy]]:
    proxy = ResponseDroppingProxy(drop_every=3, max_drops=4)
    broker = fresh_broker("--advertised-listeners", f"PLAINTEXT://127.0.0.1:{proxy.port}", "num.partitions=2")
    proxy.start(broker.address)
    try:
        yield broker, proxy
    finally:
        proxy.close()


RECORDS = 200


def test_kafka_python_idempotent_producer_survives_dropped_responses_without_duplicates(
        proxied_broker: tuple[Any, ResponseDroppingProxy]) -> None:
    broker, proxy = proxied_broker
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_idempotence=True, linger_ms=5,
                             batch_size=512, request_timeout_ms=10_000, retry_backoff_ms=20,
                             reconnect_backoff_ms=20)
    futures = []
    for index in range(RECORDS):
        futures.append(producer.send("idem", key=str(index % 7).encode(), value=str(index).encode()))
        if index % 25 == 24:
            producer.flush(30)  # several requests, so that several responses get dropped
    producer.flush(30)
    sent = {str(index).encode(): future.get(10) for index, future in enumerate(futures)}
    producer.close(5)
    assert proxy.drops >= 2, "the proxy never dropped a response: nothing was retried"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, enable_auto_commit=False)
    consumer.assign([TopicPartition("idem", 0), TopicPartition("idem", 1)])
    seen = [(record.partition, record.offset, record.value) for record in consumer]
    consumer.close()
    values = [value for _, _, value in seen]
    assert sorted(values) == sorted(sent), "records lost or duplicated"
    for partition, offset, value in seen:  # the acknowledged offsets are where the records are
        assert (sent[value].partition, sent[value].offset) == (partition, offset)


def test_librdkafka_idempotent_producer_survives_dropped_responses_without_duplicates(
        proxied_broker: tuple[Any, ResponseDroppingProxy]) -> None:
    broker, proxy = proxied_broker
    producer = ConfluentProducer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", "enable.idempotence": True,
                                  "linger.ms": 5, "batch.num.messages": 20, "retry.backoff.ms": 20,
                                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100})
    delivered: dict[bytes, tuple[int, int]] = {}
    failures: list[str] = []

    def report(error: object, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered[message.value()] = (message.partition(), message.offset())

    for index in range(RECORDS):
        producer.produce("idem-rd", key=str(index % 7).encode(), value=str(index).encode(), on_delivery=report)
        if index % 25 == 24:
            producer.flush(30)
    assert producer.flush(30) == 0
    assert not failures and len(delivered) == RECORDS
    assert proxy.drops >= 2
    consumer = ConfluentConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "idem-check",
                                  "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition("idem-rd", p, 0) for p in range(2)])
    seen: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 20
    while len(seen) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append((message.partition(), message.offset(), message.value()))
    consumer.close()
    assert sorted(value for _, _, value in seen) == sorted(delivered)
    for partition, offset, value in seen:
        assert delivered[value] == (partition, offset)


# --- deduplication across a broker restart, with hand-made requests ------------------------------


class RawConnection:
    """One request at a time over a plain socket, encoded with this repository's codec."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.correlation_id = 0

    def call(self, request: Message, version: int) -> Any:
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, version, self.correlation_id, "raw-test"))
        frame = _read_frame(self.sock)[4:]
        reader = parse_response_header(frame, request.API_KEY, version)
        return RESPONSES[request.API_KEY].decode_from(reader, version)

    def close(self) -> None:
        self.sock.close()


def produce(connection: RawConnection, producer_id: int, epoch: int, sequence: int, count: int) -> tuple[int, int]:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    for index in range(count):
        builder.append(timestamp=int(time.time() * 1000), key=None, value=f"{sequence + index}".encode())
    request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
        name="restart", partition_data=[PartitionProduceData(index=0, records=bytes(builder.build()))])])
    result = connection.call(request, 9).responses[0].partition_responses[0]
    return result.error_code, result.base_offset


@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "clean-stop"])
def test_a_retry_after_a_broker_restart_is_still_recognised(fresh_broker: Callable[..., Any], kill: bool) -> None:
    broker = fresh_broker("num.partitions=1")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("restart", 1, 1)])["restart"].result(10)
    connection = RawConnection(broker.address)
    init = connection.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
    assert init.error_code == ErrorCode.NONE
    producer_id, epoch = init.producer_id, init.producer_epoch
    assert produce(connection, producer_id, epoch, 0, 3) == (ErrorCode.NONE, 0)
    assert produce(connection, producer_id, epoch, 3, 2) == (ErrorCode.NONE, 3)
    connection.close()
    broker.restart(kill=kill)
    connection = RawConnection(broker.address)
    assert produce(connection, producer_id, epoch, 3, 2) == (ErrorCode.NONE, 3)  # the duplicate: original offset
    assert produce(connection, producer_id, epoch, 0, 3) == (ErrorCode.NONE, 0)
    assert produce(connection, producer_id, epoch, 6, 1)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(connection, producer_id, epoch, 5, 1) == (ErrorCode.NONE, 5)
    fresh = connection.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
    assert fresh.producer_id > producer_id  # ids are never handed out twice
    connection.close()
