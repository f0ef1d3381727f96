"""Transactions over real sockets with confluent-kafka (librdkafka) and kafka-python.

Exactly-once consume-transform-produce with a worker killed mid-transaction, aborted transactions
hidden from read_committed consumers, fencing of an older producer with the same transactional id,
a broker restarted during an open transaction, and the coordinator aborting a transaction that
outlives its timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

REPO_ROOT = Path(__file__).resolve().parents[2]
FAST_TIMEOUTS = ("transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
                 "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")


def create_topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(10)


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int | None = None,
                quiet_s: float = 0.5, timeout_s: float = 20.0) -> list[bytes]:
    """Every value of the topic, read with librdkafka at this isolation level, once nothing more arrives."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    last_arrival = time.monotonic()
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
                last_arrival = time.monotonic()
            elif (expect is None or len(values) >= expect) and time.monotonic() - last_arrival >= quiet_s:
                break
    finally:
        consumer.close()
    return values


def read_values_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=1500)
    consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
    try:
        return [record.value for record in consumer]
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """ListOffsets(latest) per partition: the last stable offset for read_committed, else the high watermark."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    try:
        found = consumer.end_offsets([KafkaTopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: offset for tp, offset in found.items()}
    finally:
        consumer.close()


def transactional_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                         **extra})
    producer.init_transactions(20)
    return producer


def produce_values(producer: Producer, topic: str, values: Iterable[bytes], partitions: int = 2) -> None:
    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=index % partitions)
    assert producer.flush(20) == 0


def transaction_state(bootstrap: str, transactional_id: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return str(admin.describe_transactions([transactional_id])[transactional_id].state.value)
    finally:
        admin.close()


# --- read_committed and read_uncommitted --------------------------------------------------------


def test_aborted_transactions_are_hidden_from_read_committed_only(broker: Any) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "tx-visibility")
    producer = transactional_producer(bootstrap, "visibility")
    committed_first = [b"c1-%d" % i for i in range(10)]
    aborted = [b"ab-%d" % i for i in range(10)]
    committed_last = [b"c2-%d" % i for i in range(6)]
    producer.begin_transaction()
    produce_values(producer, "tx-visibility", committed_first)
    producer.commit_transaction(20)
    producer.begin_transaction()
    produce_values(producer, "tx-visibility", aborted)
    producer.abort_transaction(20)
    producer.begin_transaction()
    produce_values(producer, "tx-visibility", committed_last)
    producer.commit_transaction(20)
    # An open transaction holds the last stable offset back: ListOffsets for read_committed says so.
    producer.begin_transaction()
    produce_values(producer, "tx-visibility", [b"open-0", b"open-1"])
    stable = end_offsets(bootstrap, "tx-visibility", 2, "read_committed")
    high = end_offsets(bootstrap, "tx-visibility", 2, "read_uncommitted")
    assert all(stable[p] == high[p] - 1 for p in range(2)), (stable, high)
    producer.abort_transaction(20)
    assert end_offsets(bootstrap, "tx-visibility", 2, "read_committed") == end_offsets(
        bootstrap, "tx-visibility", 2, "read_uncommitted")

    expected = sorted(committed_first + committed_last)
    assert sorted(read_values(bootstrap, "tx-visibility", 2, "read_committed", len(expected))) == expected
    assert sorted(read_values_kafka_python(bootstrap, "tx-visibility", 2, "read_committed")) == expected
    everything = sorted(expected + aborted + [b"open-0", b"open-1"])
    assert sorted(read_values(bootstrap, "tx-visibility", 2, "read_uncommitted", len(everything))) == everything
    assert sorted(read_values_kafka_python(bootstrap, "tx-visibility", 2, "read_uncommitted")) == everything


def test_kafka_python_transactions_commit_and_abort(broker: Any) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "tx-kp", partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
    producer.init_transactions()
    producer.begin_transaction()
    for index in range(5):
        producer.send("tx-kp", value=b"keep-%d" % index)
    producer.commit_transaction()
    producer.begin_transaction()
    for index in range(5):
        producer.send("tx-kp", value=b"drop-%d" % index)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert read_values_kafka_python(bootstrap, "tx-kp", 1, "read_committed") == [b"keep-%d" % i for i in range(5)]
    assert len(read_values(bootstrap, "tx-kp", 1, "read_uncommitted", 10)) == 10


# --- fencing ------------------------------------------------------------------------------------


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker: Any) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "tx-fence")
    old = transactional_producer(bootstrap, "fenced-id")
    old.begin_transaction()
    produce_values(old, "tx-fence", [b"zombie-%d" % i for i in range(4)])
    new = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="fenced-id")
    new.init_transactions()  # aborts the old producer's open transaction and bumps the epoch
    new.begin_transaction()
    for index in range(4):
        new.send("tx-fence", value=b"new-%d" % index, partition=index % 2)
    new.commit_transaction()
    new.close()
    with pytest.raises(KafkaException) as failure:
        old.commit_transaction(20)
    error = failure.value.args[0]
    assert error.fatal() and "fenced" in error.str().lower(), error.str()
    values = read_values(bootstrap, "tx-fence", 2, "read_committed", 4)
    assert sorted(values) == [b"new-%d" % i for i in range(4)]
    assert transaction_state(bootstrap, "fenced-id") == "CompleteCommit"


# --- timeouts -----------------------------------------------------------------------------------


def test_a_transaction_outliving_its_timeout_is_aborted(fresh_broker: Callable[..., Any],
                                                        wait_until: Callable[..., Any]) -> None:
    broker = fresh_broker(*FAST_TIMEOUTS)
    create_topics(broker.bootstrap, "tx-timeout")
    producer = transactional_producer(broker.bootstrap, "slow", **{"transaction.timeout.ms": 1500,
                                                                   "message.timeout.ms": 1500})
    producer.begin_transaction()
    produce_values(producer, "tx-timeout", [b"late-%d" % i for i in range(6)])
    wait_until(lambda: transaction_state(broker.bootstrap, "slow") == "CompleteAbort", 15,
               "the coordinator did not abort the timed-out transaction")
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    assert read_values(broker.bootstrap, "tx-timeout", 2, "read_committed", quiet_s=0.5) == []
    assert len(read_values(broker.bootstrap, "tx-timeout", 2, "read_uncommitted", 6)) == 6
    assert end_offsets(broker.bootstrap, "tx-timeout", 2, "read_committed") == end_offsets(
        broker.bootstrap, "tx-timeout", 2, "read_uncommitted")


# --- broker restarts ----------------------------------------------------------------------------


def test_a_transaction_open_across_a_broker_crash_can_still_commit(fresh_broker: Callable[..., Any]) -> None:
    broker = fresh_broker(*FAST_TIMEOUTS)
    create_topics(broker.bootstrap, "tx-crash")
    producer = transactional_producer(broker.bootstrap, "survivor", **{"transaction.timeout.ms": 60_000})
    producer.begin_transaction()
    produce_values(producer, "tx-crash", [b"v-%d" % i for i in range(10)])
    broker.restart(kill=True)
    # Never half-visible: nothing for read_committed while it is open, even after recovery.
    assert read_values(broker.bootstrap, "tx-crash", 2, "read_committed", quiet_s=0.5) == []
    assert len(read_values(broker.bootstrap, "tx-crash", 2, "read_uncommitted", 10)) == 10
    assert transaction_state(broker.bootstrap, "survivor") == "Ongoing"
    producer.commit_transaction(30)
    assert sorted(read_values(broker.bootstrap, "tx-crash", 2, "read_committed", 10)) == sorted(
        b"v-%d" % i for i in range(10))


@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "clean-stop"])
def test_an_abandoned_transaction_is_aborted_after_a_broker_restart(fresh_broker: Callable[..., Any],
                                                                    wait_until: Callable[..., Any],
                                                                    kill: bool) -> None:
    broker = fresh_broker(*FAST_TIMEOUTS)
    create_topics(broker.bootstrap, "tx-abandon")
    producer = transactional_producer(broker.bootstrap, "abandoned", **{"transaction.timeout.ms": 2000,
                                                                        "message.timeout.ms": 2000})
    producer.begin_transaction()
    produce_values(producer, "tx-abandon", [b"x-%d" % i for i in range(8)])
    broker.restart(kill=kill)
    wait_until(lambda: transaction_state(broker.bootstrap, "abandoned") == "CompleteAbort", 15,
               "the transaction open at the restart was not aborted")
    assert read_values(broker.bootstrap, "tx-abandon", 2, "read_committed", quiet_s=0.5) == []
    assert len(read_values(broker.bootstrap, "tx-abandon", 2, "read_uncommitted", 8)) == 8
    del producer


# --- exactly once through a crash of the worker -------------------------------------------------

WORKER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, Producer

    bootstrap = sys.argv[1]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "xform-worker", "linger.ms": 5,
                         "transaction.timeout.ms": 30000})
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "xform", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 2000, "heartbeat.interval.ms": 200})
    consumer.subscribe(["xform-in"])
    print("ready", flush=True)
    while True:
        messages = [m for m in consumer.consume(25, 0.2) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce("xform-out", key=message.key(), value=message.value().upper())
        producer.flush(30)
        print("open", len(messages), flush=True)  # in the log, not committed: a good moment to die
        time.sleep(0.3)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        print("committed", len(messages), flush=True)
""")

INPUTS = 300


class Worker:
    """The worker script as a subprocess; its stdout lines are collected by a thread."""

    def __init__(self, script: Path, bootstrap: str) -> None:
        environment = {key: value for key, value in os.environ.items() if not key.startswith("KAFKALITE_")}
        self.process = subprocess.Popen([sys.executable, str(script), bootstrap], cwd=REPO_ROOT,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environment)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.decode("utf-8", "replace").strip())

    def committed(self) -> int:
        return sum(int(line.split()[1]) for line in list(self.lines) if line.startswith("committed"))

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)
        self.process.wait(10)


def test_consume_transform_produce_is_exactly_once_through_a_worker_crash(
        fresh_broker: Callable[..., Any], wait_until: Callable[..., Any], tmp_path: Path) -> None:
    broker = fresh_broker(*FAST_TIMEOUTS)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, "xform-in", "xform-out", partitions=3)
    source = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    inputs = [b"record-%03d" % i for i in range(INPUTS)]
    for value in inputs:
        source.produce("xform-in", key=value, value=value)
    assert source.flush(20) == 0
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")

    first = Worker(script, bootstrap)
    try:
        # Let it commit a few transactions, then kill it while the next one is open.
        wait_until(lambda: first.committed() >= 50, 60, f"the worker made no progress: {first.lines[-5:]}")
        opens_seen = sum(line.startswith("open") for line in first.lines)
        wait_until(lambda: sum(line.startswith("open") for line in list(first.lines)) > opens_seen, 30,
                   "the worker opened no further transaction")
        first.stop(signal.SIGKILL)
    finally:
        first.stop(signal.SIGKILL)
    assert first.committed() < INPUTS, "the first worker finished everything before it could be killed"

    second = Worker(script, bootstrap)
    try:
        wait_until(lambda: len(read_values(bootstrap, "xform-out", 3, "read_committed", quiet_s=0.3,
                                           timeout_s=5)) >= INPUTS, 90,
                   f"the restarted worker did not finish: {second.lines[-5:]}")
    finally:
        second.stop(signal.SIGKILL)

    expected = sorted(value.upper() for value in inputs)
    committed = sorted(read_values(bootstrap, "xform-out", 3, "read_committed", INPUTS))
    assert committed == expected, "the output read with read_committed is not every input exactly once"
    everything = read_values(bootstrap, "xform-out", 3, "read_uncommitted", INPUTS)
    assert len(everything) > INPUTS, "no aborted records: the worker was not killed inside a transaction"
