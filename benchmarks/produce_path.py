"""The broker's produce path without sockets: prints numbers, asserts nothing about time.

    python benchmarks/produce_path.py [--repeat N]

Times ``Partition.append_from_client`` (header checks, CRC-32C, the batch's max timestamp, the
append to an in-memory log) for batches of several shapes, uncompressed and compressed with lz4 and
zstd: with the header a client computes ("right"), and with the max timestamp left at 0 as some
clients send it ("unset"), which makes the broker read the record timestamps. Each call appends a
fresh copy of the batch; the copies are made before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.broker.config import BrokerConfig  # noqa: E402
from kafkalite.broker.core.log.memory import MemoryLog  # noqa: E402
from kafkalite.broker.core.partition import Partition  # noqa: E402
from kafkalite.broker.core.topics import log_config  # noqa: E402
from kafkalite.protocol._crc32c import crc32c  # noqa: E402
from kafkalite.protocol.compression import Compression  # noqa: E402
from kafkalite.protocol.records import Record, build_record_batch  # noqa: E402

SHAPES = {
    "1 record of 100 B": (1, 100),
    "100 records of 100 B": (100, 100),
    "1000 records of 1 KiB": (1000, 1000),
}


def make_batch(count: int, size: int, compression: Compression, now: int, unset_max: bool) -> bytes:
    """Records with distinct values, half random and half zeros (about 2:1 compressible)."""
    records = [Record(offset=i, timestamp=now + i, key=b"key-%d" % i, value=os.urandom(size // 2) + bytes(size // 2))
               for i in range(count)]
    batch = build_record_batch(records, compression=compression)
    if unset_max:
        struct.pack_into(">q", batch, 35, 0)
        struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def per_call(batch: bytes, repeat: int, number: int, now: int) -> float:
    """The fastest mean time of one append, in seconds."""
    settings = BrokerConfig({"log.storage": "memory"}).topic_settings({"segment.bytes": str(2**30)})
    best = float("inf")
    for _ in range(repeat):
        partition = Partition("bench", 0, MemoryLog("bench-0", log_config(settings)), settings,
                              producer_id_expiration_ms=86_400_000)
        copies = [bytearray(batch) for _ in range(number)]
        start = time.perf_counter()
        for copy in copies:
            partition.append_from_client(copy, now)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    now = int(time.time() * 1000)
    print(f"{'batch':<24} {'codec':<6} {'header':<6} {'bytes':>9} {'µs/append':>10} {'MB/s':>8}")
    for name, (count, size) in SHAPES.items():
        for compression in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
            for unset_max in (False, True):
                batch = make_batch(count, size, compression, now, unset_max)
                number = max(20, min(2000, 2_000_000 // len(batch)))
                seconds = per_call(batch, args.repeat, number, now)
                print(f"{name:<24} {compression.name.lower():<6} {'unset' if unset_max else 'right':<6} "
                      f"{len(batch):>9} {seconds * 1e6:>10.1f} {len(batch) / seconds / 1e6:>8.0f}")


if __name__ == "__main__":
    main()
