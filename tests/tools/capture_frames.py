#!/usr/bin/env python3
"""Capture real Kafka protocol frames exchanged by real clients, for codec tests.

What it does
============
1. Starts librdkafka's in-process *mock cluster* (bundled with confluent-kafka)
   by creating a "holder" ``confluent_kafka.Producer`` configured with
   ``test.mock.num.brokers=1``.  librdkafka logs the mock's bootstrap address
   ("Mock cluster enabled: ... replaced with 127.0.0.1:PORT"); we pick it up
   through the ``logger=`` hook.  The holder is kept alive for as long as the
   mock is needed (one mock cluster per client library).

2. For every scenario a :class:`RecordingProxy` is started on
   ``127.0.0.1:<ephemeral>``.  It forwards bytes to the mock broker, splits
   both directions into size-prefixed Kafka frames and records each frame
   (direction, api_key, api_version, correlation_id, frame bytes *without* the
   4-byte size prefix).  Responses carry no api key/version, so they are
   matched to their request through the correlation id (the first int32 of the
   response frame) per connection.

   The mock advertises its own ``127.0.0.1:PORT`` in Metadata /
   FindCoordinator (and any other) responses, so clients would bypass the
   proxy after bootstrapping.  The proxy therefore replaces the byte sequence
   ``b"127.0.0.1" + int32(mock_port)`` with ``b"127.0.0.1" + int32(proxy_port)``
   in every response before forwarding it.  This keeps all lengths unchanged,
   so no parsing is needed.  **The recorded response is the original frame as
   sent by the mock (before the rewrite).**

3. Scenarios are then driven through the proxy with kafka-python and
   confluent-kafka (producers with every compression codec, idempotent and
   transactional producers, consumer groups with several assignment
   protocols, admin calls, ...).  Anything that the mock or a client does not
   support is logged and skipped; every scenario is bounded in time and a
   global watchdog aborts the whole run if it ever exceeds ``--max-seconds``.

4. Frames are deduplicated per client by ``(direction, api_key, api_version,
   variant)``: the first frame seen for a key is kept.  ``variant`` is only set
   where the content differs meaningfully:

   * Produce requests: the compression codec(s) of the record batches and
     whether they are idempotent / transactional (parsed from the batches).
   * Fetch responses: ``empty`` or the set of codecs found in the returned
     batches, plus ``control`` when transaction markers are present.

   Each kept frame becomes one JSON line in ``<out>/<client>.jsonl``::

       {"client": ..., "scenario": ..., "direction": "request"|"response",
        "api_key": int, "api_version": int, "correlation_id": int,
        "variant": str|null, "frame": "<hex>"}

   ``frame`` is the hex of the frame without the 4-byte size prefix, i.e. it
   starts with the request header (api_key, api_version, correlation_id,
   client_id, ...) or with the response header (correlation_id, ...).
   Note: ``api_version`` of a response is the version of the *request* it
   answers; an ApiVersions error response to an unsupported version is
   encoded with ApiVersions v0 regardless (as Kafka does).

Rerun
=====
::

    .venv/bin/python tests/tools/capture_frames.py --out tests/data/frames

Everything listens/connects on loopback only.  A full run takes about a
minute.  Output is not bit-for-bit reproducible (timestamps, producer ids,
member ids, CRCs differ between runs), but its shape is stable.
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

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "scenario": self.scenario,
            "direction": self.direction,
            "api_key": self.api_key,
            "api_version": self.api_version,
            "correlation_id": self.correlation_id,
            "variant": self.variant,
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
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(c_writer)
        u_writer = None
        try:
            u_reader, u_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), timeout=5)
            self._writers.add(u_writer)
            pending: dict[int, tuple[int, int]] = {}
            pumps = [
                asyncio.create_task(self._pump_requests(c_reader, u_writer, pending)),
                asyncio.create_task(self._pump_responses(u_reader, c_writer, pending)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except (OSError, asyncio.TimeoutError) as exc:
            log.warning("[%s] upstream connection failed: %s", self.scenario, exc)
        finally:
            for w in (c_writer, u_writer):
                if w is not None:
                    w.close()
                    self._writers.discard(w)
            self._tasks.discard(task)

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

class _AddressHandler(logging.Handler):
    PATTERN = re.compile(r"Mock cluster enabled: .* replaced with (\S+)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.address: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.address = m.group(1).split(",")[0]


@contextmanager
def mock_cluster(timeout: float = 10.0) -> Iterator[tuple[str, int]]:
    """Start a librdkafka mock cluster with one broker; yield (host, port)."""
    from confluent_kafka import Producer

    handler = _AddressHandler()
    mock_log = logging.getLogger(f"capture_frames.mock.{id(handler)}")
    mock_log.propagate = False
    mock_log.setLevel(logging.DEBUG)
    mock_log.addHandler(handler)
    holder = Producer({"test.mock.num.brokers": 1, "logger": mock_log})
    deadline = time.monotonic() + timeout
    while handler.address is None:
        if time.monotonic() > deadline:
            raise RuntimeError("librdkafka mock cluster did not report its address")
        holder.poll(0.1)
    host, port = handler.address.rsplit(":", 1)
    if host != LOOPBACK:
        raise RuntimeError(f"unexpected mock address {handler.address}")
    log.info("mock cluster at %s", handler.address)
    try:
        yield host, int(port)
    finally:
        holder.flush(1)
        del holder


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


def _scan_batches(records: bytes | None) -> list[tuple[int, int, int]]:
    """Return (magic, attributes, producer_id) of every batch/message in `records`."""
    out = []
    pos = 0
    while records and pos + 17 <= len(records):
        size = struct.unpack_from(">i", records, pos + 8)[0]
        magic = records[pos + 16]
        if magic >= 2:
            attrs = struct.unpack_from(">h", records, pos + 21)[0]
            pid = struct.unpack_from(">q", records, pos + 43)[0] if pos + 51 <= len(records) else -1
        else:
            attrs = records[pos + 17]
            pid = -1
        out.append((magic, attrs, pid))
        pos += 12 + size
    return out


def _describe_batches(batches: list[tuple[int, int, int]]) -> str:
    if not batches:
        return "empty"
    codecs = sorted({CODEC_NAMES.get(a & 7, str(a & 7)) for m, a, _ in batches
                     if not (m >= 2 and a & 0x20)})
    parts = ["magic" + "+".join(sorted({str(m) for m, _, _ in batches}))]
    parts.append("+".join(codecs) if codecs else "nodata")
    if any(m >= 2 and a & 0x20 for m, a, _ in batches):
        parts.append("control")
    if any(m >= 2 and a & 0x10 for m, a, _ in batches):
        parts.append("transactional")
    elif any(pid >= 0 for _, _, pid in batches):
        parts.append("idempotent")
    return ",".join(parts)


def _request_body(frame: bytes, flexible: bool) -> _Reader:
    r = _Reader(frame, 8)  # api_key, api_version, correlation_id
    r.string(False)  # client_id is never compact
    r.tags(flexible)
    return r


def _produce_request_variant(frame: bytes, version: int) -> str:
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
    return _describe_batches(batches)


def _fetch_response_variant(frame: bytes, version: int) -> str:
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
    return _describe_batches(batches)


def variant_of(f: CapturedFrame) -> str | None:
    try:
        if f.direction == "request" and f.api_key == 0:
            return _produce_request_variant(f.frame, f.api_version)
        if f.direction == "response" and f.api_key == 1:
            return _fetch_response_variant(f.frame, f.api_version)
    except (struct.error, ValueError, IndexError):
        return "unparsed"
    return None


def select_frames(frames: list[CapturedFrame]) -> list[CapturedFrame]:
    """Deduplicate by (client, direction, api_key, api_version, variant)."""
    kept: dict[tuple[Any, ...], CapturedFrame] = {}
    for f in frames:
        if len(f.frame) > MAX_FRAME_BYTES:
            continue
        f.variant = variant_of(f)
        key = (f.client, f.direction, f.api_key, f.api_version, f.variant)
        kept.setdefault(key, f)
    return sorted(kept.values(), key=lambda f: (f.client, f.api_key, f.api_version,
                                                f.direction != "request", f.variant or ""))


# --------------------------------------------------------------------------
# Scenario plumbing
# --------------------------------------------------------------------------

Scenario = Callable[[str], None]  # receives the proxy's bootstrap address


@dataclass
class Session:
    loop: LoopThread
    recorder: Recorder
    client: str
    upstream: tuple[str, int]
    results: dict[str, str] = field(default_factory=dict)

    def run(self, name: str, scenario: Scenario) -> None:
        proxy = RecordingProxy(self.loop, self.upstream, self.recorder, self.client, name).start()
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


def kafka_python_scenarios(session: Session) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    _install_cramjam_snappy()
    common: dict[str, Any] = {"request_timeout_ms": 5000, "client_id": "kafka-python-capture"}

    def produce(topic: str, **cfg: Any) -> Scenario:
        def run(bootstrap: str) -> None:
            p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, **common, **cfg)
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

    for codec in CODECS:
        session.run(f"produce-{codec}",
                    produce(f"kp-{codec}", compression_type=None if codec == "none" else codec))
    session.run("produce-idempotent", produce("kp-idempotent", enable_idempotence=True))
    session.run("produce-transactional",
                produce("kp-txn", transactional_id="kp-txn-1", compression_type="gzip"))
    # Older protocol versions: legacy message sets (magic 0/1).
    session.run("produce-legacy-0.10", produce("kp-legacy", api_version=(0, 10, 2),
                                                 compression_type="gzip"))
    session.run("produce-legacy-0.9", produce("kp-legacy", api_version=(0, 9)))

    topics = [f"kp-{c}" for c in CODECS] + ["kp-idempotent", "kp-txn"]

    def consume(group: str, expected: int, **cfg: Any) -> Scenario:
        def run(bootstrap: str) -> None:
            c = KafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group,
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              session_timeout_ms=6000, heartbeat_interval_ms=500,
                              fetch_max_wait_ms=200, **common, **cfg)
            try:
                got = 0
                deadline = time.monotonic() + 20
                while got < expected and time.monotonic() < deadline:
                    got += sum(len(v) for v in c.poll(timeout_ms=500).values())
                # Keep the group alive a little longer to capture heartbeats.
                end = time.monotonic() + 1.5
                while time.monotonic() < end:
                    c.poll(timeout_ms=200)
                c.commit()
                c.committed(TopicPartition(topics[0], 0))
                c.end_offsets(c.assignment())
                c.offsets_for_times({tp: 0 for tp in c.assignment()})
                if got < expected:
                    raise RuntimeError(f"consumed {got}/{expected} records")
            finally:
                c.close()
        return run

    total = RECORDS_PER_PRODUCE * len(topics)
    session.run("consume-group", consume("kp-group", total))
    session.run("consume-group-read-committed",
                consume("kp-group-rc", total, isolation_level="read_committed"))
    session.run("consume-group-legacy-0.10", consume("kp-group-legacy", total,
                                                     api_version=(0, 10, 2)))

    def admin(bootstrap: str) -> None:
        a = KafkaAdminClient(bootstrap_servers=bootstrap, **common)
        errors = []
        try:
            for name, call in [
                ("list_topics", lambda: a.list_topics()),
                ("describe_topics", lambda: a.describe_topics(["kp-none"])),
                ("describe_cluster", lambda: a.describe_cluster()),
                ("create_topics", lambda: a.create_topics(
                    [__import__("kafka.admin", fromlist=["NewTopic"]).NewTopic("kp-admin", 2, 1)])),
                ("list_consumer_groups", lambda: a.list_consumer_groups()),
                ("describe_consumer_groups", lambda: a.describe_consumer_groups(["kp-group"])),
                ("list_consumer_group_offsets", lambda: a.list_consumer_group_offsets("kp-group")),
                ("describe_configs", lambda: a.describe_configs([
                    __import__("kafka.admin", fromlist=["ConfigResource"]).ConfigResource(
                        "TOPIC", "kp-none")])),
            ]:
                try:
                    call()
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            a.close()
        if errors:
            raise RuntimeError("; ".join(errors))

    session.run("admin", admin)


# --------------------------------------------------------------------------
# confluent-kafka scenarios
# --------------------------------------------------------------------------

def confluent_scenarios(session: Session) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    common: dict[str, Any] = {"client.id": "confluent-kafka-capture",
                              "socket.timeout.ms": 5000}

    def _wait(pred: Callable[[], bool], timeout: float, poll: Callable[[], Any]) -> bool:
        deadline = time.monotonic() + timeout
        while not pred() and time.monotonic() < deadline:
            poll()
        return pred()

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
                for i in range(3):
                    p.produce(topic, key=b"aborted", value=_payload(i, "aborted"))
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
                c.commit(asynchronous=False)
                assignment = c.assignment()
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

    # The transactional scenario wrote 3 aborted records which read_uncommitted sees.
    session.run("consume-group-range", consume("ck-group-range", total + 3,
                                               **{"partition.assignment.strategy": "range",
                                                  "session.timeout.ms": 6000}))
    session.run("consume-group-cooperative",
                consume("ck-group-coop", total + 3,
                        **{"partition.assignment.strategy": "cooperative-sticky",
                           "session.timeout.ms": 6000}))
    session.run("consume-group-read-committed",
                consume("ck-group-rc", total, **{"isolation.level": "read_committed",
                                                 "session.timeout.ms": 6000}))
    session.run("consume-group-kip848", consume("ck-group-848", total + 3,
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
        from confluent_kafka import ShareConsumer

        sc = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "ck-share", **common})
        try:
            sc.subscribe(["ck-none"])
            deadline = time.monotonic() + 8
            got = 0
            while time.monotonic() < deadline and got < RECORDS_PER_PRODUCE:
                msgs = sc.poll(0.5) if hasattr(sc, "poll") else sc.consume_batch(0.5)
                got += len(msgs or [])
            if not got:
                raise RuntimeError("share consumer received nothing")
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

CLIENTS: dict[str, Callable[[Session], None]] = {
    "kafka-python": kafka_python_scenarios,
    "confluent-kafka": confluent_scenarios,
}


def write_output(out: Path, frames: list[CapturedFrame], clients: list[str]) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for client in clients:
        path = out / f"{client}.jsonl"
        lines = [json.dumps(f.to_json(), sort_keys=False) for f in frames if f.client == client]
        path.write_text("".join(line + "\n" for line in lines))
        sizes[client] = path.stat().st_size
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
    ap.add_argument("--out", type=Path, default=Path("tests/data/frames"),
                    help="output directory (default: %(default)s)")
    ap.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    ap.add_argument("--max-seconds", type=float, default=600,
                    help="hard limit for the whole run (default: %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    _start_watchdog(args.max_seconds)

    recorder = Recorder()
    loop = LoopThread()
    results: dict[str, dict[str, str]] = {}
    try:
        for client in args.clients:
            with mock_cluster() as upstream:
                session = Session(loop, recorder, client, upstream)
                CLIENTS[client](session)
                results[client] = session.results
    finally:
        loop.stop()

    frames = select_frames(recorder.snapshot())
    sizes = write_output(args.out, frames, args.clients)
    print(summarize(frames))
    for client, res in results.items():
        print(f"\n{client} scenarios:")
        for name, status in res.items():
            print(f"  {name}: {status}")
    print("\nfiles: " + ", ".join(f"{c}.jsonl={n} bytes" for c, n in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
