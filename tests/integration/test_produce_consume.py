"""Produce and consume with real clients: kafka-python and confluent-kafka (librdkafka), every codec.

Each client produces 10,000 keyed records with headers and explicit timestamps to its own 3-partition
topic per codec (none, gzip, snappy, lz4, zstd); then each topic is read back by *both* clients, so
every producer/consumer pairing is covered (a batch written by one client's codec framing is read by
the other's decoder). What a user relies on, and what is checked:

* a key lands in the partition the Java client would choose (murmur2, ``protocol.murmur2``), as
  reported by the producer's acknowledgement; confluent-kafka is configured with
  ``partitioner=murmur2_random`` (librdkafka's default, ``consistent_random``, hashes with CRC32);
* acknowledged offsets are contiguous from 0 per partition, in send order;
* the consumer gets every record back once, in order per partition, at the offset that was
  acknowledged, with its key (null values too), value, headers (repeated keys, order kept) and
  CreateTime timestamp intact.

A topic's ``compression.type`` recompresses what producers send (stored batches checked on disk).
A batch larger than the topic's ``segment.bytes`` is refused with RECORD_LIST_TOO_LARGE.

Consumers use ``assign()``, so these tests do not depend on consumer groups.
"""

from __future__ import annotations

import functools
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import kafka.codec
import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from kafkalite.protocol.compression import Compression
from kafkalite.protocol.murmur2 import default_partition
from kafkalite.protocol.records import iter_batches

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

RECORDS = 10_000
PARTITIONS = 3
TIMEOUT_S = 60.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent"
CLIENTS = (KAFKA_PYTHON, CONFLUENT)

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Sent:
    key: bytes
    value: bytes | None
    headers: Headers
    timestamp: int


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    create_time: bool  # the timestamp type is CreateTime


@dataclass(frozen=True, slots=True)
class Produced:
    topic: str
    records: list[Sent]
    acks: list[tuple[int, int]]  # (partition, offset) acknowledged for records[i]


def make_records(tag: str, count: int = RECORDS) -> list[Sent]:
    """Keyed records of mixed shapes: JSON-like text, null values, large incompressible values,
    no headers, repeated header keys, binary header values."""
    randomness = random.Random(tag)
    # Explicit CreateTime timestamps (the consumer must see exactly these), recent enough that the
    # default 7-day retention does not delete the segments under the test.
    base_timestamp = int(time.time() * 1000) - count
    records = []
    for index in range(count):
        key = f"{tag}/key-{index}".encode()
        if index % 997 == 0:
            value: bytes | None = None  # a tombstone
        elif index % 1000 == 1:
            value = randomness.randbytes(20_000)  # larger than kafka-python's default batch.size
        else:
            value = f'{{"seq":{index},"tag":"{tag}","pad":"{"x" * (index % 64)}"}}'.encode()
        headers: Headers = ()
        if index % 7:
            headers = (("seq", str(index).encode()), ("bin", bytes([index % 256, 0, 255])))
            if index % 10 == 0:
                headers += (("seq", b"again"),)
        records.append(Sent(key, value, headers, base_timestamp + index))
    return records


# producing -----------------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=TIMEOUT_S)


def produce_kafka_python(bootstrap: str, topic: str, codec: str, records: list[Sent]) -> list[tuple[int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all", linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    try:
        futures = [producer.send(topic, key=record.key, value=record.value, headers=list(record.headers),
                                 timestamp_ms=record.timestamp) for record in records]
        producer.flush(timeout=TIMEOUT_S)
        metadata = [future.get(timeout=TIMEOUT_S) for future in futures]
    finally:
        producer.close(timeout=TIMEOUT_S)
    return [(item.partition, item.offset) for item in metadata]


def produce_confluent(bootstrap: str, topic: str, codec: str, records: list[Sent]) -> list[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all",
                         "linger.ms": 5, "partitioner": "murmur2_random", "enable.idempotence": False})
    acks: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[KafkaError] = []

    def delivered(index: int, error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            acks[index] = (message.partition(), message.offset())  # type: ignore[attr-defined]

    for index, record in enumerate(records):
        producer.produce(topic, key=record.key, value=record.value, headers=list(record.headers),
                         timestamp=record.timestamp, on_delivery=functools.partial(delivered, index))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "confluent-kafka did not deliver everything in time"
    assert not errors, errors[:5]
    assert None not in acks
    return acks  # type: ignore[return-value]


PRODUCERS: dict[str, Callable[[str, str, str, list[Sent]], list[tuple[int, int]]]] = {
    KAFKA_PYTHON: produce_kafka_python, CONFLUENT: produce_confluent}


# consuming -----------------------------------------------------------------------------------------

def consume_kafka_python(bootstrap: str, topic: str, expected: dict[int, int]) -> list[Consumed]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumed: list[Consumed] = []
    counts = dict.fromkeys(expected, 0)
    try:
        consumer.assign([TopicPartition(topic, partition) for partition in expected])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT_S
        while counts != expected and time.monotonic() < deadline:
            for topic_partition, messages in consumer.poll(timeout_ms=500, max_records=5000).items():
                for message in messages:
                    counts[topic_partition.partition] += 1
                    consumed.append(Consumed(
                        message.partition, message.offset, message.key, message.value,
                        tuple((key, value) for key, value in message.headers), message.timestamp,
                        message.timestamp_type == 0))
    finally:
        consumer.close()
    return consumed


def consume_confluent(bootstrap: str, topic: str, expected: dict[int, int]) -> list[Consumed]:
    # librdkafka wants a group.id to make a Consumer; with assign() and no commits it never joins the group.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"unused-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False, "fetch.wait.max.ms": 100})
    consumed: list[Consumed] = []
    counts = dict.fromkeys(expected, 0)
    try:
        consumer.assign([ConfluentTopicPartition(topic, partition, OFFSET_BEGINNING) for partition in expected])
        deadline = time.monotonic() + TIMEOUT_S
        while counts != expected and time.monotonic() < deadline:
            wanted = sum(expected.values()) - sum(counts.values())  # consume() returns early only when full
            for message in consumer.consume(num_messages=min(5000, wanted), timeout=0.5):
                error = message.error()
                assert error is None, error
                timestamp_type, timestamp = message.timestamp()
                counts[message.partition()] += 1
                consumed.append(Consumed(
                    message.partition(), message.offset(), message.key(), message.value(),
                    tuple(message.headers() or ()), timestamp, timestamp_type == TIMESTAMP_CREATE_TIME))
    finally:
        consumer.close()
    return consumed


CONSUMERS: dict[str, Callable[[str, str, dict[int, int]], list[Consumed]]] = {
    KAFKA_PYTHON: consume_kafka_python, CONFLUENT: consume_confluent}


# fixtures ------------------------------------------------------------------------------------------

def require_codec(client: str, codec: str) -> None:
    if client == KAFKA_PYTHON and codec == "snappy" and not kafka.codec.has_snappy():
        pytest.skip("kafka-python needs python-snappy for snappy: add python-snappy>=0.7 to the test extra")


@pytest.fixture(scope="module")
def produced(broker: BrokerProcess) -> Iterator[Callable[[str, str], Produced]]:
    """``produced(client, codec)``: a topic that client filled with that codec (made once per module)."""
    made: dict[tuple[str, str], Produced] = {}

    def get(client: str, codec: str) -> Produced:
        if (client, codec) not in made:
            topic = f"round-trip-{client}-{codec}-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap, topic)
            records = make_records(f"{client}-{codec}")
            acks = PRODUCERS[client](broker.bootstrap, topic, codec, records)
            made[(client, codec)] = Produced(topic, records, acks)
        return made[(client, codec)]

    yield get


# tests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("consumer_client", CLIENTS)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer_client", CLIENTS)
def test_records_come_back_intact_and_in_order(produced: Callable[[str, str], Produced], broker: BrokerProcess,
                                                producer_client: str, codec: str, consumer_client: str) -> None:
    require_codec(producer_client, codec)
    require_codec(consumer_client, codec)
    batch = produced(producer_client, codec)
    topic, records, acks = batch.topic, batch.records, batch.acks

    # The producer's acknowledgements: murmur2 placement, offsets contiguous from 0 in send order.
    sent_to: dict[int, list[Sent]] = {partition: [] for partition in range(PARTITIONS)}
    acked_offsets: dict[int, list[int]] = {partition: [] for partition in range(PARTITIONS)}
    for record, (partition, offset) in zip(records, acks, strict=True):
        assert partition == default_partition(record.key, PARTITIONS), record.key
        sent_to[partition].append(record)
        acked_offsets[partition].append(offset)
    for partition, offsets in acked_offsets.items():
        assert offsets, f"no record went to partition {partition}"
        assert offsets == list(range(len(offsets))), f"partition {partition}: acknowledged offsets not 0..n-1"

    expected_counts = {partition: len(sent) for partition, sent in sent_to.items()}
    consumed = CONSUMERS[consumer_client](broker.bootstrap, topic, expected_counts)

    for partition, sent in sent_to.items():
        mine = [record for record in consumed if record.partition == partition]
        assert [record.offset for record in mine] == list(range(len(sent))), f"partition {partition} offsets"
        assert [(record.key, record.value, record.headers) for record in mine] == \
               [(record.key, record.value, record.headers) for record in sent], f"partition {partition} records"
        assert [record.timestamp for record in mine] == [record.timestamp for record in sent]
        assert all(record.create_time for record in mine)


@pytest.mark.parametrize("producer_client", CLIENTS)
def test_a_topic_compression_type_recompresses_what_is_stored(broker: BrokerProcess, producer_client: str) -> None:
    """``compression.type=zstd`` on the topic: batches produced with lz4 are stored as zstd, and both
    clients read the records back intact."""
    topic = f"topic-codec-{producer_client}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"compression.type": "zstd"})])[topic].result(
        timeout=TIMEOUT_S)
    records = make_records(f"recompressed-{producer_client}", 2000)
    acks = PRODUCERS[producer_client](broker.bootstrap, topic, "lz4", records)
    expected = {partition: [record for record, (p, _) in zip(records, acks, strict=True) if p == partition]
                for partition in range(PARTITIONS)}

    codecs = {batch.compression for partition in range(PARTITIONS)
              for segment in sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))
              for batch in iter_batches(segment.read_bytes())}
    assert codecs == {Compression.ZSTD}

    for consumer_client in CLIENTS:
        consumed = CONSUMERS[consumer_client](broker.bootstrap, topic,
                                              {partition: len(sent) for partition, sent in expected.items()})
        for partition, sent in expected.items():
            mine = [record for record in consumed if record.partition == partition]
            assert [(record.offset, record.key, record.value, record.headers, record.timestamp) for record in mine] \
                == [(offset, record.key, record.value, record.headers, record.timestamp)
                    for offset, record in enumerate(sent)], f"{consumer_client}: partition {partition}"


def test_a_batch_larger_than_the_segment_size_is_refused_with_record_list_too_large(broker: BrokerProcess) -> None:
    topic = f"tiny-segments-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])[topic].result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 3000})
    outcomes: list[KafkaError | None] = []
    for value in (bytes(2000), b"small"):  # one batch each
        producer.produce(topic, value=value, on_delivery=lambda error, message: outcomes.append(error))
        assert producer.flush(TIMEOUT_S) == 0
    assert [None if error is None else error.code() for error in outcomes] == [KafkaError.RECORD_LIST_TOO_LARGE, None]
