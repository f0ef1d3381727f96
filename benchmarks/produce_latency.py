"""Produce latency with fsync before the answer, and whether the event loop stalls meanwhile.

    python benchmarks/produce_latency.py [--seconds 20] [--producers 8] [--partitions 8] [--acks -1]
                                         [--flush-on-ack true] [--segment-bytes 1048576]

Starts ``kafkalite serve`` on a data directory, creates a topic, and has ``--producers`` connections
each send Produce requests (one batch of 10 records of 100 B) one at a time, for ``--seconds``,
timing each request until its answer. Small segments make the broker roll often, so the work that
follows a roll (fsync of the rolled segment, producer state snapshots, checkpoints) happens during
the run. A probe connection sends ApiVersions every 10 ms: its latency is the event loop's
responsiveness (an fsync on the loop shows up there). Prints p50, p99, p99.9 and the worst of both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol.framing import encode_request  # noqa: E402
from kafkalite.protocol.messages import ApiVersionsRequest, CreateTopicsRequest, ProduceRequest  # noqa: E402
from kafkalite.protocol.messages.create_topics_request import CreatableTopic  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.records import RecordBatchBuilder  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402

TOPIC = "latency"


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes) -> None:
    writer.write(frame)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    await reader.readexactly(size)


def _batch() -> bytes:
    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for index in range(10):
        builder.append(timestamp=now, key=b"key-%d" % index, value=b"v" * 100)
    return bytes(builder.build())


async def _producer(address: tuple[str, int], partition: int, acks: int, until: float, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    correlation_id = 0
    while time.monotonic() < until:
        correlation_id += 1
        request = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=TOPIC, partition_data=[PartitionProduceData(index=partition, records=_batch())])])
        frame = encode_request(request, 9, correlation_id, "latency")
        began = time.perf_counter()
        await _round_trip(reader, writer, frame)
        latencies.append((time.perf_counter() - began) * 1000)
    writer.close()


async def _probe(address: tuple[str, int], until: float, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    frame = encode_request(ApiVersionsRequest(), 0, 1, "probe")
    while time.monotonic() < until:
        began = time.perf_counter()
        await _round_trip(reader, writer, frame)
        latencies.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.01)
    writer.close()


async def _create_topic(address: tuple[str, int], partitions: int) -> None:
    reader, writer = await asyncio.open_connection(*address)
    request = CreateTopicsRequest(topics=[CreatableTopic(name=TOPIC, num_partitions=partitions, replication_factor=1)],
                                  timeout_ms=30_000)
    await _round_trip(reader, writer, encode_request(request, 5, 1, "latency"))
    writer.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def describe(label: str, values: list[float]) -> str:
    return (f"{label:<10} {len(values):7d} requests  p50 {statistics.median(values):7.2f} ms  "
            f"p99 {percentile(values, 0.99):7.2f} ms  p99.9 {percentile(values, 0.999):7.2f} ms  "
            f"max {max(values):7.2f} ms")


async def measure(address: tuple[str, int], seconds: float, producers: int, partitions: int,
                  acks: int) -> tuple[list[float], list[float]]:
    await _create_topic(address, partitions)
    until = time.monotonic() + seconds
    produced: list[float] = []
    probed: list[float] = []
    await asyncio.gather(_probe(address, until, probed),
                         *(_producer(address, index % partitions, acks, until, produced) for index in range(producers)))
    return produced, probed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--acks", type=int, default=-1)
    parser.add_argument("--flush-on-ack", default="true")
    parser.add_argument("--segment-bytes", type=int, default=1024 * 1024)
    args = parser.parse_args()
    configs = {"log.flush.on.ack": args.flush_on_ack, "log.segment.bytes": args.segment_bytes}
    with tempfile.TemporaryDirectory() as scratch, BrokerProcess(Path(scratch) / "data", configs) as broker:
        produced, probed = asyncio.run(measure(broker.address, args.seconds, args.producers, args.partitions,
                                               args.acks))
        rss = broker.rss_mib()
    print(f"{args.producers} producers, {args.partitions} partitions, acks={args.acks}, "
          f"log.flush.on.ack={args.flush_on_ack}, segment.bytes={args.segment_bytes}, {args.seconds:.0f} s")
    print(describe("produce", produced))
    print(describe("probe", probed))
    print(f"throughput {len(produced) / args.seconds:.0f} requests/s ({len(produced) * 10 / args.seconds:.0f} "
          f"records/s); broker RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
