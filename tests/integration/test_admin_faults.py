"""Real clients meeting injected faults, reacting as they do to Kafka's own failures.

The brokers come from the pytest plugin (``kafka_broker_factory``), faults from ``broker.faults.inject``
as a context manager; the broker's recent-request log shows what each client did about them. Every
record sent is read back to count it: delivered once, none lost, none twice. The last tests drive
the same faults over HTTP (a subprocess broker) and from the ``kafkalite faults`` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer

from kafkalite.testing import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0
Factory = Callable[..., Any]


def read_back(bootstrap: str, topic: str, partitions: int, count: int) -> list[bytes]:
    """Every record value of ``topic`` (read_committed), once ``count`` of them are there."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, index, OFFSET_BEGINNING) for index in range(partitions)])
    values: list[bytes] = []

    def enough() -> bool:
        for message in consumer.consume(1000, timeout=0.2):
            assert message.error() is None, message.error()
            values.append(message.value())
        return len(values) >= count

    try:
        wait_for(enough, TIMEOUT_S, f"{count} records of {topic} were not read back")
        values.extend(message.value() for message in consumer.consume(1000, timeout=0.5))  # and no more
    finally:
        consumer.close()
    return values


def deliver_with_confluent(bootstrap: str, topic: str, values: list[bytes], client_id: str,
                           **configs: Any) -> list[Any]:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "retry.backoff.ms": 50, "enable.idempotence": True, **configs})
    reports: list[Any] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda error, message: reports.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    return reports


def produce_answers(broker: Any, client_id: str) -> list[str]:
    """The errors of a client's Produce requests, oldest first."""
    return [row["error"] for row in reversed(broker.faults.requests(api="Produce", client_id=client_id, limit=1000))]


def refreshed_metadata_between_retries(broker: Any, client_id: str) -> bool:
    """Whether the client asked for Metadata after a refused Produce and before it was accepted."""
    log = list(reversed(broker.faults.requests(client_id=client_id, limit=1000)))
    refused = next(i for i, row in enumerate(log) if row["api"] == "Produce" and row["error"] != "NONE")
    accepted = next(i for i, row in enumerate(log) if i > refused and row["api"] == "Produce"
                    and row["error"] == "NONE")
    return any(row["api"] == "Metadata" for row in log[refused:accepted])


def test_confluent_kafka_retries_not_leader_after_a_metadata_refresh_and_delivers_once(
        kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory()
    broker.create_topic("payments", 1)
    values = [b"payment-%d" % i for i in range(50)]
    with broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3) as fault:
        reports = deliver_with_confluent(broker.bootstrap_servers, "payments", values, "payments-app")
        assert fault.info() is None  # used up
    assert reports == [None] * 50
    assert produce_answers(broker, "payments-app")[:3] == ["NOT_LEADER_OR_FOLLOWER"] * 3
    assert refreshed_metadata_between_retries(broker, "payments-app")
    assert read_back(broker.bootstrap_servers, "payments", 1, 50) == values


def test_kafka_python_retries_not_leader_after_a_metadata_refresh_and_delivers_once(
        kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory()
    broker.create_topic("invoices", 1)
    values = [b"invoice-%d" % i for i in range(50)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="invoices-app", acks="all",
                             retries=10, retry_backoff_ms=50, max_in_flight_requests_per_connection=1)
    try:
        producer.partitions_for("invoices")
        with broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3):
            futures = [producer.send("invoices", value, partition=0) for value in values]
            producer.flush(TIMEOUT_S)
        assert all(future.get(TIMEOUT_S).topic == "invoices" for future in futures)
    finally:
        producer.close(TIMEOUT_S)
    assert produce_answers(broker, "invoices-app")[:3] == ["NOT_LEADER_OR_FOLLOWER"] * 3
    assert refreshed_metadata_between_retries(broker, "invoices-app")
    assert read_back(broker.bootstrap_servers, "invoices", 1, 50) == values


def test_a_lost_answer_makes_an_idempotent_producer_retry_and_the_broker_keep_one_copy(
        kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory()
    broker.create_topic("ledger", 1)
    values = [b"entry-%d" % i for i in range(20)]
    with broker.faults.inject(kind="drop_after", api="Produce", count=1) as fault:
        reports = deliver_with_confluent(broker.bootstrap_servers, "ledger", values, "ledger-app")
    assert reports == [None] * 20
    produced = broker.faults.requests(api="Produce", client_id="ledger-app", limit=1000)
    assert [row["fault_id"] for row in produced].count(fault.id) == 1 and len(produced) >= 2  # sent again
    assert read_back(broker.bootstrap_servers, "ledger", 1, 20) == values


def test_an_unavailable_leader_holds_records_until_it_is_back(kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory()
    broker.create_topic("events", 1)
    values = [b"event-%d" % i for i in range(30)]
    with broker.faults.inject(kind="leader_unavailable", topic="events", partition=0, duration_ms=1500):
        reports = deliver_with_confluent(broker.bootstrap_servers, "events", values, "events-app",
                                         **{"topic.metadata.refresh.fast.interval.ms": 100})
    assert reports == [None] * 30
    refused = [row for row in broker.faults.requests(client_id="events-app", limit=1000, errors=True)]
    assert {row["error"] for row in refused} <= {"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE"} and refused
    assert read_back(broker.bootstrap_servers, "events", 1, 30) == values


def consume_in_group(bootstrap: str, topic: str, group: str, count: int, client_id: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "retry.backoff.ms": 50, "coordinator.query.interval.ms": 200})
    consumer.subscribe([topic])
    values: list[bytes] = []

    def enough() -> bool:
        for message in consumer.consume(100, timeout=0.2):
            assert message.error() is None, message.error()
            values.append(message.value())
        return len(values) >= count

    try:
        wait_for(enough, TIMEOUT_S, f"the consumer of group {group} did not read {count} records")
        wait_for(lambda: _commit(consumer), TIMEOUT_S, f"group {group} could not commit")
    finally:
        consumer.close()
    return values


def _commit(consumer: Consumer) -> bool:
    try:
        consumer.commit(asynchronous=False)
    except Exception:  # noqa: BLE001 - a retriable coordinator error: try again
        return False
    return True


def test_a_confluent_consumer_survives_coordinator_not_available(kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory({"group.initial.rebalance.delay.ms": 0})
    broker.create_topic("orders", 2)
    values = [b"order-%d" % i for i in range(40)]
    for index in range(2):
        broker.produce("orders", values[index::2], partition=index)
    with broker.faults.inject(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=3), \
            broker.faults.inject(api="JoinGroup", error="COORDINATOR_NOT_AVAILABLE", count=1), \
            broker.faults.inject(api="OffsetCommit", error="COORDINATOR_NOT_AVAILABLE", count=1):
        read = consume_in_group(broker.bootstrap_servers, "orders", "shipping", 40, "shipping-app")
    assert sorted(read) == sorted(values)
    refused = {row["api"] for row in broker.faults.requests(client_id="shipping-app", limit=1000, errors=True)}
    assert {"FindCoordinator", "JoinGroup", "OffsetCommit"} <= refused
    offsets = {row["partition"]: row["committed_offset"] for row in _group(broker, "shipping")["offsets"]}
    assert offsets == {0: 20, 1: 20}


def _group(broker: Any, group_id: str) -> dict[str, Any]:
    from kafkalite.broker.admin.views import group_view

    return broker._on_loop(lambda observer: group_view(observer.cluster, group_id))  # type: ignore[no-any-return]


def test_a_kafka_python_consumer_survives_coordinator_not_available(kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory({"group.initial.rebalance.delay.ms": 0})
    broker.create_topic("returns", 1)
    values = [b"return-%d" % i for i in range(20)]
    broker.produce("returns", values)
    consumer = KafkaConsumer("returns", bootstrap_servers=broker.bootstrap_servers, group_id="refunds",
                             client_id="refunds-app", auto_offset_reset="earliest", enable_auto_commit=False,
                             retry_backoff_ms=50)
    read: list[bytes] = []
    try:
        with broker.faults.inject(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=2), \
                broker.faults.inject(api="SyncGroup", error="COORDINATOR_NOT_AVAILABLE", count=1):
            # polls of a second: kafka-python 3 can miss a SyncGroup answer that lands as a short poll ends
            wait_for(lambda: read.extend(r.value for rs in consumer.poll(1000).values() for r in rs)
                     or len(read) >= 20, TIMEOUT_S, "kafka-python did not read the records")
        consumer.commit()
    finally:
        consumer.close()
    assert read == values
    refused = {row["api"] for row in broker.faults.requests(client_id="refunds-app", limit=1000, errors=True)}
    assert {"FindCoordinator", "SyncGroup"} <= refused


def test_a_subprocess_broker_takes_faults_through_its_http_api(kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory(subprocess=True)
    assert broker.admin_url is not None and broker.admin_url.startswith("http://127.0.0.1:")
    broker.create_topic("audit", 1)
    with broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=2) as fault:
        assert fault.info()["remaining"] == 2
        reports = deliver_with_confluent(broker.bootstrap_servers, "audit", [b"a", b"b"], "audit-app")
    assert reports == [None, None]
    assert produce_answers(broker, "audit-app")[:2] == ["NOT_LEADER_OR_FOLLOWER"] * 2
    with broker.faults.inject(kind="latency", api="Fetch", delay_ms=10) as fault:
        assert [item["id"] for item in broker.faults.list()] == [fault.id]
    assert broker.faults.list() == []


def kafkalite(*arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
    environment["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "kafkalite", *arguments], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=environment, check=False)


def test_the_faults_commands_inject_list_and_clear(kafka_broker_factory: Factory) -> None:
    broker = kafka_broker_factory({"admin.listener": "127.0.0.1:0"})
    admin = broker.admin_url
    injected = kafkalite("faults", "inject", "--admin", admin, "--api", "Produce", "--error",
                         "NOT_LEADER_OR_FOLLOWER", "--count", "3", "--topic", "orders", "--partition", "1")
    assert injected.returncode == 0, injected.stderr
    assert injected.stdout.startswith("injected fault 1:")
    listed = kafkalite("faults", "list", "--admin", admin)
    header, row = listed.stdout.strip().splitlines()
    assert header.split() == ["ID", "KIND", "API", "WHAT", "TARGET", "REMAINING", "APPLIED", "EXPIRES", "IN"]
    assert row.split()[:7] == ["1", "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "orders-1", "3", "0"]
    assert [fault["id"] for fault in broker.faults.list()] == [1]
    as_json = kafkalite("faults", "inject", "--admin", admin, "--kind", "latency", "--api", "Fetch",
                        "--delay-ms", "50", "--json")
    assert '"kind": "latency"' in as_json.stdout
    assert kafkalite("faults", "clear", "--admin", admin, "2").stdout.strip() == "removed fault 2"
    assert kafkalite("faults", "clear", "--admin", admin).stdout.strip() == "cleared 1 fault"
    assert kafkalite("faults", "list", "--admin", admin).stdout.strip() == "no faults in force"
    refused = kafkalite("faults", "inject", "--admin", admin, "--api", "Produce", "--error", "NOPE")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip().startswith("Error: unknown error 'NOPE'") and "HTTP 400" in refused.stderr
    gone = kafkalite("faults", "clear", "--admin", admin, "99")
    assert gone.returncode == 1 and "HTTP 404" in gone.stderr
