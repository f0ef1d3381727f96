"""Codec throughput: prints numbers, asserts nothing about time.

    python benchmarks/codec.py [--repeat N]

1. decode + encode of a ProduceRequest (v9, flexible) carrying one 1 MiB record batch;
2. decode + encode of a FetchResponse (v12) with 100 partitions of 8 KiB records each;
3. record-batch header parse + CRC-32C check over a 1 MiB batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol.messages import FetchResponse, ProduceRequest  # noqa: E402
from kafkalite.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.primitives import Writer  # noqa: E402
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder  # noqa: E402

MIB = 1 << 20


def best_of(function: Callable[[], object], repeat: int, number: int) -> float:
    """The fastest mean time per call, in seconds, over ``repeat`` rounds of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def batch_of(size: int) -> bytearray:
    builder = RecordBatchBuilder()
    value = os.urandom(1000)
    while builder.size_in_bytes < size - 1100:
        builder.append(timestamp=1_700_000_000_000, key=b"key", value=value)
    return builder.build()


def line(name: str, seconds: float, size: int) -> None:
    print(f"{name:<48} {seconds * 1e6:>10.1f} µs {size / seconds / 1e6:>10.0f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    records = bytes(batch_of(MIB))
    produce = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        TopicProduceData(name="bench", partition_data=[PartitionProduceData(index=0, records=records)])])
    frame = produce.encode(9)
    decoded = ProduceRequest.decode(frame, 9)
    view = decoded.topic_data[0].partition_data[0].records
    copied = not (isinstance(view, memoryview) and view.obj is frame)
    print(f"ProduceRequest v9 with a {len(records)}-byte batch; decode copies the records: {copied}")
    line("  decode", best_of(lambda: ProduceRequest.decode(frame, 9), args.repeat, 200), len(frame))
    writer_buffers = lambda: produce.encode_into(Writer(), 9)  # noqa: E731
    line("  encode (buffers, records by reference)", best_of(writer_buffers, args.repeat, 200), len(frame))
    line("  encode to one bytes object", best_of(lambda: produce.encode(9), args.repeat, 50), len(frame))

    chunk = bytes(batch_of(8 * 1024))
    fetch = FetchResponse(responses=[FetchableTopicResponse(topic="bench", partitions=[
        PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000, log_start_offset=0,
                      records=chunk) for i in range(100)])])
    fetch_frame = fetch.encode(12)
    print(f"FetchResponse v12, 100 partitions x {len(chunk)} bytes ({len(fetch_frame)} bytes)")
    line("  decode", best_of(lambda: FetchResponse.decode(fetch_frame, 12), args.repeat, 100), len(fetch_frame))
    line("  encode", best_of(lambda: fetch.encode(12), args.repeat, 100), len(fetch_frame))

    print(f"Record batch of {len(records)} bytes")
    line("  header parse", best_of(lambda: RecordBatch(records), args.repeat, 2000), len(records))
    line("  header parse + CRC-32C", best_of(lambda: RecordBatch(records).validate_crc(), args.repeat, 500),
         len(records))


if __name__ == "__main__":
    main()
