"""The consume path's cost per byte: broker CPU seconds per 100 MB fetched, and records/s.

    python benchmarks/consume_cpu.py                                  # this checkout: 1 KiB and 100 B records
    python benchmarks/consume_cpu.py --source ../other-checkout --source .  # two brokers, passes interleaved
    python benchmarks/consume_cpu.py --sizes 1024 --passes 8 --megabytes 200

Each ``--source`` is a checkout of kafkalite: a broker is started from it (``python -m kafkalite serve``
with that directory first on the path) on 127.0.0.1 with a scratch data directory. For each record
size, a topic of ``--partitions`` partitions gets ``--megabytes`` MB of record values (confluent-kafka,
lz4 off, linger 5 ms), the same on every broker. Then ``--passes`` rounds: in each round every broker
(in turn, the first one alternating between rounds) is read from the beginning to the end by a fresh
consumer, confluent-kafka and then the bundled client, each assigning every partition with no group.
The broker's CPU time comes from ``/proc/PID/schedstat`` (nanoseconds on a CPU), read before and after
the pass. The table gives, per source, client and size, the median (min-max) over the passes of the
broker's CPU seconds per 100 MB of record values and of thousands of records a second.
Nothing is asserted; loopback only; every broker is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import compare

from kafkalite.testing.process import BrokerProcess


def cpu_seconds(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def start_broker(source: Path, data_dir: Path) -> BrokerProcess:
    """A broker running the kafkalite found in ``source`` (its directory first on the path, and the cwd)."""
    saved_cwd, saved_path = os.getcwd(), os.environ.get("PYTHONPATH")
    os.chdir(source)
    os.environ["PYTHONPATH"] = str(source)
    try:
        return BrokerProcess(data_dir, admin=False).start()
    finally:
        os.chdir(saved_cwd)
        if saved_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved_path


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    value = os.urandom(size)
    for number in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(60) != 0:
        raise RuntimeError("the fill did not finish")


def consume_with(client: str) -> Callable[[str, str, int, int], tuple[int, int]]:
    """``compare.py``'s consumer of ``client``, reading every partition of the topic from the start:
    records and bytes of values read."""
    def consume(bootstrap: str, topic: str, partitions: int, records: int) -> tuple[int, int]:
        count, nbytes, _ = compare.CONSUMERS[client](argparse.Namespace(bootstrap=bootstrap, topic=topic,
                                                                         records=records))
        return count, nbytes

    return consume


CLIENTS = {client: consume_with(client) for client in ("confluent", "bundled")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", type=Path, help="a kafkalite checkout (repeatable)")
    parser.add_argument("--sizes", default="1024,100", help="record sizes in bytes, comma-separated")
    parser.add_argument("--megabytes", type=int, default=100, help="MB of record values per topic")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--clients", default="confluent,bundled")
    a = parser.parse_args()
    sources = [path.resolve() for path in (a.source or [Path(__file__).resolve().parents[1]])]
    sizes = [int(size) for size in a.sizes.split(",")]
    clients = a.clients.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-consume-cpu-"))
    brokers: list[BrokerProcess] = []
    try:
        for index, source in enumerate(sources):
            brokers.append(start_broker(source, scratch / f"data-{index}"))
        rows: dict[tuple[int, str, int], list[tuple[float, float]]] = {}
        for size in sizes:
            records = a.megabytes * 1_000_000 // size
            topic = f"consume-{size}"
            for broker in brokers:
                fill(broker.bootstrap, topic, a.partitions, records, size)
            for round_number in range(a.passes):
                order = list(enumerate(brokers))
                if round_number % 2:
                    order.reverse()
                for index, broker in order:
                    for client in clients:
                        before, started = cpu_seconds(broker.pid), time.perf_counter()
                        count, nbytes = CLIENTS[client](broker.bootstrap, topic, a.partitions, records)
                        seconds, cpu = time.perf_counter() - started, cpu_seconds(broker.pid) - before
                        flag = "" if count == records else f"  !! {count} of {records}"
                        per_100mb = cpu * 1e8 / max(nbytes, 1)
                        rows.setdefault((index, client, size), []).append((per_100mb, count / seconds))
                        print(f"  pass {round_number + 1} {sources[index].name:>20s} {client:9s} {size:5d} B "
                              f"{count / seconds / 1000:8.0f}k rec/s  broker cpu {cpu:6.3f} s = "
                              f"{per_100mb:.3f} s/100MB{flag}", flush=True)
        print(f"\n{'source':>20s} {'client':9s} {'size':>6s}  {'cpu s/100MB median (min-max)':32s}"
              f" {'k records/s median (min-max)':28s}")
        for (index, client, size), values in sorted(rows.items(), key=lambda item: (item[0][2], item[0][1],
                                                                                    item[0][0])):
            cpu_values = [value[0] for value in values]
            rates = [value[1] / 1000 for value in values]
            print(f"{sources[index].name:>20s} {client:9s} {size:5d}B  {figures(cpu_values, rates)}")
    finally:
        stop_all(brokers, scratch)


def figures(cpu_values: list[float], rates: list[float]) -> str:
    """A table row's figures: CPU seconds per 100 MB and thousands of records a second, median (min-max)."""
    return (f"{statistics.median(cpu_values):.3f} ({min(cpu_values):.3f}-{max(cpu_values):.3f})"
            f"{'':13s} {statistics.median(rates):6.0f} ({min(rates):.0f}-{max(rates):.0f})")


def stop_all(brokers: list[BrokerProcess], scratch: Path) -> None:
    for broker in brokers:
        try:
            broker.stop()
        finally:
            broker.close()
    shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
