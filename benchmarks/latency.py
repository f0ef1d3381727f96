"""Latency at a fixed rate: kafkalite beside librdkafka's mock cluster, produce-ack and end to end.

    python benchmarks/latency.py                       # 1k, 10k and 50k records/s, acks=1 and all, 5 s each
    python benchmarks/latency.py --rates 10000 --seconds 10 --reps 3
    python benchmarks/latency.py --flush-on-ack        # also kafkalite with log.flush.on.ack=true, beside fsync

A confluent-kafka producer (``linger.ms`` 0, acks=1 or all) sends 100-byte records at a fixed rate
(paced every millisecond) into a fresh one-partition topic, while a confluent-kafka consumer in a
thread of the same process long-polls it (``fetch.wait.max.ms`` 500, ``fetch.min.bytes`` 1: the
broker answers as soon as a record arrives). Each record carries its send time. Produce-ack latency
is librdkafka's own figure for each delivery report (``Message.latency()``: from ``produce()`` to
the acknowledgement); end to end is from ``produce()`` to the consumer handing out the record. The
first second is warm-up and not counted. Beside the percentiles: the server process's CPU time (user
and system, from ``/proc``) over the whole client run, per record sent (warm-up included). The mock
is the one ``benchmarks/compare.py`` starts (librdkafka's mock cluster from confluent-kafka's
wheel); kafkalite is started from this checkout on 127.0.0.1 with a scratch data directory. Each
(server, rate, acks) runs in its own client process; reps interleave the servers. Percentiles are
over every record of every rep.

``--flush-on-ack`` adds a kafkalite with ``log.flush.on.ack=true`` (acks=all waits for the fsync of
the written partitions) and measures the disk's own fsync latency in that data directory: 4 KiB
appended and ``fsync``-ed, one at a time. Nothing is asserted.

``--raw`` adds, for each server, rate and acks, a run of a client without librdkafka: one blocking
socket that sends a one-record Produce v9 and reads its answer before the next, paced at the rate
(a request due while one is in flight goes as soon as the answer is read). Its ack latency is the
round trip from the request's send to its answer's last byte, so it shows the server's own figure
without the producer's thread hand-offs (librdkafka's own floor at linger.ms 0 is about 1 ms here,
against the mock too); its rows have no end-to-end figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WARMUP_S = 1.0
SIZE = 100


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def client_main(a: argparse.Namespace) -> None:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    acked: list[float] = []
    ends: list[float] = []
    failures = [0]
    measuring_from = [0.0]
    stop = threading.Event()
    ready = threading.Event()

    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 500, "fetch.min.bytes": 1, "enable.partition.eof": False})
    consumer.assign([TopicPartition(a.topic, 0, OFFSET_END)])

    def consume() -> None:
        poll = consumer.poll
        while not stop.is_set():
            message = poll(0.1)  # returns with the first record there is
            if message is not None and message.error() is None:
                now = time.perf_counter_ns()
                ready.set()
                sent = int((message.value() or b"0")[:20])
                if sent >= measuring_from[0]:
                    ends.append((now - sent) / 1e6)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures[0] += 1
            return
        if int(message.value()[:20]) >= measuring_from[0]:
            acked.append(message.latency() * 1000)

    producer = Producer({"bootstrap.servers": a.bootstrap, "acks": a.acks, "linger.ms": 0,
                         "enable.idempotence": False, "on_delivery": delivered})
    producer.list_topics(a.topic, timeout=20)
    padding = b"x" * (SIZE - 20)
    # until the consumer has its position: a record every 10 ms
    deadline = time.monotonic() + 20
    while not ready.is_set() and time.monotonic() < deadline:
        producer.produce(a.topic, b"%020d" % time.perf_counter_ns() + padding)
        producer.poll(0.01)
    start = time.perf_counter_ns()
    measuring_from[0] = start + int(WARMUP_S * 1e9)
    total = int(a.rate * (a.seconds + WARMUP_S))
    sent = 0
    produce, poll = producer.produce, producer.poll
    while sent < total:
        due = min(total, int((time.perf_counter_ns() - start) * a.rate / 1e9) + 1)
        while sent < due:
            try:
                produce(a.topic, b"%020d" % time.perf_counter_ns() + padding)
            except BufferError:  # the producer's queue is full: the server is behind
                poll(0.001)
                continue
            sent += 1
        poll(0)
        next_at = start + sent * 1e9 / a.rate
        pause = (next_at - time.perf_counter_ns()) / 1e9
        if pause > 0:
            time.sleep(min(pause, 0.001))
    producer.flush(30)
    expected = len(acked)
    deadline = time.monotonic() + 10
    while len(ends) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    reader.join(5)
    consumer.close()
    print(json.dumps({"acked": acked, "ends": ends, "failures": failures[0]}), flush=True)


def raw_main(a: argparse.Namespace) -> None:
    """One ``--raw`` run: one-record Produce requests over one blocking socket, one in flight."""
    import socket
    import struct

    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.framing import encode_request, parse_response_header
    from kafkalite.protocol.messages import MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse
    from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic
    from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
    from kafkalite.protocol.records import RecordBatchBuilder

    host, _, port = a.bootstrap.split(",")[0].rpartition(":")
    connection = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    correlation_ids = iter(range(1, 1 << 31))

    def read_exactly(size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = connection.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return bytes(data)

    def round_trip(frame: bytes) -> bytes:
        connection.sendall(frame)
        return read_exactly(struct.unpack(">i", read_exactly(4))[0])

    deadline = time.monotonic() + 20  # the topic exists, or is created by the Metadata request
    while True:
        body = parse_response_header(round_trip(encode_request(
            MetadataRequest(topics=[MetadataRequestTopic(name=a.topic)], allow_auto_topic_creation=True),
            9, next(correlation_ids), "latency-raw")), MetadataRequest.API_KEY, 9)
        topics = MetadataResponse.decode_from(body, 9).topics
        if topics and topics[0].error_code == ErrorCode.NONE and topics[0].partitions:
            break
        if time.monotonic() > deadline:
            sys.exit(f"topic {a.topic} has no leader")
        time.sleep(0.05)
    acks = -1 if a.acks == "all" else int(a.acks)
    padding = b"x" * (SIZE - 20)
    acked: list[float] = []
    failures = 0
    total = int(a.rate * (a.seconds + WARMUP_S))
    start = time.perf_counter_ns()
    measuring_from = start + int(WARMUP_S * 1e9)
    for sent in range(total):
        pause = (start + sent * 1e9 / a.rate - time.perf_counter_ns()) / 1e9
        if pause > 0:
            time.sleep(pause)
        builder = RecordBatchBuilder()
        builder.append(timestamp=time.time_ns() // 1_000_000, key=None, value=b"%020d" % sent + padding)
        request = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=a.topic, partition_data=[PartitionProduceData(index=0, records=builder.build())])])
        frame = encode_request(request, 9, next(correlation_ids), "latency-raw")
        began = time.perf_counter_ns()
        answer = round_trip(frame)
        ended = time.perf_counter_ns()
        response = ProduceResponse.decode_from(parse_response_header(answer, ProduceRequest.API_KEY, 9), 9)
        if response.responses[0].partition_responses[0].error_code != ErrorCode.NONE:
            failures += 1
        elif began >= measuring_from:
            acked.append((ended - began) / 1e6)
    connection.close()
    print(json.dumps({"acked": acked, "ends": [], "failures": failures}), flush=True)


def fsync_latency(directory: Path, count: int = 300) -> list[float]:
    """The disk's own: 4 KiB appended and fsynced, ``count`` times, in milliseconds."""
    path = directory / "fsync-probe"
    block = os.urandom(4096)
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    client = sub.add_parser("client", help="one run (used by the benchmark)")
    client.add_argument("--bootstrap", required=True)
    client.add_argument("--topic", required=True)
    client.add_argument("--rate", type=int, required=True)
    client.add_argument("--acks", default="1")
    client.add_argument("--seconds", type=float, default=5.0)
    raw = sub.add_parser("raw", help="one --raw run (used by the benchmark)")
    for option in ("--bootstrap", "--topic"):
        raw.add_argument(option, required=True)
    raw.add_argument("--rate", type=int, required=True)
    raw.add_argument("--acks", default="1")
    raw.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="1000,10000,50000")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run (after 1 s warm-up)")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--flush-on-ack", action="store_true",
                        help="also kafkalite with log.flush.on.ack=true (acks=all), beside the disk's fsync")
    parser.add_argument("--raw", action="store_true",
                        help="also a client without librdkafka: one-record Produce v9, one in flight (ack only)")
    a = parser.parse_args()
    if a.command == "client":
        client_main(a)
        return
    if a.command == "raw":
        raw_main(a)
        return

    from compare import Mock, cpu_seconds

    from kafkalite.testing.process import BrokerProcess

    rates = [int(r) for r in a.rates.split(",")]
    acks_list = a.acks.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-latency-"))
    brokers = {"kafkalite": BrokerProcess(scratch / "data", admin=False).start()}
    if a.flush_on_ack:
        brokers["kafkalite flush.on.ack"] = BrokerProcess(scratch / "flush", {"log.flush.on.ack": "true"},
                                                          admin=False).start()
    runs = [(rate, acks) for rate in rates for acks in acks_list]
    clients = ["client", "raw"] if a.raw else ["client"]
    topics = {f"lat-{rep}-{rate}-{acks}-{client}": 1
              for rep in range(a.reps) for rate, acks in runs for client in clients}
    mock = Mock(topics)
    results: dict[tuple[str, int, str, str], dict[str, list[float]]] = {}
    pids = {"mock": mock.pid, **{name: broker.pid for name, broker in brokers.items()}}
    try:
        servers = [("mock", mock.bootstrap)] + [(name, b.bootstrap_servers) for name, b in brokers.items()]
        for rep in range(a.reps):
            for (rate, acks), client in ((run, client) for run in runs for client in clients):
                order = servers if rep % 2 == 0 else servers[::-1]
                for name, bootstrap in order:
                    if name.endswith("flush.on.ack") and acks != "all":
                        continue
                    topic = f"lat-{rep}-{rate}-{acks}-{client}"
                    cpu_before = cpu_seconds(pids[name])
                    done = subprocess.run([sys.executable, __file__, client, "--bootstrap", bootstrap,
                                           "--topic", topic, "--rate", str(rate), "--acks", acks,
                                           "--seconds", str(a.seconds)],
                                          capture_output=True, text=True, timeout=a.seconds + 120)
                    cpu_after = cpu_seconds(pids[name])
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    if not lines:
                        print(f"  {name} {rate}/s acks={acks}: no result: {done.stderr[-300:]}", flush=True)
                        continue
                    result = json.loads(lines[-1])
                    into = results.setdefault((name, rate, acks, client), {"acked": [], "ends": [], "cpu": []})
                    into["acked"] += result["acked"]
                    into["ends"] += result["ends"]
                    sent = rate * (a.seconds + WARMUP_S)
                    if cpu_before is not None and cpu_after is not None:
                        into["cpu"].append((cpu_after - cpu_before) / sent * 1e6)
                    label = name if client == "client" else f"{name} (raw)"
                    counted = len(result["ends"] or result["acked"])
                    print(f"  rep{rep + 1} {label:30s} {rate:>6}/s acks={acks:3s} ack p50"
                          f" {percentile(result['acked'], 0.5):6.2f} ms  end-to-end p50"
                          f" {percentile(result['ends'], 0.5):6.2f} ms  ({counted} records,"
                          f" {result['failures']} failed; server CPU"
                          f" {into['cpu'][-1] if into['cpu'] else float('nan'):.0f} µs/record)", flush=True)
        print(f"\nlatency in ms, {SIZE}-byte records, linger.ms 0, over {a.reps} rep(s) of {a.seconds:g} s;"
              " ack = produce() to acknowledgement, e2e = produce() to the consumer")
        print(f"{'server':30s} {'rate/s':>7s} {'acks':>4s} {'ack p50':>8s} {'p99':>7s} {'p99.9':>7s}"
              f" {'e2e p50':>8s} {'p99':>7s} {'p99.9':>7s} {'records':>8s} {'CPU µs/rec':>10s}")
        for (rate, acks), client in ((run, client) for run in runs for client in clients):
            for name, _ in servers:
                figures = results.get((name, rate, acks, client))
                if not figures:
                    continue
                acked, ends = figures["acked"], figures["ends"]
                cpu = statistics.median(figures["cpu"]) if figures["cpu"] else float("nan")
                label = name if client == "client" else f"{name} (raw)"
                print(f"{label:30s} {rate:>7} {acks:>4s} {percentile(acked, 0.5):8.2f} {percentile(acked, 0.99):7.2f}"
                      f" {percentile(acked, 0.999):7.2f} {percentile(ends, 0.5):8.2f} {percentile(ends, 0.99):7.2f}"
                      f" {percentile(ends, 0.999):7.2f} {len(ends or acked):>8} {cpu:>10.0f}")
        if a.flush_on_ack:
            times = fsync_latency(scratch)
            print(f"\nthe disk's own fsync (4 KiB appended, then fsync) in the data directory: p50"
                  f" {statistics.median(times):.2f} ms, p99 {percentile(times, 0.99):.2f} ms,"
                  f" p99.9 {percentile(times, 0.999):.2f} ms ({len(times)} fsyncs)")
    finally:
        mock.stop()
        for broker in brokers.values():
            broker.stop()
            broker.close()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
