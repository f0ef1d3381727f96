#!/usr/bin/env python3
"""Capture real Kafka protocol frames exchanged by real clients, for codec tests.

How it works
============
1. **Mock broker.**  librdkafka (bundled with confluent-kafka) ships an
   in-memory mock cluster.  A "holder" ``confluent_kafka.Producer`` configured
   with ``test.mock.num.brokers=1`` starts one; librdkafka then logs
   "Mock cluster enabled: ... replaced with 127.0.0.1:PORT", which we pick up
   through the client's ``logger=`` hook (log callbacks are delivered by
   ``poll()``, so the holder is polled continuously).  The holder runs in a
   child process (this script with ``--serve-mock``) that prints the address
   and the mock's parse-error complaints on stdout and exits when its stdin
   is closed: malformed requests have crashed the mock (segfault), and out of
   process that only ends one phase.  Each phase (see ``PHASES``) gets a
   fresh mock.

2. **Recording proxy.**  For every scenario a :class:`RecordingProxy` listens
   on ``127.0.0.1:<ephemeral>`` and forwards to the mock broker.  It splits
   both directions into size-prefixed Kafka frames and records each one:
   direction, api_key, api_version, correlation_id and the frame bytes
   *without* the 4-byte size prefix.  Responses carry no api key/version;
   they are matched to their request by correlation id (the first int32 of a
   response) per connection.

   The mock advertises its own ``127.0.0.1:PORT`` (Metadata, FindCoordinator,
   ShareFetch node endpoints, ...), so clients would bypass the proxy after
   bootstrapping.  The proxy therefore replaces ``b"127.0.0.1" +
   int32(mock_port)`` with ``b"127.0.0.1" + int32(proxy_port)`` in every
   response before forwarding it.  Lengths do not change, so nothing needs
   parsing.  **The recorded response is the original frame as sent by the
   mock, before this rewrite.**

3. **Scenarios** drive kafka-python and confluent-kafka through the proxy:
   producers with every compression codec, idempotent and transactional
   producers, consumer groups (eager, cooperative-sticky, KIP-848), a
   consume-transform-produce transaction, a KIP-932 share consumer, admin
   calls, and kafka-python pinned to older broker versions (older request
   versions, legacy magic 0/1 message sets).  Failures are reported and the
   run goes on; every scenario is time-bounded, and a watchdog ends the whole
   run after ``--max-seconds``.  kafka-python needs two small workarounds for
   mock bugs, see :func:`_kafka_python_mock_workarounds`.

4. **Selection.**  Frames are deduplicated per client by ``(direction,
   api_key, api_version, variant)``; the first frame seen for a key is kept
   (the largest, for ShareFetch).  ``variant`` is set only where content
   differs meaningfully (see :func:`classify`): Produce requests and Fetch
   responses by the magic/codecs/idempotent/transactional/control flags of
   their record batches (parsed, CRCs verified), JoinGroup requests by their
   protocol names, ApiVersions responses by their error code.

5. **Cross-check.**  Every selected frame is decoded and re-encoded with
   kafka-python's schema-generated codec (:class:`KafkaPythonCodec`).  Frames
   that do not round-trip byte-identically are librdkafka-mock bugs (see the
   README) and go to ``nonconformant.jsonl`` instead of the client files.

Output (``--out``): ``kafka-python.jsonl``, ``confluent-kafka.jsonl`` and
``nonconformant.jsonl``, one JSON object per line::

    {"client": ..., "scenario": ..., "direction": "request"|"response",
     "api_key": int, "api_version": int, "correlation_id": int,
     "variant": str|null, "note": str|null, "frame": "<hex>"}

``frame`` is the hex of the frame without the size prefix: it starts with the
request header (api_key, api_version, correlation_id, client_id, ...) or the
response header (correlation_id, ...).  A response's ``api_version`` is that of
the request it answers.

Rerun
=====
::

    .venv/bin/python tests/tools/capture_frames.py --out tests/frames

Loopback only.  A full run takes about two minutes.  The output is not
bit-for-bit reproducible (timestamps, producer/member ids, CRCs, ports and
which first frame wins change between runs), but its shape is stable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("capture_frames")

LOOPBACK = "127.0.0.1"
#: Frames larger than this are not kept (keeps the data set small).
MAX_FRAME_BYTES = 128 * 1024
#: Records per produce scenario (small so that frames stay small).
RECORDS_PER_PRODUCE = 20
ABORTED_RECORDS = 3
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
    32: "DescribeConfigs", 33: "AlterConfigs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs",
    47: "OffsetDelete", 60: "DescribeCluster", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 71: "GetTelemetrySubscriptions", 72: "PushTelemetry",
    76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch",
    79: "ShareAcknowledge",
}


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------

@dataclass
class CapturedFrame:
    client: str
    scenario: str
    direction: str  # "request" | "response"
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes
    variant: str | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "scenario": self.scenario,
            "direction": self.direction,
            "api_key": self.api_key,
            "api_version": self.api_version,
            "correlation_id": self.correlation_id,
            "variant": self.variant,
            "note": self.note,
            "frame": self.frame.hex(),
        }


class Recorder:
    """Thread-safe sink for captured frames."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames: list[CapturedFrame] = []

    def add(self, frame: CapturedFrame) -> None:
        with self._lock:
            self.frames.append(frame)

    def snapshot(self) -> list[CapturedFrame]:
        with self._lock:
            return list(self.frames)


# --------------------------------------------------------------------------
# Asyncio loop in a background thread, hosting all proxies
# --------------------------------------------------------------------------

class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="proxy-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size_bytes = await reader.readexactly(4)
        (size,) = struct.unpack(">i", size_bytes)
        if size < 0 or size > 100 * 1024 * 1024:
            raise ValueError(f"implausible frame size {size}")
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


class RecordingProxy:
    """Loopback TCP proxy to one mock broker that records every Kafka frame."""

    def __init__(self, loop: LoopThread, upstream: tuple[str, int], recorder: Recorder,
                 client: str, scenario: str) -> None:
        self._loop = loop
        self.upstream = upstream
        self.recorder = recorder
        self.client = client
        self.scenario = scenario
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    # -- lifecycle (called from the main thread) --
    def start(self) -> RecordingProxy:
        self._loop.call(self._start())
        return self

    def stop(self) -> None:
        try:
            self._loop.call(self._stop())
        except Exception:  # pragma: no cover - best effort
            log.exception("stopping proxy failed")

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, LOOPBACK, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        old = LOOPBACK.encode() + struct.pack(">i", self.upstream[1])
        new = LOOPBACK.encode() + struct.pack(">i", self.port)
        self._rewrite = (old, new)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)

    # -- per connection --
    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self._writers.add(c_writer)
        u_writer = None
        try:
            u_reader, u_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), timeout=5)
            self._writers.add(u_writer)
            pending: dict[int, tuple[int, int]] = {}
            pumps = {
                asyncio.create_task(self._pump_requests(c_reader, u_writer, pending)),
                asyncio.create_task(self._pump_responses(u_reader, c_writer, pending)),
            }
            self._tasks |= pumps
            # Either side closing ends the connection; _stop() cancels the pumps.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for p in pumps:
                p.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self._tasks -= pumps
        except (TimeoutError, OSError) as exc:
            log.warning("[%s] upstream connection failed: %s", self.scenario, exc)
        finally:
            for w in (c_writer, u_writer):
                if w is not None:
                    w.close()
                    self._writers.discard(w)

    async def _pump_requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             pending: dict[int, tuple[int, int]]) -> None:
        while (frame := await _read_frame(reader)) is not None:
            api_key, api_version, corr = struct.unpack_from(">hhi", frame, 0)
            pending[corr] = (api_key, api_version)
            self.recorder.add(CapturedFrame(self.client, self.scenario, "request",
                                            api_key, api_version, corr, frame))
            writer.write(struct.pack(">i", len(frame)) + frame)
            await writer.drain()

    async def _pump_responses(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                              pending: dict[int, tuple[int, int]]) -> None:
        while (frame := await _read_frame(reader)) is not None:
            (corr,) = struct.unpack_from(">i", frame, 0)
            key_version = pending.pop(corr, None)
            if key_version is None:
                log.warning("[%s] response with unknown correlation id %d", self.scenario, corr)
            else:
                self.recorder.add(CapturedFrame(self.client, self.scenario, "response",
                                                key_version[0], key_version[1], corr, frame))
            # Point advertised broker addresses at the proxy (same length).
            old, new = self._rewrite
            out = frame.replace(old, new) if old in frame else frame
            writer.write(struct.pack(">i", len(out)) + out)
            await writer.drain()


# --------------------------------------------------------------------------
# librdkafka mock cluster
# --------------------------------------------------------------------------

class _MockLogHandler(logging.Handler):
    """Collects the mock's address and its complaints from librdkafka's log."""

    ADDRESS = re.compile(r"Mock cluster enabled: .* replaced with (\S+)")
    RECEIVED = re.compile(r"Received (\w+Request)V(\d+) from (\S+)")
    CLOSED = re.compile(r"Connection from (\S+) closed: (Parse error.*)")
    NOTABLE = re.compile(r"max allowed|[Uu]nsupported|[Uu]nknown request")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.address: str | None = None
        self.notable: list[str] = []
        self._last_request: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if m := self.ADDRESS.search(msg):
            self.address = m.group(1).split(",")[0]
        elif m := self.RECEIVED.search(msg):
            self._last_request[m.group(3)] = f"{m.group(1)} v{m.group(2)}"
        elif m := self.CLOSED.search(msg):
            last = self._last_request.get(m.group(1), "?")
            self.notable.append(f"{m.group(2)} (connection dropped) after {last}")
        elif self.NOTABLE.search(msg):
            self.notable.append(re.sub(r"^.*\[thrd:[^]]*\]: ", "", msg))


def serve_mock(max_seconds: float) -> int:
    """Child-process mode: run a 1-broker librdkafka mock until stdin closes.

    Protocol on stdout (one line each): ``ADDRESS host:port`` once, then
    ``NOTE <text>`` for every parse error or similar complaint of the mock.
    """
    from confluent_kafka import Producer

    class _Forward(_MockLogHandler):
        def emit(self, record: logging.LogRecord) -> None:
            had_address, n_notes = self.address, len(self.notable)
            super().emit(record)
            if self.address and not had_address:
                print(f"ADDRESS {self.address}", flush=True)
            for note in self.notable[n_notes:]:
                print(f"NOTE {note}", flush=True)

    mock_log = logging.getLogger("capture_frames.mock")
    mock_log.propagate = False
    mock_log.setLevel(logging.DEBUG)
    mock_log.addHandler(_Forward())
    # debug=mock makes the mock log the protocol parse errors that we report.
    holder = Producer({"test.mock.num.brokers": 1, "logger": mock_log, "debug": "mock"})
    stdin_closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    deadline = time.monotonic() + max_seconds
    while not stdin_closed.is_set() and time.monotonic() < deadline:
        holder.poll(0.2)  # also delivers the log callbacks
    return 0


@dataclass
class MockCluster:
    host: str
    port: int
    process: Any
    notes: list[str] = field(default_factory=list)

    @property
    def upstream(self) -> tuple[str, int]:
        return self.host, self.port

    def crashed(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"mock process exited with code {code}"


@contextmanager
def mock_cluster(max_seconds: float, timeout: float = 15.0) -> Iterator[MockCluster]:
    """Start a 1-broker librdkafka mock cluster in a child process.

    The mock runs out of process because malformed requests can crash it
    (we saw segfaults after the parse errors described in the README); a
    crash then only ends the current phase instead of the whole capture.
    """
    import queue
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve-mock",
         "--max-seconds", str(max_seconds)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read_stdout, name="mock-stdout", daemon=True).start()
    collector: threading.Thread | None = None
    try:
        address = None
        deadline = time.monotonic() + timeout
        while address is None:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise RuntimeError("mock process exited before reporting its address")
            if line.startswith("ADDRESS "):
                address = line.split(" ", 1)[1]
        host, port = address.rsplit(":", 1)
        if host != LOOPBACK:
            raise RuntimeError(f"unexpected mock address {address}")
        log.info("mock cluster at %s (pid %d)", address, proc.pid)
        mock = MockCluster(host, int(port), proc)

        def collect_notes() -> None:
            while (line := lines.get()) is not None:
                if line.startswith("NOTE "):
                    mock.notes.append(line[5:])

        collector = threading.Thread(target=collect_notes, name="mock-notes", daemon=True)
        collector.start()
        yield mock
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if collector is not None:
            collector.join(2)


# --------------------------------------------------------------------------
# Frame classification (variants) -- a tiny, defensive reader
# --------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _unpack(self, fmt: str) -> Any:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self) -> int: return self._unpack(">b")
    def i16(self) -> int: return self._unpack(">h")
    def i32(self) -> int: return self._unpack(">i")
    def i64(self) -> int: return self._unpack(">q")

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("out of bounds")
        self.pos += n

    def string(self, flexible: bool) -> None:
        n = self.uvarint() - 1 if flexible else self.i16()
        if n > 0:
            self.skip(n)

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.i32()
        if n < 0:
            return None
        self.skip(n)
        return self.data[self.pos - n:self.pos]

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.i32()

    def tags(self, flexible: bool) -> None:
        if flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.skip(self.uvarint())


@dataclass
class _Batch:
    magic: int
    attributes: int
    producer_id: int
    crc_stored: int
    crc_ok: bool


def _scan_batches(records: bytes | None) -> list[_Batch]:
    """Decode the headers of the record batches (magic 2) / messages (magic 0, 1)."""
    import zlib

    import crc32c  # project dependency

    out = []
    pos = 0
    while records and pos + 17 <= len(records):
        size = struct.unpack_from(">i", records, pos + 8)[0]
        end = pos + 12 + size
        if size <= 0 or end > len(records):
            break  # a truncated trailing batch is legal in Fetch responses
        magic = records[pos + 16]
        if magic >= 2:
            crc = struct.unpack_from(">I", records, pos + 17)[0]
            attrs = struct.unpack_from(">h", records, pos + 21)[0]
            pid = struct.unpack_from(">q", records, pos + 43)[0]
            ok = crc == crc32c.crc32c(records[pos + 21:end])
        else:
            crc = struct.unpack_from(">I", records, pos + 12)[0]
            attrs = records[pos + 17]
            pid = -1
            ok = crc == zlib.crc32(records[pos + 16:end])
        out.append(_Batch(magic, attrs, pid, crc, ok))
        pos = end
    return out


def _describe_batches(batches: list[_Batch], notes: list[str]) -> str:
    if not batches:
        return "empty"
    control = [b for b in batches if b.magic >= 2 and b.attributes & 0x20]
    data = [b for b in batches if b not in control]
    codecs = sorted({CODEC_NAMES.get(b.attributes & 7, str(b.attributes & 7)) for b in data})
    parts = ["magic" + "+".join(sorted({str(b.magic) for b in batches}))]
    parts.append("+".join(codecs) if codecs else "nodata")
    if control:
        parts.append("control")
    if any(b.magic >= 2 and b.attributes & 0x10 for b in batches):
        parts.append("transactional")
    elif any(b.producer_id >= 0 for b in batches):
        parts.append("idempotent")
    bad = [b for b in batches if not b.crc_ok]
    if bad:
        zero_control = all(b in control and b.crc_stored == 0 for b in bad)
        notes.append(f"{len(bad)} of {len(batches)} record batches have a wrong CRC"
                     + (" (control batches written by the librdkafka mock carry CRC 0)"
                        if zero_control else ""))
    return ",".join(parts)


def _request_body(frame: bytes, flexible: bool) -> _Reader:
    r = _Reader(frame, 8)  # api_key, api_version, correlation_id
    r.string(False)  # client_id is never compact
    r.tags(flexible)
    return r


def _produce_request_variant(frame: bytes, version: int, notes: list[str]) -> str:
    flex = version >= 9
    r = _request_body(frame, flex)
    if version >= 3:
        r.string(flex)  # transactional_id
    r.i16()  # acks
    r.i32()  # timeout
    batches = []
    for _ in range(r.array_len(flex)):
        if version >= 13:
            r.skip(16)
        else:
            r.string(flex)
        for _ in range(r.array_len(flex)):
            r.i32()
            batches += _scan_batches(r.bytes_(flex))
            r.tags(flex)
        r.tags(flex)
    return _describe_batches(batches, notes)


def _fetch_response_variant(frame: bytes, version: int, notes: list[str]) -> str:
    flex = version >= 12
    r = _Reader(frame, 4)
    r.tags(flex)
    if version >= 1:
        r.i32()  # throttle
    if version >= 7:
        r.i16()
        r.i32()
    batches = []
    for _ in range(r.array_len(flex)):
        if version >= 13:
            r.skip(16)
        else:
            r.string(flex)
        for _ in range(r.array_len(flex)):
            r.i32()
            r.i16()
            r.i64()
            if version >= 4:
                r.i64()
            if version >= 5:
                r.i64()
            if version >= 4:
                for _ in range(max(r.array_len(flex), 0)):
                    r.i64()
                    r.i64()
                    r.tags(flex)
            if version >= 11:
                r.i32()
            batches += _scan_batches(r.bytes_(flex))
            r.tags(flex)
        r.tags(flex)
    return _describe_batches(batches, notes)


def _joingroup_request_variant(frame: bytes, version: int) -> str:
    flex = version >= 6
    r = _request_body(frame, flex)
    r.string(flex)  # group_id
    r.i32()  # session_timeout_ms
    if version >= 1:
        r.i32()  # rebalance_timeout_ms
    r.string(flex)  # member_id
    if version >= 5:
        r.string(flex)  # group_instance_id
    r.string(flex)  # protocol_type
    names = []
    for _ in range(r.array_len(flex)):
        n = r.uvarint() - 1 if flex else r.i16()
        names.append(frame[r.pos:r.pos + n].decode(errors="replace"))
        r.skip(n)
        r.bytes_(flex)
        r.tags(flex)
    return "protocols=" + "+".join(names)


def classify(f: CapturedFrame) -> tuple[str | None, list[str]]:
    """Return (variant, notes) for a frame; see the module docstring."""
    notes: list[str] = []
    try:
        if f.direction == "request" and f.api_key == 0:
            return _produce_request_variant(f.frame, f.api_version, notes), notes
        if f.direction == "response" and f.api_key == 1:
            return _fetch_response_variant(f.frame, f.api_version, notes), notes
        if f.direction == "request" and f.api_key == 11:
            return _joingroup_request_variant(f.frame, f.api_version), notes
        if f.direction == "response" and f.api_key == 18:
            # ApiVersions responses always use response header v0.
            (error_code,) = struct.unpack_from(">h", f.frame, 4)
            return (f"error={error_code}" if error_code else None), notes
    except (struct.error, ValueError, IndexError):
        return "unparsed", notes
    return None, notes


class KafkaPythonCodec:
    """Independent cross-check: decode + re-encode a frame with kafka-python's codec.

    kafka-python 3.x generates its protocol classes from Apache Kafka's JSON
    message schemas.  A frame that kafka-python decodes and re-encodes to the
    identical bytes is very likely spec-conformant; one that it cannot is
    either malformed (we found several librdkafka-mock bugs this way) or hits
    a kafka-python limitation.  Response headers are checked separately (the
    correlation id plus, for flexible versions except ApiVersions, an empty
    tagged-field section).
    """

    NO_SCHEMA = "kafka-python has no schema for this API"

    def __init__(self) -> None:
        import importlib
        import pkgutil

        import kafka.protocol
        from kafka.protocol.api_message import ApiMessage

        for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
            try:
                importlib.import_module(mod.name)
            except Exception:  # noqa: BLE001 - optional modules
                pass
        self.classes: dict[tuple[int, str], Any] = {}
        todo = list(ApiMessage.__subclasses__())
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
                self.classes[(cls.API_KEY, cls.type)] = cls

    def check(self, f: CapturedFrame) -> str | None:
        """Return None if the frame round-trips byte-identically, else a reason."""
        cls = self.classes.get((f.api_key, f.direction))
        if cls is None:
            return self.NO_SCHEMA
        v = f.api_version
        try:
            if f.direction == "request":
                obj = cls.decode(f.frame, version=v, header=True)
                out = bytes(obj.encode(version=v, header=True))
                body_len = len(f.frame)
                ok = out == f.frame
            else:
                flexible = cls.flexible_version_q(v) and f.api_key != 18
                hlen = 5 if flexible else 4
                if flexible and f.frame[4] != 0:
                    return "response header carries tagged fields"
                body = f.frame[hlen:]
                obj = cls.decode(body, version=v)
                obj._header = None
                out = bytes(obj.encode(version=v))
                body_len = len(body)
                ok = out == body
        except Exception as exc:  # noqa: BLE001
            return f"kafka-python cannot decode it: {type(exc).__name__}: {exc}"
        if not ok:
            return (f"kafka-python re-encodes it differently ({len(out)} vs {body_len} "
                    f"bytes{', trailing bytes?' if len(out) < body_len else ''})")
        return None


#: Explanations for the mock defects found by KafkaPythonCodec,
#: keyed by (api_key, api_version, direction).
_APIVERSIONS_BUG = (
    "librdkafka mock: its UNSUPPORTED_VERSION reply to an ApiVersions v3+ request "
    "writes the ApiKeys count as a plain int8 (N instead of compact N+1) and no tagged "
    "fields; it is neither the v0-encoded fallback Kafka sends nor a valid v3 body")
KNOWN_MOCK_BUGS: dict[tuple[int, int, str], str] = {
    (18, 3, "response"): _APIVERSIONS_BUG,
    (18, 4, "response"): _APIVERSIONS_BUG,
    (0, 5, "response"): "librdkafka mock: Produce v5 response lacks LogStartOffset "
                        "(the mock writes it only for v6+)",
    (3, 13, "response"): "librdkafka mock: Metadata v13 response body is one byte longer "
                         "than the schema allows",
    (13, 4, "response"): "librdkafka mock: LeaveGroup v4 response writes a bogus Members "
                         "compact-array length",
}


#: (api_key, direction) whose largest frame is kept instead of the first one: the
#: first ShareFetch exchange carries neither records nor acknowledgements.
PREFER_LARGEST = {(78, "request"), (78, "response")}


def select_frames(frames: list[CapturedFrame], codec: KafkaPythonCodec | None
                  ) -> tuple[list[CapturedFrame], list[CapturedFrame]]:
    """Deduplicate by (client, direction, api_key, api_version, variant).

    Returns (conformant, nonconformant): frames that kafka-python's codec
    cannot round-trip are set aside (with a note) instead of being kept.
    """
    kept: dict[tuple[Any, ...], CapturedFrame] = {}
    bad: dict[tuple[Any, ...], CapturedFrame] = {}
    for f in frames:
        if len(f.frame) > MAX_FRAME_BYTES:
            continue
        f.variant, notes = classify(f)
        key = (f.client, f.direction, f.api_key, f.api_version, f.variant)
        if key in kept and not (
                (f.api_key, f.direction) in PREFER_LARGEST and len(f.frame) > len(kept[key].frame)):
            continue
        problem = codec.check(f) if codec is not None else None
        if problem == KafkaPythonCodec.NO_SCHEMA:
            notes.insert(0, "not cross-checked: " + problem)
            problem = None
        if problem is None:
            f.note = "; ".join(notes) or None
            kept[key] = f
            bad.pop(key, None)
        elif key not in bad:
            known = KNOWN_MOCK_BUGS.get((f.api_key, f.api_version, f.direction))
            f.note = "; ".join([problem] + ([known] if known else []) + notes)
            bad[key] = f

    def order(f: CapturedFrame) -> tuple[Any, ...]:
        return (f.client, f.api_key, f.api_version, f.direction != "request", f.variant or "")

    return sorted(kept.values(), key=order), sorted(bad.values(), key=order)


# --------------------------------------------------------------------------
# Scenario plumbing
# --------------------------------------------------------------------------

Scenario = Callable[[str], None]  # receives the proxy's bootstrap address


@dataclass
class Session:
    loop: LoopThread
    recorder: Recorder
    client: str
    mock: MockCluster
    results: dict[str, str] = field(default_factory=dict)

    def run(self, name: str, scenario: Scenario) -> None:
        if crash := self.mock.crashed():
            self.results[name] = f"skipped: {crash}"
            return
        proxy = RecordingProxy(self.loop, self.mock.upstream, self.recorder, self.client,
                               name).start()
        t0 = time.monotonic()
        try:
            scenario(proxy.bootstrap)
            self.results[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - report and carry on
            self.results[name] = f"failed: {type(exc).__name__}: {exc}"
            log.debug("scenario %s traceback:\n%s", name, traceback.format_exc())
        finally:
            proxy.stop()
        log.info("[%s] %s: %s (%.1fs)", self.client, name, self.results[name],
                 time.monotonic() - t0)


def _payload(i: int, tag: str) -> bytes:
    return (f"{tag} record {i:04d} " + "lorem ipsum dolor sit amet " * 3).encode()


HEADERS = [("trace-id", b"0123456789abcdef"), ("source", b"capture_frames"), ("empty", b"")]


# --------------------------------------------------------------------------
# kafka-python scenarios
# --------------------------------------------------------------------------

def _install_cramjam_snappy() -> None:
    """kafka-python only supports the ``python-snappy`` module; emulate it with cramjam."""
    import kafka.codec

    if kafka.codec.has_snappy():
        return
    import cramjam

    class _Snappy:
        @staticmethod
        def compress(data: bytes) -> bytes:
            return bytes(cramjam.snappy.compress_raw(bytes(data)))

        @staticmethod
        def decompress(data: bytes) -> bytes:
            return bytes(cramjam.snappy.decompress_raw(bytes(data)))

    kafka.codec.snappy = _Snappy  # type: ignore[attr-defined]


@contextmanager
def _kafka_python_mock_workarounds(caps: dict[int, int] | None = None) -> Iterator[None]:
    """Work around two librdkafka-mock bugs that would stop kafka-python early.

    * kafka-python 3.x opens every connection with ApiVersions v4.  A real
      broker that only supports v0-v2 answers with an UNSUPPORTED_VERSION error
      encoded as v0 and kafka-python retries with the advertised max version.
      The mock instead answers with a malformed frame (see the README), which
      kafka-python cannot decode, so it never gets past the handshake.  We make
      kafka-python start the handshake at v2 -- exactly what it would do after
      a well-formed error response.
    * The mock advertises JoinGroup v6 and SyncGroup v4 but parses these
      flexible versions with non-compact arrays and drops the connection
      ("ProtocolCnt ... > max allowed", "Parse error").  `caps` (api_key ->
      max version) defaults to JoinGroup v5 and SyncGroup v3.

    Everything else, including version negotiation from the mock's
    ApiVersions response and all encoding, is kafka-python's own logic.
    """
    from kafka.net.connection import KafkaConnection
    from kafka.protocol.broker_version_data import BrokerVersionData

    caps = {11: 5, 14: 3} if caps is None else caps
    orig_init = KafkaConnection.__init__
    orig_api_version = BrokerVersionData.api_version

    def patched_init(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        self._api_versions_idx = min(self._api_versions_idx, 2)

    def patched_api_version(self: Any, operation: Any, min_version: int = 0,
                            max_version: float = float("inf")) -> int:
        key = getattr(operation, "API_KEY", getattr(operation, "value", None))
        if key in caps:
            max_version = min(max_version, caps[key])
        return orig_api_version(self, operation, min_version, max_version)

    KafkaConnection.__init__ = patched_init  # type: ignore[method-assign]
    BrokerVersionData.api_version = patched_api_version  # type: ignore[method-assign]
    try:
        yield
    finally:
        KafkaConnection.__init__ = orig_init  # type: ignore[method-assign]
        BrokerVersionData.api_version = orig_api_version  # type: ignore[method-assign]


KP_COMMON: dict[str, Any] = {"request_timeout_ms": 5000, "bootstrap_timeout_ms": 5000,
                             "client_id": "kafka-python-capture"}


def _kp_produce(topic: str, **cfg: Any) -> Scenario:
    """kafka-python: produce RECORDS_PER_PRODUCE keyed records with headers."""
    def run(bootstrap: str) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, **{**KP_COMMON, **cfg})
        try:
            if cfg.get("transactional_id"):
                p.init_transactions()
                p.begin_transaction()
            futures = [p.send(topic, key=b"key-%d" % (i % 5), value=_payload(i, topic),
                              headers=HEADERS if p.config["api_version"] >= (0, 11) else None)
                       for i in range(RECORDS_PER_PRODUCE)]
            p.flush(10)
            for fut in futures:
                fut.get(timeout=10)
            if cfg.get("transactional_id"):
                p.commit_transaction()
        finally:
            p.close(timeout=5)
    return run


def _kp_consume(topics: list[str], group: str, expected: int, poll_seconds: float = 20,
                **cfg: Any) -> Scenario:
    """kafka-python: consume `topics` in `group`, commit, look up offsets."""
    def run(bootstrap: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=6000, heartbeat_interval_ms=500,
                          fetch_max_wait_ms=200,
                          # The mock writes transaction control batches with CRC 0.
                          check_crcs=False, **{**KP_COMMON, **cfg})
        try:
            got = 0
            deadline = time.monotonic() + poll_seconds
            while got < expected and time.monotonic() < deadline:
                got += sum(len(v) for v in c.poll(timeout_ms=500).values())
            # Keep the group alive a little longer to capture heartbeats.
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                c.poll(timeout_ms=200)
            if c.assignment():
                c.commit()
                c.committed(TopicPartition(topics[0], 0))
                c.end_offsets(list(c.assignment()))
                c.offsets_for_times({tp: 0 for tp in c.assignment()})
            if got < expected:
                raise RuntimeError(f"consumed {got}/{expected} records")
        finally:
            c.close()
    return run


def kafka_python_scenarios(session: Session) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import ConfigResource, NewTopic, OffsetSpec

    _install_cramjam_snappy()
    common = KP_COMMON
    produce, consume = _kp_produce, _kp_consume

    def admin(bootstrap: str) -> None:
        a = KafkaAdminClient(bootstrap_servers=bootstrap, **common)
        errors = []
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("api_versions", lambda: a.api_versions()),
            ("list_topics", lambda: a.list_topics()),
            ("describe_topics", lambda: a.describe_topics(["kp-none"])),
            ("describe_cluster", lambda: a.describe_cluster()),
            ("list_partition_offsets", lambda: a.list_partition_offsets(
                {TopicPartition("kp-none", 0): OffsetSpec.LATEST})),
            ("create_topics", lambda: a.create_topics([NewTopic("kp-admin", 2, 1)])),
            ("list_groups", lambda: a.list_groups()),
            ("describe_groups", lambda: a.describe_groups(["kp-group"])),
            ("list_group_offsets", lambda: a.list_group_offsets("kp-group")),
            ("describe_configs", lambda: a.describe_configs(
                [ConfigResource("TOPIC", "kp-none")])),
        ]
        try:
            for name, call in calls:
                try:
                    call()
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            a.close()
        if errors:
            raise RuntimeError("; ".join(errors))

    # 1. Unpatched, unpinned kafka-python: fails at the ApiVersions handshake
    #    (captures its ApiVersions v4 request and the mock's malformed reply).
    session.run("handshake-unpinned", produce("kp-none", bootstrap_timeout_ms=1500))

    # 2. Negotiated versions (highest common versions of kafka-python and mock).
    with _kafka_python_mock_workarounds():
        for codec in CODECS:
            session.run(f"produce-{codec}", produce(
                f"kp-{codec}", compression_type=None if codec == "none" else codec))
        # kafka-python 3.x is idempotent by default; also capture the plain producer.
        session.run("produce-non-idempotent", produce(
            "kp-plain", enable_idempotence=False, acks=1, compression_type="snappy"))
        session.run("produce-transactional", produce(
            "kp-txn", transactional_id="kp-txn-1", compression_type="gzip"))
        topics = [f"kp-{c}" for c in CODECS] + ["kp-plain", "kp-txn"]
        total = RECORDS_PER_PRODUCE * len(topics)
        session.run("consume-group", consume(topics, "kp-group", total))
        session.run("consume-group-read-committed", consume(
            topics, "kp-group-rc", total, isolation_level="read_committed"))
        session.run("admin", admin)

    # 3. Pinned older broker versions: older request versions, and legacy
    #    message sets (magic 0/1) for Produce < v3 (the mock rejects those).
    for pin in ((2, 3), (1, 1), (0, 11), (0, 10, 2), (0, 9)):
        label = ".".join(map(str, pin))
        session.run(f"produce-pinned-{label}", produce(
            f"kp-pinned-{label}", api_version=pin,
            compression_type="gzip" if pin >= (0, 10) else None))
        session.run(f"consume-pinned-{label}", consume(
            ["kp-gzip"], f"kp-group-{label}", RECORDS_PER_PRODUCE, api_version=pin))


def kafka_python_unparseable_scenarios(session: Session) -> None:
    """Request versions the mock advertises but cannot parse (it drops the connection).

    Run against a separate mock: a member whose SyncGroup was dropped has been
    seen to crash the mock later on.
    """
    _install_cramjam_snappy()
    with _kafka_python_mock_workarounds():
        session.run("produce-for-unparseable", _kp_produce("kp-none"))
    with _kafka_python_mock_workarounds(caps={}):
        session.run("consume-joingroup-v6", _kp_consume(
            ["kp-none"], "kp-group-jg6", 1, poll_seconds=3))
    with _kafka_python_mock_workarounds(caps={11: 5}):
        session.run("consume-syncgroup-v4", _kp_consume(
            ["kp-none"], "kp-group-sg4", 1, poll_seconds=3))


# --------------------------------------------------------------------------
# confluent-kafka scenarios
# --------------------------------------------------------------------------

def confluent_scenarios(session: Session) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    common: dict[str, Any] = {"client.id": "confluent-kafka-capture",
                              "socket.timeout.ms": 5000}

    def produce(topic: str, **cfg: Any) -> Scenario:
        def run(bootstrap: str) -> None:
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **common, **cfg})
            delivered: list[Any] = []
            txn = "transactional.id" in cfg
            if txn:
                p.init_transactions(10)
                p.begin_transaction()
            for i in range(RECORDS_PER_PRODUCE):
                p.produce(topic, key=b"key-%d" % (i % 5), value=_payload(i, topic),
                          headers=HEADERS, on_delivery=lambda err, msg: delivered.append(err))
            if txn:
                p.commit_transaction(10)
                # A second, aborted transaction (EndTxn with commit=false).
                p.begin_transaction()
                for i in range(ABORTED_RECORDS):
                    p.produce(topic, key=b"aborted", value=_payload(i, "aborted"))
                p.flush(10)  # make sure the aborted batch reaches the broker
                p.abort_transaction(10)
            remaining = p.flush(10)
            if remaining or len(delivered) < RECORDS_PER_PRODUCE or any(delivered):
                raise RuntimeError(f"delivery incomplete: {remaining} left, errors "
                                   f"{[e for e in delivered if e]}")
        return run

    for codec in CODECS:
        session.run(f"produce-{codec}", produce(f"ck-{codec}", **{"compression.codec": codec}))
    session.run("produce-idempotent", produce("ck-idempotent", **{"enable.idempotence": True}))
    session.run("produce-transactional", produce("ck-txn", **{"transactional.id": "ck-txn-1",
                                                               "compression.codec": "lz4"}))
    topics = [f"ck-{c}" for c in CODECS] + ["ck-idempotent", "ck-txn"]
    total = RECORDS_PER_PRODUCE * len(topics)

    def consume(group: str, expected: int, **cfg: Any) -> Scenario:
        def run(bootstrap: str) -> None:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "fetch.wait.max.ms": 200, **common, **cfg})
            try:
                c.subscribe(topics)
                got = 0
                deadline = time.monotonic() + 25
                while got < expected and time.monotonic() < deadline:
                    msg = c.poll(0.5)
                    if msg is not None and msg.error() is None:
                        got += 1
                for _ in range(3):
                    c.poll(0.5)
                assignment = c.assignment()
                if got:
                    c.commit(asynchronous=False)
                c.committed(assignment, timeout=5)
                if assignment:
                    c.get_watermark_offsets(assignment[0], timeout=5)
                    c.offsets_for_times([TopicPartition(tp.topic, tp.partition, 0)
                                         for tp in assignment], timeout=5)
                if got < expected:
                    raise RuntimeError(f"consumed {got}/{expected} records")
            finally:
                c.close()
        return run

    # The transactional scenario wrote aborted records which read_uncommitted sees.
    session.run("consume-group-range", consume("ck-group-range", total + ABORTED_RECORDS,
                                               **{"partition.assignment.strategy": "range",
                                                  "session.timeout.ms": 6000}))
    session.run("consume-group-cooperative",
                consume("ck-group-coop", total + ABORTED_RECORDS,
                        **{"partition.assignment.strategy": "cooperative-sticky",
                           "session.timeout.ms": 6000}))
    session.run("consume-group-read-committed",
                consume("ck-group-rc", total, **{"isolation.level": "read_committed",
                                                 "session.timeout.ms": 6000}))
    session.run("consume-group-kip848", consume("ck-group-848", total + ABORTED_RECORDS,
                                                **{"group.protocol": "consumer"}))

    def transactional_consume_produce(bootstrap: str) -> None:
        """Consume-transform-produce: AddOffsetsToTxn + TxnOffsetCommit."""
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-eos",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, **common})
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-eos-1", **common})
        try:
            c.subscribe(["ck-none"])
            p.init_transactions(10)
            p.begin_transaction()
            got = []
            deadline = time.monotonic() + 15
            while len(got) < RECORDS_PER_PRODUCE and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m)
                    p.produce("ck-eos-out", key=m.key(), value=m.value())
            positions = c.position(c.assignment())
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 10)
            p.commit_transaction(10)
        finally:
            c.close()

    session.run("transactional-consume-produce", transactional_consume_produce)

    def share_consumer(bootstrap: str) -> None:
        """KIP-932 share group: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge."""
        from confluent_kafka import ShareConsumer

        sc = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "ck-share", **common})
        p = Producer({"bootstrap.servers": bootstrap, **common})
        try:
            p.produce("ck-share", value=b"creates the topic")
            p.flush(5)
            sc.subscribe(["ck-share"])
            # Share groups start at the latest offset: produce once the member is in.
            got, produced = 0, False
            start = time.monotonic()
            while time.monotonic() - start < 10 and got < RECORDS_PER_PRODUCE:
                if not produced and time.monotonic() - start > 2:
                    for i in range(RECORDS_PER_PRODUCE):
                        p.produce("ck-share", key=b"key-%d" % i, value=_payload(i, "share"))
                    p.flush(5)
                    produced = True
                got += sum(1 for m in sc.poll(0.5) if m.error() is None)
            if got:
                sc.commit_sync()
            if got < RECORDS_PER_PRODUCE:
                raise RuntimeError(f"share consumer received {got}/{RECORDS_PER_PRODUCE}")
        finally:
            sc.close()

    session.run("share-consumer", share_consumer)

    def admin(bootstrap: str) -> None:
        a = AdminClient({"bootstrap.servers": bootstrap, **common})
        errors = []
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("list_topics", lambda: a.list_topics(timeout=5)),
            ("create_topics", lambda: a.create_topics(
                [NewTopic("ck-admin", 2, 1)], operation_timeout=3)["ck-admin"].result(5)),
            ("describe_configs", lambda: [f.result(5) for f in a.describe_configs(
                [ConfigResource(ResourceType.TOPIC, "ck-none")], request_timeout=5).values()]),
            ("list_consumer_groups", lambda: a.list_consumer_groups(request_timeout=5).result(5)),
            ("describe_consumer_groups", lambda: [f.result(5) for f in a.describe_consumer_groups(
                ["ck-group-range"], request_timeout=5).values()]),
            ("describe_cluster", lambda: a.describe_cluster(request_timeout=5).result(5)),
        ]
        for name, call in calls:
            try:
                call()
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
        if errors:
            raise RuntimeError("; ".join(errors))

    session.run("admin", admin)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

#: (client, phase); every phase runs against its own, fresh mock cluster.
PHASES: list[tuple[str, Callable[[Session], None]]] = [
    ("kafka-python", kafka_python_scenarios),
    ("kafka-python", kafka_python_unparseable_scenarios),
    ("confluent-kafka", confluent_scenarios),
]


NONCONFORMANT_FILE = "nonconformant.jsonl"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "frames"


def write_output(out: Path, frames: list[CapturedFrame], nonconformant: list[CapturedFrame],
                 clients: list[str]) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    files = {f"{client}.jsonl": [json.dumps(f.to_json()) for f in frames if f.client == client]
             for client in clients}
    # nonconformant.jsonl is shared: keep the lines of clients not captured this time.
    path = out / NONCONFORMANT_FILE
    others = [line for line in (path.read_text().splitlines() if path.exists() else [])
              if json.loads(line)["client"] not in clients]
    files[NONCONFORMANT_FILE] = others + [json.dumps(f.to_json()) for f in nonconformant]
    for name, lines in files.items():
        path = out / name
        path.write_text("".join(line + "\n" for line in lines))
        sizes[name] = path.stat().st_size
    return sizes


def summarize(frames: list[CapturedFrame]) -> str:
    rows: dict[tuple[str, str], list[str]] = {}
    for f in frames:
        label = f"{API_NAMES.get(f.api_key, f.api_key)}({f.api_key}) v{f.api_version}"
        if f.variant:
            label += f" [{f.variant}]"
        rows.setdefault((f.client, f.direction), []).append(label)
    return "\n".join(f"{client} {direction}s ({len(v)}):\n  " + "\n  ".join(v)
                     for (client, direction), v in sorted(rows.items()))


def _start_watchdog(seconds: float) -> None:
    def bark() -> None:
        time.sleep(seconds)
        sys.stderr.write(f"capture_frames: watchdog expired after {seconds}s, aborting\n")
        sys.stderr.flush()
        os._exit(3)

    threading.Thread(target=bark, name="watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="output directory (default: tests/frames)")
    clients = sorted({c for c, _ in PHASES})
    ap.add_argument("--clients", nargs="+", choices=clients, default=clients)
    ap.add_argument("--max-seconds", type=float, default=600,
                    help="hard limit for the whole run (default: %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_mock:
        return serve_mock(args.max_seconds)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    _start_watchdog(args.max_seconds)

    recorder = Recorder()
    loop = LoopThread()
    results: dict[str, dict[str, str]] = {}
    mock_complaints: dict[str, list[str]] = {}
    try:
        for client, phase in PHASES:
            if client not in args.clients:
                continue
            with mock_cluster(args.max_seconds) as mock:
                session = Session(loop, recorder, client, mock)
                phase(session)
                results.setdefault(client, {}).update(session.results)
                mock_complaints.setdefault(client, []).extend(mock.notes)
                if crash := mock.crashed():
                    mock_complaints[client].append(crash)
    finally:
        loop.stop()

    frames, nonconformant = select_frames(recorder.snapshot(), KafkaPythonCodec())
    sizes = write_output(args.out, frames, nonconformant, args.clients)
    print(summarize(frames))
    print("\nnot conformant (kept apart in " + NONCONFORMANT_FILE + "):")
    for f in nonconformant:
        print(f"  {f.client} {f.direction} {API_NAMES.get(f.api_key, f.api_key)}"
              f"({f.api_key}) v{f.api_version}: {f.note}")
    for client, res in results.items():
        print(f"\n{client} scenarios:")
        for name, status in res.items():
            print(f"  {name}: {status}")
        if mock_complaints.get(client):
            print("  mock log (parse errors etc.):")
            for line in sorted(set(mock_complaints[client])):
                print(f"    {line}")
    print("\nfiles: " + ", ".join(f"{name}={n} bytes" for name, n in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
