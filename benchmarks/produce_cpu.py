"""The produce path's cost per byte: broker CPU seconds per 100 MB produced, and records/s.

    python benchmarks/produce_cpu.py                                  # this checkout: 1 KiB and 100 B records
    python benchmarks/produce_cpu.py --source ../other-checkout --source .  # two brokers, passes interleaved
    python benchmarks/produce_cpu.py --sizes 1024 --codecs none,lz4 --passes 8 --megabytes 200
    python benchmarks/produce_cpu.py --rdkafka-performance PATH --clients confluent,rdkperf

The twin of ``consume_cpu.py``. Each ``--source`` is a checkout of kafkalite: a broker is started from
it (``python -m kafkalite serve`` with that directory first on the path) on 127.0.0.1 with a scratch
data directory (CRC checks and disk writes on, as always). Once each is idle (its start's warm-up done),
``--passes`` rounds: in each round every broker (in turn, the first one alternating between rounds)
gets, for each record size, codec and client, ``--megabytes`` MB of record values into a fresh topic of
``--partitions`` partitions, with ``compare.py``'s produce settings (linger.ms 5, 1 MiB batches, large
queues, acks=1, no idempotence) and its event-like JSON values; the topic is deleted after the pass, so
no pass runs with the page cache full of earlier ones. Clients: confluent-kafka (in this process) and,
given a binary, rdkafka_performance (librdkafka's C benchmark client,
``benchmarks/build_rdkafka_performance.sh``; it produces to partition 0). The broker's CPU time comes
from ``/proc/PID/schedstat`` (nanoseconds on a CPU), read before the first record and after the last
acknowledgement. The table gives, per source, client, size and codec, the median (min-max) over the
passes of the broker's CPU seconds per 100 MB of record values and of thousands of records a second.
Nothing is asserted; loopback only; every broker is stopped at the end.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import compare
from compare import BATCH_BYTES, LINGER_MS
from consume_cpu import cpu_seconds, figures, start_broker, stop_all

from kafkalite.testing.process import BrokerProcess, wait_for

CLIENT_TIMEOUT_S = 240.0


def settle(pid: int, timeout: float = 30.0) -> None:
    """Wait until the broker is idle (its start's warm-up imports done): under 5 ms of CPU in 0.25 s."""
    last = [cpu_seconds(pid)]

    def idle() -> bool:
        time.sleep(0.25)
        now, last[0] = cpu_seconds(pid), last[0]
        busy = now - last[0]
        last[0] = now
        return busy < 0.005

    wait_for(idle, timeout, "the broker did not settle after its start")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)

    def gone() -> bool:
        return topic not in admin.list_topics(timeout=10).topics

    wait_for(gone, 30, f"topic {topic} still listed after its deletion")


def produce_confluent(bootstrap: str, topic: str, records: int, size: int, codec: str, pid: int,
                      rdkafka_performance: str | None) -> tuple[int, float, float]:
    """Records acknowledged, seconds, broker CPU seconds."""
    """``compare.py``'s confluent-kafka producer (acks=1), timed with the broker's CPU around it."""
    run = argparse.Namespace(bootstrap=bootstrap, topic=topic, records=records, acks="1", compression=codec,
                             spread=False)
    before = cpu_seconds(pid)
    seconds, delivered, _ = compare.produce_confluent(run, compare.record_values(size))
    return delivered, seconds, cpu_seconds(pid) - before


def produce_rdkperf(bootstrap: str, topic: str, records: int, size: int, codec: str, pid: int,
                    rdkafka_performance: str | None) -> tuple[int, float, float]:
    """rdkafka_performance's figures: records delivered, its own seconds, and the broker's CPU seconds
    over the whole run (its start and metadata included)."""
    assert rdkafka_performance is not None
    command = [rdkafka_performance, "-P", "-t", topic, "-p", "0", "-b", bootstrap, "-s", str(size),
               "-c", str(records), "-a", "1", "-X", f"linger.ms={LINGER_MS}", "-X", f"batch.size={BATCH_BYTES}",
               "-X", f"compression.codec={codec}",
               "-X", "batch.num.messages=1000000", "-X", "queue.buffering.max.messages=2000000",
               "-X", "queue.buffering.max.kbytes=2097151", "-X", "enable.idempotence=false"]
    before = cpu_seconds(pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    cpu = cpu_seconds(pid) - before
    found = re.findall(r"(\d+) messages produced \((\d+) bytes\), (\d+) delivered .*? in (\d+)ms",
                       done.stdout + done.stderr)
    if not found:
        raise RuntimeError(f"rdkafka_performance printed no result: {(done.stdout + done.stderr)[-400:]}")
    _produced, _nbytes, delivered, ms = (int(x) for x in found[-1])
    return delivered, ms / 1000, cpu


CLIENTS: dict[str, Callable[[str, str, int, int, str, int, str | None], tuple[int, float, float]]] = {
    "confluent": produce_confluent, "rdkperf": produce_rdkperf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", type=Path, help="a kafkalite checkout (repeatable)")
    parser.add_argument("--sizes", default="1024,100", help="record sizes in bytes, comma-separated")
    parser.add_argument("--codecs", default="none", help="compression types, comma-separated (none, lz4, ...)")
    parser.add_argument("--megabytes", type=int, default=100, help="MB of record values per pass")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--clients", default="confluent", help="confluent, rdkperf (comma-separated)")
    parser.add_argument("--rdkafka-performance", metavar="PATH", help="an rdkafka_performance binary")
    a = parser.parse_args()
    sources = [path.resolve() for path in (a.source or [Path(__file__).resolve().parents[1]])]
    sizes = [int(size) for size in a.sizes.split(",")]
    codecs = a.codecs.split(",")
    clients = a.clients.split(",")
    if "rdkperf" in clients and not a.rdkafka_performance:
        parser.error("the rdkperf client needs --rdkafka-performance PATH")
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-produce-cpu-"))
    brokers: list[BrokerProcess] = []
    try:
        for index, source in enumerate(sources):
            brokers.append(start_broker(source, scratch / f"data-{index}"))
        for broker in brokers:
            settle(broker.pid)
        rows: dict[tuple[int, str, int, str], list[tuple[float, float]]] = {}
        topic_numbers = iter(range(1_000_000))
        for round_number in range(a.passes):
            order = list(enumerate(brokers))
            if round_number % 2:
                order.reverse()
            for size in sizes:
                records = a.megabytes * 1_000_000 // size
                for codec in codecs:
                    for client in clients:
                        for index, broker in order:
                            topic = f"produce-{size}-{codec}-{next(topic_numbers)}"
                            create_topic(broker.bootstrap, topic, a.partitions)
                            acked, seconds, cpu = CLIENTS[client](broker.bootstrap, topic, records, size, codec,
                                                                  broker.pid, a.rdkafka_performance)
                            delete_topic(broker.bootstrap, topic)
                            flag = "" if acked == records else f"  !! {acked} of {records}"
                            per_100mb = cpu * 1e8 / max(acked * size, 1)
                            rows.setdefault((index, client, size, codec), []).append((per_100mb, acked / seconds))
                            print(f"  pass {round_number + 1} {sources[index].name:>20s} {client:9s} {size:5d} B "
                                  f"{codec:5s} {acked / seconds / 1000:8.0f}k rec/s  broker cpu {cpu:6.3f} s = "
                                  f"{per_100mb:.3f} s/100MB{flag}", flush=True)
        print(f"\n{'source':>20s} {'client':9s} {'size':>6s} {'codec':5s}  {'cpu s/100MB median (min-max)':32s}"
              f" {'k records/s median (min-max)':28s}")
        for (index, client, size, codec), values in sorted(
                rows.items(), key=lambda item: (item[0][2], item[0][3], item[0][1], item[0][0])):
            cpu_values = [value[0] for value in values]
            rates = [value[1] / 1000 for value in values]
            print(f"{sources[index].name:>20s} {client:9s} {size:5d}B {codec:5s}  {figures(cpu_values, rates)}")
    finally:
        stop_all(brokers, scratch)


if __name__ == "__main__":
    main()
