"""Load: many connections, many partitions, and a soak at steady load. Loopback only, bounded, stops by itself.

    python benchmarks/load.py connections [--idle 1000] [--busy 100] [--rate 20] [--seconds 20]
    python benchmarks/load.py partitions [--topics 1000] [--partitions 10] [--nofile 256]
    python benchmarks/load.py soak [--minutes 10] [--producers 20] [--rate 50] [--consumers 2]
    python benchmarks/load.py all        # the three, one after the other (soak: --minutes)

Each part starts ``kafkalite serve`` on a data directory in a subprocess (``BrokerProcess``) and reads
its resident memory (VmRSS), CPU time and open descriptors from /proc (Linux).

``connections``: ``--busy`` connections each send ``--rate`` Produce requests a second (acks=1, one
batch of ten 100-byte records, to one of ten partitions) for ``--seconds``, once alone and once while
``--idle`` other connections that did what a client does first (ApiVersions) sit idle. Prints the
broker's RSS before and with the idle connections, and each phase's produce round trips (p50, p99,
max, as seen by the client), throughput, errors and broker CPU.

``partitions``: ``benchmarks/partitions.py``'s run: ``--topics`` x ``--partitions`` partitions created
under a hard and soft open-file limit of ``--nofile``, listed by one Metadata request, one record each
with acks=all, the broker restarted on the same data, listed and read back. Prints each step's time,
descriptors and RSS, then the restart's start time.

``soak``: for ``--minutes``, ``--producers`` connections each send ``--rate`` Produce requests a
second (as above) to a topic of ten partitions whose segments roll at 4 MiB and whose retention keeps
16 MiB a partition (so rolls and retention run throughout), ``--consumers`` connections long-poll
Fetch from where they left off, and one new connection a second asks for ApiVersions and Metadata and
closes. Each second it samples the broker's RSS, open descriptors and CPU, its event loop's worst lag
so far (from the admin endpoint's /metrics: a stall of the broker's loop shows there, a stall of the
machine or of this client does not), and the produce round trips completed in that second; each
minute it prints a summary line (requests, p50/p99/max, RSS range, descriptors, CPU, consumer lag,
loop lag). At the end it says whether RSS stayed flat (the last minute's median
within ``FLAT_MIB`` MiB of the first minute's after warm-up) and how much the per-minute p99 varied.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import struct
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol.errors import ErrorCode  # noqa: E402
from kafkalite.protocol.framing import encode_request, parse_response_header  # noqa: E402
from kafkalite.protocol.messages import (  # noqa: E402
    ApiVersionsRequest,
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig  # noqa: E402
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402

PARTITIONS = 10
RECORDS_PER_BATCH = 10
VALUE = b"v" * 100
PRODUCE_VERSION = 9
FETCH_VERSION = 12
FLAT_MIB = 5.0  # the soak calls RSS flat when the last minute's median is within this of the first one's
WARM_UP_S = 60  # the soak's first minute: caches and buffers fill, the first segments roll
CLIENT_ID = "load"


# --- one connection, raw frames --------------------------------------------------------------------------

class Connection:
    """One connection; one request in flight, answers read in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, address: tuple[str, int]) -> Connection:
        return cls(*await asyncio.open_connection(*address))

    async def call(self, request: object, version: int) -> bytes:
        self.correlation_id += 1
        self.writer.write(encode_request(request, version, self.correlation_id, CLIENT_ID))  # type: ignore[arg-type]
        return await self.receive()

    async def call_frame(self, frame: bytearray) -> bytes:
        """Send a pre-encoded request frame with this connection's next correlation id."""
        self.correlation_id += 1
        struct.pack_into(">i", frame, 8, self.correlation_id)  # size, api key, api version, correlation id
        self.writer.write(frame)
        return await self.receive()

    async def receive(self) -> bytes:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    def close(self) -> None:
        self.writer.close()


def produce_frame(topic: str, partition: int) -> bytearray:
    """A Produce request (acks=1) of one batch of ten records; the batch is built once per connection."""
    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for index in range(RECORDS_PER_BATCH):
        builder.append(timestamp=now, key=b"key-%d" % index, value=VALUE)
    request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=builder.build())])])
    return bytearray(encode_request(request, PRODUCE_VERSION, 0, CLIENT_ID))


def produce_error(frame: bytes) -> int:
    response = ProduceResponse.decode_from(parse_response_header(frame, 0, PRODUCE_VERSION), PRODUCE_VERSION)
    return int(response.responses[0].partition_responses[0].error_code)  # type: ignore[attr-defined]


async def create_topic(address: tuple[str, int], name: str, configs: dict[str, str]) -> None:
    connection = await Connection.open(address)
    frame = await connection.call(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=PARTITIONS, replication_factor=1,
        configs=[CreatableTopicConfig(key, value) for key, value in configs.items()])], timeout_ms=30_000), 5)
    connection.close()
    response = CreateTopicsResponse.decode_from(parse_response_header(frame, 19, 5), 5)
    error = response.topics[0].error_code  # type: ignore[attr-defined]
    if error != ErrorCode.NONE:
        raise RuntimeError(f"creating {name} failed: {ErrorCode(error).name}")


# --- what the clients measure ------------------------------------------------------------------------------

@dataclass
class Tally:
    """Produce round trips (ms) since the last ``take``, and totals."""

    latencies: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0

    def take(self) -> list[float]:
        taken, self.latencies = self.latencies, []
        return taken


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    if not ordered:
        return "no requests"
    return (f"p50 {statistics.median(ordered):6.2f} ms  p99 {percentile(ordered, 0.99):6.2f} ms  "
            f"max {ordered[-1]:7.2f} ms")


async def producer(address: tuple[str, int], topic: str, partition: int, rate: float, until: float,
                   tally: Tally, phase: float = 0.0) -> None:
    """``rate`` Produce requests a second on one connection until ``until`` (monotonic), one in flight;
    the first ``phase`` (0-1) of an interval from now, so that many connections do not send at once."""
    connection = await Connection.open(address)
    frame = produce_frame(topic, partition)
    interval = 1.0 / rate
    next_send = time.monotonic() + interval * phase
    try:
        while next_send < until:
            delay = next_send - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            began = time.perf_counter()
            answer = await connection.call_frame(frame)
            tally.latencies.append((time.perf_counter() - began) * 1000)
            tally.requests += 1
            if produce_error(answer) != ErrorCode.NONE:
                tally.errors += 1
            next_send = max(next_send + interval, time.monotonic() - interval)  # no burst to catch up
    finally:
        connection.close()


async def consumer(address: tuple[str, int], topic: str, partitions: list[int], until: float,
                   lag: dict[int, int]) -> int:
    """Long-poll Fetch from offset 0 of ``partitions`` until ``until``; the records read. ``lag``: per
    partition, high watermark minus position after the last answer."""
    connection = await Connection.open(address)
    positions = dict.fromkeys(partitions, 0)
    read = 0
    try:
        while time.monotonic() < until:
            request = FetchRequest(max_wait_ms=200, min_bytes=1, max_bytes=16 << 20, topics=[FetchTopic(
                topic=topic, partitions=[FetchPartition(partition=index, fetch_offset=position,
                                                        partition_max_bytes=4 << 20)
                                         for index, position in positions.items()])])
            frame = await connection.call(request, FETCH_VERSION)
            response = FetchResponse.decode_from(parse_response_header(frame, 1, FETCH_VERSION), FETCH_VERSION)
            for answer in response.responses[0].partitions:  # type: ignore[attr-defined]
                index = answer.partition_index
                if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # retention went past us
                    positions[index] = answer.log_start_offset
                    continue
                for batch in iter_batches(answer.records or b""):
                    if isinstance(batch, RecordBatch) and batch.last_offset >= positions[index]:
                        read += batch.last_offset + 1 - max(batch.base_offset, positions[index])
                        positions[index] = batch.last_offset + 1
                lag[index] = max(0, answer.high_watermark - positions[index])
    finally:
        connection.close()
    return read


async def churn(address: tuple[str, int], until: float) -> int:
    """One new connection a second: ApiVersions, Metadata (all topics), close. How many were made."""
    made = 0
    while time.monotonic() < until:
        began = time.monotonic()
        connection = await Connection.open(address)
        await connection.call(ApiVersionsRequest(), 0)
        await connection.call(MetadataRequest(topics=None), 12)
        connection.close()
        made += 1
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
    return made


async def hold_idle(address: tuple[str, int], count: int) -> list[Connection]:
    """``count`` connections that sent ApiVersions and then say nothing (opened 100 at a time)."""
    async def one() -> Connection:
        connection = await Connection.open(address)
        await connection.call(ApiVersionsRequest(), 0)
        return connection

    held: list[Connection] = []
    for start in range(0, count, 100):
        held += await asyncio.gather(*(one() for _ in range(min(100, count - start))))
    return held


def machine_load() -> str:
    """The machine's 1-minute load average and core count: latencies mean little on a busy machine."""
    return f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"


def raise_open_file_limit() -> None:
    """This process holds a socket per connection: as many as the hard limit allows."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_loop(main: Callable[[], Awaitable[None]]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(main())  # type: ignore[arg-type]
        return
    uvloop.run(main())  # type: ignore[arg-type]


# --- connections: 1,000 idle + 100 busy ---------------------------------------------------------------------

async def busy_phase(broker: BrokerProcess, busy: int, rate: float, seconds: float) -> str:
    tally = Tally()
    rss_peak = broker.rss_mib()
    cpu_before = broker.cpu_seconds()
    until = time.monotonic() + seconds
    workers = asyncio.gather(*(producer(broker.address, "load", index % PARTITIONS, rate, until, tally, index / busy)
                               for index in range(busy)))
    all_latencies: list[float] = []
    while not workers.done():
        await asyncio.wait([workers], timeout=1.0)
        all_latencies += tally.take()
        rss_peak = max(rss_peak, broker.rss_mib())
    await workers
    cpu = (broker.cpu_seconds() - cpu_before) / seconds * 100
    return (f"{summary(all_latencies)}  {tally.requests / seconds:6.0f} requests/s  {tally.errors} errors  "
            f"broker CPU {cpu:4.0f} %  RSS peak {rss_peak:.0f} MiB  {machine_load()}")


def connections(idle: int, busy: int, rate: float, seconds: float, scratch: Path) -> None:
    raise_open_file_limit()
    with BrokerProcess(scratch / "data") as broker:
        async def main() -> None:
            await create_topic(broker.address, "load", {})
            await asyncio.sleep(1)  # the broker has loaded what Produce needs
            print(f"broker RSS at start: {broker.rss_mib():.1f} MiB, {broker.descriptors()} descriptors")
            line = await busy_phase(broker, busy, rate, seconds)
            print(f"{busy} busy connections x {rate:g} Produce/s, alone:       {line}")
            before = broker.rss_mib()
            held = await hold_idle(broker.address, idle)
            await asyncio.sleep(1)
            with_idle = broker.rss_mib()
            print(f"{idle} idle connections held: broker RSS {before:.1f} -> {with_idle:.1f} MiB "
                  f"({(with_idle - before) * 1024 / idle:.1f} KiB each), {broker.descriptors()} descriptors")
            line = await busy_phase(broker, busy, rate, seconds)
            print(f"{busy} busy connections x {rate:g} Produce/s, {idle} idle: {line}")
            print(f"broker RSS at the end: {broker.rss_mib():.1f} MiB")
            for connection in held:
                connection.close()

        run_loop(main)
        tracebacks = broker.log_text().count("Traceback")
        print(f"tracebacks in the broker's log: {tracebacks}")


# --- partitions: 10,000 created, listed, restarted ------------------------------------------------------------

def partitions(topics: int, partitions_per_topic: int, nofile: int, scratch: Path) -> None:
    import benchmarks.partitions as scenario

    broker = scenario.run(topics=topics, partitions=partitions_per_topic, nofile=nofile, scratch=scratch)
    print(f"restart with {topics * partitions_per_topic} partitions: listening after {broker.started_in_s:.2f} s "
          "(python start-up included)")


# --- soak ---------------------------------------------------------------------------------------------------

@dataclass
class Second:
    """One second of the soak, as sampled at its end."""

    rss_mib: float
    descriptors: int
    cpu_percent: float
    latencies: list[float]
    loop_lag_max_ms: float | None = None  # the broker's own measure: its event loop's worst lateness so far
    load_average: float = field(default_factory=lambda: os.getloadavg()[0])


def loop_lag_max_ms(admin_url: str | None) -> float | None:
    """The broker's worst event-loop lag since it started (its admin endpoint's /metrics), in ms."""
    if admin_url is None:
        return None
    try:
        with urllib.request.urlopen(f"{admin_url}/metrics", timeout=2) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("kafkalite_event_loop_lag_max_seconds "):
            return float(line.split()[1]) * 1000
    return None


def minute_line(minute: int, seconds: list[Second], lag: int) -> str:
    latencies = [value for second in seconds for value in second.latencies]
    rss = [second.rss_mib for second in seconds]
    p99s = [percentile(sorted(second.latencies), 0.99) for second in seconds if second.latencies]
    return (f"minute {minute:3d}: {len(latencies) / len(seconds):6.0f} Produce/s  {summary(latencies)}  "
            f"worst second's p99 {max(p99s, default=float('nan')):6.2f} ms  "
            f"RSS {min(rss):5.1f}-{max(rss):5.1f} MiB  fds {max(second.descriptors for second in seconds):4d}  "
            f"CPU {statistics.fmean(second.cpu_percent for second in seconds):3.0f} %  consumer lag {lag}  "
            f"broker loop lag max so far {_ms(seconds[-1].loop_lag_max_ms)}  "
            f"load average {statistics.fmean(second.load_average for second in seconds):4.1f}")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"


def soak(minutes: float, producers: int, rate: float, consumers: int, scratch: Path) -> None:
    topic_configs = {"segment.bytes": str(4 << 20), "retention.bytes": str(16 << 20)}
    total_s = minutes * 60
    with BrokerProcess(scratch / "data", {"log.retention.check.interval.ms": 5000}) as broker:
        minutes_seen: list[list[Second]] = []
        totals: dict[str, int] = {}

        async def main() -> None:
            await create_topic(broker.address, "soak", topic_configs)
            tally = Tally()
            lag: dict[int, int] = {}
            until = time.monotonic() + total_s
            tasks = [asyncio.ensure_future(producer(broker.address, "soak", index % PARTITIONS, rate, until, tally,
                                                    index / producers))
                     for index in range(producers)]
            shares = [list(range(PARTITIONS))[index::consumers] for index in range(consumers)]
            reads = [asyncio.ensure_future(consumer(broker.address, "soak", share, until, lag)) for share in shares]
            churned = asyncio.ensure_future(churn(broker.address, until))
            loop = asyncio.get_running_loop()
            current: list[Second] = []
            cpu_before, at = broker.cpu_seconds(), time.monotonic()
            tick = at + 1.0
            print(f"soak: {producers} connections x {rate:g} Produce/s ({RECORDS_PER_BATCH} records of "
                  f"{len(VALUE)} B each), {consumers} consumers, one new connection a second, {minutes:g} min; "
                  f"RSS at start {broker.rss_mib():.1f} MiB {machine_load()}")
            while tick <= until + 0.5:
                await asyncio.sleep(max(0.0, tick - time.monotonic()))
                cpu_now, now = broker.cpu_seconds(), time.monotonic()
                lag_max = await loop.run_in_executor(None, loop_lag_max_ms, broker.admin_url)
                current.append(Second(broker.rss_mib(), broker.descriptors(),
                                      (cpu_now - cpu_before) / (now - at) * 100, tally.take(), lag_max))
                cpu_before, at = cpu_now, now
                tick += 1.0
                if len(current) == 60:
                    minutes_seen.append(current)
                    print(minute_line(len(minutes_seen), current, sum(lag.values())), flush=True)
                    current = []
            await asyncio.gather(*tasks)
            totals["records read"] = sum(await asyncio.gather(*reads))
            totals["connections churned"] = await churned
            totals["requests"], totals["errors"] = tally.requests, tally.errors
            if current and not minutes_seen:
                minutes_seen.append(current)

        run_loop(main)
        tracebacks = broker.log_text().count("Traceback")
        print(f"{totals['requests']} Produce requests ({totals['errors']} errors), {totals['records read']} records "
              f"read back, {totals['connections churned']} connections opened and closed; "
              f"tracebacks in the broker's log: {tracebacks}")
        verdict(minutes_seen)


def verdict(minutes_seen: list[list[Second]]) -> None:
    """RSS flat or not (first minute after warm-up against the last), and how steady p99 was."""
    settled = minutes_seen[1:] if len(minutes_seen) > 2 else minutes_seen
    first = statistics.median(second.rss_mib for second in settled[0])
    last = statistics.median(second.rss_mib for second in settled[-1])
    slope = 0.0
    if len(settled) > 1:
        medians = [statistics.median(second.rss_mib for second in minute) for minute in settled]
        slope = statistics.linear_regression(range(len(medians)), medians).slope
    flat = abs(last - first) <= FLAT_MIB
    first_minute = len(minutes_seen) - len(settled) + 1
    print(f"RSS {'flat' if flat else 'NOT flat'}: median {first:.1f} MiB in minute {first_minute}, "
          f"{last:.1f} MiB in the last ({last - first:+.1f} MiB, trend {slope:+.2f} MiB/min; flat means within "
          f"{FLAT_MIB:g} MiB)")
    p99s = [percentile(sorted(value for second in minute for value in second.latencies), 0.99) for minute in settled]
    print(f"per-minute produce p99: {min(p99s):.2f}-{max(p99s):.2f} ms (median {statistics.median(p99s):.2f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("connections", "partitions", "soak", "all"))
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--busy", type=int, default=100)
    parser.add_argument("--rate", type=float, help="Produce requests a second per busy connection "
                        "(default: 20 for connections, 50 for the soak)")
    parser.add_argument("--seconds", type=float, default=20.0, help="connections: each phase's length")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--nofile", type=int, default=256)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--consumers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.part in ("connections", "all"):
            connections(args.idle, args.busy, args.rate or 20.0, args.seconds, Path(scratch) / "connections")
        if args.part in ("partitions", "all"):
            partitions(args.topics, args.partitions, args.nofile, Path(scratch) / "partitions")
        if args.part in ("soak", "all"):
            soak(args.minutes, args.producers, args.rate or 50.0, args.consumers, Path(scratch) / "soak")


if __name__ == "__main__":
    main()
