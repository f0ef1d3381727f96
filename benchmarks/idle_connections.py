"""What an idle client connection costs the broker, and whether a busy broker still answers at once.

    python benchmarks/idle_connections.py [--connections 2000]

Starts ``kafkalite serve --memory`` in a subprocess, reads its resident memory (VmRSS), then opens
``--connections`` connections that each do what a client does first (ApiVersions) and then sit idle.
Prints the broker's RSS before and after and the RSS per idle connection, then the round-trip time of
ApiVersions on a new connection while all of them are open (median of 20). Needs an open-file limit
above the connection count (the script raises its own soft limit to the hard one).
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kafkalite.testing import BrokerProcess  # noqa: E402

REQUEST = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def api_versions(connection: socket.socket) -> None:
    connection.sendall(struct.pack(">i", len(REQUEST)) + REQUEST)
    size = struct.unpack(">i", _read(connection, 4))[0]
    _read(connection, size)


def _read(connection: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=2000)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as scratch, BrokerProcess(Path(scratch) / "data", memory=True) as broker:
        address = ("127.0.0.1", broker.port)
        with socket.create_connection(address) as warm:
            api_versions(warm)  # the broker has loaded what a request needs
        time.sleep(0.5)
        before = rss_kib(broker.pid)
        idle = []
        for _ in range(args.connections):
            connection = socket.create_connection(address)
            api_versions(connection)
            idle.append(connection)
        time.sleep(0.5)
        after = rss_kib(broker.pid)
        latencies = []
        for _ in range(20):
            began = time.perf_counter()
            with socket.create_connection(address) as probe:
                api_versions(probe)
            latencies.append((time.perf_counter() - began) * 1000)
        for connection in idle:
            connection.close()
    print(f"broker RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB with {args.connections} idle "
          f"connections: {(after - before) / args.connections:.1f} KiB per idle connection")
    print(f"a new client's ApiVersions round trip meanwhile: {statistics.median(latencies):.2f} ms median "
          f"({min(latencies):.2f}-{max(latencies):.2f})")


if __name__ == "__main__":
    main()
