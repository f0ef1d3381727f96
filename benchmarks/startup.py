"""Start-up time: from the broker's exec to its first ApiVersions answer, installed as users install it.

    python benchmarks/startup.py [--runs 5] [--editable] [--importtime] [--against CHECKOUT] [--floor]

Installs this checkout with ``pip install --no-deps --target DIR .`` (a regular, non-editable
install, byte-compiled by pip) into a scratch directory, and runs ``python -m kafkalite serve`` from
there (``PYTHONPATH=DIR``, from a scratch working directory, so nothing of the checkout is imported)
with an empty data directory on a free loopback port, ``--runs`` times. For each run it prints how
long after the exec the port accepted a connection and how long until the answer to an ApiVersions
v0 request came back, and the CPU time the process used (user and system, from its start to its
exit after SIGTERM, which the wall-clock figures of a busy machine do not disturb as much), then
the median and the least of each. Once ApiVersions is answered, the same connection asks for
Metadata v1 of one topic (which creates it, as ``auto.create.topics.enable`` does), produces one
record to it with acks=1 (Produce v3) and fetches it back (Fetch v4): the time to each answer is
printed too, so a start that answered ApiVersions early but left the rest of the broker to load later
would show it.
``--editable`` runs the checkout itself instead.
``--importtime`` prints the 15 slowest imports of one start (``python -X importtime``).
``--against CHECKOUT`` installs another checkout (say one of the main branch) the same way and
alternates runs between the two, so a busy machine's load falls on both alike; the medians of each
are printed side by side. ``--floor`` adds, in each round, ``python -c "import asyncio, uvloop"``
(exec to exit): what any broker on this loop pays before its own code runs. Nothing is asserted;
the broker is stopped by its PID after each run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ApiVersions v0, correlation id 7, client id "startup": size, key 18, version 0, id, client id
_BODY = struct.pack(">hhih", 18, 0, 7, 7) + b"startup"
REQUEST = struct.pack(">i", len(_BODY)) + _BODY
TOPIC = b"startup"


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 7) + b"startup"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _record_batch(value: bytes, timestamp_ms: int) -> bytes:
    """One magic-2 batch of one record (no key, no headers), written by hand."""
    record = bytes([0, 0, 0, 1]) + bytes([len(value) * 2]) + value + bytes([0])  # attrs, ts/offset deltas, key -1
    records = bytes([len(record) * 2]) + record  # each length a zigzag varint (all below 64 here)
    after_crc = (struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + records)
    after_length = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


# Metadata v1 of TOPIC (auto-created), correlation id 8
METADATA = _frame(3, 1, 8, struct.pack(">ih", 1, len(TOPIC)) + TOPIC)


# Fetch v4 of TOPIC's partition 0 from offset 0 (replica -1, at most 500 ms for at least 1 byte, 1 MiB,
# read_uncommitted), correlation id 10
FETCH = _frame(1, 4, 10, struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">ih", 1, len(TOPIC)) + TOPIC
               + struct.pack(">iiqi", 1, 0, 0, 1 << 20))


def produce_request() -> bytes:
    """Produce v3 of one record to TOPIC's partition 0 with acks=1, correlation id 9."""
    batch = _record_batch(b"hello", int(time.time() * 1000))
    body = (struct.pack(">hhi", -1, 1, 30_000) + struct.pack(">ih", 1, len(TOPIC)) + TOPIC
            + struct.pack(">iii", 1, 0, len(batch)) + batch)
    return _frame(0, 3, 9, body)


def _read_frame(connection: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data[4:]


def _string_end(frame: bytes, position: int) -> int:
    (size,) = struct.unpack_from(">h", frame, position)
    return position + 2 + max(size, 0)


def metadata_topic_error(frame: bytes) -> int:
    """The error code of the one topic in a Metadata v1 answer (after its correlation id)."""
    position = 4
    (brokers,) = struct.unpack_from(">i", frame, position)
    position += 4
    for _ in range(brokers):
        position = _string_end(frame, position + 4) + 4  # node id, host, port
        position = _string_end(frame, position)  # rack
    position += 4 + 4  # controller id, topic count
    return int(struct.unpack_from(">h", frame, position)[0])


def produce_error(frame: bytes) -> int:
    """The error code of the one partition in a Produce v3 answer (after its correlation id)."""
    position = _string_end(frame, 4 + 4) + 4  # topic count, name, partition count
    return int(struct.unpack_from(">h", frame, position + 4)[0])  # after the partition index


def fetched(frame: bytes) -> tuple[int, int]:
    """The error code and the records' size of the one partition in a Fetch v4 answer."""
    position = _string_end(frame, 4 + 4 + 4) + 4  # throttle time, topic count, name, partition count
    error, _, _, aborted = struct.unpack_from(">hqqi", frame, position + 4)  # after the partition index
    position += 4 + 2 + 8 + 8 + 4 + max(aborted, 0) * 16  # each aborted transaction: two int64
    return int(error), int(struct.unpack_from(">i", frame, position)[0])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def children_cpu_s() -> float:
    """User and system CPU seconds of the children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_floor(env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Seconds from exec to exit of ``python -c "import asyncio, uvloop"``, and its CPU seconds."""
    cpu = children_cpu_s()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import asyncio, uvloop"], cwd=cwd, env=env, check=True)
    return time.perf_counter() - started, children_cpu_s() - cpu


class Start:
    """One start's figures, in seconds from the exec (NaN when that step failed)."""

    def __init__(self) -> None:
        nan = float("nan")
        self.accepted = self.answered = self.metadata = self.produced = self.fetched = self.cpu = nan
        self.errors = ""


def one_start(env: dict[str, str], cwd: Path, extra: list[str] | None = None) -> Start:
    """Seconds to accepting, to the first ApiVersions, Metadata, Produce and Fetch answers, and the
    process's CPU seconds and stderr."""
    start = Start()
    cpu = children_cpu_s()
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="data-", dir=cwd))
    command = [sys.executable, *(extra or []), "-m", "kafkalite", "serve", "--port", str(port),
               "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--data-dir", str(data)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = started + 30
        while time.perf_counter() < deadline and process.poll() is None:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                time.sleep(0.0005)  # polling a port that is not open yet: no condition to wait on
                continue
            start.accepted = time.perf_counter() - started
            with connection:
                connection.sendall(REQUEST)
                if struct.unpack_from(">i", _read_frame(connection))[0] != 7:
                    break
                start.answered = time.perf_counter() - started
                connection.sendall(METADATA)
                if metadata_topic_error(_read_frame(connection)) != 0:
                    break
                start.metadata = time.perf_counter() - started
                connection.sendall(produce_request())
                if produce_error(_read_frame(connection)) != 0:
                    break
                start.produced = time.perf_counter() - started
                connection.sendall(FETCH)
                error, size = fetched(_read_frame(connection))
                if error != 0 or size == 0:
                    break
                start.fetched = time.perf_counter() - started
            break
    finally:
        process.terminate()
        try:
            _, errors = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            _, errors = process.communicate()
        shutil.rmtree(data, ignore_errors=True)
    start.cpu = children_cpu_s() - cpu
    start.errors = errors.decode(errors="replace")
    return start


def install(checkout: Path, target: Path, scratch: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(checkout)], check=True, cwd=scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--editable", action="store_true", help="run the checkout instead of an install")
    parser.add_argument("--importtime", action="store_true", help="show the slowest imports of one start")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT", help="alternate with another checkout")
    parser.add_argument("--floor", action="store_true", help='also time python -c "import asyncio, uvloop"')
    a = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-startup-"))
    try:
        base = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        sides: list[tuple[str, dict[str, str], Path]] = []
        for label, checkout in (("this checkout", REPO), ("against", a.against)):
            if checkout is None:
                continue
            env = dict(base)
            if a.editable:
                env["PYTHONPATH"] = str(checkout.resolve())
                sides.append((f"{label} ({checkout})", env, checkout.resolve()))
                continue
            target = scratch / f"site-{len(sides)}"
            install(checkout, target, scratch)
            env["PYTHONPATH"] = str(target)
            sides.append((f"{label} ({checkout}, installed)", env, scratch))
        print("running the checkouts themselves" if a.editable else
              "installed with pip (not editable) into scratch directories")
        for _, env, cwd in sides:
            one_start(env, cwd)  # the first start after an install warms the page cache
        results: dict[str, tuple[list[float], ...]] = {label: ([], [], [], [], [], []) for label, _, _ in sides}
        floors: tuple[list[float], list[float]] = ([], [])
        for run in range(a.runs):
            if a.floor:
                wall, cpu = one_floor(sides[0][1], sides[0][2])
                floors[0].append(wall * 1000)
                floors[1].append(cpu * 1000)
                print(f"import asyncio, uvloop run {run + 1}: {wall * 1000:.0f} ms from exec to exit, "
                      f"CPU {cpu * 1000:.0f} ms")
            for label, env, cwd in sides:
                start = one_start(env, cwd)
                figures = (start.accepted, start.answered, start.metadata, start.produced, start.fetched, start.cpu)
                if any(value != value for value in figures):  # NaN: a step was not answered
                    print(f"{label} run {run + 1}: a request went unanswered; the broker said: "
                          f"{start.errors[-500:]}")
                    continue
                for column, value in zip(results[label], figures, strict=True):
                    column.append(value * 1000)
                print(f"{label} run {run + 1}: accepting after {start.accepted * 1000:.0f} ms, answered "
                      f"ApiVersions after {start.answered * 1000:.0f}, Metadata {start.metadata * 1000:.0f}, "
                      f"Produce {start.produced * 1000:.0f}, Fetch {start.fetched * 1000:.0f} ms, "
                      f"CPU {start.cpu * 1000:.0f} ms")
        print("median / least, in ms:")
        if floors[0]:
            print(f"import asyncio, uvloop: {_spread(floors[0])} from exec to exit, CPU {_spread(floors[1])}")
        for label, (accepts, answers, metadatas, produces, fetches, cpus) in results.items():
            if answers:
                print(f"{label}, {len(answers)} runs: accepting {_spread(accepts)}, first ApiVersions answer "
                      f"{_spread(answers)}, Metadata {_spread(metadatas)}, Produce {_spread(produces)}, "
                      f"Fetch {_spread(fetches)}, CPU to start, answer and stop {_spread(cpus)}")
        if a.importtime:
            _, env, cwd = sides[0]
            rows = []
            for line in one_start(env, cwd, ["-X", "importtime"]).errors.splitlines():
                if line.startswith("import time:") and "|" in line:
                    parts = [part.strip() for part in line.removeprefix("import time:").split("|")]
                    if parts[0].isdigit():
                        rows.append((int(parts[1]), int(parts[0]), parts[2]))
            print("slowest imports of this checkout (cumulative µs, self µs, module):")
            for cumulative, own, name in sorted(rows, reverse=True)[:15]:
                print(f"  {cumulative:>8} {own:>8}  {name}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} / {min(values):.0f}"


if __name__ == "__main__":
    main()
