"""Many partitions under a small open-file limit: what they cost and whether everything still works.

    python benchmarks/partitions.py [--topics 1000] [--partitions 10] [--nofile 256]

Starts ``kafkalite serve`` with a data directory under a hard and soft ``RLIMIT_NOFILE`` of ``--nofile``
(so raising the limit cannot help), creates ``--topics`` x ``--partitions`` partitions with
confluent-kafka's admin client, lists them with one Metadata request, produces one record to every
partition with acks=all, restarts the broker on the same data, lists them again and reads every
record back. Prints the time of each step (the clean shutdown's too), the broker's open descriptors, RSS and idle
CPU, and whether its log holds a traceback. The integration tests run the same steps at a smaller scale.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.testing import BrokerProcess  # noqa: E402

TIMEOUT_S = 600.0


def topic_names(topics: int) -> list[str]:
    return [f"wide-{index:05d}" for index in range(topics)]


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, len(names), 100):
        futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names[start:start + 100]],
                                      request_timeout=TIMEOUT_S)
        for future in futures.values():
            future.result(TIMEOUT_S)


def listed_partitions(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    return sum(len(topic.partitions) for name, topic in metadata.topics.items() if name.startswith("wide-"))


def produce_everywhere(bootstrap: str, names: list[str], partitions: int) -> int:
    delivered: list[int] = []
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})

    def report(error: object, message: object) -> None:
        (failed.append(str(error)) if error is not None else delivered.append(1))

    for name in names:
        for partition in range(partitions):
            producer.produce(name, value=f"{name}/{partition}".encode(), partition=partition, on_delivery=report)
            producer.poll(0)
    producer.flush(TIMEOUT_S)
    if failed:
        raise RuntimeError(f"{len(failed)} records were not delivered, e.g. {failed[0]}")
    return len(delivered)


def read_everything(bootstrap: str, names: list[str], partitions: int) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(name, partition, 0) for name in names for partition in range(partitions)])
    values: set[bytes] = set()
    deadline = time.monotonic() + TIMEOUT_S
    expected = len(names) * partitions
    while len(values) < expected and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                values.add(message.value())
    consumer.close()
    return values


def timed(label: str, step: Callable[[], object]) -> object:
    began = time.perf_counter()
    result = step()
    print(f"{label:<52} {time.perf_counter() - began:8.2f} s")
    return result


def run(topics: int, partitions: int, nofile: int, scratch: Path) -> BrokerProcess:
    names = topic_names(topics)
    total = topics * partitions
    broker = BrokerProcess(scratch / "data", nofile=nofile)
    try:
        timed(f"start (empty data dir, RLIMIT_NOFILE {nofile})", broker.start)
        timed(f"create {topics} topics x {partitions} partitions",
              lambda: create_topics(broker.bootstrap_servers, names, partitions))
        listed = timed("list them with one Metadata request", lambda: listed_partitions(broker.bootstrap_servers))
        assert listed == total, f"Metadata listed {listed} of {total} partitions"
        delivered = timed("one record to every partition, acks=all",
                          lambda: produce_everywhere(broker.bootstrap_servers, names, partitions))
        assert delivered == total
        time.sleep(5)  # the ticks right after the writes flush and checkpoint what they changed
        cpu_before = broker.cpu_seconds()
        time.sleep(10)
        idle = (broker.cpu_seconds() - cpu_before) / 10 * 100
        print(f"{'idle: CPU, open descriptors, RSS':<52} {idle:7.2f} %  {broker.descriptors()} fds  "
              f"{broker.rss_mib():.0f} MiB")
        timed("clean shutdown (SIGTERM until the process exits)", lambda: broker.stop(TIMEOUT_S))
        timed("restart on the same data", lambda: (broker.spawn(broker.port), broker.wait_until_listening(TIMEOUT_S)))
        listed = timed("list them again", lambda: listed_partitions(broker.bootstrap_servers))
        assert listed == total, f"after the restart Metadata listed {listed} of {total} partitions"
        values = timed("read every record back", lambda: read_everything(broker.bootstrap_servers, names, partitions))
        expected = {f"{name}/{partition}".encode() for name in names for partition in range(partitions)}
        assert values == expected, f"read back {len(values)} of {len(expected)} records"
        print(f"{'after reading: open descriptors, RSS':<52} {broker.descriptors()} fds  {broker.rss_mib():.0f} MiB")
        tracebacks = broker.log_text().count("Traceback")
        print(f"tracebacks in the broker's log: {tracebacks}")
        return broker
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--nofile", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        run(args.topics, args.partitions, args.nofile, Path(scratch))


if __name__ == "__main__":
    main()
