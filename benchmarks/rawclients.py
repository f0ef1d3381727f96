"""The clients of ``benchmarks/latency.py`` that speak the wire protocol themselves, without librdkafka.

``raw_main`` (``--raw``) sends one-record Produce requests over one blocking socket, one in flight;
``raw_e2e_main`` (``--raw-e2e``) pipelines Produce requests on one socket and long-polls with Fetch
on another, in one thread. Requests are encoded with ``kafkalite.protocol`` once and stamped in
place for each send, and answers of the usual shape are read in place, so the client costs little
CPU beside the server it measures. ``latency.py``'s docstring says what each one measures.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Sequence
from typing import Any, TypeAlias

WARMUP_S = 1.0
SIZE = 100
BATCH_SIZE = 16_384  # bytes: a Kafka producer's default batch.size
Bytes: TypeAlias = "bytes | bytearray | memoryview"


def own_cpu_seconds() -> float:
    """This process's CPU time so far, user and system, every thread."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime



def _read_frame(connection: Any) -> bytes:
    """One size-prefixed frame from a blocking socket, without its size."""

    def read_exactly(size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = connection.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return bytes(data)

    return read_exactly(struct.unpack(">i", read_exactly(4))[0])


def _receive(connection: Any, size: int, whose: str) -> tuple[bytes, int]:
    """What one ``recv`` of up to ``size`` bytes gives, and when it returned (``perf_counter_ns``)."""
    data = connection.recv(size)
    received = time.perf_counter_ns()
    if not data:
        raise ConnectionError(f"the server closed the {whose} connection")
    return data, received


def _connect(bootstrap: str) -> Any:
    """A blocking TCP connection to the first bootstrap server, Nagle off."""
    import socket

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    connection = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def _await_topic(connection: Any, topic: str) -> None:
    """Until ``topic`` has a leader (a Metadata request creates it where the server does that)."""
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.framing import encode_request, parse_response_header
    from kafkalite.protocol.messages import MetadataRequest, MetadataResponse
    from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic

    deadline = time.monotonic() + 20
    while True:
        connection.sendall(encode_request(
            MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True),
            9, 1, "latency-raw"))
        answer = _read_frame(connection)
        topics = MetadataResponse.decode_from(parse_response_header(answer, MetadataRequest.API_KEY, 9), 9).topics
        if topics and topics[0].error_code == ErrorCode.NONE and topics[0].partitions:
            return
        if time.monotonic() > deadline:
            sys.exit(f"topic {topic} has no leader")
        time.sleep(0.05)


def raw_main(a: argparse.Namespace) -> None:
    """One ``--raw`` run: one-record Produce requests over one blocking socket, one in flight."""
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.framing import encode_request, parse_response_header
    from kafkalite.protocol.messages import ProduceRequest, ProduceResponse
    from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
    from kafkalite.protocol.records import RecordBatchBuilder

    connection = _connect(a.bootstrap)
    correlation_ids = iter(range(2, 1 << 31))

    def round_trip(frame: bytes) -> bytes:
        connection.sendall(frame)
        return _read_frame(connection)

    _await_topic(connection, a.topic)
    acks = -1 if a.acks == "all" else int(a.acks)
    padding = b"x" * (SIZE - 20)
    acked: list[float] = []
    failures = 0
    total = int(a.rate * (a.seconds + WARMUP_S))
    cpu_before = own_cpu_seconds()
    start = time.perf_counter_ns()
    measuring_from = start + int(WARMUP_S * 1e9)
    for sent in range(total):
        pause = (start + sent * 1e9 / a.rate - time.perf_counter_ns()) / 1e9
        if pause > 0:
            time.sleep(pause)
        builder = RecordBatchBuilder()
        builder.append(timestamp=time.time_ns() // 1_000_000, key=None, value=b"%020d" % sent + padding)
        request = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(
            name=a.topic, partition_data=[PartitionProduceData(index=0, records=builder.build())])])
        frame = encode_request(request, 9, next(correlation_ids), "latency-raw")
        began = time.perf_counter_ns()
        answer = round_trip(frame)
        ended = time.perf_counter_ns()
        response = ProduceResponse.decode_from(parse_response_header(answer, ProduceRequest.API_KEY, 9), 9)
        if response.responses[0].partition_responses[0].error_code != ErrorCode.NONE:
            failures += 1
        elif began >= measuring_from:
            acked.append((ended - began) / 1e6)
    cpu = (own_cpu_seconds() - cpu_before) / total * 1e6
    connection.close()
    print(json.dumps({"acked": acked, "ends": [], "failures": failures, "cpu": cpu}), flush=True)


# --- the raw end-to-end client ------------------------------------------------------------------------------

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TWO_INT64 = struct.Struct(">qq")
_UINT32 = struct.Struct(">I")
_BATCH_START = struct.Struct(">qi")  # base offset, batch length
_FETCH_HEAD = struct.Struct(">bihi")  # header tagged fields (none), throttle time, error code, session id
_FETCH_PARTITION = struct.Struct(">hqqqbi")  # error, high watermark, last stable, log start, aborted, replica
_PRODUCE_ANSWER = struct.Struct(">hq")  # error code, base offset
_BATCH_CRC, _BATCH_ATTRIBUTES, _BATCH_TIMESTAMPS = 17, 21, 27  # offsets in a magic-2 batch
_BATCH_LAST_OFFSET_DELTA, _BATCH_RECORDS_COUNT = 23, 57
_FETCH_OFFSET_MARK = _VALUE_MARK = 0x0123456789ABCDEF


def _compact_name(name: str) -> bytes:
    from kafkalite.protocol.primitives import append_uvarint

    out = bytearray()
    append_uvarint(out, len(name.encode()) + 1)
    return bytes(out) + name.encode()


def records_per_batch(batch_bytes: int = BATCH_SIZE) -> int:
    """How many of this client's records fit in one uncompressed batch of ``batch_bytes`` (one at least)."""
    from kafkalite.protocol.records import RecordBatchBuilder

    builder = RecordBatchBuilder()
    count = 0
    while True:
        builder.append(timestamp=0, key=None, value=bytes(SIZE))
        if builder.size_in_bytes > batch_bytes:
            return max(1, count)
        count += 1


class ProduceFrame:
    """Produce v9 requests of one batch of 1 to ``max_records`` records, each size encoded once, then
    stamped in place for each send.

    Each record's value is ``SIZE`` bytes whose first 16 are the request's send time and the time that
    record was due (``perf_counter_ns``, big endian); a stamp writes the correlation id, the batch's
    base and max timestamps, those times and the batch's CRC-32C, so each request is a valid batch
    without encoding one. ``layouts`` gives, for each batch length, where each record's value starts in
    the batch, so the consumer reads the times back in place (:func:`send_times`)."""

    __slots__ = ("_requests", "_crc32c", "layouts", "answer_prefix")

    def __init__(self, topic: str, acks: int, max_records: int = 1) -> None:
        from kafkalite.protocol._crc32c import crc32c
        from kafkalite.protocol.framing import encode_request
        from kafkalite.protocol.messages import ProduceRequest
        from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
        from kafkalite.protocol.records import RecordBatchBuilder

        # per records count: the frame, the batch's bytes under its CRC, where the CRC, the timestamps
        # and each record's value are in the frame
        self._requests: list[tuple[bytearray, memoryview, int, int, tuple[int, ...]]] = []
        self.layouts: dict[int, tuple[int, ...]] = {}
        timestamp = time.time_ns() // 1_000_000
        for count in range(1, max_records + 1):
            builder = RecordBatchBuilder()
            for index in range(count):
                builder.append(timestamp=timestamp, key=None,
                               value=_TWO_INT64.pack(_VALUE_MARK, index) + b"x" * (SIZE - 16))
            batch = bytes(builder.build())
            request = ProduceRequest(acks=acks, timeout_ms=30_000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])])
            frame = bytearray(encode_request(request, 9, 0, "latency-raw"))
            at = frame.index(batch)
            values = tuple(frame.index(_TWO_INT64.pack(_VALUE_MARK, index), at) for index in range(count))
            self._requests.append((frame, memoryview(frame)[at + _BATCH_ATTRIBUTES:at + len(batch)],
                                   at + _BATCH_CRC, at + _BATCH_TIMESTAMPS, values))
            self.layouts[len(batch)] = tuple(value - at for value in values)
        self._crc32c = crc32c
        # an answer v9 after its correlation id: no header tags, one topic, one partition, index 0
        self.answer_prefix = b"\x00\x02" + _compact_name(topic) + b"\x02\x00\x00\x00\x00"

    def stamp(self, correlation_id: int, sent_ns: int, due_ns: Sequence[int], timestamp_ms: int) -> bytearray:
        """The request for ``len(due_ns)`` records sent at ``sent_ns``, the n-th due at ``due_ns[n]``."""
        frame, crc_region, crc_at, timestamps_at, values = self._requests[len(due_ns) - 1]
        _INT32.pack_into(frame, 8, correlation_id)
        pack_into = _TWO_INT64.pack_into
        pack_into(frame, timestamps_at, timestamp_ms, timestamp_ms)
        for value_at, due in zip(values, due_ns, strict=True):
            pack_into(frame, value_at, sent_ns, due)
        _UINT32.pack_into(frame, crc_at, self._crc32c(crc_region))
        return frame


class FetchFrame:
    """A one-partition Fetch v12 request (no fetch session) encoded once; each send patches the
    correlation id and the fetch offset."""

    __slots__ = ("frame", "_offset_at", "answer_prefix")

    def __init__(self, topic: str, max_wait_ms: int = 500) -> None:
        from kafkalite.protocol.framing import encode_request
        from kafkalite.protocol.messages import FetchRequest
        from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic

        request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=52_428_800,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchTopic(
                                   topic=topic, partitions=[FetchPartition(
                                       partition=0, fetch_offset=_FETCH_OFFSET_MARK, partition_max_bytes=1_048_576)])])
        self.frame = bytearray(encode_request(request, 12, 0, "latency-raw"))
        self._offset_at = self.frame.index(_INT64.pack(_FETCH_OFFSET_MARK))
        # an answer v12 after its header and first fields: one topic, one partition, index 0
        self.answer_prefix = b"\x02" + _compact_name(topic) + b"\x02\x00\x00\x00\x00"

    def at(self, correlation_id: int, fetch_offset: int) -> bytearray:
        _INT32.pack_into(self.frame, 8, correlation_id)
        _INT64.pack_into(self.frame, self._offset_at, fetch_offset)
        return self.frame


def produce_answer(frame: Bytes, prefix: bytes) -> tuple[int, int]:
    """A Produce v9 answer's (error code, base offset) for the one partition it answers.

    ``frame`` starts at the correlation id. The usual answer is read at fixed places after
    ``prefix``; anything else goes through the codec."""
    view = memoryview(frame)
    end = 4 + len(prefix)
    if view[4:end] == prefix:
        error_code, base_offset = _PRODUCE_ANSWER.unpack_from(view, end)
        return error_code, base_offset
    from kafkalite.protocol.framing import parse_response_header
    from kafkalite.protocol.messages import ProduceResponse

    partition = ProduceResponse.decode_from(parse_response_header(view, 0, 9), 9).responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def fetch_answer(frame: Bytes, prefix: bytes) -> tuple[int, Bytes]:
    """A Fetch v12 answer's (error code, records) for its one partition: the response's error code
    if it has one, else the partition's; records empty when there are none.

    ``frame`` starts at the correlation id. The usual answer (no throttle or error, one topic, one
    partition, no aborted transactions) is read in place; anything else goes through the codec."""
    view = memoryview(frame)
    tags, _throttle, error_code, _session = _FETCH_HEAD.unpack_from(view, 4)
    position = 4 + _FETCH_HEAD.size
    end = position + len(prefix)
    if tags == 0 and error_code == 0 and view[position:end] == prefix:
        error_code, _high, _stable, _start, aborted, _replica = _FETCH_PARTITION.unpack_from(view, end)
        position = end + _FETCH_PARTITION.size
        if aborted in (0, 1):  # null or empty
            from kafkalite.protocol.primitives import Reader

            reader = Reader(view, position)
            size = reader.uvarint()  # the records' compact length
            return error_code, view[reader.pos:reader.pos + size - 1] if size > 1 else b""
    from kafkalite.protocol.framing import parse_response_header
    from kafkalite.protocol.messages import FetchResponse

    response = FetchResponse.decode_from(parse_response_header(view, 1, 12), 12)
    if response.error_code:
        return response.error_code, b""
    partition = response.responses[0].partitions[0]
    records = partition.records
    if records is None or isinstance(records, (bytes, bytearray, memoryview)):
        return partition.error_code, records or b""
    return partition.error_code, b"".join(records)  # a decoded answer holds one buffer; to be sure


def send_times(records: Bytes, layouts: dict[int, tuple[int, ...]]) -> tuple[list[tuple[int, int]], int]:
    """The (send, due) times carried by the records of a Fetch answer's ``records``, and the offset
    after its last whole batch (-1 if it holds none).

    A batch as :class:`ProduceFrame` makes it (its length in ``layouts``, as many records as the layout
    has values) is read at fixed places; any other goes through the record decoder."""
    view = memoryview(records)
    size = len(view)
    times: list[tuple[int, int]] = []
    unpack_from = _TWO_INT64.unpack_from
    next_offset = -1
    position = 0
    while size - position >= 61:
        base_offset, length = _BATCH_START.unpack_from(view, position)
        end = position + 12 + length
        if end > size:
            break  # a partial batch ends an answer
        values = layouts.get(length + 12)
        if values is not None and _INT32.unpack_from(view, position + _BATCH_RECORDS_COUNT)[0] == len(values):
            times += [unpack_from(view, position + value_at) for value_at in values]
        else:
            from kafkalite.protocol.records import RecordBatch

            times.extend(unpack_from(record.value or bytes(16)) for record in RecordBatch(view[position:end]).records())
        next_offset = base_offset + _INT32.unpack_from(view, position + _BATCH_LAST_OFFSET_DELTA)[0] + 1
        position = end
    return times, next_offset


class _Frames:
    """Complete response frames out of a socket's bytes (each without its size prefix)."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        pending = self.pending
        pending += data
        frames = []
        position, available = 0, len(pending)
        while available - position >= 4:
            size = _INT32.unpack_from(pending, position)[0]
            if available - position - 4 < size:
                break
            frames.append(bytes(pending[position + 4:position + 4 + size]))
            position += 4 + size
        if position:
            del pending[:position]
        return frames


def raw_e2e_main(a: argparse.Namespace) -> None:
    """One ``--raw-e2e`` run: pipelined Produce requests and a long-polling Fetch, in one thread.

    When a place in the window is free, every record due by then and not sent yet goes in one
    Produce request (at most ``max_records`` of them), as a Kafka producer's accumulator batches the
    records that arrive while its requests are in flight; ``--one-record-per-request`` sends each
    record in a request of its own (the broker's cost per request)."""
    import gc
    import select
    from bisect import bisect_left
    from collections import deque

    producer = _connect(a.bootstrap)
    _await_topic(producer, a.topic)
    consumer = _connect(a.bootstrap)
    if a.one_record_per_request:
        max_records = 1
    else:
        max_records = a.max_batch_records or records_per_batch()
    produce = ProduceFrame(a.topic, -1 if a.acks == "all" else int(a.acks), max_records)
    fetch = FetchFrame(a.topic)
    produce_prefix, fetch_prefix, layouts = produce.answer_prefix, fetch.answer_prefix, produce.layouts
    producer_frames, consumer_frames = _Frames(), _Frames()
    acked: list[float] = []  # per record: its request's send to the answer
    ends: list[float] = []
    acked_from_due: list[float] = []  # per record, from the time it was due (a held one waited)
    ends_from_due: list[float] = []
    failures = fetch_errors = late = held = fetches = requests = 0
    # the Produce requests not answered yet, in order: each one's send time and its records' due times
    in_flight: deque[tuple[int, list[int]]] = deque()
    window = a.max_in_flight
    rate = a.rate
    total = int(rate * (a.seconds + WARMUP_S))
    last_offset = -1  # of the last record acknowledged
    fetch_offset = 0  # a fresh topic: from its start (the first second is not counted anyway)
    correlation_id = fetch_correlation_id = 2
    perf_counter_ns, monotonic = time.perf_counter_ns, time.monotonic
    send_produce, send_fetch = producer.sendall, consumer.sendall
    stamp, fetch_at = produce.stamp, fetch.at
    sockets = [producer, consumer]
    gc.collect()
    gc.freeze()
    gc.disable()  # the lists of figures hold no cycles; a collection would be the client's pause
    send_fetch(fetch_at(fetch_correlation_id, fetch_offset))
    cpu_before = own_cpu_seconds()
    start = perf_counter_ns()
    wall_ms_at_start = time.time_ns() // 1_000_000
    measuring_from = start + int(WARMUP_S * 1e9)
    give_up = monotonic() + 3 * (a.seconds + WARMUP_S) + 10
    sent = held_until = 0
    while True:
        now = perf_counter_ns()
        timeout: float | None = 0.5
        if sent < total:
            due = min(total, (now - start) * rate // 1_000_000_000 + 1)
            while sent < due and len(in_flight) < window:
                up_to = min(due, sent + max_records)
                due_times = [start + index * 1_000_000_000 // rate for index in range(sent, up_to)]
                late += bisect_left(due_times, now - 1_000_000)  # sent more than a millisecond after their time
                if sent < held_until:
                    held += min(held_until, up_to) - sent
                send_produce(stamp(correlation_id, now, due_times, wall_ms_at_start + (now - start) // 1_000_000))
                in_flight.append((now, due_times))
                correlation_id += 1
                requests += 1
                sent = up_to
                now = perf_counter_ns()
            if sent < due:
                held_until = due  # due while the window is full: sent when an answer frees a place
                timeout = None
            elif sent < total:
                timeout = max(0.0, (start + sent * 1_000_000_000 // rate - now) / 1e9)
        elif not in_flight and fetch_offset > last_offset:
            break
        if monotonic() > give_up:
            break
        readable = select.select(sockets, (), (), timeout)[0]
        if producer in readable:
            data, received = _receive(producer, 1 << 16, "producer's")
            for frame in producer_frames.feed(data):
                sent_at, due_times = in_flight.popleft()
                error_code, base_offset = produce_answer(frame, produce_prefix)
                if error_code:
                    failures += len(due_times)
                    continue
                last_offset = max(last_offset, base_offset + len(due_times) - 1)
                if sent_at >= measuring_from:
                    acked += [(received - sent_at) / 1e6] * len(due_times)
                    acked_from_due += [(received - due_at) / 1e6 for due_at in due_times]
        if consumer in readable:
            data, received = _receive(consumer, 1 << 20, "consumer's")
            for frame in consumer_frames.feed(data):
                error_code, records = fetch_answer(frame, fetch_prefix)
                if error_code:
                    fetch_errors += 1
                    if fetch_errors > 100:
                        sys.exit(f"Fetch answered error {error_code} {fetch_errors} times")
                    time.sleep(0.01)
                else:
                    times, next_offset = send_times(records, layouts)
                    if next_offset > fetch_offset:
                        fetch_offset = next_offset
                    for sent_at, due_at in times:
                        if sent_at >= measuring_from:
                            ends.append((received - sent_at) / 1e6)
                            ends_from_due.append((received - due_at) / 1e6)
                fetches += 1
                fetch_correlation_id += 1
                send_fetch(fetch_at(fetch_correlation_id, fetch_offset))
    cpu = (own_cpu_seconds() - cpu_before) / max(1, sent) * 1e6
    gc.enable()
    producer.close()
    consumer.close()
    print(json.dumps({"acked": acked, "ends": ends, "failures": failures, "cpu": cpu,
                      "late": late + total - sent, "held": held, "fetches": fetches,
                      "acked_from_due": acked_from_due, "ends_from_due": ends_from_due, "requests": requests,
                      "sent": sent, "max_records": max_records}), flush=True)
