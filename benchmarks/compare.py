"""kafkalite side by side with librdkafka's in-memory mock cluster: the same clients, interleaved runs.

    python benchmarks/compare.py                      # 3 reps, every test (about 10 minutes on 2 cores)
    python benchmarks/compare.py --quick              # 1 rep, 10x fewer records: a smoke test, ratios mean nothing
    python benchmarks/compare.py --only confluent --match '1024B acks=all none' --reps 5
    python benchmarks/compare.py --bootstrap 127.0.0.1:9092 --broker-pid PID   # a broker already running
    python benchmarks/compare.py --broker-config log.flush.on.ack=true

Everything comes from this repository and its ``test`` extra. The peer is librdkafka's mock cluster
as confluent-kafka's wheel carries it: a child process (``compare.py mock``) creates it through
librdkafka's C API (``rd_kafka_mock_cluster_new``, ``rd_kafka_mock_topic_create``) and serves real TCP
on 127.0.0.1 until it is told to stop. kafkalite is started from this checkout on 127.0.0.1 with a
scratch data directory (CRC checks and disk writes on, as always), unless ``--bootstrap`` names one.

Tests (``--quick`` divides the record counts by 10): confluent-kafka 1,000,000 x 100 B and 100,000 x
1 KiB, each with acks=1 and acks=all, compression none and lz4; kafka-python 100,000 x 100 B; the
bundled client (``kafkalite.client``, ``send_many``) 1,000,000 x 100 B and 100,000 x 1 KiB, acks=1;
rdkafka_performance (librdkafka's C benchmark client) 1,000,000 x 100 B and 100,000 x 1 KiB, acks=1 and
all, when a binary is found (``--rdkafka-performance PATH`` or ``rdkafka_performance`` on PATH; it is
not in any Python package: ``benchmarks/build_rdkafka_performance.sh`` builds it from librdkafka's
sources against an installed librdkafka; without it those rows are left out with a note).

* produce: the records into a fresh one-partition topic; linger.ms 5, 1 MiB batches, large queues.
  The clock starts after connecting and fetching metadata and stops when the last record is
  acknowledged.
* consume: the mock keeps at most 5 MiB per partition (a fixed limit in librdkafka's mock), so the
  consume tests read a second topic with enough partitions to hold every record (about 3.5 MiB each),
  filled beforehand, untimed, with the same records and codec, on both sides alike. The consumer
  assigns every partition from the beginning (no group); the clock runs from assign to the last
  record.

Each rep starts a fresh mock (and kafkalite deletes each test's topics once the test is measured, so no
test runs with gigabytes of earlier ones in its page cache); then test by test, mock and kafkalite
alternate (the side that goes first alternates between reps), so drifts and neighbours hit both
alike. Every figure is its own client process. The table gives median (min-max) thousands of
records/s over the reps, the ratio of the medians (b/m > 1: kafkalite faster), MB/s (10^6 bytes of
record values), the CPU seconds each server process used during the op (median), and its RSS after
the op (largest). A second table says where each op's time went: how many cores the client process, the
server process and the whole machine kept busy while the client ran (CPU seconds over wall seconds, from
``/proc`` and the client's rusage; the client's start and stop included) and how much the host stole
from this VM; a server busy well under a core on a machine with cores to spare is not what set that
row's pace. Failed or incomplete runs are flagged and left out of the medians. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LINGER_MS = 5
BATCH_BYTES = 1024 * 1024
MOCK_PARTITION_BYTES = 3_500_000  # what one mock partition is given to keep (its own limit is 5 MiB)
CLIENT_TIMEOUT_S = 240.0
IDLE_TIMEOUT_S = 10.0
# kafka-python 3 cannot read the mock's answer to ApiVersions v3+, so both sides get the same fixed version
KAFKA_PYTHON_API = (2, 3)
FAMILIES = ("confluent", "kafka-python", "bundled", "rdkperf")


# --- records -------------------------------------------------------------------------------------------

def record_values(size: int, count: int = 1024) -> list[bytes]:
    """``count`` record values of ``size`` bytes cut from event-like JSON text (lz4 makes it ~3x smaller)."""
    rng = random.Random(16)
    kinds = ("view", "click", "cart", "order", "signin", "signout")
    lines = []
    total = 0
    n = 0
    while total < size + count * 41 + 8192:
        line = (f'{{"time":{1764000000000 + 13 * n},"account":"a{rng.randrange(100000):06d}",'
                f'"kind":"{rng.choice(kinds)}","item":{rng.randrange(20000)},'
                f'"trace":"{rng.getrandbits(60):015x}","amount":{rng.uniform(0, 900):.2f}}}\n')
        lines.append(line)
        total += len(line)
        n += 1
    text = "".join(lines).encode()
    return [text[(41 * k) % (len(text) - size):][:size] for k in range(count)]


def fill_partitions(records: int, size: int) -> int:
    return max(1, math.ceil(records * (size + 20) / MOCK_PARTITION_BYTES))


# --- one client run (a child process: ``compare.py client ...``) ---------------------------------------

def client_main(a: argparse.Namespace) -> None:
    if a.op == "produce":
        values = record_values(a.size)
        seconds, acked, errors = PRODUCERS[a.family](a, values)
        result = {"records": acked, "bytes": acked * a.size, "seconds": seconds, "errors": errors}
    else:
        records, nbytes, seconds = CONSUMERS[a.family](a)
        result = {"records": records, "bytes": nbytes, "seconds": seconds, "errors": 0}
    print(json.dumps(result), flush=True)


def confluent_config(a: argparse.Namespace) -> dict[str, Any]:
    return {"bootstrap.servers": a.bootstrap, "acks": a.acks, "linger.ms": LINGER_MS, "batch.size": BATCH_BYTES,
            "batch.num.messages": 1_000_000, "compression.type": a.compression,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_097_151,
            "enable.idempotence": False}


def produce_confluent(a: argparse.Namespace, values: list[bytes]) -> tuple[float, int, int]:
    from confluent_kafka import Producer

    failed = [0]

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed[0] += 1

    producer = Producer({**confluent_config(a), "delivery.report.only.error": True, "on_delivery": delivered})
    metadata = producer.list_topics(a.topic, timeout=20)
    produce, poll, topic, k = producer.produce, producer.poll, a.topic, len(values)
    # --spread: partition i of P takes the i-th block of records (a fill; the default partitioner is
    # sticky, so a partition could get more than the mock keeps)
    spread = len(metadata.topics[a.topic].partitions) if a.spread else 0
    start = time.perf_counter()
    for i in range(a.records):
        value = values[i % k]
        while True:
            try:
                if spread:
                    produce(topic, value, partition=i * spread // a.records)
                else:
                    produce(topic, value)
                break
            except BufferError:
                poll(0.001)
        if i % 10000 == 0:
            poll(0)
    left = producer.flush(CLIENT_TIMEOUT_S / 2)
    return time.perf_counter() - start, a.records - left - failed[0], failed[0] + left


def produce_kafka_python(a: argparse.Namespace, values: list[bytes]) -> tuple[float, int, int]:
    from kafka import KafkaProducer

    options: dict[str, Any] = {}
    if a.compression != "none":
        options["compression_type"] = a.compression
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, acks=-1 if a.acks == "all" else int(a.acks),
                             linger_ms=LINGER_MS, batch_size=BATCH_BYTES, max_request_size=2 * BATCH_BYTES,
                             enable_idempotence=False, api_version=KAFKA_PYTHON_API, **options)
    producer.partitions_for(a.topic)
    send, topic, k = producer.send, a.topic, len(values)
    start = time.perf_counter()
    futures = [send(topic, values[i % k]) for i in range(a.records)]
    producer.flush(timeout=CLIENT_TIMEOUT_S / 2)
    seconds = time.perf_counter() - start
    failed = sum(1 for f in futures if not f.is_done or f.failed())
    producer.close()
    return seconds, a.records - failed, failed


def produce_bundled(a: argparse.Namespace, values: list[bytes]) -> tuple[float, int, int]:
    import asyncio

    from kafkalite.client import Producer

    async def main() -> tuple[float, int, int]:
        async with Producer(bootstrap_servers=a.bootstrap, acks=-1 if a.acks == "all" else int(a.acks),
                            linger_ms=LINGER_MS, batch_size=BATCH_BYTES,
                            compression_type=a.compression) as producer:
            await producer.partitions_for(a.topic)
            k = len(values)
            records = [values[i % k] for i in range(a.records)]
            start = time.perf_counter()
            futures = await producer.send_many(a.topic, records)
            await producer.flush()
            seconds = time.perf_counter() - start
            failed = sum(1 for f in futures if f.exception() is not None)
            return seconds, a.records - failed, failed

    return asyncio.run(main())


def consume_confluent(a: argparse.Namespace) -> tuple[int, int, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"bench-{random.getrandbits(32):08x}",
                         "enable.auto.commit": False, "queued.min.messages": 1_000_000,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 1_048_576})
    metadata = consumer.list_topics(a.topic, timeout=20)
    partitions = sorted(metadata.topics[a.topic].partitions)
    start = time.perf_counter()
    consumer.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in partitions])
    count = nbytes = 0
    last = time.perf_counter()
    while count < a.records and time.perf_counter() - last < IDLE_TIMEOUT_S:
        batch = consumer.consume(10000, timeout=0.5)
        for message in batch:
            if message.error() is None:
                count += 1
                nbytes += len(message.value() or b"")
        if batch:
            last = time.perf_counter()
    seconds = time.perf_counter() - start
    consumer.close()
    return count, nbytes, seconds


def consume_kafka_python(a: argparse.Namespace) -> tuple[int, int, float]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False, group_id=None,
                             api_version=KAFKA_PYTHON_API,
                             max_partition_fetch_bytes=1_048_576, fetch_max_bytes=52_428_800)
    partitions = [TopicPartition(a.topic, p) for p in sorted(consumer.partitions_for_topic(a.topic) or [0])]
    start = time.perf_counter()
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    count = nbytes = 0
    last = time.perf_counter()
    while count < a.records and time.perf_counter() - last < IDLE_TIMEOUT_S:
        batch = consumer.poll(timeout_ms=500, max_records=100000)
        for records in batch.values():
            count += len(records)
            nbytes += sum(len(r.value) for r in records)
        if batch:
            last = time.perf_counter()
    seconds = time.perf_counter() - start
    consumer.close()
    return count, nbytes, seconds


def consume_bundled(a: argparse.Namespace) -> tuple[int, int, float]:
    import asyncio

    from kafkalite.client import Consumer, TopicPartition

    async def main() -> tuple[int, int, float]:
        async with Consumer(bootstrap_servers=a.bootstrap, auto_offset_reset="earliest") as consumer:
            numbers = await consumer.partitions_for(a.topic) or [0]
            start = time.perf_counter()
            consumer.assign([TopicPartition(a.topic, p) for p in sorted(numbers)])
            count = nbytes = 0
            last = time.perf_counter()
            poll = consumer.poll
            while count < a.records and time.perf_counter() - last < IDLE_TIMEOUT_S:
                records = await poll(timeout_ms=500)
                if records:
                    count += len(records)
                    nbytes += sum(len(r.value or b"") for r in records)
                    last = time.perf_counter()
            return count, nbytes, time.perf_counter() - start

    return asyncio.run(main())


PRODUCERS = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "bundled": produce_bundled}
CONSUMERS = {"confluent": consume_confluent, "kafka-python": consume_kafka_python, "bundled": consume_bundled}


def rdkperf_run(binary: str, op: str, bootstrap: str, topic: str, test: dict[str, Any],
                partitions: int) -> dict[str, Any]:
    """rdkafka_performance: produce to partition 0; consume every partition (one process, -p per partition)."""
    if op == "produce":
        command = [binary, "-P", "-t", topic, "-p", "0", "-b", bootstrap, "-s", str(test["size"]),
                   "-c", str(test["records"]), "-a", "-1" if test["acks"] == "all" else test["acks"],
                   "-X", f"linger.ms={LINGER_MS}", "-X", f"batch.size={BATCH_BYTES}",
                   "-X", "batch.num.messages=1000000", "-X", "queue.buffering.max.messages=2000000",
                   "-X", "queue.buffering.max.kbytes=2097151", "-X", "enable.idempotence=false"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
        found = re.findall(r"(\d+) messages produced \((\d+) bytes\), (\d+) delivered .*? in (\d+)ms",
                           done.stdout + done.stderr)
        if not found:
            raise RuntimeError(f"rdkafka_performance printed no result: {(done.stdout + done.stderr)[-400:]}")
        produced, nbytes, delivered, ms = (int(x) for x in found[-1])
        return {"records": delivered, "bytes": delivered * test["size"], "seconds": ms / 1000,
                "errors": produced - delivered}
    command = [binary, "-C", "-t", topic, "-b", bootstrap, "-o", "beginning", "-c", str(test["records"]),
               "-X", "queued.min.messages=1000000"]
    for p in range(partitions):
        command += ["-p", str(p)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    found = re.findall(r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms", done.stdout + done.stderr)
    if not found:
        raise RuntimeError(f"rdkafka_performance printed no result: {(done.stdout + done.stderr)[-400:]}")
    records, nbytes, ms = (int(x) for x in found[-1])
    return {"records": records, "bytes": nbytes, "seconds": ms / 1000, "errors": 0}


# --- the mock cluster (a child process: ``compare.py mock TOPIC:PARTITIONS ...``) -------------------------

def mock_main(a: argparse.Namespace) -> None:
    import ctypes

    import confluent_kafka

    libs = sorted((Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    library = ctypes.CDLL(str(libs[0]) if libs else "librdkafka.so.1")
    library.rd_kafka_conf_new.restype = ctypes.c_void_p
    library.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_char_p, ctypes.c_size_t]
    library.rd_kafka_new.restype = ctypes.c_void_p
    library.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    library.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    library.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    library.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    library.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    library.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    error = ctypes.create_string_buffer(512)
    conf = library.rd_kafka_conf_new()
    library.rd_kafka_conf_set(conf, b"log_level", b"3", error, len(error))
    handle = library.rd_kafka_new(0, conf, error, len(error))  # RD_KAFKA_PRODUCER
    if not handle:
        sys.exit(f"rd_kafka_new: {error.value.decode()}")
    cluster = library.rd_kafka_mock_cluster_new(handle, 1)
    if not cluster:
        sys.exit("rd_kafka_mock_cluster_new failed")
    for spec in a.topics:
        name, _, count = spec.rpartition(":")
        code = library.rd_kafka_mock_topic_create(cluster, name.encode(), int(count), 1)
        if code:
            sys.exit(f"rd_kafka_mock_topic_create {name}: error {code}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("BOOTSTRAP", library.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    sys.stdin.read()  # until the parent closes our stdin (or SIGTERM)


class Mock:
    def __init__(self, topics: dict[str, int]) -> None:
        command = [sys.executable, __file__, "mock", *(f"{t}:{p}" for t, p in topics.items())]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = (self.process.stdout.readline() if self.process.stdout else "").split()
        if len(line) != 2 or line[0] != "BOOTSTRAP":
            self.stop()
            raise RuntimeError(f"the mock cluster did not start (said {line})")
        self.bootstrap = line[1]
        self.pid = self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- process figures -------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds (user and system) of this process's finished children: the client processes."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> tuple[float, float, float]:
    """CPU seconds of the whole machine so far, busy (not idle, not waiting for I/O, not stolen) and
    stolen by the host (the VM's steal time), with the monotonic clock: ``/proc/stat``."""
    fields = [int(field) for field in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick, time.monotonic()


def memory_mib(pid: int, field: str = "VmRSS") -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# --- the comparison ----------------------------------------------------------------------------------------

def build_tests(families: list[str], quick: bool, match: str) -> list[dict[str, Any]]:
    f = 10 if quick else 1
    tests: list[dict[str, Any]] = []
    shapes = ((1_000_000 // f, 100), (100_000 // f, 1024))
    if "confluent" in families:
        tests += [dict(family="confluent", records=n, size=s, acks=acks, compression=c)
                  for n, s in shapes for acks in ("1", "all") for c in ("none", "lz4")]
    if "kafka-python" in families:
        tests.append(dict(family="kafka-python", records=100_000 // f, size=100, acks="1", compression="none"))
    if "bundled" in families:
        tests += [dict(family="bundled", records=n, size=s, acks="1", compression="none") for n, s in shapes]
    if "rdkperf" in families:
        tests += [dict(family="rdkperf", records=n, size=s, acks=acks, compression="none")
                  for n, s in shapes for acks in ("1", "all")]
    for i, t in enumerate(tests):
        t["id"] = f"{t['family']} {t['records']}x{t['size']}B acks={t['acks']} {t['compression']}"
        t["index"] = i
        t["partitions"] = fill_partitions(t["records"], t["size"])
    return [t for t in tests if re.search(match, t["id"])]


def run_client(test: dict[str, Any], op: str, bootstrap: str, topic: str, records: int | None = None,
               rdkperf: str | None = None) -> dict[str, Any]:
    if test["family"] == "rdkperf" and rdkperf and records is None:
        return rdkperf_run(rdkperf, op, bootstrap, topic, test, test["partitions"])
    family = "confluent" if records is not None or test["family"] == "rdkperf" else test["family"]
    command = [sys.executable, __file__, "client", op, "--family", family, *(["--spread"] if records else []),
               "--bootstrap", bootstrap,
               "--topic", topic, "--records", str(records or test["records"]), "--size", str(test["size"]),
               "--acks", test["acks"], "--compression", test["compression"]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, cwd=REPO)
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"no result (exit {done.returncode}): {done.stderr.strip()[-400:]}")


def measure(test: dict[str, Any], op: str, bootstrap: str, topic: str, pid: int,
            rdkperf: str | None) -> dict[str, Any]:
    cpu0 = cpu_seconds(pid)
    client0, machine0 = children_cpu_seconds(), machine_cpu()
    try:
        result = run_client(test, op, bootstrap, topic, rdkperf=rdkperf)
    except Exception as error:  # a failed or stuck client is a flagged row, not the end of the run
        result = {"records": 0, "bytes": 0, "seconds": 0.0, "error": f"{type(error).__name__}: {error}"[:300]}
    cpu1 = cpu_seconds(pid)
    client1, machine1 = children_cpu_seconds(), machine_cpu()
    result["cpu"] = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    # cores kept busy while the client process ran (its start and stop included): the server's, the
    # client's, the whole machine's, and what the host took from this VM
    wall = machine1[2] - machine0[2]
    result["cores"] = {"server": None if result["cpu"] is None else result["cpu"] / wall,
                       "client": (client1 - client0) / wall, "machine": (machine1[0] - machine0[0]) / wall,
                       "steal": (machine1[1] - machine0[1]) / wall}
    result["rss"] = memory_mib(pid)
    result["ok"] = "error" not in result and result["records"] == test["records"] and not result.get("errors")
    seconds = result["seconds"] or math.inf
    result["rate"] = result["records"] / seconds
    result["mbs"] = result["bytes"] / seconds / 1e6
    return result


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=p, replication_factor=1) for t, p in topics.items()],
                                  operation_timeout=30, request_timeout=30)
    for future in futures.values():
        future.result(60)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30, request_timeout=30).values():
        try:
            future.result(60)
        except Exception as error:  # a rep that failed early may not have made every topic
            print(f"  deleting a topic failed: {error}", flush=True)


def k(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values) / 1e3:.0f} ({min(values) / 1e3:.0f}-{max(values) / 1e3:.0f})"


def table(tests: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[str]:
    width = max([len(t["id"]) for t in tests] + [4])
    lines = ["m = mock, b = kafkalite.  kmsg/s = 1000 records/s, median (min-max) over the reps;"
             " b/m = ratio of the medians (>1: kafkalite faster)",
             f"{'test':{width}s} {'op':7s} {'m kmsg/s':>17s} {'b kmsg/s':>17s} {'b/m':>5s}"
             f" {'m MB/s':>7s} {'b MB/s':>7s} {'CPU-s m/b':>11s} {'RSS MiB m/b':>13s}"]
    ratios: dict[str, list[float]] = {"produce": [], "consume": []}
    for t in tests:
        for op in ("produce", "consume"):
            runs = {side: [r for r in results if r["test"] == t["id"] and r["op"] == op and r["side"] == side]
                    for side in ("mock", "kafkalite")}
            good = {side: [r for r in rr if r["ok"]] for side, rr in runs.items()}
            if not runs["mock"] and not runs["kafkalite"]:
                continue
            rates = {side: [r["rate"] for r in rr] for side, rr in good.items()}
            ratio = (statistics.median(rates["kafkalite"]) / statistics.median(rates["mock"])
                     if rates["mock"] and rates["kafkalite"] else None)
            if ratio:
                ratios[op].append(ratio)

            def figure(side: str, key: str, fmt: str, pick: Any = statistics.median,
                       good: dict[str, list[dict[str, Any]]] = good,
                       runs: dict[str, list[dict[str, Any]]] = runs) -> str:
                values = [r[key] for r in (good[side] if key != "rss" else runs[side]) if r[key] is not None]
                return format(pick(values), fmt) if values else "-"

            lines.append(f"{t['id']:{width}s} {op:7s} {k(rates['mock']):>17s} {k(rates['kafkalite']):>17s}"
                         f" {'-' if ratio is None else f'{ratio:.2f}':>5s}"
                         f" {figure('mock', 'mbs', '.1f'):>7s} {figure('kafkalite', 'mbs', '.1f'):>7s}"
                         f" {figure('mock', 'cpu', '.2f') + '/' + figure('kafkalite', 'cpu', '.2f'):>11s}"
                         f" {figure('mock', 'rss', '.0f', max) + '/' + figure('kafkalite', 'rss', '.0f', max):>13s}")
            for side in ("mock", "kafkalite"):
                bad = [r for r in runs[side] if not r["ok"]]
                if bad:
                    why = bad[0].get("error") or f"{bad[0]['records']} of {t['records']} records, " \
                                                 f"{bad[0].get('errors', 0)} errors"
                    lines.append(f"{'':{width}s}   !! {side}: {len(bad)} of {len(runs[side])} runs failed ({why})")
    lines.append("")
    for op, values in ratios.items():
        if values:
            mean = math.exp(sum(math.log(v) for v in values) / len(values))
            lines.append(f"geomean kafkalite/mock {op}: {mean:.2f}  (over {len(values)} tests, "
                         f"range {min(values):.2f}-{max(values):.2f})")
    return lines + [""] + cores_table(tests, results)


CORES = ("client", "server", "machine", "steal")


def cores_table(tests: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[str]:
    """Where each op's time went: the cores its client, its server and the whole machine kept busy
    while the client ran (CPU seconds over wall seconds, median of the complete runs), m/b as above.
    A server busy well under one core on a machine with cores to spare did not set that row's pace."""
    width = max([len(t["id"]) for t in tests] + [4])
    lines = [f"cores busy while the client ran (CPU s / wall s, medians; the machine has {os.cpu_count()}):",
             f"{'test':{width}s} {'op':7s}" + "".join(f" {name + ' m/b':>13s}" for name in CORES)]
    spare: list[tuple[float, float]] = []  # kafkalite's server and machine, per row
    for t in tests:
        for op in ("produce", "consume"):
            medians: dict[tuple[str, str], float] = {}
            for side in ("mock", "kafkalite"):
                runs = [r for r in results if r["test"] == t["id"] and r["op"] == op and r["side"] == side
                        and r["ok"] and "cores" in r]
                for name in CORES:
                    values = [r["cores"][name] for r in runs if r["cores"][name] is not None]
                    if values:
                        medians[side, name] = statistics.median(values)
            if not medians:
                continue
            cells = "".join(f" {_pair(medians.get(('mock', n)), medians.get(('kafkalite', n))):>13s}" for n in CORES)
            lines.append(f"{t['id']:{width}s} {op:7s}{cells}")
            if ("kafkalite", "server") in medians and ("kafkalite", "machine") in medians:
                spare.append((medians["kafkalite", "server"], medians["kafkalite", "machine"]))
    if spare:
        servers, machines = [s for s, _ in spare], [m for _, m in spare]
        lines.append(f"kafkalite's process: {min(servers):.2f}-{max(servers):.2f} of a core (median"
                     f" {statistics.median(servers):.2f}); the machine: {min(machines):.2f}-{max(machines):.2f}"
                     f" of {os.cpu_count()} cores, over {len(spare)} rows")
    return lines


def _pair(mock: float | None, kafkalite: float | None) -> str:
    return "/".join("-" if value is None else f"{value:.2f}" for value in (mock, kafkalite))


def compare_main(a: argparse.Namespace) -> None:
    families = [f.strip() for f in a.only.split(",") if f.strip()]
    notes: list[str] = []
    rdkperf = a.rdkafka_performance or shutil.which("rdkafka_performance")
    if "rdkperf" in families and not rdkperf:
        families.remove("rdkperf")
        notes.append("note: no rdkafka_performance binary (--rdkafka-performance PATH or on PATH): "
                     "its rows are left out")
    tests = build_tests(families, a.quick, a.match)
    if not tests:
        sys.exit("no tests selected")
    reps = 1 if a.quick else a.reps
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-compare-"))
    broker = None
    try:
        if a.bootstrap:
            bootstrap, pid = a.bootstrap, a.broker_pid
        else:
            from kafkalite.testing.process import BrokerProcess

            configs = dict(kv.split("=", 1) for kv in a.broker_config)
            broker = BrokerProcess(scratch / "data", configs, admin=False).start()
            bootstrap, pid = broker.bootstrap_servers, broker.pid
        import confluent_kafka
        import kafka

        print(f"compare {time.strftime('%Y-%m-%d %H:%M:%S')}  CPUs {os.cpu_count()}  reps {reps}"
              f"{'  (quick: 10x fewer records)' if a.quick else ''}\n"
              f"mock: librdkafka {confluent_kafka.libversion()[0]} mock cluster (confluent-kafka's wheel),"
              f" a fresh process per rep\nkafkalite: {bootstrap} pid {pid}"
              f" configs {a.broker_config or 'default'}\nclients: confluent-kafka {confluent_kafka.__version__},"
              f" kafka-python {kafka.__version__}, kafkalite.client"
              f"{', rdkafka_performance' if rdkperf and 'rdkperf' in families else ''}", flush=True)
        rss_before = memory_mib(pid)
        results: list[dict[str, Any]] = []
        started = time.time()
        for rep in range(1, reps + 1):
            suffix = f"{rep}-{random.getrandbits(24):06x}"
            topics = {}
            for t in tests:
                topics[f"p{t['index']}-{suffix}"] = 1
                topics[f"c{t['index']}-{suffix}"] = t["partitions"]
            mock = Mock(topics)
            try:
                create_topics(bootstrap, topics)
                sides = [("mock", mock.bootstrap, mock.pid), ("kafkalite", bootstrap, pid)]
                if rep % 2 == 0:
                    sides.reverse()
                for t in tests:
                    for side, server, server_pid in sides:
                        for op in ("produce", "consume"):
                            topic = f"{op[0]}{t['index']}-{suffix}"
                            if op == "consume":  # the consume topic is filled first, untimed
                                try:
                                    run_client(t, "produce", server, topic, records=t["records"])
                                except Exception as error:
                                    print(f"  fill of {topic} on {side} failed: {error}", flush=True)
                            r = measure(t, op, server, topic, server_pid, rdkperf)
                            r.update(test=t["id"], op=op, side=side, rep=rep)
                            results.append(r)
                            flag = "" if r["ok"] else f"  !! {r.get('error') or 'incomplete'}"
                            print(f"  rep{rep} {t['id']:38s} {op:7s} {side:>9s} {r['rate']:>9.0f}/s"
                                  f" {r['mbs']:>7.1f} MB/s cpu={r['cpu'] if r['cpu'] is None else round(r['cpu'], 2)}"
                                  f" rss={r['rss'] if r['rss'] is None else round(r['rss'])}{flag}", flush=True)
                    # Done with the test's topics: kafkalite deletes them, so later tests do not run
                    # with gigabytes of earlier ones in the page cache (the mock's go with it per rep).
                    done = [f"p{t['index']}-{suffix}", f"c{t['index']}-{suffix}"]
                    delete_topics(bootstrap, done)
                    for topic in done:
                        del topics[topic]
            finally:
                mock.stop()
                if topics:  # a rep cut short
                    delete_topics(bootstrap, list(topics))
        lines = table(tests, results)
        lines.append(f"kafkalite RSS MiB: before {rss_before and round(rss_before, 1)}, after "
                     f"{round(memory_mib(pid) or 0, 1)}, peak (VmHWM) {round(memory_mib(pid, 'VmHWM') or 0, 1)}")
        lines.append(f"wall time {time.time() - started:.0f} s")
        print("\n" + "\n".join(lines + notes))
        if a.json:
            Path(a.json).write_text("\n".join(json.dumps(r) for r in results) + "\n")
    finally:
        if broker is not None:
            broker.stop()
            broker.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    client = sub.add_parser("client", help="one client run (used by the comparison)")
    client.add_argument("op", choices=["produce", "consume"])
    client.add_argument("--family", choices=sorted(PRODUCERS), required=True)
    client.add_argument("--bootstrap", required=True)
    client.add_argument("--topic", required=True)
    client.add_argument("--records", type=int, required=True)
    client.add_argument("--size", type=int, default=100)
    client.add_argument("--acks", default="1")
    client.add_argument("--compression", default="none")
    client.add_argument("--spread", action="store_true", help="produce: the records in blocks over every partition")
    mock = sub.add_parser("mock", help="serve a mock cluster with these TOPIC:PARTITIONS (used by the comparison)")
    mock.add_argument("topics", nargs="*")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 rep, 10x fewer records (a smoke test)")
    parser.add_argument("--only", default=",".join(FAMILIES), help="families: " + ",".join(FAMILIES))
    parser.add_argument("--match", default="", help="regex on the test name")
    parser.add_argument("--bootstrap", default="", help="an already running kafkalite (default: start one)")
    parser.add_argument("--broker-pid", type=int, default=0, help="its PID, for CPU seconds and RSS")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a config of the kafkalite this starts (repeatable)")
    parser.add_argument("--rdkafka-performance", default="", metavar="PATH", help="librdkafka's C benchmark client")
    parser.add_argument("--json", default="", metavar="FILE", help="also write every run as a JSON line")
    a = parser.parse_args()
    if a.command == "client":
        client_main(a)
    elif a.command == "mock":
        mock_main(a)
    else:
        compare_main(a)


if __name__ == "__main__":
    main()
