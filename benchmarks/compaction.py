"""Log compaction: how small the internal topics stay, how fast the broker restarts, and whether
produce and fetch notice the cleaner.

    python benchmarks/compaction.py offsets [--commits 1000000] [--partitions 10]
    python benchmarks/compaction.py latency [--megabytes 100] [--seconds 20]

``offsets`` starts ``kafkalite serve`` with ``offsets.topic.num.partitions=--partitions``, commits
``--commits`` offsets (OffsetCommit requests of ten partitions each, for 100 groups, so every
partition of ``__consumer_offsets`` gets its share), waits until the cleaner has nothing left to do,
and prints the size of ``__consumer_offsets`` on disk (before and after compaction, and what a log
that kept every commit would hold), then the time a clean restart and a kill -9 restart take until
the broker listens, and checks every group's committed offsets after each.

``latency`` writes ``--megabytes`` of keyed records (1 KiB values over 5,000 keys) to a compacted
topic, then for ``--seconds`` times produce requests (acks=1) and fetches on another topic while
the cleaner compacts it, and once more after it is done; it prints p50/p99/max of both and the
cleaner's own log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol.framing import encode_request, parse_response_header  # noqa: E402
from kafkalite.protocol.messages import (  # noqa: E402
    CreateTopicsRequest,
    FetchRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    ProduceRequest,
)
from kafkalite.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig  # noqa: E402
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkalite.protocol.messages.offset_commit_request import (  # noqa: E402
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkalite.protocol.messages.offset_fetch_request import OffsetFetchRequestTopic  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.records import RecordBatchBuilder  # noqa: E402
from kafkalite.testing import BrokerProcess, wait_for  # noqa: E402

GROUPS = 100
TOPIC_PARTITIONS = 10
PIPELINE = 64


class Connection:
    """Pipelined requests on one connection: send many, read the answers in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, address: tuple[str, int]) -> Connection:
        return cls(*await asyncio.open_connection(*address))

    def send(self, request: object, version: int) -> None:
        self.correlation_id += 1
        self.writer.write(encode_request(request, version, self.correlation_id, "compaction"))  # type: ignore[arg-type]

    async def receive(self) -> bytes:
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    async def call(self, request: object, version: int) -> bytes:
        self.send(request, version)
        return await self.receive()

    def close(self) -> None:
        self.writer.close()


def offsets_size(data_dir: Path) -> int:
    return sum(path.stat().st_size for directory in data_dir.glob("__consumer_offsets-*")
               for path in directory.iterdir() if path.is_file())


async def commit_everything(address: tuple[str, int], commits: int) -> dict[str, dict[int, int]]:
    """``commits`` offsets, ten partitions per request, round-robin over the groups; the last of each."""
    connection = await Connection.open(address)
    requests = commits // TOPIC_PARTITIONS
    last: dict[str, dict[int, int]] = {}
    in_flight = 0
    for number in range(requests):
        group = f"group-{number % GROUPS}"
        offset = number // GROUPS
        connection.send(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                            topics=[OffsetCommitRequestTopic("orders", [
                                                OffsetCommitRequestPartition(partition, offset + partition)
                                                for partition in range(TOPIC_PARTITIONS)])]), 8)
        last[group] = {partition: offset + partition for partition in range(TOPIC_PARTITIONS)}
        in_flight += 1
        if in_flight >= PIPELINE:
            await connection.receive()
            in_flight -= 1
    for _ in range(in_flight):
        await connection.receive()
    connection.close()
    return last


async def committed(address: tuple[str, int], groups: list[str]) -> dict[str, dict[int, int]]:
    connection = await Connection.open(address)
    found = {}
    for group in groups:
        frame = await connection.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequestTopic("orders", list(range(TOPIC_PARTITIONS)))]), 7)
        response = OffsetFetchResponse.decode_from(parse_response_header(frame, 9, 7), 7)
        found[group] = {p.partition_index: p.committed_offset for p in response.topics[0].partitions}
    connection.close()
    return found


async def create(address: tuple[str, int], name: str, partitions: int, configs: dict[str, str]) -> None:
    connection = await Connection.open(address)
    await connection.call(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[CreatableTopicConfig(key, value) for key, value in configs.items()])], timeout_ms=30_000), 5)
    connection.close()


def offsets(commits: int, partitions: int, scratch: Path, cleaner: bool = True) -> None:
    configs = {"offsets.topic.num.partitions": partitions, "log.cleaner.backoff.ms": 1000,
               "log.cleaner.enable": "true" if cleaner else "false"}
    broker = BrokerProcess(scratch / "data", configs)
    broker.start()
    try:
        asyncio.run(create(broker.address, "orders", TOPIC_PARTITIONS, {}))
        began = time.perf_counter()
        last = asyncio.run(commit_everything(broker.address, commits))
        elapsed = time.perf_counter() - began
        written = offsets_size(broker.data_dir)
        print(f"{commits} offsets committed in {elapsed:.1f} s ({commits / elapsed:.0f}/s); "
              f"__consumer_offsets: {written / 2**20:.1f} MiB on disk when the last commit was answered")

        def settled() -> bool:
            first = offsets_size(broker.data_dir)
            time.sleep(3)
            return offsets_size(broker.data_dir) == first

        began = time.perf_counter()
        wait_for(settled, 600, "the cleaner did not settle")
        cleanings = len(re.findall(r"__consumer_offsets-\d+\): cleaned up to", broker.log_text()))
        print(f"after the cleaner settled ({time.perf_counter() - began:.0f} s, {cleanings} cleanings): "
              f"{offsets_size(broker.data_dir) / 2**20:.2f} MiB, for {GROUPS * TOPIC_PARTITIONS} live keys")
        expected = {group: values for group, values in last.items()}
        for kind in ("clean", "kill -9"):
            broker.restart(kill=kind == "kill -9")
            found = asyncio.run(committed(broker.address, list(expected)))
            assert found == expected, "committed offsets differ after the restart"
            print(f"restart after a {kind}: listening after {broker.started_in_s:.2f} s (python start-up included); "
                  f"every group's offsets as committed; RSS {broker.rss_mib():.0f} MiB")
    finally:
        broker.close()


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"p50 {statistics.median(ordered):6.2f} ms  p99 {ordered[int(len(ordered) * 0.99)]:6.2f} ms  "
            f"max {ordered[-1]:6.2f} ms  ({len(ordered)} requests)")


async def measure(address: tuple[str, int], seconds: float) -> tuple[list[float], list[float]]:
    producer = await Connection.open(address)
    consumer = await Connection.open(address)
    produced: list[float] = []
    fetched: list[float] = []
    until = time.monotonic() + seconds
    offset = 0
    while time.monotonic() < until:
        builder = RecordBatchBuilder()
        builder.append(timestamp=int(time.time() * 1000), key=b"probe", value=b"p" * 100)
        began = time.perf_counter()
        await producer.call(ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[TopicProduceData(
            name="probe", partition_data=[PartitionProduceData(index=0, records=builder.build())])]), 9)
        produced.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        await consumer.call(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(
            topic="probe", partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                      partition_max_bytes=1 << 20)])]), 12)
        fetched.append((time.perf_counter() - began) * 1000)
        offset += 1
        await asyncio.sleep(0.005)
    producer.close()
    consumer.close()
    return produced, fetched


async def fill(address: tuple[str, int], megabytes: int) -> None:
    connection = await Connection.open(address)
    value = b"v" * 1024
    batches = megabytes * 1024 // 100
    in_flight = 0
    for number in range(batches):
        builder = RecordBatchBuilder()
        for index in range(100):
            builder.append(timestamp=int(time.time() * 1000), key=b"key-%d" % ((number * 100 + index) % 5000),
                           value=value)
        connection.send(ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
            name="compacted", partition_data=[PartitionProduceData(index=0, records=builder.build())])]), 9)
        in_flight += 1
        if in_flight >= 16:
            await connection.receive()
            in_flight -= 1
    for _ in range(in_flight):
        await connection.receive()
    connection.close()


def latency(megabytes: int, seconds: float, scratch: Path) -> None:
    broker = BrokerProcess(scratch / "data", {"log.cleaner.backoff.ms": 1000})
    broker.start()
    try:
        asyncio.run(create(broker.address, "probe", 1, {}))
        asyncio.run(create(broker.address, "compacted", 1, {"cleanup.policy": "compact",
                                                            "segment.bytes": str(16 * 2**20)}))
        quiet = asyncio.run(measure(broker.address, seconds))
        began = time.perf_counter()
        asyncio.run(fill(broker.address, megabytes))
        print(f"wrote {megabytes} MiB to the compacted topic in {time.perf_counter() - began:.1f} s")
        mark = broker.log_mark()
        during = asyncio.run(measure(broker.address, seconds))
        lines = [line for line in broker.log_text(since=mark).splitlines() if "cleaned up to" in line]
        print(f"produce, nothing to clean:  {percentiles(quiet[0])}")
        print(f"fetch,   nothing to clean:  {percentiles(quiet[1])}")
        print(f"produce, while cleaning:    {percentiles(during[0])}")
        print(f"fetch,   while cleaning:    {percentiles(during[1])}")
        for line in lines:
            print("  " + line.split(" INFO ", 1)[-1])
        size = sum(path.stat().st_size for path in (broker.data_dir / "compacted-0").iterdir())
        print(f"the compacted topic now holds {size / 2**20:.1f} MiB")
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("offsets", "latency"))
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-cleaner", action="store_true", help="offsets: with log.cleaner.enable=false")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.part == "offsets":
            offsets(args.commits, args.partitions, Path(scratch), cleaner=not args.no_cleaner)
        else:
            latency(args.megabytes, args.seconds, Path(scratch))


if __name__ == "__main__":
    main()
