"""Crash consistency: SIGKILL the broker at random moments while clients write, then check what survived.

    python benchmarks/crash_consistency.py [--kills 50] [--flush-on-ack true] [--seed N]

Starts ``kafkalite serve`` on a data directory and runs three clients (confluent-kafka) against it:

* an idempotent producer (acks=all) writing numbered records to three partitions, remembering the
  offset every acknowledged record was given;
* a committer, committing ever larger offsets for a group (OffsetCommit), remembering the last
  commit acknowledged per partition;
* a transactional producer, writing transactions of five records and committing or aborting each
  (at random), remembering which commits and aborts were acknowledged.

Meanwhile the broker is killed with SIGKILL ``--kills`` times, after a random 0.3-1.5 s each time,
and restarted on the same data directory (and port: the clients reconnect by themselves). Small
segments make it roll, snapshot and checkpoint during the run. At the end a last clean restart, then
the checks:

* every acknowledged record is present exactly once, at the offset it was acknowledged with, and no
  record appears twice at all (idempotence survived every restart); within a partition the records
  keep the order they were produced in; every batch read back passes its CRC (no torn batch);
* every partition's committed offset is at least the last acknowledged commit (and is a value that
  was committed);
* under read_committed every acknowledged commit's five records are visible, no aborted
  transaction's, and no transaction is half visible.

With ``--flush-on-ack false`` the same checks measure what a kill -9 keeps without fsync before the
answer: the page cache outlives the process, so everything does (a power loss would not keep what
no fsync covered; that cannot be tested from user space). ``run`` returns a :class:`CrashReport`;
``tests/integration/test_crash_consistency.py`` runs a few kills of it.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.testing import BrokerProcess, wait_for  # noqa: E402

DATA_TOPIC, TXN_TOPIC, GROUP = "crash-data", "crash-txn", "crash-group"
PARTITIONS = 3
TXN_RECORDS = 5
TIMEOUT_S = 60.0
QUIET = {"log_level": 0}  # librdkafka logs every refused reconnect while the broker is down


@dataclass
class CrashReport:
    kills: int = 0
    seconds: float = 0.0
    acknowledged: int = 0
    stored: int = 0
    commits_acknowledged: int = 0
    transactions_committed: int = 0
    transactions_aborted: int = 0
    transactions_unknown: int = 0
    client_errors: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    restart_seconds: list[float] = field(default_factory=list)

    def summary(self) -> str:
        restarts = sorted(self.restart_seconds) or [0.0]
        return (f"{self.kills} kills in {self.seconds:.0f} s: {self.acknowledged} records acknowledged, "
                f"{self.stored} stored; {self.commits_acknowledged} offset commits acknowledged; "
                f"transactions {self.transactions_committed} committed, {self.transactions_aborted} aborted, "
                f"{self.transactions_unknown} unknown; restart median {restarts[len(restarts) // 2]:.2f} s, "
                f"max {restarts[-1]:.2f} s; client errors {dict(self.client_errors)}; "
                f"{len(self.violations)} violations")


class _Workload:
    """The three clients, each on its own thread, and what they were told."""

    def __init__(self, bootstrap: str, rng: random.Random, report: CrashReport) -> None:
        self.bootstrap = bootstrap
        self.rng = rng
        self.report = report
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acknowledged: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        self.last_commit: dict[int, int] = {}  # partition -> last acknowledged committed offset
        self.attempted_commits: dict[int, set[int]] = defaultdict(set)
        self.committed_txns: set[int] = set()
        self.aborted_txns: set[int] = set()
        self.unknown_txns: set[int] = set()
        self.threads = [threading.Thread(target=target, name=target.__name__, daemon=True)
                        for target in (self._produce, self._commit, self._transact)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(TIMEOUT_S * 2)

    def _error(self, kind: str) -> None:
        with self.lock:
            self.report.client_errors[kind] += 1

    def _produce(self) -> None:
        producer = Producer({**QUIET, "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 300_000, "reconnect.backoff.ms": 20,
                             "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
                             "queue.buffering.max.messages": 20_000})

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                self._error(f"produce:{error.name()}")
                return
            with self.lock:
                self.acknowledged[message.value().decode()] = (message.partition(), message.offset())

        sequence = 0
        while not self.stop.is_set():
            try:
                producer.produce(DATA_TOPIC, value=f"record-{sequence}".encode(), partition=sequence % PARTITIONS,
                                 on_delivery=delivered)
                sequence += 1
                producer.poll(0)
                if sequence % 200 == 0:
                    producer.poll(0.01)
            except BufferError:
                producer.poll(0.05)
        producer.flush(TIMEOUT_S)

    def _commit(self) -> None:
        consumer = Consumer({**QUIET, "bootstrap.servers": self.bootstrap, "group.id": GROUP,
                             "enable.auto.commit": False,
                             "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200})
        offset = 0
        while not self.stop.is_set():
            offset += 1
            partition = offset % PARTITIONS
            with self.lock:
                self.attempted_commits[partition].add(offset)
            try:
                consumer.commit(offsets=[TopicPartition(DATA_TOPIC, partition, offset)], asynchronous=False)
            except KafkaException as exc:
                self._error(f"commit:{exc.args[0].name()}")
                time.sleep(0.05)
                continue
            with self.lock:
                self.last_commit[partition] = offset
                self.report.commits_acknowledged += 1
        consumer.close()

    def _new_transactional_producer(self) -> Producer:
        producer = Producer({**QUIET, "bootstrap.servers": self.bootstrap, "transactional.id": "crash-txn-producer",
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000,
                             "transaction.timeout.ms": 60_000, "reconnect.backoff.ms": 20,
                             "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20})
        while not self.stop.is_set():
            try:
                producer.init_transactions(TIMEOUT_S)
                return producer
            except KafkaException as exc:
                self._error(f"init:{exc.args[0].name()}")
                time.sleep(0.1)
        return producer

    def _transact(self) -> None:
        producer = self._new_transactional_producer()
        number = 0
        while not self.stop.is_set():
            number += 1
            commit = self.rng.random() < 0.7
            try:
                producer.begin_transaction()
                for index in range(TXN_RECORDS):
                    producer.produce(TXN_TOPIC, value=f"txn-{number}-{index}".encode(), partition=index % PARTITIONS)
                if commit:
                    producer.commit_transaction(TIMEOUT_S)
                else:
                    producer.abort_transaction(TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                self._error(f"txn:{error.name()}")
                with self.lock:
                    self.unknown_txns.add(number)
                if error.txn_requires_abort():
                    try:
                        producer.abort_transaction(TIMEOUT_S)
                    except KafkaException:
                        producer = self._new_transactional_producer()
                elif error.fatal() or not error.retriable():
                    producer = self._new_transactional_producer()
                continue
            with self.lock:
                (self.committed_txns if commit else self.aborted_txns).add(number)
        try:  # a transaction left open by a failure would hold read_committed readers back
            producer.abort_transaction(10)
        except KafkaException:
            pass


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of ``topic`` a consumer with ``isolation`` sees: each
    partition is read to its high watermark, or (read_committed: past the last aborted or open
    transaction nothing comes) until two seconds pass without a record."""
    consumer = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": "crash-reader",
                         "enable.auto.commit": False,
                         "isolation.level": isolation, "check.crcs": True, "fetch.wait.max.ms": 50})
    try:
        ends = {partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S,
                                                          cached=False)[1] for partition in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in range(PARTITIONS)])
        found: list[tuple[int, int, bytes]] = []
        positions = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + TIMEOUT_S
        idle = 0
        while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline and idle < 4:
            messages = consumer.consume(10_000, timeout=0.5)
            idle = 0 if messages else idle + 1
            for message in messages:
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(message.error())
                    continue
                found.append((message.partition(), message.offset(), message.value()))
                positions[message.partition()] = message.offset() + 1
        return found
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(DATA_TOPIC, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S)
        return {item.partition: item.offset for item in answer}
    finally:
        consumer.close()


def _check(broker: BrokerProcess, workload: _Workload, report: CrashReport) -> None:
    bootstrap = broker.bootstrap
    stored = _read(bootstrap, DATA_TOPIC, "read_uncommitted")
    report.stored = len(stored)
    report.acknowledged = len(workload.acknowledged)
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, offset, value in stored:
        where[value.decode()].append((partition, offset))
    for value, places in where.items():
        if len(places) > 1:
            report.violations.append(f"{value} is stored {len(places)} times: {places}")
    for value, place in workload.acknowledged.items():
        if where.get(value) != [place]:
            report.violations.append(f"{value} was acknowledged at {place} but is stored at {where.get(value)}")
    last_sequence: dict[int, int] = {}
    for partition, _, value in sorted(stored):
        sequence = int(value.decode().rsplit("-", 1)[1])
        if sequence <= last_sequence.get(partition, -1):
            report.violations.append(f"partition {partition}: record-{sequence} after "
                                     f"record-{last_sequence[partition]}")
        last_sequence[partition] = sequence

    committed = _committed(bootstrap)
    for partition, offset in workload.last_commit.items():
        found = committed.get(partition, -1)
        if found < offset or found not in workload.attempted_commits[partition]:
            report.violations.append(f"partition {partition}: committed offset {found}, last acknowledged {offset}")

    visible = Counter(value.decode().rsplit("-", 1)[0] for _, _, value in _read(bootstrap, TXN_TOPIC,
                                                                                 "read_committed"))
    report.transactions_committed = len(workload.committed_txns)
    report.transactions_aborted = len(workload.aborted_txns)
    report.transactions_unknown = len(workload.unknown_txns)
    for number in workload.committed_txns:
        if visible.get(f"txn-{number}", 0) != TXN_RECORDS:
            report.violations.append(f"committed transaction {number}: {visible.get(f'txn-{number}', 0)} "
                                     f"of {TXN_RECORDS} records visible")
    for number in workload.aborted_txns:
        if visible.get(f"txn-{number}", 0):
            report.violations.append(f"aborted transaction {number} is visible")
    for name, count in visible.items():
        if count not in (0, TXN_RECORDS):
            report.violations.append(f"{name} is half visible: {count} of {TXN_RECORDS} records")
    if "Traceback" in broker.log_text():
        report.violations.append("the broker logged a traceback")


def run(kills: int, scratch: Path, *, flush_on_ack: bool = True, seed: int | None = None,
        min_delay: float = 0.3, max_delay: float = 1.5) -> CrashReport:
    rng = random.Random(seed)
    report = CrashReport()
    configs = {"log.flush.on.ack": "true" if flush_on_ack else "false", "log.segment.bytes": 256 * 1024,
               "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
               "offsets.topic.segment.bytes": 256 * 1024, "transaction.state.log.segment.bytes": 256 * 1024}
    broker = BrokerProcess(scratch / "data", configs)
    began = time.monotonic()
    try:
        broker.start()
        admin = AdminClient({**QUIET, "bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(DATA_TOPIC, PARTITIONS, 1), NewTopic(TXN_TOPIC, PARTITIONS, 1)],
                                          request_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
        workload = _Workload(broker.bootstrap, rng, report)
        workload.start()
        wait_for(lambda: len(workload.acknowledged) > 100, TIMEOUT_S, "no record was acknowledged")
        for _ in range(kills):
            time.sleep(rng.uniform(min_delay, max_delay))  # the fault schedule, not a synchronisation
            broker.kill()
            report.kills += 1
            restarting = time.monotonic()
            broker.restart()
            report.restart_seconds.append(time.monotonic() - restarting)
        time.sleep(rng.uniform(min_delay, max_delay))
        workload.finish()
        broker.restart()  # a clean stop and start: what the checks read is what a restart shows
        _check(broker, workload, report)
    finally:
        report.seconds = time.monotonic() - began
        broker.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--flush-on-ack", default="true")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        report = run(args.kills, Path(scratch), flush_on_ack=args.flush_on_ack == "true", seed=args.seed)
    print(report.summary())
    for violation in report.violations[:50]:
        print("  " + violation)


if __name__ == "__main__":
    main()
