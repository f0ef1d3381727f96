"""Python Kafka clients side by side against one kafkalite broker: producing, consuming, latency.

    python benchmarks/clients.py [--mode all|produce|consume|latency] [--records 100000] [--size 100]
                                 [--rounds 3] [--only NAME ...]
    python benchmarks/clients.py --bootstrap 127.0.0.1:9092     # an already running broker

Starts a kafkalite broker on 127.0.0.1 (a free port, a scratch data directory; stopped by its PID at
the end) unless ``--bootstrap`` is given, then runs every client of each mode ``--rounds`` times,
interleaved (round 1: every client, round 2: every client, ...), each run in its own Python process.
Nothing is asserted; medians are printed.

* **produce**: ``--records`` records of ``--size`` bytes into a fresh one-partition topic with acks=1,
  no compression, ``linger.ms`` 5 and 256 KiB batches. The clock starts after the client has
  connected and fetched metadata, and stops when the last record is acknowledged. Clients:
  ``bundled-send`` (the asyncio ``Producer.send()``, one record per call), ``bundled-many``
  (``Producer.send_many()``), ``bundled-sync`` (the blocking facade's ``send()``), ``kafka-python``,
  ``aiokafka`` and ``confluent`` (confluent-kafka, librdkafka).
* **consume**: every client reads the same one-partition topic of ``--records`` records from the
  beginning, with its default fetch settings, without a group (assign and seek). The clock starts
  once the client knows its position and stops at the last record. Clients: ``bundled-poll``
  (``await Consumer.poll()``), ``bundled-iter`` (``async for record in consumer``), ``bundled-sync``
  (the blocking ``poll()``), ``kafka-python`` (``poll()``), ``aiokafka`` (``getmany()``) and
  ``confluent`` (``consume()``).
* **latency**: a producer sends 1,000 records/s for ``--latency-seconds`` (linger.ms 0, acks=1) to a
  fresh topic while a consumer of the same client library reads them; each record carries its send
  time, and the time from ``send()`` to the consumer handing the record out is recorded (the first
  200 records are warm-up). Pooled over the rounds, p50 and p99 are printed per client:
  ``bundled`` (the asyncio producer and consumer on one event loop), ``confluent`` (a consumer
  thread) and ``aiokafka``.
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
CONSUMERS = ["bundled-poll", "bundled-iter", "bundled-sync", "kafka-python", "aiokafka", "confluent"]
LATENCY = ["bundled", "confluent", "aiokafka"]
BATCH_BYTES = 256 * 1024
LINGER_MS = 5
LATENCY_RATE = 1000
LATENCY_WARMUP = 200


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


# --- consuming (each runs in a child process) --------------------------------------------------------------

def consume_bundled_poll(bootstrap: str, topic: str, records: int) -> float:
    import asyncio

    from kafkalite.client import Consumer, TopicPartition

    async def main() -> float:
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.position(partition)
            start = time.perf_counter()
            count = 0
            poll = consumer.poll
            while count < records:
                count += len(await poll(timeout_ms=1000))
            return time.perf_counter() - start

    return asyncio.run(main())


def consume_bundled_iter(bootstrap: str, topic: str, records: int) -> float:
    import asyncio

    from kafkalite.client import Consumer, TopicPartition

    async def main() -> float:
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.position(partition)
            start = time.perf_counter()
            count = 0
            async for _ in consumer:
                count += 1
                if count == records:
                    break
            return time.perf_counter() - start

    return asyncio.run(main())


def consume_bundled_sync(bootstrap: str, topic: str, records: int) -> float:
    from kafkalite.client import TopicPartition, sync

    with sync.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.position(partition)
        start = time.perf_counter()
        count = 0
        while count < records:
            count += len(consumer.poll(timeout_ms=1000))
        return time.perf_counter() - start


def consume_kafka_python(bootstrap: str, topic: str, records: int) -> float:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    consumer.position(partition)
    start = time.perf_counter()
    count = 0
    while count < records:
        count += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def consume_aiokafka(bootstrap: str, topic: str, records: int) -> float:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    async def main() -> float:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = AioTopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            await consumer.position(partition)
            start = time.perf_counter()
            count = 0
            while count < records:
                count += sum(len(batch) for batch in (await consumer.getmany(timeout_ms=1000)).values())
            return time.perf_counter() - start
        finally:
            await consumer.stop()

    return asyncio.run(main())


def consume_confluent(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.list_topics(topic, timeout=30)
    consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
    start = time.perf_counter()
    count = 0
    while count < records:
        count += len(consumer.consume(1000, timeout=1.0))
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


CONSUME_RUNNERS = {"bundled-poll": consume_bundled_poll, "bundled-iter": consume_bundled_iter,
                   "bundled-sync": consume_bundled_sync, "kafka-python": consume_kafka_python,
                   "aiokafka": consume_aiokafka, "confluent": consume_confluent}


# --- latency (each runs in a child process) ----------------------------------------------------------------

def latency_bundled(bootstrap: str, topic: str, seconds: float) -> list[float]:
    import asyncio

    from kafkalite.client import Consumer, Producer, TopicPartition

    async def main() -> list[float]:
        latencies: list[float] = []
        total = int(seconds * LATENCY_RATE)
        async with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=0) as producer, \
                Consumer(bootstrap_servers=bootstrap, auto_offset_reset="latest") as consumer:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.position(partition)
            await producer.partitions_for(topic)

            async def read() -> None:
                async for record in consumer:
                    latencies.append((time.perf_counter_ns() - int(record.value)) / 1e6)
                    if len(latencies) == total:
                        return

            reader = asyncio.get_running_loop().create_task(read())
            started = time.perf_counter()
            for index in range(total):
                delay = started + index / LATENCY_RATE - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await producer.send(topic, str(time.perf_counter_ns()).encode(), partition=0)
            await asyncio.wait_for(reader, 30)
        return latencies[LATENCY_WARMUP:]

    return asyncio.run(main())


def latency_confluent(bootstrap: str, topic: str, seconds: float) -> list[float]:
    import threading

    from confluent_kafka import OFFSET_END, Consumer, Producer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    total = int(seconds * LATENCY_RATE)
    latencies: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_END)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    producer.list_topics(topic, timeout=30)
    ready = threading.Event()

    def read() -> None:
        while len(latencies) < total:
            message = consumer.poll(0.1)
            ready.set()
            if message is not None and message.error() is None:
                latencies.append((time.perf_counter_ns() - int(message.value())) / 1e6)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(30)
    time.sleep(1.0)  # the consumer's fetch position is resolved before the first record goes out
    started = time.perf_counter()
    for index in range(total):
        delay = started + index / LATENCY_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, str(time.perf_counter_ns()).encode(), partition=0)
        producer.poll(0)
    producer.flush(30)
    reader.join(30)
    consumer.close()
    return latencies[LATENCY_WARMUP:]


def latency_aiokafka(bootstrap: str, topic: str, seconds: float) -> list[float]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    async def main() -> list[float]:
        latencies: list[float] = []
        total = int(seconds * LATENCY_RATE)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="latest")
        await producer.start()
        await consumer.start()
        try:
            partition = AioTopicPartition(topic, 0)
            consumer.assign([partition])
            await consumer.position(partition)

            async def read() -> None:
                async for record in consumer:
                    latencies.append((time.perf_counter_ns() - int(record.value)) / 1e6)
                    if len(latencies) == total:
                        return

            reader = asyncio.get_running_loop().create_task(read())
            started = time.perf_counter()
            for index in range(total):
                delay = started + index / LATENCY_RATE - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await producer.send(topic, str(time.perf_counter_ns()).encode(), partition=0)
            await asyncio.wait_for(reader, 30)
        finally:
            await consumer.stop()
            await producer.stop()
        return latencies[LATENCY_WARMUP:]

    return asyncio.run(main())


LATENCY_RUNNERS = {"bundled": latency_bundled, "confluent": latency_confluent, "aiokafka": latency_aiokafka}


def worker(mode: str, client: str, bootstrap: str, topic: str, records: int, size: int, seconds: float) -> None:
    if mode == "produce":
        value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
        elapsed = RUNNERS[client](bootstrap, topic, [value] * records)
        print(json.dumps({"client": client, "seconds": elapsed, "records": records}))
    elif mode == "consume":
        elapsed = CONSUME_RUNNERS[client](bootstrap, topic, records)
        print(json.dumps({"client": client, "seconds": elapsed, "records": records}))
    else:
        print(json.dumps({"client": client, "latencies": LATENCY_RUNNERS[client](bootstrap, topic, seconds)}))


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


def run_worker(mode: str, client: str, bootstrap: str, topic: str,
               args: argparse.Namespace) -> dict[str, object] | None:
    output = subprocess.run(
        [sys.executable, __file__, "--worker", client, "--mode", mode, "--bootstrap", bootstrap, "--topic", topic,
         "--records", str(args.records), "--size", str(args.size), "--latency-seconds", str(args.latency_seconds)],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    if output.returncode != 0:
        print(f"  {mode} {client}: FAILED\n{output.stderr[-2000:]}")
        return None
    result: dict[str, object] = json.loads(output.stdout.strip().splitlines()[-1])
    return result


def bench_produce(bootstrap: str, args: argparse.Namespace) -> None:
    clients = [client for client in args.only if client in CLIENTS] or CLIENTS
    print(f"produce: {args.records:,} records x {args.size} B, acks=1, no compression, linger.ms={LINGER_MS}, "
          f"batches of {BATCH_BYTES // 1024} KiB; {args.rounds} interleaved rounds against {bootstrap}")
    times: dict[str, list[float]] = {client: [] for client in clients}
    for round_number in range(args.rounds):
        for client in clients:
            topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic)
            result = run_worker("produce", client, bootstrap, topic, args)
            if result is not None:
                seconds = float(result["seconds"])  # type: ignore[arg-type]
                times[client].append(seconds)
                print(f"  round {round_number + 1} {client:<13} {args.records / seconds:>12,.0f} records/s")
    rates = {client: args.records / statistics.median(seconds) for client, seconds in times.items() if seconds}
    reference = rates.get("bundled-send")
    print()
    print("| client | records/s (median) | vs bundled send() |")
    print("| --- | ---: | ---: |")
    for client, rate in sorted(rates.items(), key=lambda item: -item[1]):
        ratio = f"{rate / reference:.2f}x" if reference else "-"
        print(f"| {client} | {rate:,.0f} | {ratio} |")
    print()


def bench_consume(bootstrap: str, args: argparse.Namespace) -> None:
    clients = [client for client in args.only if client in CONSUMERS] or CONSUMERS
    topic = f"bench-consume-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    fill(bootstrap, topic, args.records, args.size)
    print(f"consume: {args.records:,} records x {args.size} B from the beginning of one partition, default fetch "
          f"settings; {args.rounds} interleaved rounds against {bootstrap}")
    times: dict[str, list[float]] = {client: [] for client in clients}
    for round_number in range(args.rounds):
        for client in clients:
            result = run_worker("consume", client, bootstrap, topic, args)
            if result is not None:
                seconds = float(result["seconds"])  # type: ignore[arg-type]
                times[client].append(seconds)
                print(f"  round {round_number + 1} {client:<13} {args.records / seconds:>12,.0f} records/s")
    rates = {client: args.records / statistics.median(seconds) for client, seconds in times.items() if seconds}
    aiokafka, kafka_python = rates.get("aiokafka"), rates.get("kafka-python")
    print()
    print("| client | records/s (median) | vs aiokafka | vs kafka-python |")
    print("| --- | ---: | ---: | ---: |")
    for client, rate in sorted(rates.items(), key=lambda item: -item[1]):
        versus = [f"{rate / other:.2f}x" if other else "-" for other in (aiokafka, kafka_python)]
        print(f"| {client} | {rate:,.0f} | {versus[0]} | {versus[1]} |")
    print()


def bench_latency(bootstrap: str, args: argparse.Namespace) -> None:
    clients = [client for client in args.only if client in LATENCY] or LATENCY
    print(f"latency: {LATENCY_RATE:,} records/s for {args.latency_seconds:g} s, linger.ms=0, acks=1, send() to the "
          f"consumer handing the record out; {args.rounds} interleaved rounds against {bootstrap}")
    pooled: dict[str, list[float]] = {client: [] for client in clients}
    for round_number in range(args.rounds):
        for client in clients:
            topic = f"bench-latency-{client}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic)
            result = run_worker("latency", client, bootstrap, topic, args)
            if result is not None:
                latencies = sorted(result["latencies"])  # type: ignore[call-overload]
                pooled[client].extend(latencies)
                print(f"  round {round_number + 1} {client:<10} p50 {percentile(latencies, 50):6.2f} ms  "
                      f"p99 {percentile(latencies, 99):6.2f} ms  ({len(latencies)} records)")
    print()
    print("| client | p50 ms | p99 ms | records |")
    print("| --- | ---: | ---: | ---: |")
    for client, latencies in pooled.items():
        if latencies:
            latencies.sort()
            p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
            print(f"| {client} | {p50:.2f} | {p99:.2f} | {len(latencies):,} |")
    print()


def percentile(ordered: list[float], percent: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    import asyncio

    from kafkalite.client import Producer

    async def main() -> None:
        async with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS, batch_size=BATCH_BYTES) as p:
            value = (b"0123456789abcdef" * (size // 16 + 1))[:size]
            await p.send_many(topic, [value] * records)
            await p.flush()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["all", "produce", "consume", "latency"], default="all")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    names = sorted({*CLIENTS, *CONSUMERS, *LATENCY})
    parser.add_argument("--only", nargs="*", choices=names, default=[])
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--worker", choices=names, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.mode, args.worker, args.bootstrap, args.topic, args.records, args.size, args.latency_seconds)
        return

    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-clients-"))
    broker: subprocess.Popen[bytes] | None = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            broker, bootstrap = start_broker(scratch)
        if args.mode in ("all", "produce"):
            bench_produce(bootstrap, args)
        if args.mode in ("all", "consume"):
            bench_consume(bootstrap, args)
        if args.mode in ("all", "latency"):
            bench_latency(bootstrap, args)
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
