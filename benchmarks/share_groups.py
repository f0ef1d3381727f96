"""Share groups: how fast confluent-kafka's ShareConsumer drains a topic, next to a classic consumer.

    python benchmarks/share_groups.py [--records 200000] [--size 100] [--consumers 1 3] [--max-poll-records 500]

Starts ``kafkalite serve`` with a data directory, produces ``--records`` records of ``--size`` bytes to a
one-partition topic, then for each count of ``--consumers`` drains it with that many share consumers
of a new share group (implicit acknowledgement: each poll accepts the previous one's records, and
the acknowledgements ride on the next ShareFetch; the last poll's are committed before closing, as
close alone releases them), each on its own thread, and once with one classic
consumer. Prints records per second, how the records were split, and whether any was delivered
twice. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.testing import BrokerProcess  # noqa: E402

TIMEOUT_S = 300.0


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(TIMEOUT_S)
    return records / (time.perf_counter() - started)


def drain_shared(bootstrap: str, topic: str, records: int, consumers: int,
                 max_poll_records: int) -> tuple[float, list[int], int]:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=[entry])]).values():
        future.result(TIMEOUT_S)
    seen: collections.Counter[int] = collections.Counter()
    per_consumer = [0] * consumers
    lock = threading.Lock()
    done = threading.Event()

    def run(index: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "max.poll.records": max_poll_records})
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while not done.is_set() and time.monotonic() < deadline:
            offsets = [message.offset() for message in consumer.poll(0.2) if not message.error()]
            with lock:
                seen.update(offsets)
                per_consumer[index] += len(offsets)
                if len(seen) >= records:
                    done.set()
        consumer.commit_sync()  # accept the last poll's records: close alone would release them
        consumer.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(index,)) for index in range(consumers)]
    for thread in threads:
        thread.start()
    done.wait(TIMEOUT_S)
    elapsed = time.perf_counter() - started
    for thread in threads:
        thread.join(TIMEOUT_S)
    return len(seen) / elapsed, per_consumer, sum(1 for count in seen.values() if count > 1)


def drain_classic(bootstrap: str, topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-classic-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    started = time.perf_counter()
    received = 0
    deadline = time.monotonic() + TIMEOUT_S
    while received < records and time.monotonic() < deadline:
        received += sum(1 for message in consumer.consume(1000, 0.2) if not message.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return received / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--max-poll-records", type=int, default=500, help="records one ShareFetch may acquire")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, BrokerProcess(Path(scratch) / "data") as broker:
        bootstrap = broker.bootstrap_servers
        topic = "bench-share"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(TIMEOUT_S)
        print(f"produce: {produce(bootstrap, topic, args.records, args.size):,.0f} records/s")
        print(f"classic consumer: {drain_classic(bootstrap, topic, args.records):,.0f} records/s")
        for consumers in args.consumers:
            rate, split, twice = drain_shared(bootstrap, topic, args.records, consumers, args.max_poll_records)
            print(f"{consumers} share consumer(s): {rate:,.0f} records/s, split {split}, delivered twice: {twice}")


if __name__ == "__main__":
    main()
