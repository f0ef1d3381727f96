"""Latency at a fixed rate: kafkalite beside librdkafka's mock cluster, produce-ack and end to end.

    python benchmarks/latency.py                       # 1k, 10k and 50k records/s, acks=1 and all, 5 s each
    python benchmarks/latency.py --rates 10000 --seconds 10 --reps 3
    python benchmarks/latency.py --flush-on-ack        # also kafkalite with log.flush.on.ack=true, beside fsync
    python benchmarks/latency.py --raw --raw-e2e       # also the clients without librdkafka (below)
    python benchmarks/latency.py --rates 10000 --raw-e2e --one-record-per-request  # batched and one a request
    python benchmarks/latency.py --rates 1000,10000 --raw-e2e --c-e2e  # that client in Python and in C

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
the written partitions) and measures the disk's own fsync latency in that data directory, one sync at
a time: 4 KiB appended and ``fsync``-ed, and a one-record batch's bytes appended and ``fdatasync``-ed
(what a flush.on.ack round does for one 100-byte record). Nothing is asserted.

``--raw`` adds, for each server, rate and acks, a run of a client without librdkafka: one blocking
socket that sends a one-record Produce v9 and reads its answer before the next, paced at the rate
(a request due while one is in flight goes as soon as the answer is read). Its ack latency is the
round trip from the request's send to its answer's last byte, so it shows the server's own figure
without the producer's thread hand-offs (librdkafka's own floor at linger.ms 0 is about 1 ms here,
against the mock too); its rows have no end-to-end figure.

``--raw-e2e`` adds, for each server, rate and acks, a run of an end-to-end client without librdkafka
(``benchmarks/rawclients.py``), in one thread of one process (so both ends read one clock,
``perf_counter_ns``): a producer on one socket sends Produce v9 requests at the rate without waiting
for their answers, at most ``--max-in-flight`` (5, Kafka's default) unanswered at a time, and a
consumer on a second socket long-polls with Fetch v12 (no fetch session; ``max_wait_ms`` 500,
``min_bytes`` 1; each Fetch from the offset after the last record it got) the moment the previous
answer is in. One ``select`` waits for either socket's answers and the next send time. The producer
batches as Kafka's producers do at ``linger.ms`` 0: whenever a place in the window is free, every
record due by then and not sent yet goes in one request, one record batch of up to
``--max-batch-records`` (by default as many as fit in 16 KiB, the default ``batch.size``: 148), so
the records that come due while the window is full leave together when an answer frees a place.
``--one-record-per-request`` adds a run of the same client sending each record in a request of its
own (the broker's cost per request; the window then holds nearly every record from 10 k/s). Each
request size is encoded once; each send writes its correlation id, the batch's timestamps, each
record's value (its first 16 bytes the request's send time and the time that record was due) and
the batch's CRC-32C in place, and answers of the usual shape are read in place (others by the
codec), so the client costs little CPU beside the server on a small machine; its own CPU per record
is printed (``client µs/rec``, every client's when a raw end-to-end client runs). Ack latency is
from a request's send to its answer's arrival, for each record it carries; end to end from the send
to the arrival of the Fetch answer holding the record. A record is *late* when it leaves more than
1 ms after its time; *held* when it was due while the window was full, so it left when an answer
freed a place. The first table's latencies count from the actual send, so a held record's wait is
not in them; a second table counts ack and end to end from the time each record was due (the value
carries both times), which includes that wait, and gives the records per Produce request (the
mean). The mock answers each Fetch with one batch and answered 400-2,600 Fetches a second on this
VM, so at 10 k records/s its consumer falls behind; a Fetch with nothing to read it answers at
``max_wait_ms``. Its end-to-end column is that backlog or wait, not its speed. With a raw end-to-end
client each run's line also says how many of the machine's cores were busy during the run and how
much CPU the host took from this VM (steal time, from ``/proc/stat``): the other work on a small
shared machine is part of what a latency shows.

``--c-e2e`` adds the same end-to-end client written in C (``benchmarks/rawe2e.c``, C11 and POSIX, libc
only; compiled once a run with ``cc -O2`` into the scratch directory, and left out with one line said
when there is no ``cc``): the same pacing, window, batching, warm-up, record values and figures (its
clock ``CLOCK_MONOTONIC``, its own CPU from ``getrusage``), the same line of JSON, rows labelled
``(C raw e2e)`` in both tables. Why: the Python client takes 0.6-0.8 of a core at 10 k records/s beside
a broker on a 2-core machine, so its own CPU is in the latencies it measures; the C one spends 3-6 us
of user time a record, and the rest of its CPU (about 30 us a record at 10 k/s) is the kernel's work
for its socket calls on the loopback (a ``send`` also runs the receiving side's TCP and wakes the
server), which the Python client pays as well. It waits for the topic with a Metadata v9 request (as
``rawclients.py`` does) and then talks to the first bootstrap server, so it runs against the mock as
against kafkalite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rawclients import SIZE, WARMUP_S, own_cpu_seconds, raw_e2e_main, raw_main  # noqa: E402 (after the path)

ONE_RECORD_BATCH_BYTES = 61 + 8 + SIZE  # batch header, the record's own fields (no key, no headers), value


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
    cpu_before = own_cpu_seconds()
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
    cpu = (own_cpu_seconds() - cpu_before) / total * 1e6
    stop.set()
    reader.join(5)
    consumer.close()
    print(json.dumps({"acked": acked, "ends": ends, "failures": failures[0], "cpu": cpu}), flush=True)


def fsync_latency(directory: Path, count: int = 300, size: int = 4096,
                  sync: Callable[[int], None] = os.fsync) -> list[float]:
    """The disk's own: ``size`` bytes appended and synced, ``count`` times, in milliseconds."""
    path = directory / "fsync-probe"
    block = os.urandom(size)
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, block)
            sync(fd)
            times.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return times


_LATENCY_HEAD = f" {'ack p50':>8s} {'p99':>7s} {'p99.9':>7s} {'e2e p50':>8s} {'p99':>7s} {'p99.9':>7s}"


def _latency_columns(acked: list[float], ends: list[float]) -> str:
    """The p50, p99 and p99.9 of the acknowledgements and of end to end, under ``_LATENCY_HEAD``."""
    return (f" {percentile(acked, 0.5):8.2f} {percentile(acked, 0.99):7.2f} {percentile(acked, 0.999):7.2f}"
            f" {percentile(ends, 0.5):8.2f} {percentile(ends, 0.99):7.2f} {percentile(ends, 0.999):7.2f}")


def _per_request(figures: dict[str, list[float]]) -> float:
    """Records a Produce request, the mean over a raw end-to-end client's runs."""
    return sum(figures["sent"]) / max(1, sum(figures["requests"]))


def compile_c_client(scratch: Path) -> Path | None:
    """``benchmarks/rawe2e.c`` compiled with ``cc -O2`` into ``scratch``; None (and one line said) without a
    compiler or when it does not compile."""
    compiler = shutil.which("cc")
    if compiler is None:
        print("no C compiler (cc) on PATH: the C raw end-to-end client is left out", flush=True)
        return None
    binary = scratch / "rawe2e"
    done = subprocess.run([compiler, "-O2", "-o", str(binary), str(REPO / "benchmarks" / "rawe2e.c")],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        print(f"benchmarks/rawe2e.c did not compile, the C raw end-to-end client is left out:"
              f" {done.stderr.strip()[-300:]}", flush=True)
        return None
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    for name, what in [("client", "one run"), ("raw", "one --raw run"), ("rawe2e", "one --raw-e2e run")]:
        one_run = sub.add_parser(name, help=f"{what} (used by the benchmark)")
        one_run.add_argument("--bootstrap", required=True)
        one_run.add_argument("--topic", required=True)
        one_run.add_argument("--rate", type=int, required=True)
        one_run.add_argument("--acks", default="1")
        one_run.add_argument("--seconds", type=float, default=5.0)
        if name == "rawe2e":
            one_run.add_argument("--max-in-flight", type=int, default=5)
            one_run.add_argument("--max-batch-records", type=int, default=None)
            one_run.add_argument("--one-record-per-request", action="store_true")
    parser.add_argument("--rates", default="1000,10000,50000")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run (after 1 s warm-up)")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--flush-on-ack", action="store_true",
                        help="also kafkalite with log.flush.on.ack=true (acks=all), beside the disk's fsync")
    parser.add_argument("--raw", action="store_true",
                        help="also a client without librdkafka: one-record Produce v9, one in flight (ack only)")
    parser.add_argument("--raw-e2e", action="store_true",
                        help="also a client without librdkafka, end to end: pipelined Produce v9 requests, each"
                             " with the records due and not sent yet, and a long-polling Fetch v12 consumer")
    parser.add_argument("--c-e2e", action="store_true",
                        help="also the same end-to-end client written in C (benchmarks/rawe2e.c, compiled with cc"
                             " -O2 for the run): the client's own CPU out of the server's way")
    parser.add_argument("--one-record-per-request", action="store_true",
                        help="also that client sending each record in a Produce request of its own")
    parser.add_argument("--max-in-flight", type=int, default=5,
                        help="--raw-e2e: Produce requests in flight at most (Kafka's default 5)")
    parser.add_argument("--max-batch-records", type=int, default=None,
                        help="--raw-e2e: records per Produce request at most (default: as many as fit in"
                             " 16 KiB, a Kafka producer's default batch.size)")
    a = parser.parse_args()
    if a.command == "client":
        client_main(a)
        return
    if a.command == "raw":
        raw_main(a)
        return
    if a.command == "rawe2e":
        raw_e2e_main(a)
        return

    from compare import Mock, cpu_seconds, machine_cpu

    from kafkalite.testing.process import BrokerProcess

    rates = [int(r) for r in a.rates.split(",")]
    acks_list = a.acks.split(",")
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-latency-"))
    brokers = {"kafkalite": BrokerProcess(scratch / "data", admin=False).start()}
    if a.flush_on_ack:
        brokers["kafkalite flush.on.ack"] = BrokerProcess(scratch / "flush", {"log.flush.on.ack": "true"},
                                                          admin=False).start()
    runs = [(rate, acks) for rate in rates for acks in acks_list]
    c_client = compile_c_client(scratch) if a.c_e2e else None
    raw_e2e_clients = [*(["rawe2e"] if a.raw_e2e else []), *(["rawe2e-c"] if c_client else []),
                       *(["rawe2e1"] if a.one_record_per_request else [])]
    clients = ["client", *(["raw"] if a.raw else []), *raw_e2e_clients]
    labels = {"client": "", "raw": " (raw)", "rawe2e": " (raw e2e)", "rawe2e-c": " (C raw e2e)",
              "rawe2e1": " (raw e2e, 1 a request)"}
    width = max(32, *(len(name + labels[client]) for name in ["mock", *brokers] for client in clients))
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
                    machine_before = machine_cpu()
                    command, extra = client, []
                    if client in raw_e2e_clients:
                        command, extra = "rawe2e", ["--max-in-flight", str(a.max_in_flight)]
                        if client == "rawe2e1":
                            extra.append("--one-record-per-request")
                        elif a.max_batch_records:
                            extra += ["--max-batch-records", str(a.max_batch_records)]
                    program = [str(c_client)] if client == "rawe2e-c" else [sys.executable, __file__, command]
                    done = subprocess.run([*program, "--bootstrap", bootstrap,
                                           "--topic", topic, "--rate", str(rate), "--acks", acks,
                                           "--seconds", str(a.seconds), *extra],
                                          capture_output=True, text=True, timeout=3 * (a.seconds + WARMUP_S) + 120)
                    cpu_after = cpu_seconds(pids[name])
                    machine = [after - before for after, before in zip(machine_cpu(), machine_before, strict=True)]
                    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
                    if not lines:
                        print(f"  {name} {rate}/s acks={acks}: no result: {done.stderr[-300:]}", flush=True)
                        continue
                    result = json.loads(lines[-1])
                    into = results.setdefault((name, rate, acks, client), {
                        "acked": [], "ends": [], "cpu": [], "client_cpu": [], "late": [], "acked_from_due": [],
                        "ends_from_due": [], "held": [], "requests": [], "sent": []})
                    into["acked"] += result["acked"]
                    into["ends"] += result["ends"]
                    into["client_cpu"].append(result.get("cpu", float("nan")))
                    into["late"].append(result.get("late", 0))
                    into["acked_from_due"] += result.get("acked_from_due", [])
                    into["ends_from_due"] += result.get("ends_from_due", [])
                    into["held"].append(result.get("held", 0))
                    into["requests"].append(result.get("requests", 0))
                    into["sent"].append(result.get("sent", 0))
                    sent = rate * (a.seconds + WARMUP_S)
                    if cpu_before is not None and cpu_after is not None:
                        into["cpu"].append((cpu_after - cpu_before) / sent * 1e6)
                    label = name + labels[client]
                    counted = len(result["ends"] or result["acked"])
                    client_figures = ""
                    if client in raw_e2e_clients:
                        from_due = percentile(result["ends_from_due"], 0.99)
                        per_request = result["sent"] / max(1, result["requests"])
                        client_figures = (f"; client CPU {result['cpu']:.0f} µs/record, {result['late']} sent late,"
                                          f" {result['held']} held by the window, {per_request:.2f} records a"
                                          f" Produce request (at most {result['max_records']}),"
                                          f" {result['fetches']} Fetch answers;"
                                          f" end-to-end p99 from the due time {from_due:.2f} ms")
                    if raw_e2e_clients:
                        client_figures += (f"; the machine's cores busy {machine[0] / machine[2]:.2f},"
                                           f" stolen by the host {machine[1] / machine[2]:.2f}")
                    print(f"  rep{rep + 1} {label:{width}s} {rate:>6}/s acks={acks:3s} ack p50"
                          f" {percentile(result['acked'], 0.5):6.2f} ms  end-to-end p50"
                          f" {percentile(result['ends'], 0.5):6.2f} ms  ({counted} records,"
                          f" {result['failures']} failed; server CPU"
                          f" {into['cpu'][-1] if into['cpu'] else float('nan'):.0f} µs/record{client_figures})",
                          flush=True)
        print(f"\nlatency in ms, {SIZE}-byte records, linger.ms 0, over {a.reps} rep(s) of {a.seconds:g} s;"
              " ack = produce() to acknowledgement, e2e = produce() to the consumer")
        more = f" {'client µs/rec':>13s} {'late':>6s} {'rec/req':>7s}" if raw_e2e_clients else ""
        print(f"{'server':{width}s} {'rate/s':>7s} {'acks':>4s}{_LATENCY_HEAD} {'records':>8s}"
              f" {'CPU µs/rec':>10s}{more}")
        for (rate, acks), client in ((run, client) for run in runs for client in clients):
            for name, _ in servers:
                figures = results.get((name, rate, acks, client))
                if not figures:
                    continue
                acked, ends = figures["acked"], figures["ends"]
                cpu = statistics.median(figures["cpu"]) if figures["cpu"] else float("nan")
                label = name + labels[client]
                if raw_e2e_clients:
                    late = str(sum(figures["late"])) if client in raw_e2e_clients else "-"
                    per_request = f"{_per_request(figures):.2f}" if client in raw_e2e_clients else "-"
                    more = f" {statistics.median(figures['client_cpu']):>13.0f} {late:>6s} {per_request:>7s}"
                print(f"{label:{width}s} {rate:>7} {acks:>4s}{_latency_columns(acked, ends)}"
                      f" {len(ends or acked):>8} {cpu:>10.0f}{more}")
        if raw_e2e_clients:
            print("\nthe raw end-to-end clients, counted from the time each record was due (a record held by a"
                  " full window waited for a place)")
            print(f"{'server':{width}s} {'rate/s':>7s} {'acks':>4s}{_LATENCY_HEAD} {'records':>8s} {'held':>8s}"
                  f" {'rec/req':>7s}")
            for (rate, acks), client in ((run, client) for run in runs for client in raw_e2e_clients):
                for name, _ in servers:
                    figures = results.get((name, rate, acks, client))
                    if not figures:
                        continue
                    acked, ends = figures["acked_from_due"], figures["ends_from_due"]
                    per_request = _per_request(figures)
                    print(f"{name + labels[client]:{width}s} {rate:>7} {acks:>4s}{_latency_columns(acked, ends)}"
                          f" {len(ends):>8} {sum(figures['held']):>8.0f} {per_request:>7.2f}")
        if a.flush_on_ack:
            print()
            for what, size, sync in [("4 KiB appended, then fsync", 4096, os.fsync),
                                     ("a one-record batch appended, then fdatasync", ONE_RECORD_BATCH_BYTES,
                                      os.fdatasync)]:
                times = fsync_latency(scratch, size=size, sync=sync)
                print(f"the disk's own fsync ({what}) in the data directory: p50"
                      f" {statistics.median(times):.2f} ms, p99 {percentile(times, 0.99):.2f} ms,"
                      f" p99.9 {percentile(times, 0.999):.2f} ms ({len(times)} syncs)")
    finally:
        mock.stop()
        for broker in brokers.values():
            broker.stop()
            broker.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
