"""Opening a large data directory: after a clean shutdown, after a crash, and the clean shutdown itself.

    python benchmarks/recovery.py [--partitions 1000] [--mib 10] [--tail-kib 256]
                                  [--shutdown-partitions 10000] [--dir DIR] [--keep]

Builds ``--partitions`` partition logs of ``--mib`` MiB each (1,000 x 10 MiB: 10 GiB) with the log layer
directly (``LogManager``, ``DiskLog.append`` of 1 MiB batches of 1 KiB records, broker defaults: 1 GiB
segments, an index entry every 4 KiB), fast, in a scratch directory (or ``--dir``, reused when it
holds logs already; removed at the end unless ``--keep`` or given). Then, each step timed:

* clean shutdown: every log opened and closed cleanly (what a broker's stop does to its logs);
* open after a clean shutdown: how many bytes of ``.log`` files were read (``os.pread`` on them) and
  how many bytes the process read in all (``rchar`` of ``/proc/self/io``: indexes, checkpoints too);
* open after a crash: a ``--tail-kib`` batch appended to every log and not flushed, the logs closed
  without the clean-shutdown marker (the checkpoints keep the recovery points from before the tail),
  then opened: what recovery read and validated;
* with ``--shutdown-partitions`` (0: skip), in another scratch directory, that many partitions with one
  small unflushed batch each, closed cleanly (the fsyncs of a stop), then opened and closed again idle.

The page cache is not dropped (that needs root and would slow everyone on the machine): the reads of
the crash recovery come from memory, so the times are what validating costs in CPU, and the counts
of bytes read say what a cold start would have to read. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.broker.core.log.manager import LogManager  # noqa: E402
from kafkalite.broker.core.log.partition_log import LogConfig  # noqa: E402
from kafkalite.protocol.record_writer import RecordBatchWriter  # noqa: E402

TOPIC = "recovery"
MIB = 1024 * 1024


def batch_of(size: int, record_size: int = 1024) -> bytearray:
    """One uncompressed batch of about ``size`` bytes of ``record_size``-byte records, stamped now."""
    writer = RecordBatchWriter()
    value = bytes(record_size)
    now = int(time.time() * 1000)
    while writer.size_in_bytes + record_size + 16 <= size or writer.records_count == 0:
        writer.append(now, None, value)
    return writer.build()


def open_manager(data: Path, now_ms: int | None = None) -> LogManager:
    manager = LogManager(data, LogConfig())
    manager.open(now_ms=now_ms)
    return manager


class ReadCounter:
    """Counts the bytes ``os.pread`` returns from ``.log`` files while active."""

    def __init__(self) -> None:
        self.log_bytes = 0
        self.log_reads = 0
        self._original = os.pread

    @contextmanager
    def counting(self) -> Iterator[ReadCounter]:
        original = self._original

        def pread(fd: int, length: int, offset: int) -> bytes:
            data = original(fd, length, offset)
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
                self.log_bytes += len(data)
                self.log_reads += 1
            return data

        os.pread = pread
        try:
            yield self
        finally:
            os.pread = original


def read_chars() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def timed(label: str, step: Callable[[], object]) -> object:
    started = time.perf_counter()
    result = step()
    print(f"{label}: {time.perf_counter() - started:.2f} s", flush=True)
    return result


def build(data: Path, partitions: int, mib: int) -> None:
    manager = open_manager(data)
    batch = batch_of(MIB)
    topic_id = uuid.uuid4()
    started = time.perf_counter()
    for partition in range(partitions):
        partition_log = manager.create_log(TOPIC, partition, topic_id)
        for _ in range(mib):
            partition_log.append(batch, int(time.time() * 1000))
        if partition % 100 == 99:
            print(f"  built {partition + 1} partitions, {time.perf_counter() - started:.0f} s", flush=True)
    manager.close(clean=True)


def opened(data: Path, counter: ReadCounter, label: str) -> LogManager:
    before = read_chars()
    with counter.counting() as counts:
        counts.log_bytes = counts.log_reads = 0
        manager = timed(label, lambda: open_manager(data))
    assert isinstance(manager, LogManager)
    total = sum(partition_log.size_bytes() for partition_log in manager.logs.values())
    print(f"  {len(manager.logs)} logs, {total / MIB:,.0f} MiB; read {counts.log_bytes / MIB:,.1f} MiB of .log files "
          f"in {counts.log_reads:,} preads; {(read_chars() - before) / MIB:,.1f} MiB read in all", flush=True)
    return manager


def recovery(data: Path, partitions: int, mib: int, tail_kib: int) -> None:
    if not any(data.glob(f"{TOPIC}-*")):
        timed(f"build {partitions} partitions x {mib} MiB", lambda: build(data, partitions, mib))
    else:
        print(f"reusing the logs in {data}")
    timed("sync (untimed by the steps below)", os.sync)
    counter = ReadCounter()
    manager = open_manager(data)
    timed("clean shutdown (every log closed with flush, checkpoints, marker)", lambda: manager.close(clean=True))
    manager = opened(data, counter, "open after a clean shutdown")
    tail = batch_of(tail_kib * 1024)
    for partition_log in manager.logs.values():
        partition_log.append(tail, int(time.time() * 1000))
    manager.close(clean=False)  # no fsync of the tails, no marker: the recovery points stay before them
    manager = opened(data, counter, f"open after a crash ({tail_kib} KiB unflushed per log)")
    manager.close(clean=True)


def shutdown(root: Path, partitions: int) -> None:
    data = root / "shutdown"
    manager = open_manager(data)
    batch = batch_of(200)
    topic_ids: dict[str, uuid.UUID] = {}

    def create() -> None:
        for index in range(partitions):  # topics of 10 partitions, as benchmarks/partitions.py makes them
            topic = f"wide-{index // 10:05d}"
            topic_id = topic_ids.setdefault(topic, uuid.uuid4())
            manager.create_log(topic, index % 10, topic_id).append(batch, int(time.time() * 1000))

    timed(f"create {partitions} partitions and append one batch to each", create)
    timed(f"clean shutdown of {partitions} partitions written since their last flush",
          lambda: manager.close(clean=True))
    manager = timed(f"open {partitions} partitions after a clean shutdown", lambda: open_manager(data))
    assert isinstance(manager, LogManager)
    timed(f"clean shutdown of {partitions} idle partitions", lambda: manager.close(clean=True))
    shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=10, help="MiB per partition")
    parser.add_argument("--tail-kib", type=int, default=256, help="unflushed KiB per partition before the crash")
    parser.add_argument("--shutdown-partitions", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, help="where to build the logs (kept; reused when it holds them)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-recovery-"))
    data = a.dir if a.dir is not None else scratch / "data"
    try:
        if a.partitions:
            recovery(data, a.partitions, a.mib, a.tail_kib)
        if a.shutdown_partitions:
            shutdown(scratch, a.shutdown_partitions)
    finally:
        if a.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
