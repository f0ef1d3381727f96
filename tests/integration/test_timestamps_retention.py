"""Record timestamps and time retention, as a user sees them with real clients.

* Retention runs on Kafka's schedule: records with CreateTimes in 1970 and 2001 (far past
  ``retention.ms``) are still readable seconds after they were written with the default config,
  because the first retention check comes ``log.initial.task.delay.ms`` (30 s) after start-up and
  the next ones every ``log.retention.check.interval.ms`` (5 min). A broker started with short
  values of both deletes them at once, as a user who wants fast retention asks.
* The batch max timestamp is Kafka's, computed from the records: librdkafka sends a record without
  a timestamp (-1) under a header max timestamp of 0, which used to be stored as 1970 and deleted by
  the first retention check; it is stored as -1, and time retention of its segment goes by the
  segment's last modification.
* LogAppendTime topics give consumers the broker's append time, flagged as such.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.protocol.records import RecordBatch, iter_batches

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import BrokerProcess

TIMEOUT_S = 30.0
OLD_TIMESTAMPS = (1, 978_307_200_000)  # 1970-01-01T00:00:00.001Z and 2001-01-01T00:00:00Z


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})])[topic].result(timeout=TIMEOUT_S)
    return topic


def produce(bootstrap: str, topic: str, timestamps: tuple[int, ...]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index, timestamp in enumerate(timestamps):
        producer.produce(topic, key=b"key-%d" % index, value=b"value-%d" % index, partition=0, timestamp=timestamp)
        producer.flush(TIMEOUT_S)  # one batch per record
    assert producer.flush(TIMEOUT_S) == 0


def consumer_for(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100})


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = consumer_for(bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(ConfluentTopicPartition(topic, 0), timeout=TIMEOUT_S, cached=False)
        return int(low), int(high)
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = consumer_for(bootstrap)
    messages: list[Any] = []
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=count - len(messages), timeout=0.5):
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


def test_old_create_times_survive_the_default_retention_schedule(
        fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()  # the default config: retention.ms 7 days, first check 30 s after start
    topic = create_topic(broker.bootstrap, unique("old-create-times"))
    produce(broker.bootstrap, topic, OLD_TIMESTAMPS)
    written = time.monotonic()
    while time.monotonic() - written < 5.0:  # the records must stay readable for 5 s: watch the log start
        assert watermarks(broker.bootstrap, topic) == (0, 2)
        time.sleep(0.25)
    messages = consume_all(broker.bootstrap, topic, 2)
    assert [(message.offset(), message.timestamp()[1]) for message in messages] == list(enumerate(OLD_TIMESTAMPS))
    assert "retention deleted" not in broker.log_text()


def test_retention_can_be_made_fast(fresh_broker: Callable[..., BrokerProcess],
                                    wait_until: Callable[..., object]) -> None:
    broker = fresh_broker("log.retention.check.interval.ms=100", "log.initial.task.delay.ms=0")
    topic = create_topic(broker.bootstrap, unique("fast-retention"))
    produce(broker.bootstrap, topic, OLD_TIMESTAMPS)
    wait_until(lambda: watermarks(broker.bootstrap, topic) == (2, 2), TIMEOUT_S, "retention did not delete 1970/2001")
    assert "retention deleted" in broker.log_text()


def stored_batches(broker: BrokerProcess, topic: str) -> list[RecordBatch]:
    batches: list[RecordBatch] = []
    for path in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        batches.extend(item for item in iter_batches(path.read_bytes()) if isinstance(item, RecordBatch))
    return batches


def test_a_record_without_timestamp_is_kept_by_time_retention(fresh_broker: Callable[..., BrokerProcess],
                                                              wait_until: Callable[..., object]) -> None:
    broker = fresh_broker("log.retention.check.interval.ms=100", "log.initial.task.delay.ms=0")
    undated = create_topic(broker.bootstrap, unique("undated"), {"retention.ms": "3600000"})
    dated = create_topic(broker.bootstrap, unique("dated"), {"retention.ms": "3600000"})
    produce(broker.bootstrap, undated, (-1,))  # librdkafka: record timestamp -1, header max timestamp 0
    produce(broker.bootstrap, dated, (OLD_TIMESTAMPS[0],))
    [batch] = stored_batches(broker, undated)
    assert (batch.base_timestamp, batch.max_timestamp) == (-1, -1)
    batch.validate_crc()
    wait_until(lambda: watermarks(broker.bootstrap, dated) == (1, 1), TIMEOUT_S, "the 1970 record was not deleted")
    assert watermarks(broker.bootstrap, undated) == (0, 1)  # the same checks kept the undated one
    [message] = consume_all(broker.bootstrap, undated, 1)
    assert (message.offset(), message.value()) == (0, b"value-0")


def test_log_append_time_topics_give_the_brokers_time(broker: BrokerProcess) -> None:
    topic = create_topic(broker.bootstrap, unique("append-time"), {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(broker.bootstrap, topic, OLD_TIMESTAMPS)
    after = int(time.time() * 1000)
    messages = consume_all(broker.bootstrap, topic, 2)
    for message in messages:
        timestamp_type, timestamp = message.timestamp()
        assert timestamp_type == TIMESTAMP_LOG_APPEND_TIME and before <= timestamp <= after
