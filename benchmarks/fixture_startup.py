"""How fast a test gets a broker: from asking for one to its first ApiVersions answer.

    python benchmarks/fixture_startup.py [--runs 7]

Measures, and prints medians (min-max) of:

* the in-process broker (``kafkalite.testing.EmbeddedBroker``, in-memory storage): the first one in a
  fresh interpreter (imports included) and each one after it, as the pytest plugin starts them;
* the subprocess broker (``kafkalite.testing.BrokerProcess`` running ``kafkalite serve --memory``): from
  spawning the process to the answer.

"Ready" is the moment an ApiVersions v0 request sent over a fresh TCP connection is answered.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 9) + b"bench-api"


def answer_api_versions(host: str, port: int, deadline_s: float = 30.0) -> None:
    """Connect (retrying until the port accepts), send ApiVersions v0, read the whole answer."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            connection = socket.create_connection((host, port), timeout=deadline_s)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.0005)
    with connection:
        connection.sendall(struct.pack(">i", len(API_VERSIONS)) + API_VERSIONS)
        size = struct.unpack(">i", _read(connection, 4))[0]
        _read(connection, size)


def _read(connection: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def in_process(runs: int) -> tuple[float, list[float]]:
    """Run in a fresh interpreter so the first figure includes the imports."""
    code = f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from fixture_startup import answer_api_versions
began = time.perf_counter()
from kafkalite.testing import EmbeddedBroker
times = []
for _ in range({runs + 1}):
    start = time.perf_counter() if times else began
    broker = EmbeddedBroker().start()
    answer_api_versions(broker.host, broker.port)
    times.append(time.perf_counter() - start)
    broker.close()
print(" ".join(f"{{value:.6f}}" for value in times))
"""
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    values = [float(value) for value in output.split()]
    return values[0], values[1:]


def in_subprocess(runs: int) -> list[float]:
    sys.path.insert(0, str(REPO))
    from kafkalite.testing import BrokerProcess

    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as scratch:
            process = BrokerProcess(Path(scratch) / "data", memory=True)
            began = time.perf_counter()
            process.spawn()
            process.wait_until_listening()
            answer_api_versions("127.0.0.1", process.port)
            times.append(time.perf_counter() - began)
            process.close()
    return times


def _line(label: str, values: list[float]) -> str:
    milliseconds = [value * 1000 for value in values]
    return (f"{label:<44} {statistics.median(milliseconds):8.1f} ms "
            f"({min(milliseconds):.1f}-{max(milliseconds):.1f}, {len(values)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    firsts, nexts = [], []
    for _ in range(max(1, args.runs // 2)):
        first, rest = in_process(args.runs)
        firsts.append(first)
        nexts.extend(rest)
    print(_line("in-process broker, first (imports included)", firsts))
    print(_line("in-process broker, each after the first", nexts))
    print(_line("subprocess broker (kafkalite serve --memory)", in_subprocess(args.runs)))


if __name__ == "__main__":
    main()
