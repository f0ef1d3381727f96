"""Mutated real client frames against a broker process: it must stay alive, bounded and quiet.

    python -m tests.tools.frame_fuzz [--seconds 600] [--connections 4] [--seed N] [--memory]

Starts ``kafkalite serve`` (disk storage unless ``--memory``) and has ``--connections`` workers send
it the request frames captured from real clients (``tests/frames/*.jsonl``), mutated: bits flipped,
bytes replaced, integers set to their extremes, frames cut short or padded, header fields changed,
size prefixes that lie. Workers pipeline a few frames per connection, sometimes read the answers,
sometimes close at once, sometimes leave a frame half sent or send nothing and keep the
connection (the broker must close those by itself), sometimes never read what comes back.
Meanwhile a probe connection sends ApiVersions every 50 ms and times the answer, and the broker's
resident memory and open sockets are sampled.

At the end every fuzzing connection is closed and the broker's open sockets must return to where
they started. ``run`` returns a :class:`FuzzReport`; the integration test runs it for a few
seconds and checks: RSS below the bound, sockets back to their starting level, no traceback in the
broker's log (each error is one line), the broker alive and answering. By hand, run it for minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.framing import encode_request, parse_request
from kafkalite.protocol.message import FieldSpec, Struct
from kafkalite.protocol.messages import REQUESTS
from kafkalite.testing.process import BrokerProcess, wait_for

FRAMES_DIR = Path(__file__).resolve().parents[1] / "frames"
RSS_LIMIT_MIB = 100.0
SOCKETS_SETTLE_S = 20.0
PROBE = struct.pack(">hhih", 18, 0, 0x7EEDBEEF, 5) + b"probe"
FUZZ_CONFIGS = {
    "connections.max.idle.ms": 2000,  # connections that went quiet are closed soon
    "socket.request.receive.timeout.ms": 2000,  # as are those that started a frame and stopped
    "socket.request.max.bytes": 50 * 1024 * 1024,
    "auto.create.topics.enable": "true",
    "num.partitions": 2,
    "log.segment.bytes": 256 * 1024,
    "group.initial.rebalance.delay.ms": 0,
}
_INTERESTING = [0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000,
                0xFFFFFFFF, 2**63 - 1, -(2**63)]


def request_frames() -> list[bytes]:
    """Every captured request frame (without its size prefix)."""
    frames = []
    for path in sorted(FRAMES_DIR.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["direction"] == "request":
                frames.append(bytes.fromhex(entry["frame"]))
    return frames


_WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _extreme(kind: str, rng: random.Random) -> object:
    """A value at the edge of what a field of schema type ``kind`` can hold."""
    if kind in _WIDTHS:
        bits = _WIDTHS[kind]
        return rng.choice((0, -1, 1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), rng.randrange(-(2 ** (bits - 1)),
                                                                                         2 ** (bits - 1))))
    if kind == "uint16":
        return rng.choice((0, 0xFFFF))
    if kind == "float64":
        return rng.choice((float("nan"), float("inf"), -1.0, 1e308))
    if kind == "bool":
        return rng.choice((True, False))
    if kind == "string":
        return rng.choice(("", "x" * rng.randint(1, 300), "\u00e9\u4e2d", "__consumer_offsets", "a..b"))
    if kind in ("bytes", "records"):
        return os.urandom(rng.randint(0, 200))
    if kind == "uuid":
        return uuid.UUID(int=rng.choice((0, rng.getrandbits(128))))
    return None


def _leaves(struct: Struct) -> list[tuple[Struct, FieldSpec]]:
    """Every (struct, field) pair under ``struct`` whose value is not itself a struct or a list of them."""
    found: list[tuple[Struct, FieldSpec]] = []
    for spec in struct.FIELDS:
        value = getattr(struct, spec.name)
        if spec.struct is None:
            found.append((struct, spec))
        elif isinstance(value, list):
            for item in value:
                found.extend(_leaves(item))
        elif value is not None:
            found.extend(_leaves(value))
    return found


def mutate_fields(frame: bytes, rng: random.Random) -> bytes:
    """Decode the request, set one to three of its fields to extreme values, encode it again (the
    bytes stay well-formed, so the mutation reaches the handler); the frame unchanged if it does not decode."""
    try:
        request = parse_request(frame)
        message = REQUESTS[request.api_key].decode_from(request.body, request.api_version)
    except (ProtocolError, KeyError):
        return frame
    leaves = _leaves(message)
    if not leaves:
        return frame
    for owner, spec in rng.sample(leaves, min(len(leaves), rng.randint(1, 3))):
        kind = spec.type.removeprefix("[]")
        value = _extreme(kind, rng)
        if spec.type.startswith("[]"):
            value = [value] * rng.randint(0, 3)
        setattr(owner, spec.name, value)
    try:
        return encode_request(message, request.api_version, request.correlation_id, request.header.client_id)[4:]
    except Exception:  # a value the encoder cannot write (None where the version has no null): keep the original
        return frame


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One to three mutations of ``frame`` (sometimes none: valid frames reach deeper code)."""
    if rng.random() < 0.3:
        frame = mutate_fields(frame, rng)
        if rng.random() < 0.7:
            return frame
    data = bytearray(frame)
    for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
        kind = rng.randrange(9)
        if kind == 0 and data:  # flip bits
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:  # random bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 2 and len(data) > 8:  # an extreme integer somewhere
            width = rng.choice((2, 4, 8))
            position = rng.randrange(len(data) - width)
            value = rng.choice(_INTERESTING) % (1 << (8 * width))
            data[position:position + width] = value.to_bytes(width, "big")
        elif kind == 3 and data:  # cut short
            del data[rng.randrange(len(data)):]
        elif kind == 4:  # junk at the end
            data += os.urandom(rng.randint(1, 64))
        elif kind == 5 and len(data) > 4:  # a slice repeated
            start = rng.randrange(len(data))
            piece = data[start:start + rng.randint(1, 32)]
            position = rng.randrange(len(data))
            data[position:position] = piece * rng.randint(1, 8)
        elif kind == 6 and len(data) >= 4:  # another API version
            data[2:4] = rng.randrange(-2, 20).to_bytes(2, "big", signed=True)
        elif kind == 7 and len(data) >= 2:  # another API key
            data[0:2] = rng.randrange(-1, 90).to_bytes(2, "big", signed=True)
        elif kind == 8 and len(data) > 12:  # a length field (int16/int32 right after the header) lies
            position = rng.randrange(8, len(data) - 4)
            data[position:position + 4] = rng.choice((0x7FFFFFFF, -1 & 0xFFFFFFFF, 0x00FFFFFF)).to_bytes(4, "big")
    return bytes(data)


def size_prefix(frame: bytes, rng: random.Random) -> bytes:
    """The frame's size, or now and then a lie: larger (the frame looks unfinished), negative, huge."""
    roll = rng.random()
    if roll < 0.9:
        return struct.pack(">i", len(frame))
    if roll < 0.95:
        return struct.pack(">i", len(frame) + rng.randint(1, 10_000_000))
    return struct.pack(">i", rng.choice((-1, -(2**31), 2**31 - 1, 0)))


@dataclass
class FuzzReport:
    seconds: float = 0.0
    frames_sent: int = 0
    connections_opened: int = 0
    probe_latencies_ms: list[float] = field(default_factory=list)
    probe_failures: int = 0
    peak_rss_mib: float = 0.0
    sockets_at_start: int = 0
    sockets_at_end: int = 0
    tracebacks: int = 0
    warnings: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    alive: bool = True

    def summary(self) -> str:
        latencies = sorted(self.probe_latencies_ms) or [0.0]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return (f"{self.seconds:.0f} s: {self.frames_sent} frames over {self.connections_opened} connections; "
                f"probe p50 {latencies[len(latencies) // 2]:.1f} ms, p99 {p99:.1f} ms, worst {latencies[-1]:.1f} ms, "
                f"{self.probe_failures} probe failures; peak RSS {self.peak_rss_mib:.1f} MiB; sockets "
                f"{self.sockets_at_start} at start, {self.sockets_at_end} at the end; log: {self.warnings} warnings, "
                f"{self.errors} errors, {self.tracebacks} tracebacks")


def broker_sockets(pid: int) -> int:
    """How many sockets the process holds (Linux)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


def _read_exactly(connection: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _worker(address: tuple[str, int], frames: list[bytes], seed: int, stop: threading.Event,
            report: FuzzReport, lock: threading.Lock) -> None:
    rng = random.Random(seed)
    kept: list[socket.socket] = []  # connections left half-sent or silent, for the broker to close
    while not stop.is_set():
        try:
            connection = socket.create_connection(address, timeout=2.0)
        except OSError:
            time.sleep(0.05)
            continue
        with lock:
            report.connections_opened += 1
        behaviour = rng.random()
        try:
            if behaviour < 0.05:  # connect and say nothing
                kept.append(connection)
                connection = None  # type: ignore[assignment]
            else:
                count = rng.randint(1, 6)
                payload = b""
                for _ in range(count):
                    frame = mutate(rng.choice(frames), rng)
                    payload += size_prefix(frame, rng) + frame
                if behaviour < 0.12:  # half a payload, then silence
                    connection.sendall(payload[:rng.randrange(1, max(2, len(payload)))])
                    kept.append(connection)
                    connection = None  # type: ignore[assignment]
                else:
                    # Several writes, as a client's pipelined requests arrive.
                    position = 0
                    while position < len(payload):
                        step = rng.randint(1, len(payload) - position)
                        connection.sendall(payload[position:position + step])
                        position += step
                    if behaviour < 0.7:  # read what comes back, briefly
                        connection.settimeout(0.3)
                        try:
                            while connection.recv(65536):
                                pass
                        except (TimeoutError, OSError):
                            pass
                    elif behaviour < 0.8:  # never read, keep it open a while
                        kept.append(connection)
                        connection = None  # type: ignore[assignment]
                with lock:
                    report.frames_sent += count
        except OSError:
            pass
        finally:
            if connection is not None:
                connection.close()
        while len(kept) > 20:  # a bounded number of lingering connections per worker
            kept.pop(0).close()
    for connection in kept:
        connection.close()


def _probe(address: tuple[str, int], stop: threading.Event, report: FuzzReport) -> None:
    connection: socket.socket | None = None
    while not stop.is_set():
        began = time.perf_counter()
        try:
            if connection is None:
                connection = socket.create_connection(address, timeout=5.0)
            connection.sendall(struct.pack(">i", len(PROBE)) + PROBE)
            size = struct.unpack(">i", _read_exactly(connection, 4))[0]
            _read_exactly(connection, size)
            report.probe_latencies_ms.append((time.perf_counter() - began) * 1000)
        except OSError:
            report.probe_failures += 1
            if connection is not None:
                connection.close()
            connection = None
        stop.wait(0.05)
    if connection is not None:
        connection.close()


def _log_lines(text: str) -> Iterator[str]:
    return iter(text.splitlines())


def run(seconds: float, connections: int, scratch: Path, *, seed: int | None = None, memory: bool = False,
        rss_limit_mib: float = RSS_LIMIT_MIB) -> FuzzReport:
    """Fuzz a fresh broker for ``seconds`` with ``connections`` workers; the broker is stopped after."""
    frames = request_frames()
    seed = random.randrange(2**32) if seed is None else seed
    report = FuzzReport()
    broker = BrokerProcess(scratch / "data", FUZZ_CONFIGS, memory=memory)
    broker.start()
    try:
        address = broker.address
        report.sockets_at_start = broker_sockets(broker.pid)
        stop = threading.Event()
        lock = threading.Lock()
        threads = [threading.Thread(target=_worker, args=(address, frames, seed + index, stop, report, lock),
                                    name=f"fuzz-{index}", daemon=True) for index in range(connections)]
        threads.append(threading.Thread(target=_probe, args=(address, stop, report), name="probe", daemon=True))
        began = time.monotonic()
        for thread in threads:
            thread.start()
        while time.monotonic() - began < seconds:
            if not broker.running:
                report.alive = False
                break
            report.peak_rss_mib = max(report.peak_rss_mib, broker.rss_mib())
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join(10.0)
        report.seconds = time.monotonic() - began
        if broker.running:
            report.peak_rss_mib = max(report.peak_rss_mib, broker.rss_mib())
            try:
                wait_for(lambda: broker_sockets(broker.pid) <= report.sockets_at_start, SOCKETS_SETTLE_S,
                         "sockets did not return to their starting level", interval=0.1)
            except TimeoutError:
                pass
            report.sockets_at_end = broker_sockets(broker.pid)
        else:
            report.alive = False
        text = broker.log_text()
        for line in _log_lines(text):
            if "Traceback" in line:
                report.tracebacks += 1
            if " WARNING " in line:
                report.warnings += 1
            if " ERROR " in line or " CRITICAL " in line:
                report.errors += 1
                if len(report.error_samples) < 10:
                    report.error_samples.append(line)
        if report.tracebacks:
            index = text.find("Traceback")
            report.error_samples.append(text[max(0, index - 300):index + 3000])
    finally:
        broker.close()
    del rss_limit_mib
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--memory", action="store_true", help="in-memory storage instead of a data directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        report = run(args.seconds, args.connections, Path(scratch), seed=args.seed, memory=args.memory)
    print(report.summary())
    for sample in report.error_samples:
        print(sample)


if __name__ == "__main__":
    main()
