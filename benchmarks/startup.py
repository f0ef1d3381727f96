"""Start-up time: from the broker's exec to its first ApiVersions answer, installed as users install it.

    python benchmarks/startup.py [--runs 5] [--editable] [--importtime] [--against CHECKOUT] [--floor] [--imports]
                                 [--admin]

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
(exec to exit): what any broker on this loop pays before its own code runs. ``--imports`` adds, in
each round and for each checkout, the CPU time a fresh interpreter takes to import what a start and
its first Metadata, Produce and Fetch load (``START_MODULES``), beyond ``import asyncio, uvloop`` and
with the cyclic collector off, as ``kafkalite serve`` has it: the broker's own share of a start,
without the noise of a process's start, its disk writes and its stop. ``--admin`` adds, in each
round and for each checkout, a start with ``admin.listener`` on another free loopback port: the same
figures, then how long after the exec its admin endpoint answered ``GET /v1/broker`` (asked once the
Kafka requests are answered, so never sooner than the Fetch). With ``--admin`` every start, with the
endpoint or not, then keeps its Kafka connection busy with ApiVersions requests (one every 5 ms, from
a second thread) until ``PINGS_UNTIL_S`` after the exec (and until the endpoint answered) and prints
the longest round trip: what a client busy with a broker that just started waits at worst, the
endpoint's start or the broker's own warm-up imports. Nothing is asserted; the broker is stopped by
its PID after each run.
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
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ApiVersions v0, correlation id 7, client id "startup": size, key 18, version 0, id, client id
_BODY = struct.pack(">hhih", 18, 0, 7, 7) + b"startup"
REQUEST = struct.pack(">i", len(_BODY)) + _BODY
TOPIC = b"startup"
PINGS_UNTIL_S = 1.0  # --admin: the Kafka connection is kept busy until then (seconds after the exec)
# what a start imports before its first ApiVersions answer, and what its first Metadata, Produce and
# Fetch import after it (the handlers import their message classes, the codecs on first use)
START_MODULES = ("kafkalite.cli.serve", "kafkalite.broker.server", "kafkalite.broker.core.cluster",
                 "kafkalite.broker.handlers.api_versions", "kafkalite.broker.handlers.metadata",
                 "kafkalite.broker.handlers.produce", "kafkalite.broker.handlers.fetch",
                 "kafkalite.protocol.produce_codec", "kafkalite.protocol.fetch_codec")
_IMPORTS = ("import asyncio, gc, importlib, time, uvloop\n"
            "gc.disable()\n"
            "started = time.process_time()\n"
            f"for name in {START_MODULES!r}:\n"
            "    importlib.import_module(name)\n"
            "print(time.process_time() - started)\n")


sys.path.insert(0, str(REPO))
from kafkalite.protocol.framing import encode_request, parse_response_header  # noqa: E402
from kafkalite.protocol.messages import (  # noqa: E402  (each loaded here, not between two timed answers)
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic  # noqa: E402
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkalite.protocol.records import RecordBatchBuilder  # noqa: E402

_NAME = TOPIC.decode()
# Metadata v1 of TOPIC (auto-created), correlation id 8
METADATA = encode_request(MetadataRequest(topics=[MetadataRequestTopic(name=_NAME)]), 1, 8, "startup")
# Fetch v4 of TOPIC's partition 0 from offset 0 (at most 500 ms for at least 1 byte, 1 MiB), correlation id 10
FETCH = encode_request(FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[
    FetchTopic(topic=_NAME, partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]),
    4, 10, "startup")


def produce_request() -> bytes:
    """Produce v3 of one record to TOPIC's partition 0 with acks=1, correlation id 9."""
    builder = RecordBatchBuilder()
    builder.append(timestamp=int(time.time() * 1000), key=None, value=b"hello")
    request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=_NAME, partition_data=[PartitionProduceData(index=0, records=builder.build())])])
    return encode_request(request, 3, 9, "startup")


def _read_frame(connection: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data[4:]


def metadata_topic_error(frame: bytes) -> int:
    """The error code of the one topic in a Metadata v1 answer (after its correlation id)."""
    return MetadataResponse.decode_from(parse_response_header(frame, 3, 1), 1).topics[0].error_code


def produce_error(frame: bytes) -> int:
    """The error code of the one partition in a Produce v3 answer (after its correlation id)."""
    response = ProduceResponse.decode_from(parse_response_header(frame, 0, 3), 3)
    return response.responses[0].partition_responses[0].error_code


def fetched(frame: bytes) -> tuple[int, int]:
    """The error code and the records' size of the one partition in a Fetch v4 answer."""
    partition = FetchResponse.decode_from(parse_response_header(frame, 1, 4), 4).responses[0].partitions[0]
    records = partition.records
    return partition.error_code, 0 if records is None else len(records)


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


def one_import(env: dict[str, str], cwd: Path) -> float:
    """CPU seconds a fresh interpreter takes to import ``START_MODULES`` after asyncio and uvloop."""
    done = subprocess.run([sys.executable, "-c", _IMPORTS], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout)


class Start:
    """One start's figures, in seconds from the exec (NaN when that step failed)."""

    def __init__(self) -> None:
        nan = float("nan")
        self.accepted = self.answered = self.metadata = self.produced = self.fetched = self.cpu = nan
        self.admin = nan  # when the admin endpoint answered (with --admin)
        self.longest = nan  # the longest ApiVersions round trip until then
        self.errors = ""


def admin_answer(port: int, deadline: float) -> bool:
    """Ask ``GET /v1/broker`` of the admin endpoint on ``port`` until it answers 200 or the deadline passes."""
    request = f"GET /v1/broker HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
                connection.sendall(request)
                answer = b""
                while chunk := connection.recv(65536):
                    answer += chunk
        except OSError:
            time.sleep(0.0005)  # polling a port that is not open yet: no condition to wait on
            continue
        return answer.startswith(b"HTTP/1.1 200")
    return False


def ping(connection: socket.socket, pinging: threading.Event, round_trips: list[float]) -> None:
    """ApiVersions round trips on ``connection``, one every 5 ms, while ``pinging`` is set."""
    while pinging.is_set():
        began = time.perf_counter()
        connection.sendall(REQUEST)
        _read_frame(connection)
        round_trips.append(time.perf_counter() - began)
        time.sleep(0.005)  # pacing: the broker answers few enough that its CPU figure moves little


def one_start(env: dict[str, str], cwd: Path, extra: list[str] | None = None, admin: bool = False,
              pings: bool = False) -> Start:
    """Seconds to accepting, to the first ApiVersions, Metadata, Produce and Fetch answers (and, with
    ``admin``, to the admin endpoint's first answer; with ``pings``, the longest ApiVersions round trip
    until ``PINGS_UNTIL_S``), and the process's CPU seconds and stderr."""
    start = Start()
    cpu = children_cpu_s()
    port = free_port()
    admin_port = free_port() if admin else 0
    data = Path(tempfile.mkdtemp(prefix="data-", dir=cwd))
    command = [sys.executable, *(extra or []), "-m", "kafkalite", "serve", "--port", str(port),
               "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--data-dir", str(data)]
    if admin:
        command.append(f"admin.listener=127.0.0.1:{admin_port}")
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
                if admin or pings:
                    pinging = threading.Event()
                    round_trips: list[float] = []
                    pinger = threading.Thread(target=ping, args=(connection, pinging, round_trips))
                    pinging.set()
                    pinger.start()
                    try:
                        if admin and admin_answer(admin_port, deadline):
                            start.admin = time.perf_counter() - started
                        if pings:
                            time.sleep(max(0.0, started + PINGS_UNTIL_S - time.perf_counter()))  # a fixed window
                    finally:
                        pinging.clear()
                        pinger.join()
                    start.longest = max(round_trips, default=0.0)
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
    parser.add_argument("--imports", action="store_true",
                        help="also time the imports of a start and its first requests in a fresh interpreter")
    parser.add_argument("--admin", action="store_true",
                        help="also start each checkout with admin.listener set and time its first HTTP answer")
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
            one_start(env, cwd, admin=a.admin)  # the first start after an install warms the page cache
        # each checkout, then (--admin) each with the admin endpoint on
        starts = [(label, env, cwd, False) for label, env, cwd in sides]
        starts += [(f"{label} +admin", env, cwd, True) for label, env, cwd in sides] if a.admin else []
        results: dict[str, tuple[list[float], ...]] = {label: ([], [], [], [], [], [], [], [])
                                                       for label, _, _, _ in starts}
        floors: tuple[list[float], list[float]] = ([], [])
        imports: dict[str, list[float]] = {label: [] for label, _, _ in sides}
        for run in range(a.runs):
            if a.floor:
                wall, cpu = one_floor(sides[0][1], sides[0][2])
                floors[0].append(wall * 1000)
                floors[1].append(cpu * 1000)
                print(f"import asyncio, uvloop run {run + 1}: {wall * 1000:.0f} ms from exec to exit, "
                      f"CPU {cpu * 1000:.0f} ms")
            for label, env, cwd, admin in starts:
                start = one_start(env, cwd, admin=admin, pings=a.admin)
                figures = (start.accepted, start.answered, start.metadata, start.produced, start.fetched, start.cpu,
                           start.admin if admin else 0.0, start.longest if a.admin else 0.0)
                if any(value != value for value in figures):  # NaN: a step was not answered
                    print(f"{label} run {run + 1}: a request went unanswered; the broker said: "
                          f"{start.errors[-500:]}")
                    continue
                for column, value in zip(results[label], figures, strict=True):
                    column.append(value * 1000)
                print(f"{label} run {run + 1}: accepting after {start.accepted * 1000:.0f} ms, answered "
                      f"ApiVersions after {start.answered * 1000:.0f}, Metadata {start.metadata * 1000:.0f}, "
                      f"Produce {start.produced * 1000:.0f}, Fetch {start.fetched * 1000:.0f} ms, "
                      f"CPU {start.cpu * 1000:.0f} ms"
                      + (f", admin endpoint {start.admin * 1000:.0f} ms" if admin else "")
                      + (f", longest ApiVersions round trip {start.longest * 1000:.1f} ms" if a.admin else ""))
            if a.imports:
                for label, env, cwd in sides:
                    imports[label].append(one_import(env, cwd) * 1000)
                    print(f"{label} run {run + 1}: imports beyond asyncio and uvloop, CPU {imports[label][-1]:.1f} ms")
        print("median / least, in ms:")
        if floors[0]:
            print(f"import asyncio, uvloop: {_spread(floors[0])} from exec to exit, CPU {_spread(floors[1])}")
        for label, (accepts, answers, metadatas, produces, fetches, cpus, admins, longest) in results.items():
            if answers:
                print(f"{label}, {len(answers)} runs: accepting {_spread(accepts)}, first ApiVersions answer "
                      f"{_spread(answers)}, Metadata {_spread(metadatas)}, Produce {_spread(produces)}, "
                      f"Fetch {_spread(fetches)}, CPU to start, answer and stop {_spread(cpus)}"
                      + (f", admin endpoint {_spread(admins)}" if label.endswith("+admin") else "")
                      + (f", longest ApiVersions round trip until {PINGS_UNTIL_S:g} s {_spread(longest)}"
                         if a.admin else ""))
            if imports.get(label):
                low = min(imports[label])
                print(f"{label}: imports of a start and its first requests beyond asyncio and uvloop, CPU "
                      f"{statistics.median(imports[label]):.1f} / {low:.1f}")
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
