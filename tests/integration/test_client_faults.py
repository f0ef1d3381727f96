"""Faults under the bundled producer: each ends in a retry or a clear error, never a hang or a lie.

A lost connection mid-request, a broker restart during a send loop, a topic deleted under the
producer, ``buffer.memory`` running out, a close with records pending, and wrong types given to
``send()``. Every wait has a deadline; every record reported delivered is checked in the log.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kafkalite.client import KafkaError, KafkaTimeoutError, NewTopic, Producer, RecordMetadata
from kafkalite.client import sync as blocking
from tests.tools.frame_proxy import FrameProxy

TIMEOUT_S = 30
PRODUCE = 0


class ConnectionKillingProxy(FrameProxy):
    """A loopback proxy that forwards whole frames; after the broker answers every ``kill_every``-th
    Produce request (at most ``max_kills`` times), it closes both sockets instead of forwarding the answer:
    the request was handled, but the client cannot know it."""

    def __init__(self, kill_every: int, max_kills: int) -> None:
        super().__init__()
        self.kill_every, self.max_kills = kill_every, max_kills
        self.produce_requests = self.kills = 0

    def on_request(self, frame: bytes) -> bool:
        """Whether to kill the connection at this request's answer."""
        (api_key,) = struct.unpack_from(">h", frame, 4)
        if api_key != PRODUCE:
            return False
        with self._lock:
            self.produce_requests += 1
            kill = self.produce_requests % self.kill_every == 0 and self.kills < self.max_kills
            self.kills += kill
        return kill

    def on_response(self, frame: bytes, note: Any) -> bytes | None:
        return None if note else frame


def read_all(bootstrap: str, topic: str, expected: int, partitions: int = 1) -> dict[tuple[int, int], bytes]:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition(topic, index, 0) for index in range(partitions)])
    found: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(found) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.2):
                assert message.error() is None, message.error()
                found[(message.partition(), message.offset())] = message.value()
        for message in consumer.consume(1000, timeout=0.5):  # nothing more than expected
            found[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
    return found


def create_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"fault-{uuid.uuid4().hex[:10]}"
    with blocking.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    return name


def assert_delivered_exactly(bootstrap: str, topic: str, values: list[bytes], results: list[RecordMetadata],
                             partitions: int = 1) -> None:
    stored = read_all(bootstrap, topic, len(values), partitions)
    assert len(stored) == len(values), "records are missing or duplicated"
    for value, result in zip(values, results, strict=True):
        assert stored[(result.partition, result.offset)] == value


def test_connections_killed_mid_request_are_retried_without_duplicates(fresh_broker: Any) -> None:
    proxy = ConnectionKillingProxy(kill_every=4, max_kills=3)
    broker = fresh_broker("--advertised-listeners", f"PLAINTEXT://127.0.0.1:{proxy.port}")
    proxy.start(broker.address)
    try:
        topic = create_topic(broker.bootstrap)
        values = [f"value-{index}".encode() for index in range(3000)]
        with blocking.Producer(bootstrap_servers=f"127.0.0.1:{proxy.port}", linger_ms=1, batch_size=2048,
                               retry_backoff_ms=20) as producer:
            futures = [producer.send(topic, value) for value in values]
            results = [future.result(TIMEOUT_S) for future in futures]
        assert proxy.kills == 3
        assert [result.offset for result in results] == list(range(len(values)))  # order kept across retries
        assert_delivered_exactly(broker.bootstrap, topic, values, results)
    finally:
        proxy.close()


def test_a_broker_restart_during_a_send_loop(fresh_broker: Any) -> None:
    broker = fresh_broker()
    topic = create_topic(broker.bootstrap, partitions=2)
    values = [f"value-{index}".encode() for index in range(3000)]
    with blocking.Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, reconnect_backoff_max_ms=200) as producer:
        futures = [producer.send(topic, value) for value in values[:1500]]
        futures[100].result(TIMEOUT_S)
        broker.restart()  # while the rest of the first 1500 are queued or in flight
        futures += [producer.send(topic, value) for value in values[1500:]]
        results = [future.result(TIMEOUT_S) for future in futures]
    stored = read_all(broker.bootstrap, topic, len(values), partitions=2)
    assert len(stored) == len(values), "records are missing or duplicated"
    for value, result in zip(values, results, strict=True):
        assert stored[(result.partition, result.offset)] == value


def test_a_topic_deleted_under_the_producer(fresh_broker: Any) -> None:
    broker = fresh_broker("auto.create.topics.enable=false")
    topic = create_topic(broker.bootstrap)
    with blocking.Producer(bootstrap_servers=broker.bootstrap, max_block_ms=1500, delivery_timeout_ms=2500,
                           request_timeout_ms=1000, linger_ms=100, metadata_max_age_ms=500) as producer:
        producer.send(topic, b"before").result(TIMEOUT_S)
        pending = producer.send(topic, b"in the accumulator while the topic goes")
        with blocking.Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.delete_topics([topic])[topic].raise_for_error()
        failures = []
        for future in [pending, producer.send(topic, b"after")]:
            try:
                future.result(TIMEOUT_S)
            except KafkaError as exc:
                failures.append(exc)
        # whatever reached the broker before the deletion went with the topic; nothing is reported
        # delivered after it, and each failure names the topic or the timeout
        assert len(failures) >= 1
        assert all(topic in str(error) or "timed out" in str(error) or "expired" in str(error) for error in failures)


def test_buffer_memory_exhausted_blocks_then_fails_clearly(fresh_broker: Any) -> None:
    broker = fresh_broker()
    topic = create_topic(broker.bootstrap)

    async def scenario() -> None:
        async with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=65536, batch_size=16384,
                            max_block_ms=300, delivery_timeout_ms=2000, request_timeout_ms=500,
                            reconnect_backoff_max_ms=100) as producer:
            await (await producer.send(topic, b"warm-up"))
            broker.kill()
            futures = []
            with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
                for _ in range(1000):
                    futures.append(await producer.send(topic, b"x" * 1000))
            assert 0 < len(futures) < 100
            outcomes = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), TIMEOUT_S)
            assert all(isinstance(outcome, KafkaError) for outcome in outcomes)  # none reported delivered
            await producer.close(1)

    asyncio.run(scenario())


def test_close_with_a_deadline_fails_what_is_pending(fresh_broker: Any) -> None:
    broker = fresh_broker()
    topic = create_topic(broker.bootstrap)

    async def scenario() -> None:
        producer = Producer(bootstrap_servers=broker.bootstrap, linger_ms=1)
        await (await producer.send(topic, b"warm-up"))
        broker.kill()
        futures = [await producer.send(topic, b"stranded") for _ in range(10)]
        await asyncio.wait_for(producer.close(0.5), TIMEOUT_S)
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(outcome, KafkaError) for outcome in outcomes)

    asyncio.run(scenario())


@pytest.mark.parametrize(("arguments", "named"), [
    ({"value": 123}, "value"),
    ({"key": 1.5}, "key"),
    ({"headers": [("k",)]}, "header"),
    ({"headers": {"k": 5}}, "header value"),
    ({"timestamp": "now"}, "timestamp"),
    ({"partition": "0"}, "partition"),
])
def test_wrong_types_given_to_send_are_type_errors(broker: Any, arguments: dict[str, Any], named: str) -> None:
    async def scenario() -> None:
        async with Producer(bootstrap_servers=broker.bootstrap) as producer:
            with pytest.raises(TypeError, match=named):
                await producer.send("client-types", **arguments)
            with pytest.raises(TypeError, match="topic"):
                await producer.send(None, b"v")  # type: ignore[arg-type]

    asyncio.run(scenario())


def test_a_broker_that_lost_the_producer_state(fresh_broker: Any) -> None:
    """An in-memory broker restarts empty, topic and producer state gone: the idempotent producer
    reconnects, the topic is created again, and the next records arrive in order (a broker without
    state for a producer takes any sequence, as Kafka does since KIP-360; the sequence errors the
    producer answers with an epoch bump are covered in tests/unit/test_client_sender.py)."""
    broker = fresh_broker("--memory")
    with blocking.Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, reconnect_backoff_max_ms=200) as producer:
        for index in range(20):
            producer.send("lost-state", f"before-{index}".encode(), partition=0)
        producer.flush()
        broker.restart()
        futures = [producer.send("lost-state", f"after-{index}".encode(), partition=0) for index in range(20)]
        results = [future.result(TIMEOUT_S) for future in futures]
    assert [result.offset for result in results] == list(range(20))  # a fresh log, in order
    stored = read_all(broker.bootstrap, "lost-state", 20)
    assert [stored[(0, offset)] for offset in range(20)] == [f"after-{index}".encode() for index in range(20)]
