"""Exactly-once consume-transform-produce with the bundled client while a worker is killed mid-transaction.

Two worker processes share a consumer group over an input topic. Each reads a batch (read_committed),
writes a transformed record per input record to the output topic inside a transaction, adds the
batch's offsets with ``send_offsets_to_transaction(offsets, consumer.group_metadata())`` and commits
(KIP-447: the group's generation fences a worker that lost its partitions). One worker is killed with
SIGKILL while its transaction is open; the coordinator aborts that transaction when it times out, the
survivor takes over the partitions from the committed offsets, and the output read with read_committed
has every input record exactly once: duplicates and losses are both 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from kafkalite.client import NewTopic, TopicPartition
from kafkalite.client import sync as blocking
from kafkalite.testing.process import BrokerProcess, wait_for

TIMEOUT_S = 60
REPO = Path(__file__).resolve().parents[2]
INPUT_RECORDS = 600
PARTITIONS = 4

_WORKER = """
import sys, time
sys.path.insert(0, {repo!r})
from kafkalite.client import KafkaError, TopicPartition, sync
name = sys.argv[1]
consumer = sync.Consumer(bootstrap_servers={bootstrap!r}, group_id={group!r}, enable_auto_commit=False,
                         isolation_level="read_committed", auto_offset_reset="earliest", session_timeout_ms=3000,
                         heartbeat_interval_ms=200, fetch_max_wait_ms=100, max_poll_records=25)
producer = sync.Producer(bootstrap_servers={bootstrap!r}, transactional_id="eos-" + name, linger_ms=1,
                         transaction_timeout_ms=3000)
producer.init_transactions()
consumer.subscribe([{input!r}])
transactions = 0
while True:
    records = consumer.poll(timeout_ms=100)
    if not records:
        continue
    producer.begin_transaction()
    try:
        for record in records:
            producer.send({output!r}, b"out-" + record.value, key=record.value)
        print("in-transaction", transactions, flush=True)
        time.sleep(0.02)
        offsets = {{}}
        for record in records:
            offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
        transactions += 1
        print("committed", transactions, flush=True)
    except KafkaError as exc:  # fenced by a rebalance: drop the batch and read it again from the commits
        print("aborting", repr(exc), flush=True)
        producer.abort_transaction()
        committed = consumer.committed(list(consumer.assignment()))
        for partition in consumer.assignment():
            value = committed.get(partition)
            if value is not None:
                consumer.seek(partition, value.offset)
            else:
                consumer.seek_to_beginning(partition)
"""


def test_exactly_once_when_a_worker_is_killed_mid_transaction(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {
        "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
        "transaction.state.log.replication.factor": 1})
    with broker:
        bootstrap = broker.bootstrap_servers
        suffix = uuid.uuid4().hex[:6]
        source, sink, group = f"eos-in-{suffix}", f"eos-out-{suffix}", f"eos-{suffix}"
        with blocking.Admin(bootstrap_servers=bootstrap) as admin:
            for name in (source, sink):
                admin.create_topics([NewTopic(name, PARTITIONS)])[name].raise_for_error()
        with blocking.Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
            for index in range(INPUT_RECORDS):
                producer.send(source, f"in-{index}".encode(), partition=index % PARTITIONS)
            producer.flush()
        script = tmp_path / "worker.py"
        script.write_text(_WORKER.format(repo=str(REPO), bootstrap=bootstrap, group=group, input=source, output=sink))
        workers = {name: subprocess.Popen([sys.executable, str(script), name], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, cwd=REPO) for name in ("a", "b")}
        lines: dict[str, list[str]] = {name: [] for name in workers}

        def follow(name: str) -> None:
            stream = workers[name].stdout
            assert stream is not None
            for line in stream:
                lines[name].append(line.decode().strip())

        readers = [threading.Thread(target=follow, args=(name,), daemon=True) for name in workers]
        for reader in readers:
            reader.start()
        try:
            # kill worker a once it has committed a few transactions and has another one open
            wait_for(lambda: sum(line.startswith("committed") for line in lines["a"]) >= 2
                     and lines["a"][-1].startswith("in-transaction"), TIMEOUT_S,
                     "worker a never committed transactions")
            os.kill(workers["a"].pid, signal.SIGKILL)
            workers["a"].wait(10)
            killed_at = time.monotonic()
            values = read_committed(bootstrap, sink, INPUT_RECORDS)
            print(f"killed worker a mid-transaction; {len(values)} output records read with read_committed "
                  f"{time.monotonic() - killed_at:.1f} s later")
        finally:
            for process in workers.values():
                if process.poll() is None:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(10)
            for reader in readers:
                reader.join(5)
    counts = Counter(values)
    expected = {f"out-in-{index}".encode() for index in range(INPUT_RECORDS)}
    duplicates = sum(count - 1 for count in counts.values() if count > 1)
    losses = len(expected - set(counts))
    print(f"exactly-once check: {INPUT_RECORDS} in, {len(values)} out, duplicates {duplicates}, losses {losses}")
    assert set(counts) <= expected
    assert (duplicates, losses) == (0, 0)


def read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Every committed output record, once the output holds ``expected`` of them (and a little longer)."""
    values: list[bytes] = []
    with blocking.Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                           auto_offset_reset="earliest", fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(topic, index) for index in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT_S
        quiet_until = None
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=200)
            values.extend(record.value for record in batch)
            if len(values) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 1.0  # anything more would be a duplicate: wait for it
            if quiet_until is not None and time.monotonic() >= quiet_until:
                break
    return values
