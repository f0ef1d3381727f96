"""Produce requests through the connection, without sockets: prints numbers, asserts nothing about time.

    python benchmarks/produce_dispatch.py [--repeat N] [--admin off|on|fault|compare] [--storage memory|disk]
    python benchmarks/produce_dispatch.py --wake      # also: each one-record Produce wakes a parked Fetch

Feeds Produce v9 frames (acks=1, one partition) to a ``KafkaConnection`` with the real handlers and
a ``Cluster`` (an in-memory log, or with ``--storage disk`` segment files in a scratch directory),
one frame per read as a producer with one request in flight sends them, and times the whole path:
framing, header and body decoding, the handler, the append, the response encoded and written to a
transport that keeps nothing. ``--admin`` says what the admin endpoint's hooks do: ``off`` (no
observer: the broker as it runs without ``admin.listener``), ``on`` (requests counted and timed, the
request log kept), ``fault`` (on, with a fault registered that matches no request, so each request
is also checked against it). ``compare`` switches one connection between the three every 2,000
requests, round after round (``--repeat`` rounds), and prints each one's median and the cost of
``on`` and ``fault`` relative to ``off``: on a busy machine, that cancels most of the drift that
separate runs see. Times are the process's CPU time (``time.process_time``), so that other work on a
shared machine inflates them less than wall time would.
Without sockets the denominator is small, so the relative cost of the hooks is larger here than on
a real connection.

``--wake`` adds the row a consumer that keeps up makes: before each one-record Produce, a second
connection sends a Fetch v12 (no session, ``max_wait_ms`` 500, ``min_bytes`` 1, as librdkafka's
long poll) for the offset the Produce will write, which parks; the append completes it and both
answers are written in the Produce's read. The time is per record: the Fetch parked, the Produce
handled, the Fetch answered.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.broker.config import BrokerConfig  # noqa: E402
from kafkalite.broker.core.cluster import Cluster, Endpoint  # noqa: E402
from kafkalite.broker.net import KafkaConnection, ReceiveScratch  # noqa: E402
from kafkalite.protocol.framing import encode_request  # noqa: E402
from kafkalite.protocol.messages import FetchRequest, ProduceRequest  # noqa: E402
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.records import Record, build_record_batch  # noqa: E402

SHAPES = {"1 record of 100 B": (1, 100), "10 records of 1 KiB": (10, 1000)}


class NullTransport(asyncio.Transport):
    """Takes what the connection writes and keeps nothing."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def writelines(self, buffers: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def make_frame(count: int, size: int) -> bytes:
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, key=b"key-%d" % i, value=os.urandom(size)) for i in range(count)]
    batch = bytes(build_record_batch(records))
    request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name="bench", partition_data=[PartitionProduceData(index=0, records=batch)])])
    return encode_request(request, 9, 1, "bench-producer")


def make_fetch_frames(count: int) -> list[bytes]:
    """Fetch v12 frames for offsets 0 to ``count - 1`` of partition 0 (a long poll with no session)."""
    frames = []
    for offset in range(count):
        request = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=52428800, session_id=0, session_epoch=-1,
                               topics=[FetchTopic(topic="bench", partitions=[
                                   FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1048576)])])
        frames.append(encode_request(request, 12, offset + 1, "bench-consumer"))
    return frames


async def per_woken_record(frame: bytes, fetches: list[bytes], storage: str, directory: str) -> float:
    """Mean CPU seconds of one record that a parked Fetch waits for: the Fetch, the Produce, both answers."""
    cluster = make_cluster(storage, directory)
    cluster.open()
    cluster.endpoints[:] = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.topics.create("bench", 1)
    scratch = ReceiveScratch()
    producer = KafkaConnection(cluster, max_request_bytes=2**24, idle_ms=0, scratch=scratch)
    consumer = KafkaConnection(cluster, max_request_bytes=2**24, idle_ms=0, scratch=scratch)
    producer.connection_made(NullTransport())
    consumer.connection_made(NullTransport())
    size = len(frame)
    start = time.process_time()
    for fetch in fetches:
        consumer.get_buffer(-1)[:len(fetch)] = fetch
        consumer.buffer_updated(len(fetch))
        producer.get_buffer(-1)[:size] = frame
        producer.buffer_updated(size)
    elapsed = time.process_time() - start
    if consumer.in_flight:
        raise SystemExit("a Fetch was not answered by the append it waited for")
    producer.close()
    consumer.close()
    cluster.close()
    return elapsed / len(fetches)


def make_observer(mode: str, cluster: Cluster) -> Any:
    if mode == "off":
        return None
    from kafkalite.broker.admin.observer import RequestObserver

    observer = RequestObserver(cluster)
    if mode == "fault":
        observer.faults.add({"api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER", "count": 1})
    return observer


def make_cluster(storage: str, directory: str) -> Cluster:
    return Cluster(BrokerConfig({"log.storage": storage, "log.segment.bytes": str(2**30), "log.dirs": directory}))


async def compare(frame: bytes, block: int, rounds: int, storage: str, directory: str) -> dict[str, float]:
    """The median seconds per request of each mode on one connection of one cluster, the connection's
    observer switched between the modes every ``block`` requests, ``rounds`` times."""
    cluster = make_cluster(storage, directory)
    cluster.open()
    cluster.endpoints[:] = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.topics.create("bench", 1)
    observers = {mode: make_observer(mode, cluster) for mode in ("off", "on", "fault")}
    connection = KafkaConnection(cluster, max_request_bytes=2**24, idle_ms=0, scratch=ReceiveScratch())
    connection.connection_made(NullTransport())
    size = len(frame)

    def run(count: int) -> float:
        start = time.process_time()
        for _ in range(count):
            connection.get_buffer(-1)[:size] = frame
            connection.buffer_updated(size)
        return (time.process_time() - start) / count

    run(block)
    times: dict[str, list[float]] = {mode: [] for mode in observers}
    for _ in range(rounds):
        for mode, observer in observers.items():
            connection.observer = observer
            times[mode].append(run(block))
    connection.close()
    cluster.close()
    return {mode: statistics.median(samples) for mode, samples in times.items()}


async def per_request(frame: bytes, number: int, mode: str, storage: str, directory: str) -> float:
    """Mean CPU seconds of one Produce request, over ``number`` requests on a fresh cluster."""
    cluster = make_cluster(storage, directory)
    cluster.open()
    cluster.endpoints[:] = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.topics.create("bench", 1)
    options: dict[str, Any] = {}
    if "observer" in inspect.signature(KafkaConnection).parameters:
        options["observer"] = make_observer(mode, cluster)
    elif mode != "off":
        raise SystemExit("this kafkalite has no admin endpoint: only --admin off applies")
    connection = KafkaConnection(cluster, max_request_bytes=2**24, idle_ms=0, scratch=ReceiveScratch(), **options)
    connection.connection_made(NullTransport())
    size = len(frame)
    start = time.process_time()
    for _ in range(number):
        connection.get_buffer(-1)[:size] = frame
        connection.buffer_updated(size)
    elapsed = time.process_time() - start
    connection.close()
    cluster.close()
    return elapsed / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--admin", choices=("off", "on", "fault", "compare"), default="off")
    parser.add_argument("--storage", choices=("memory", "disk"), default="memory")
    parser.add_argument("--wake", action="store_true", help="also a one-record Produce that wakes a parked Fetch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkalite-dispatch-") as scratch:
        run(args, scratch)


def run(args: argparse.Namespace, scratch: str) -> None:
    def directory() -> str:
        return tempfile.mkdtemp(dir=scratch)

    if args.admin == "compare":
        print(f"{'batch':<22} {'off µs':>8} {'on µs':>8} {'fault µs':>9} {'on':>7} {'fault':>7}  "
              f"(medians of {args.repeat} rounds)")
        for name, (count, size) in SHAPES.items():
            medians = asyncio.run(compare(make_frame(count, size), 2000, args.repeat, args.storage, directory()))
            off = medians["off"]
            print(f"{name:<22} {off * 1e6:>8.2f} {medians['on'] * 1e6:>8.2f} {medians['fault'] * 1e6:>9.2f} "
                  f"{(medians['on'] / off - 1) * 100:>+6.1f}% {(medians['fault'] / off - 1) * 100:>+6.1f}%")
        return
    print(f"{'batch':<22} {'admin':<6} {'storage':<7} {'bytes':>7} "
          f"{'CPU µs/request (best of ' + str(args.repeat) + ')':>32}")
    for name, (count, size) in SHAPES.items():
        frame = make_frame(count, size)
        best = min(asyncio.run(per_request(frame, args.number, args.admin, args.storage, directory()))
                   for _ in range(args.repeat))
        print(f"{name:<22} {args.admin:<6} {args.storage:<7} {len(frame):>7} {best * 1e6:>32.2f}")
    if args.wake:
        frame = make_frame(1, 100)
        fetches = make_fetch_frames(args.number)
        best = min(asyncio.run(per_woken_record(frame, fetches, args.storage, directory())) for _ in range(args.repeat))
        print(f"{'1 record + woken Fetch':<22} {'off':<6} {args.storage:<7} {len(frame):>7} {best * 1e6:>32.2f}")


if __name__ == "__main__":
    main()
