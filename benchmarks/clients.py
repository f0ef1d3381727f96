"""Producer throughput of Python Kafka clients, side by side against one kafkalite broker.

    python benchmarks/clients.py [--records 100000] [--size 100] [--rounds 3] [--only NAME ...]
    python benchmarks/clients.py --bootstrap 127.0.0.1:9092     # an already running broker

Starts a kafkalite broker on 127.0.0.1 (a free port, a scratch data directory; stopped by its PID at
the end) unless ``--bootstrap`` is given, then runs every client ``--rounds`` times, interleaved
(round 1: every client, round 2: every client, ...), each run in its own Python process producing
``--records`` records of ``--size`` bytes into a fresh one-partition topic with acks=1, no
compression, ``linger.ms`` 5 and 256 KiB batches. The clock starts after the client has connected
and fetched metadata, and stops when the last record is acknowledged. Prints the median records/s
per client and its ratio to the bundled ``send()``. Nothing is asserted.

Clients: ``bundled-send`` (the asyncio ``Producer.send()``, one record per call), ``bundled-many``
(``Producer.send_many()``, a list of values per call), ``bundled-sync`` (the blocking facade's
``send()``), ``kafka-python``, ``aiokafka`` and ``confluent`` (confluent-kafka, librdkafka).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLIENTS = ["bundled-send", "bundled-many", "bundled-sync", "kafka-python", "aiokafka", "confluent"]
BATCH_BYTES = 256 * 1024
LINGER_MS = 5


# --- one measurement (runs in a child process) ---------------------------------------------------------

def run_bundled_send(bootstrap: str, topic: str, values: list[bytes]) -> float:
    import asyncio

    from kafkalite.client import Producer

    async def main() -> float:
        async with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as p:
            await p.partitions_for(topic)
            start = time.perf_counter()
            send = p.send
            future = None
            for value in values:
                future = await send(topic, value)
            assert future is not None
            await future
            await p.flush()
            return time.perf_counter() - start

    return asyncio.run(main())


def run_bundled_many(bootstrap: str, topic: str, values: list[bytes]) -> float:
    import asyncio

    from kafkalite.client import Producer

    async def main() -> float:
        async with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as p:
            await p.partitions_for(topic)
            start = time.perf_counter()
            futures = await p.send_many(topic, values)
            await p.flush()
            for future in futures:
                future.result()
            return time.perf_counter() - start

    return asyncio.run(main())


def run_bundled_sync(bootstrap: str, topic: str, values: list[bytes]) -> float:
    from kafkalite.client import sync

    with sync.Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as p:
        p.partitions_for(topic)
        start = time.perf_counter()
        send = p.send
        future = None
        for value in values:
            future = send(topic, value)
        assert future is not None
        future.result()
        p.flush()
        return time.perf_counter() - start


def run_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> float:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES,
                             enable_idempotence=False)
    producer.partitions_for(topic)
    start = time.perf_counter()
    send = producer.send
    future = None
    for value in values:
        future = send(topic, value)
    producer.flush()
    assert future is not None
    future.get(60)
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def run_aiokafka(bootstrap: str, topic: str, values: list[bytes]) -> float:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                                    max_batch_size=BATCH_BYTES, enable_idempotence=False)
        await producer.start()
        try:
            await producer.partitions_for(topic)
            start = time.perf_counter()
            send = producer.send
            future = None
            for value in values:
                future = await send(topic, value)
            await producer.flush()
            assert future is not None
            await future
            return time.perf_counter() - start
        finally:
            await producer.stop()

    return asyncio.run(main())


def run_confluent(bootstrap: str, topic: str, values: list[bytes]) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS,
                         "batch.size": BATCH_BYTES, "enable.idempotence": False,
                         "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 4_000_000})
    producer.list_topics(topic, timeout=30)
    start = time.perf_counter()
    produce = producer.produce
    poll = producer.poll
    for index, value in enumerate(values):
        produce(topic, value)
        if index % 1000 == 0:
            poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    assert remaining == 0
    return elapsed


RUNNERS = {"bundled-send": run_bundled_send, "bundled-many": run_bundled_many, "bundled-sync": run_bundled_sync,
           "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}


def worker(client: str, bootstrap: str, topic: str, records: int, size: int) -> None:
    value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    values = [value] * records
    elapsed = RUNNERS[client](bootstrap, topic, values)
    print(json.dumps({"client": client, "seconds": elapsed, "records": records}))


# --- the driver ----------------------------------------------------------------------------------------

def start_broker(scratch: Path) -> tuple[subprocess.Popen[bytes], str]:
    log_path = scratch / "broker.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "kafkalite", "serve", "--port", "0", "--data-dir", str(scratch / "data"),
             "--listeners", "PLAINTEXT://127.0.0.1:0"],
            cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"listening on \w+://[^:\s]+:(\d+)", log_path.read_text(errors="replace"))
        if match:
            return process, f"127.0.0.1:{match.group(1)}"
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"the broker did not start:\n{log_path.read_text(errors='replace')}")


def create_topic(bootstrap: str, topic: str) -> None:
    from kafkalite.client import NewTopic, sync

    with sync.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].raise_for_error()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=CLIENTS, default=CLIENTS)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.bootstrap, args.topic, args.records, args.size)
        return

    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-clients-"))
    broker: subprocess.Popen[bytes] | None = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker, bootstrap = start_broker(scratch)
        print(f"{args.records:,} records x {args.size} B, acks=1, no compression, linger.ms={LINGER_MS}, "
              f"batches of {BATCH_BYTES // 1024} KiB; {args.rounds} interleaved rounds against {bootstrap}")
        times: dict[str, list[float]] = {client: [] for client in args.only}
        for round_number in range(args.rounds):
            for client in args.only:
                topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, topic)
                output = subprocess.run(
                    [sys.executable, __file__, "--worker", client, "--bootstrap", bootstrap, "--topic", topic,
                     "--records", str(args.records), "--size", str(args.size)],
                    capture_output=True, text=True, timeout=600, cwd=REPO)
                if output.returncode != 0:
                    print(f"  round {round_number + 1} {client}: FAILED\n{output.stderr[-2000:]}")
                    continue
                result = json.loads(output.stdout.strip().splitlines()[-1])
                times[client].append(result["seconds"])
                print(f"  round {round_number + 1} {client:<13} {args.records / result['seconds']:>12,.0f} records/s")
        rates = {client: args.records / statistics.median(seconds) for client, seconds in times.items() if seconds}
        reference = rates.get("bundled-send")
        print()
        print("| client | records/s (median) | vs bundled send() |")
        print("| --- | ---: | ---: |")
        for client, rate in sorted(rates.items(), key=lambda item: -item[1]):
            ratio = f"{rate / reference:.2f}x" if reference else "-"
            print(f"| {client} | {rate:,.0f} | {ratio} |")
    finally:
        if broker is not None and broker.poll() is None:
            os.kill(broker.pid, signal.SIGTERM)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(broker.pid, signal.SIGKILL)
                broker.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
