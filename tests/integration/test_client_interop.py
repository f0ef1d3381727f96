"""The bundled client with other clients over real sockets: what it writes, they read exactly.

Records from the bundled producer (keys, null values, headers, explicit timestamps, every codec)
are read back by confluent-kafka and kafka-python, and theirs by the bundled consumer; the same key
lands in the same partition from the bundled producer and from confluent-kafka's ``murmur2_random``
partitioner (the Java client's); a transaction's aborted records stay invisible to a read_committed
confluent-kafka consumer.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from kafkalite.client import Admin, NewTopic, Producer, TimestampType, TopicPartition
from kafkalite.client import sync as blocking

TIMEOUT_S = 30
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def fresh_topic(bootstrap: str, partitions: int = 3) -> str:
    name = f"client-{uuid.uuid4().hex[:10]}"
    with blocking.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    return name


def sample(count: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    base = int(time.time() * 1000) - 10_000
    records = []
    for index in range(count):
        key = None if index % 5 == 0 else f"key-{index % 17}".encode()
        value = None if index % 11 == 0 else (f"value-{index}-" + "x" * (index % 300)).encode()
        headers = [] if index % 3 else [("seq", str(index).encode()), ("bin", bytes([0, 255, index % 256]))]
        records.append((key, value, headers, base + index))
    return records


def read_confluent(bootstrap: str, topic: str, expected: int, isolation: str = "read_uncommitted",
                   partitions: int = 3) -> list[Any]:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([ConfluentTopicPartition(topic, index, 0) for index in range(partitions)])
    messages: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.2):
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


def read_kafka_python(bootstrap: str, topic: str, expected: int, partitions: int = 3) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    consumer.assign([KafkaPythonTopicPartition(topic, index) for index in range(partitions)])
    consumer.seek_to_beginning()
    messages: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                messages.extend(batch)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_bundled_records_read_back_by_confluent_and_kafka_python(broker: Any, codec: str) -> None:
    topic = fresh_topic(broker.bootstrap)
    records = sample(400)
    with blocking.Producer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=2) as producer:
        futures = [producer.send(topic, value, key, headers=headers, timestamp=timestamp)
                   for key, value, headers, timestamp in records]
        producer.flush()
        delivered = [future.result(TIMEOUT_S) for future in futures]
    by_position = {(item.partition, item.offset): records[index] for index, item in enumerate(delivered)}
    assert len(by_position) == len(records)
    assert all(item.topic == topic and item.timestamp == records[index][3] for index, item in enumerate(delivered))

    confluent = read_confluent(broker.bootstrap, topic, len(records))
    assert len(confluent) == len(records)
    for message in confluent:
        key, value, headers, timestamp = by_position[(message.partition(), message.offset())]
        assert (message.key(), message.value(), message.timestamp()[1]) == (key, value, timestamp)
        assert (message.headers() or []) == headers

    kafka_python = read_kafka_python(broker.bootstrap, topic, len(records))
    assert len(kafka_python) == len(records)
    for message in kafka_python:
        key, value, headers, timestamp = by_position[(message.partition, message.offset)]
        assert (message.key, message.value, message.timestamp) == (key, value, timestamp)
        assert list(message.headers) == headers


def read_bundled(bootstrap: str, topic: str, expected: int, partitions: int = 3) -> list[Any]:
    with blocking.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                           fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, index) for index in range(partitions)])
        records: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.poll(timeout_ms=200))
        records.extend(consumer.poll(timeout_ms=200))  # nothing more than expected
    return records


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_and_kafka_python_records_read_back_by_the_bundled_consumer(broker: Any, codec: str) -> None:
    records = sample(300)
    written: dict[tuple[str, int, int], tuple[Any, ...]] = {}
    confluent_topic, kafka_python_topic = fresh_topic(broker.bootstrap), fresh_topic(broker.bootstrap)

    def delivered(record: tuple[Any, ...], error: Any, message: Any) -> None:
        assert error is None, error
        written[(confluent_topic, message.partition(), message.offset())] = record

    confluent = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                                   "linger.ms": 2})
    for record in records:
        key, value, headers, timestamp = record
        confluent.produce(confluent_topic, value, key, headers=headers or None, timestamp=timestamp,
                          on_delivery=functools.partial(delivered, record))
    assert confluent.flush(TIMEOUT_S) == 0
    kafka_python = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2,
                                 compression_type=None if codec == "none" else codec)
    futures = []
    for key, value, headers, timestamp in records:
        if key is None and value is None:
            value = b""  # kafka-python refuses a record with neither
        futures.append((kafka_python.send(kafka_python_topic, value, key, headers=headers, timestamp_ms=timestamp),
                        (key, value, headers, timestamp)))
    kafka_python.flush()
    for future, record in futures:
        metadata = future.get(TIMEOUT_S)
        written[(kafka_python_topic, metadata.partition, metadata.offset)] = record
    kafka_python.close()
    for topic in (confluent_topic, kafka_python_topic):
        got = read_bundled(broker.bootstrap, topic, len(records))
        assert len(got) == len(records)
        for record in got:
            key, value, headers, timestamp = written[(topic, record.partition, record.offset)]
            assert (record.key, record.value, list(record.headers)) == (key, value, list(headers))
            assert (record.timestamp, record.timestamp_type) == (timestamp, TimestampType.CREATE_TIME)
            assert record.leader_epoch == 0


def test_the_same_key_lands_in_the_same_partition_as_with_confluent(broker: Any) -> None:
    topic = fresh_topic(broker.bootstrap, partitions=7)
    keys = [f"customer-{index}".encode() for index in range(200)] + [b"", b"\x00\xff"]
    confluent_partitions: dict[bytes, int] = {}
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, b"v", key, on_delivery=lambda error, message: confluent_partitions.__setitem__(
            message.key(), message.partition()))
    assert producer.flush(TIMEOUT_S) == 0
    with blocking.Producer(bootstrap_servers=broker.bootstrap) as bundled:
        futures = {key: bundled.send(topic, b"v", key) for key in keys}
        bundled_partitions = {key: future.result(TIMEOUT_S).partition for key, future in futures.items()}
    assert bundled_partitions == confluent_partitions
    assert len(set(bundled_partitions.values())) == 7


def test_aborted_transactions_are_invisible_to_read_committed(broker: Any) -> None:
    topic = fresh_topic(broker.bootstrap, partitions=2)
    with blocking.Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:6]}",
                           linger_ms=1) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for index in range(50):
            producer.send(topic, f"committed-{index}".encode(), partition=index % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for index in range(30):
            producer.send(topic, f"aborted-{index}".encode(), partition=index % 2)
        producer.flush()  # the aborted records really reach the log
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"last", partition=0)
        producer.commit_transaction()
    committed = read_confluent(broker.bootstrap, topic, 51, isolation="read_committed", partitions=2)
    values = sorted(message.value() for message in committed)
    assert values == sorted([f"committed-{index}".encode() for index in range(50)] + [b"last"])
    uncommitted = read_confluent(broker.bootstrap, topic, 81, partitions=2)
    assert len([message for message in uncommitted if message.value().startswith(b"aborted")]) == 30


def test_async_producer_send_many_and_flush(broker: Any) -> None:
    async def scenario() -> None:
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            topic = f"client-many-{uuid.uuid4().hex[:8]}"
            (await admin.create_topics([NewTopic(topic, 2)]))[topic].raise_for_error()
        async with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 4096}) as producer:
            futures = await producer.send_many(topic, [f"v{index}".encode() for index in range(5000)])
            single = await producer.send(topic, "text value", key="text key", partition=1)
            await producer.flush()
            first = await futures[0]
            assert first.topic == topic and first.offset >= 0
            assert (await single).partition == 1
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            ends = await admin.list_offsets({TopicPartition(topic, 0): -1, TopicPartition(topic, 1): -1})
            assert sum(result.offset for result in ends.values()) == 5001

    asyncio.run(scenario())


def test_acks_zero_and_the_blocking_facade(broker: Any) -> None:
    topic = fresh_topic(broker.bootstrap, partitions=1)
    with blocking.Producer(bootstrap_servers=broker.bootstrap, acks=0) as producer:
        results = [future.result(TIMEOUT_S) for future in [producer.send(topic, b"fire") for _ in range(20)]]
        assert {result.offset for result in results} == {-1}  # acks=0: the producer never learns offsets
    with blocking.Producer(bootstrap_servers=broker.bootstrap) as producer:
        assert producer.send_and_wait(topic, b"confirmed").offset == 20
        bad = producer.send(topic, 42)  # the error of the send itself comes through its future
        with pytest.raises(TypeError, match="value"):
            bad.result(TIMEOUT_S)
        batches = producer.send_many(topic, [b"a", b"b", b"c"])
        producer.flush()
        assert batches[0].result(TIMEOUT_S).offset == 21
        assert producer.partitions_for(topic) == [0]
    assert len(read_confluent(broker.bootstrap, topic, 24, partitions=1)) == 24


def test_send_many_with_keys_puts_each_record_where_its_key_sends_it(broker: Any) -> None:
    """Keys hash to partitions as send() hashes them; each partition keeps the order given, across batches."""
    from kafkalite.client.sync import Consumer
    from kafkalite.protocol.murmur2 import default_partition

    keys = [b"user-%d" % (index % 7) if index % 5 else None for index in range(2000)]
    values = [b"%04d" % index for index in range(2000)]

    async def scenario() -> str:
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            topic = f"client-keyed-{uuid.uuid4().hex[:8]}"
            (await admin.create_topics([NewTopic(topic, 3)]))[topic].raise_for_error()
        async with Producer(bootstrap_servers=broker.bootstrap, batch_size=400, linger_ms=0) as producer:
            futures = await producer.send_many(topic, values, keys)
            await producer.flush()
            assert all(future.done() and future.exception() is None for future in futures)
        return topic

    topic = asyncio.run(scenario())
    with Consumer({"bootstrap.servers": broker.bootstrap, "enable.auto.commit": False}) as consumer:
        assigned = [TopicPartition(topic, index) for index in range(3)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while len(records) < 2000 and time.monotonic() < deadline:
            records += list(consumer.poll(timeout_ms=500))
    assert len(records) == 2000
    for record in records:
        if record.key is not None:
            assert record.partition == default_partition(record.key, 3)
    for partition in range(3):
        in_partition = [record.value for record in records if record.partition == partition]
        assert in_partition == sorted(in_partition)  # the order given
    assert sorted((record.key, record.value) for record in records if record.key) == sorted(
        (key, value) for key, value in zip(keys, values, strict=True) if key)


def test_send_many_while_the_sender_drains_every_batch_at_once(broker: Any) -> None:
    """Tiny batches and no linger: the sender takes batches while send_many still fills others."""
    async def scenario() -> None:
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            topic = f"client-drain-{uuid.uuid4().hex[:8]}"
            (await admin.create_topics([NewTopic(topic, 3)]))[topic].raise_for_error()
            async with Producer(bootstrap_servers=broker.bootstrap, batch_size=300, linger_ms=0) as producer:
                futures = []
                for round_number in range(5):
                    futures += await producer.send_many(topic, [f"{round_number}-{index}".encode() * 3
                                                                for index in range(600)])
                await producer.flush()
                assert all(future.done() and future.exception() is None for future in futures)
            ends = await admin.list_offsets({TopicPartition(topic, index): -1 for index in range(3)})
            assert sum(result.offset for result in ends.values()) == 3000

    asyncio.run(scenario())
