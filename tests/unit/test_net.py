"""KafkaConnection driven without sockets: a fake transport, fake handlers, an injected clock.

Bytes arrive the way the event loop delivers them to a ``BufferedProtocol``: written into the buffer
``get_buffer`` returns, then ``buffer_updated`` (see ``feed``)."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from kafkalite.broker.handlers.api_versions import api_versions_response
from kafkalite.broker.handlers.delayed import DelayedAnswer
from kafkalite.broker.handlers.registry import ApiHandler, RequestContext
from kafkalite.broker.net import SCRATCH_BYTES, KafkaConnection, ReceiveScratch
from kafkalite.broker.quotas import ConnectionQuotas, RequestBudget, parse_connection_overrides
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

MAX_REQUEST_BYTES = 1024
IDLE_MS = 10_000


class FakeTransport(asyncio.Transport):
    """Records what the connection writes and whether it reads, closes or aborts."""

    def __init__(self, port: int = 50000) -> None:
        super().__init__()
        self.port = port
        self.written = bytearray()
        self.closed = False
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def write(self, data: Any) -> None:
        assert not self.closed, "write after close"
        self.written += data

    def writelines(self, buffers: Any) -> None:
        for buffer in buffers:
            self.write(buffer)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def frames(self) -> list[bytes]:
        """The response frames written so far (size prefixes removed)."""
        frames, position = [], 0
        while position < len(self.written):
            (size,) = struct.unpack_from(">i", self.written, position)
            frames.append(bytes(self.written[position + 4:position + 4 + size]))
            position += 4 + size
        return frames

    def correlation_ids(self) -> list[int]:
        return [struct.unpack_from(">i", frame)[0] for frame in self.frames()]


class Handlers:
    """A small registry: ApiVersions, Metadata answered when the test says so, Heartbeat at once,
    Produce without a response (acks=0) that keeps the records views it was given (as the real one
    does until the append)."""

    def __init__(self) -> None:
        self.gates: dict[int, asyncio.Future[None]] = {}  # correlation id -> released when set
        self.seen: list[int] = []
        self.cancelled: list[int] = []
        self.records: list[memoryview] = []
        self.table: dict[int, ApiHandler] = {
            18: self._handler(18, 0, 4, lambda context, request: api_versions_response(self.table)),
            3: self._handler(3, 0, 4, self._metadata),
            12: self._handler(12, 0, 4, self._heartbeat),
            0: self._handler(0, 3, 9, self._produce),
        }

    @staticmethod
    def _handler(api_key: int, low: int, high: int, handle: Callable[..., Any]) -> ApiHandler:
        return ApiHandler(api_key, REQUESTS[api_key].NAME.removesuffix("Request"), low, high,
                          REQUESTS[api_key], RESPONSES[api_key], handle)

    def _metadata(self, context: RequestContext, request: MetadataRequest) -> Awaitable[Message]:
        gate = self.gates.setdefault(context.correlation_id, asyncio.get_running_loop().create_future())

        async def answer() -> Message:
            try:
                await gate
            except asyncio.CancelledError:
                self.cancelled.append(context.correlation_id)
                raise
            if gate.result() == "fail":
                raise RuntimeError("metadata handler failed")
            return MetadataResponse(cluster_id="test")

        return answer()

    def _heartbeat(self, context: RequestContext, request: HeartbeatRequest) -> Message:
        self.seen.append(context.correlation_id)
        if request.group_id == "explode":
            raise RuntimeError("heartbeat handler failed")
        return HeartbeatResponse()

    def _produce(self, context: RequestContext, request: ProduceRequest) -> None:
        for topic in request.topic_data:
            self.records += [partition.records for partition in topic.partition_data]

    def release(self, correlation_id: int, value: Any = None) -> None:
        self.gates[correlation_id].set_result(value)


def connect(handlers: Handlers, clock: Callable[[], float] | None = None, port: int = 50000,
            max_request_bytes: int = MAX_REQUEST_BYTES,
            **options: Any) -> tuple[KafkaConnection, FakeTransport]:
    extra = {"clock": clock} if clock is not None else {}
    connection = KafkaConnection(object(), max_request_bytes=max_request_bytes, idle_ms=IDLE_MS,
                                 handlers=handlers.table, **extra, **options)
    transport = FakeTransport(port)
    connection.connection_made(transport)
    return connection, transport


def feed(connection: KafkaConnection, data: bytes, chunk: int | None = None) -> None:
    """Deliver ``data`` as the loop does: each read fills (part of) the buffer from ``get_buffer``
    (at most ``chunk`` bytes), then ``buffer_updated``. The buffer is still held during the call,
    as uvloop does."""
    position = 0
    while position < len(data):
        buffer = connection.get_buffer(-1)
        take = min(len(buffer), len(data) - position, chunk or len(data))
        assert take > 0, "get_buffer returned an empty buffer"
        buffer[:take] = data[position:position + take]
        position += take
        connection.buffer_updated(take)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def settle() -> None:
    """Let completed handler tasks run their callbacks."""
    for _ in range(5):
        await asyncio.sleep(0)


def metadata(correlation_id: int) -> bytes:
    return encode_request(MetadataRequest(topics=[]), 4, correlation_id, "test")


def heartbeat(correlation_id: int, group_id: str = "group") -> bytes:
    return encode_request(HeartbeatRequest(group_id=group_id, member_id="m"), 3, correlation_id, "test")


def produce_acks0(correlation_id: int) -> bytes:
    return encode_request(ProduceRequest(acks=0, timeout_ms=1000, topic_data=[]), 7, correlation_id, "test")


def produce_records(correlation_id: int, records: bytes) -> bytes:
    """An acks=0 Produce v7 carrying ``records`` (opaque to the connection) for one partition."""
    topic = TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=records)])
    request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[topic])
    return encode_request(request, 7, correlation_id, "test")


def api_versions(correlation_id: int, version: int = 3) -> bytes:
    request = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
    return encode_request(request, version, correlation_id, "test")


def raw_api_versions_v5(correlation_id: int) -> bytes:
    """ApiVersions v5 (newer than any schema we have): header v2, then a v3-shaped body."""
    client_id = b"future-client"
    body = (struct.pack(">hhih", 18, 5, correlation_id, len(client_id)) + client_id + b"\x00"
            + b"\x05name" + b"\x041.0" + b"\x00")
    return struct.pack(">i", len(body)) + body


# ordering ---------------------------------------------------------------------------------------
def test_pipelined_responses_leave_in_request_order() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1) + heartbeat(2) + heartbeat(3))
        await settle()
        assert handlers.seen == [2, 3]  # the later requests were handled...
        assert transport.written == b""  # ...but wait for the first answer
        handlers.release(1)
        await settle()
        assert transport.correlation_ids() == [1, 2, 3]
        assert connection.in_flight == 0

    run(scenario)


def test_a_request_without_response_keeps_its_place() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1) + produce_acks0(2) + metadata(3) + heartbeat(4))
        handlers.release(3)
        await settle()
        assert transport.written == b""
        handlers.release(1)
        await settle()
        assert transport.correlation_ids() == [1, 3, 4]

    run(scenario)


def delayed_handlers() -> tuple[Handlers, dict[int, DelayedAnswer], list[int]]:
    """Handlers whose Metadata answers are ``DelayedAnswer``s the test completes (by correlation id);
    the ids whose answers were cancelled are listed."""
    handlers = Handlers()
    answers: dict[int, DelayedAnswer] = {}
    cancelled: list[int] = []

    def delayed_metadata(context: RequestContext, request: MetadataRequest) -> DelayedAnswer:
        answer = answers[context.correlation_id] = DelayedAnswer(
            on_cancel=lambda: cancelled.append(context.correlation_id))
        return answer

    handlers.table[3] = handlers._handler(3, 0, 4, delayed_metadata)
    return handlers, answers, cancelled


def test_a_delayed_answer_is_written_from_the_event_that_completes_it_in_request_order() -> None:
    async def scenario() -> None:
        handlers, answers, _ = delayed_handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1) + heartbeat(2) + metadata(3))
        answers[3].complete(MetadataResponse(cluster_id="three"))
        assert transport.written == b""  # 3 waits for 1
        answers[1].complete(MetadataResponse(cluster_id="one"))
        assert transport.correlation_ids() == [1, 2, 3]  # written at once: no task, no step of the loop
        assert connection.in_flight == 0

    run(scenario)


def test_a_failed_delayed_answer_closes_the_connection_and_a_closed_one_cancels_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        handlers, answers, cancelled = delayed_handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1) + metadata(2))
        answers[1].fail(RuntimeError("metadata handler failed"))
        assert transport.closed and cancelled == [2]
        assert "Metadata v4" in caplog.text and "failed" in caplog.text
        answers[2].complete(MetadataResponse())  # too late: nothing is written, nothing raises
        assert transport.written == b""

    run(scenario)


def test_a_delayed_answer_can_be_awaited_and_awaiting_it_cancelled() -> None:
    async def scenario() -> None:
        answer = DelayedAnswer()
        waiting = asyncio.ensure_future(_await(answer))
        await asyncio.sleep(0)
        answer.complete(MetadataResponse(cluster_id="x"))
        assert (await waiting) == MetadataResponse(cluster_id="x")
        stopped: list[bool] = []
        other = DelayedAnswer(on_cancel=lambda: stopped.append(True))
        task = asyncio.ensure_future(_await(other))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert stopped == [True] and other.cancelled

    run(scenario)


async def _await(answer: DelayedAnswer) -> Message | None:
    return await answer


# framing ----------------------------------------------------------------------------------------
def test_frames_split_at_every_position_and_many_frames_in_one_read() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        stream = heartbeat(1) + api_versions(2) + heartbeat(3) + api_versions(4, version=0)
        rounds = 0
        for split in range(len(stream) + 1):  # two reads, split at every position (size prefixes too)
            feed(connection, stream[:split])
            feed(connection, stream[split:])
            rounds += 1
        for chunk in range(1, len(stream) + 1):  # reads of every size: one byte ... all four frames
            feed(connection, stream, chunk)
            rounds += 1
        await settle()
        assert transport.correlation_ids() == [1, 2, 3, 4] * rounds
        assert not transport.closed
        frame = transport.frames()[1]
        response = ApiVersionsResponse.decode_from(parse_response_header(frame, 18, 3), 3)
        assert response.error_code == ErrorCode.NONE
        assert [key.api_key for key in response.api_keys] == [0, 3, 12, 18]

    run(scenario)


def test_connections_sharing_a_scratch_keep_their_own_partial_frames() -> None:
    """Reads of several connections land in one scratch, one read at a time: a size prefix split
    across reads, and a frame split across reads, must survive the other connections' reads."""
    async def scenario() -> None:
        handlers = Handlers()
        scratch = ReceiveScratch()
        connections = [connect(handlers, port=50000 + index, scratch=scratch) for index in range(3)]
        streams = [b"".join(heartbeat(index * 100 + n) for n in range(20)) for index in range(3)]
        positions = [0, 0, 0]
        steps = [1, 2, 3, 5, 7, 11, 13]
        turn = 0
        while any(position < len(stream) for position, stream in zip(positions, streams, strict=True)):
            index = turn % 3
            step = steps[turn % len(steps)]
            turn += 1
            stream, position = streams[index], positions[index]
            if position >= len(stream):
                continue
            connection, _ = connections[index]
            buffer = connection.get_buffer(-1)
            take = min(step, len(buffer), len(stream) - position)
            buffer[:take] = stream[position:position + take]
            positions[index] += take
            connection.buffer_updated(take)
        await settle()
        for index, (_, transport) in enumerate(connections):
            assert transport.correlation_ids() == [index * 100 + n for n in range(20)]
            assert not transport.closed

    run(scenario)


def test_an_idle_connection_holds_no_receive_buffer() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        scratch = ReceiveScratch()
        connection, _ = connect(handlers, scratch=scratch)
        feed(connection, heartbeat(1)[:3])  # a size prefix split across reads is all it keeps
        assert connection._scratch is scratch and len(connection._prefix) == 3
        assert not any(isinstance(value, (bytes, bytearray, memoryview)) and len(value) > 64
                       for value in vars(connection).values())

    run(scenario)


def test_a_size_prefix_reserves_only_what_arrives() -> None:
    """A client that announces 100 MiB and sends a few bytes costs a scratch-sized buffer, no more;
    the buffer doubles as the bytes come, up to the frame's size."""
    async def scenario() -> None:
        connection, _ = connect(Handlers(), max_request_bytes=100 * 1024 * 1024)
        feed(connection, struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x03")
        assert connection._body is not None and len(connection._body) == SCRATCH_BYTES
        feed(connection, bytes(SCRATCH_BYTES - 2))
        assert len(connection._body) == SCRATCH_BYTES
        feed(connection, b"\x00")
        assert len(connection._body) == 2 * SCRATCH_BYTES

    run(scenario)


@pytest.mark.parametrize("chunk", [None, 1000, 4093, SCRATCH_BYTES - 1, SCRATCH_BYTES + 1])
def test_a_frame_larger_than_the_scratch_is_received_into_its_own_buffer(chunk: int | None) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers, max_request_bytes=4 * SCRATCH_BYTES)
        records = bytes(range(256)) * (2 * SCRATCH_BYTES // 256 + 3)
        big = produce_records(2, records)
        stream = heartbeat(1) + big + heartbeat(3) + big + heartbeat(4)
        head = len(heartbeat(1)) + 100
        feed(connection, stream[:head], chunk)  # a heartbeat and the start of the Produce
        # The rest goes straight into the frame's own buffer, which grows as the bytes arrive.
        assert len(connection.get_buffer(-1)) == SCRATCH_BYTES - (100 - 4)  # 4: the size prefix
        feed(connection, stream[head:], chunk)
        await settle()
        assert transport.correlation_ids() == [1, 3, 4] and not transport.closed
        assert [bytes(kept) for kept in handlers.records] == [records, records]

    run(scenario)


def test_a_large_frame_reuses_the_last_ones_buffer_once_no_view_of_it_is_left() -> None:
    """A handled frame's buffer is the spare for the next large frame, unless a handler still holds
    a view of it (then the next frame gets a buffer of its own and the kept view stays intact)."""
    async def scenario() -> None:
        handlers = Handlers()
        connection, _ = connect(handlers, max_request_bytes=4 * SCRATCH_BYTES)
        records = bytes(range(256)) * (2 * SCRATCH_BYTES // 256 + 3)

        def receive(correlation_id: int) -> bytearray | None:
            frame = produce_records(correlation_id, records)
            feed(connection, frame[:-1])
            body = connection._body
            feed(connection, frame[-1:])
            return body

        first = receive(1)
        second = receive(2)  # the handler keeps a view of the first frame's records
        assert first is not None and second is not first
        handlers.records.clear()
        third = receive(3)
        assert third is second
        fourth = receive(4)  # a view of the third frame is kept again
        assert fourth is not third
        assert [bytes(kept) for kept in handlers.records] == [records, records]

    run(scenario)


def test_dispatched_frames_stay_valid_after_later_reads() -> None:
    """Handlers may keep views of their request (Produce records until the append) after the call;
    the reads that follow must not overwrite them."""

    async def scenario() -> None:
        handlers = Handlers()
        connection, _ = connect(handlers, max_request_bytes=4 * SCRATCH_BYTES)
        payloads = [bytes([index]) * (100 + index) for index in range(50)]
        payloads += [bytes([index]) * (SCRATCH_BYTES + index) for index in range(3)]  # own buffers too
        for chunk in (None, 7):
            handlers.records.clear()
            for correlation_id, payload in enumerate(payloads):
                feed(connection, produce_records(correlation_id, payload), chunk)
            stream = b"".join(produce_records(index, payload) for index, payload in enumerate(payloads))
            feed(connection, stream, chunk)  # several frames per read
            feed(connection, b"\x7f" * 4096)  # garbage over the scratch (it closes the connection)
            assert [bytes(kept) for kept in handlers.records] == payloads * 2
            connection, _ = connect(handlers, max_request_bytes=4 * SCRATCH_BYTES)

    run(scenario)


@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_oversized_request_closes_before_the_body_is_buffered(caplog: pytest.LogCaptureFixture,
                                                              chunk: int | None) -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        feed(connection, struct.pack(">i", 2**31 - 1), chunk)  # only the size: no body has arrived
        assert transport.closed
        assert connection._body is None  # nothing was allocated for it
        feed(connection, b"\x00" * 100)  # anything after the close is ignored
        assert transport.written == b""

    with caplog.at_level(logging.WARNING, logger="kafkalite.net"):
        run(scenario)
    assert len(caplog.records) == 1
    assert "127.0.0.1:50000" in caplog.records[0].getMessage()
    assert "socket.request.max.bytes" in caplog.records[0].getMessage()


def test_size_just_above_the_limit_closes_and_at_the_limit_is_read() -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        feed(connection, struct.pack(">i", MAX_REQUEST_BYTES + 1))
        assert transport.closed
        connection, transport = connect(Handlers())
        feed(connection, struct.pack(">i", MAX_REQUEST_BYTES) + b"\x00" * 10)
        assert not transport.closed  # waiting for the rest of the body

    run(scenario)


def test_negative_size_closes() -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        feed(connection, struct.pack(">i", -1) + b"\x00" * 8)
        assert transport.closed and transport.written == b""

    run(scenario)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x02\xff\xff",  # a frame too short for a request header
        b"\x00\x00\x00\x00",  # an empty frame
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # the size reads as 1.2 GB: over the limit
        struct.pack(">ihhi", 10, 12, 3, 7) + b"\x7f\xff",  # a client id longer than the frame
    ],
)
def test_garbage_closes(garbage: bytes) -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        feed(connection, garbage)
        assert transport.closed and transport.written == b""

    run(scenario)


def test_malformed_body_closes(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        frame = bytearray(heartbeat(1))
        del frame[-6:]  # cut the member id short
        frame[0:4] = struct.pack(">i", len(frame) - 4)
        feed(connection, bytes(frame))
        assert transport.closed and handlers.seen == []

    with caplog.at_level(logging.WARNING, logger="kafkalite.net"):
        run(scenario)
    assert "malformed Heartbeat v3" in caplog.text and "127.0.0.1:50000" in caplog.text


# versions ---------------------------------------------------------------------------------------
def test_unknown_api_key_closes(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        fetch_like = encode_request(REQUESTS[1](), 4, 9, "test")  # Fetch: not in this registry
        feed(connection, heartbeat(1) + fetch_like + heartbeat(2))
        await settle()
        assert transport.closed
        assert transport.correlation_ids() == [1]  # answered before the bad request, nothing after

    with caplog.at_level(logging.WARNING, logger="kafkalite.net"):
        run(scenario)
    assert "unknown API key 1" in caplog.text


def test_unsupported_api_versions_version_gets_a_v0_error_with_the_key_list() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, raw_api_versions_v5(77))
        await settle()
        assert not transport.closed
        (frame,) = transport.frames()
        assert struct.unpack_from(">i", frame)[0] == 77  # response header v0: the correlation id only
        response = ApiVersionsResponse.decode(frame[4:], 0)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(key.api_key, key.min_version, key.max_version) for key in response.api_keys] == [
            (0, 3, 9), (3, 0, 4), (12, 0, 4), (18, 0, 4)]
        feed(connection, api_versions(78, version=3))  # the client retries lower
        await settle()
        assert transport.correlation_ids() == [77, 78]

    run(scenario)


def test_unsupported_version_of_another_api_closes(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        connection, transport = connect(Handlers())
        feed(connection, encode_request(MetadataRequest(topics=[]), 5, 1, "test"))
        assert transport.closed and transport.written == b""

    with caplog.at_level(logging.WARNING, logger="kafkalite.net"):
        run(scenario)
    assert "Metadata v5" in caplog.text and "v0-4" in caplog.text


# handler failures -------------------------------------------------------------------------------
def test_handler_exception_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        bad, bad_transport = connect(handlers, port=1)
        good, good_transport = connect(handlers, port=2)
        feed(bad, heartbeat(1, group_id="explode"))
        feed(good, heartbeat(2))
        await settle()
        assert bad_transport.closed and bad_transport.written == b""
        assert not good_transport.closed and good_transport.correlation_ids() == [2]

    with caplog.at_level(logging.ERROR, logger="kafkalite.net"):
        run(scenario)
    assert len(caplog.records) == 1
    assert caplog.records[0].exc_info is not None and "127.0.0.1:1" in caplog.text


def test_awaitable_handler_exception_closes_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1) + heartbeat(2))
        handlers.release(1, "fail")
        await settle()
        assert transport.closed and transport.written == b""

    with caplog.at_level(logging.ERROR, logger="kafkalite.net"):
        run(scenario)
    assert "Metadata v4 from 127.0.0.1:50000 (client id 'test') failed" in caplog.text


def test_connection_lost_cancels_pending_handlers() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connections: set[KafkaConnection] = set()
        connection, _ = connect(handlers, connections=connections)
        assert connections == {connection}
        feed(connection, metadata(1) + metadata(2))
        await settle()
        connection.connection_lost(None)
        await settle()
        assert sorted(handlers.cancelled) == [1, 2]
        assert connections == set()

    run(scenario)


# back-pressure ----------------------------------------------------------------------------------
def test_reading_pauses_with_too_many_requests_in_flight() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers, max_in_flight=2)
        feed(connection, metadata(1))
        assert transport.reading
        feed(connection, metadata(2))
        assert not transport.reading
        handlers.release(1)
        await settle()
        assert transport.reading and transport.correlation_ids() == [1]

    run(scenario)


def test_reading_pauses_while_the_write_buffer_is_full() -> None:
    """A client that does not read its answers: the connection stops reading, and what it had read
    already waits (it is not dispatched, so no more answers pile up) until writing resumes."""
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, heartbeat(1))
        connection.pause_writing()
        assert not transport.reading
        feed(connection, heartbeat(2) + heartbeat(3))  # arrived before the pause took effect
        assert transport.correlation_ids() == [1] and handlers.seen == [1]
        connection.resume_writing()
        assert not transport.reading  # the held requests go first
        await settle()
        assert transport.correlation_ids() == [1, 2, 3] and transport.reading

    run(scenario)


def test_drain_stops_reading_and_completes_when_responses_are_out() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1))
        drained = connection.drain()
        assert not transport.reading and not drained.done()
        handlers.release(1)
        await asyncio.wait_for(drained, timeout=1)
        assert transport.correlation_ids() == [1]

    run(scenario)


def test_half_close_sends_pending_responses_then_closes() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        connection, transport = connect(handlers)
        feed(connection, metadata(1))
        assert connection.eof_received() is True  # keep the transport open for the answer
        handlers.release(1)
        await settle()
        assert transport.correlation_ids() == [1] and transport.closed

    run(scenario)


# idle connections -------------------------------------------------------------------------------
def test_idle_connection_closes_after_connections_max_idle_ms() -> None:
    async def scenario() -> None:
        now = [1000.0]
        connection, transport = connect(Handlers(), clock=lambda: now[0])
        now[0] += 4.0
        assert connection.check_deadlines() == pytest.approx(6.0)  # seconds until the next check
        feed(connection, heartbeat(1))  # activity resets the idle time
        now[0] += 9.0
        assert connection.check_deadlines() == pytest.approx(1.0) and not transport.closed
        now[0] += 1.0
        assert connection.check_deadlines() is None
        assert transport.closed

    run(scenario)


def test_a_connection_waiting_for_a_response_is_not_idle() -> None:
    async def scenario() -> None:
        now = [0.0]
        handlers = Handlers()
        connection, transport = connect(handlers, clock=lambda: now[0])
        feed(connection, metadata(1))
        now[0] += 60.0
        assert connection.check_deadlines() is not None and not transport.closed

    run(scenario)


# incomplete frames ------------------------------------------------------------------------------
@pytest.mark.parametrize("sent", [b"\x00\x00", b"\x00\x00\x00\x40\x00\x0c"], ids=["a split size", "part of a frame"])
def test_a_frame_left_incomplete_closes_after_the_receive_timeout(sent: bytes, caplog: pytest.LogCaptureFixture
                                                                  ) -> None:
    async def scenario() -> None:
        now = [0.0]
        connection, transport = connect(Handlers(), clock=lambda: now[0], receive_timeout_ms=2000)
        feed(connection, sent)
        now[0] += 1.0
        feed(connection, b"\x00")  # more bytes do not move the deadline, unlike the idle timer
        now[0] += 0.5
        assert connection.check_deadlines() == pytest.approx(0.5) and not transport.closed
        now[0] += 0.5
        with caplog.at_level(logging.INFO, logger="kafkalite.net"):
            assert connection.check_deadlines() is None
        assert transport.closed
        assert "still incomplete (socket.request.receive.timeout.ms)" in caplog.text

    run(scenario)


def test_complete_frames_reset_the_receive_timeout() -> None:
    async def scenario() -> None:
        now = [0.0]
        connection, transport = connect(Handlers(), clock=lambda: now[0], receive_timeout_ms=2000)
        feed(connection, heartbeat(1)[:10])
        now[0] += 1.9
        feed(connection, heartbeat(1)[10:] + heartbeat(2)[:3])  # the first completes, the next begins
        now[0] += 1.9
        assert connection.check_deadlines() == pytest.approx(0.1)
        feed(connection, heartbeat(2)[3:])
        now[0] += 5.0
        assert connection.check_deadlines() is not None and not transport.closed
        assert transport.correlation_ids() == [1, 2]

    run(scenario)


# connection quotas ------------------------------------------------------------------------------
def test_connections_over_the_per_address_limit_are_refused(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        limits = [100, 2, ""]
        quotas = ConnectionQuotas(lambda: (limits[0], limits[1], limits[2]))
        connections: set[KafkaConnection] = set()
        first = [connect(Handlers(), port=port, quotas=quotas, connections=connections) for port in (1, 2)]
        with caplog.at_level(logging.INFO, logger="kafkalite.net"):
            refused, transport = connect(Handlers(), port=3, quotas=quotas, connections=connections)
        assert transport.closed and refused not in connections
        assert "address already has the configured maximum of 2 connections" in caplog.text
        first[0][0].connection_lost(None)  # one closes: room for another
        again, transport = connect(Handlers(), port=4, quotas=quotas, connections=connections)
        assert not transport.closed and quotas.per_address == {"127.0.0.1": 2}
        limits[2] = "127.0.0.1:3"  # an override for this address (dynamic: read at each connection)
        _, transport = connect(Handlers(), port=5, quotas=quotas)
        assert not transport.closed
        limits[0] = 3  # the broker-wide limit
        _, transport = connect(Handlers(), port=6, quotas=quotas)
        assert transport.closed and quotas.total == 3

    run(scenario)


def test_connection_overrides_are_parsed_as_kafka_writes_them() -> None:
    assert parse_connection_overrides("127.0.0.1:200, [::1]:0,") == {"127.0.0.1": 200, "::1": 0}
    with pytest.raises(ValueError):
        parse_connection_overrides("127.0.0.1")


# the request budget -----------------------------------------------------------------------------
def test_a_full_request_budget_holds_new_requests_until_one_is_answered() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        budget = RequestBudget(max_requests=2)
        one, one_transport = connect(handlers, budget=budget, port=1)
        two, two_transport = connect(handlers, budget=budget, port=2)
        feed(one, metadata(1))
        feed(two, metadata(2) + heartbeat(3))  # the budget is full after metadata(2): heartbeat waits
        assert budget.requests == 2 and handlers.seen == []
        assert not two_transport.reading and one_transport.reading
        handlers.release(1)
        await settle()
        assert handlers.seen == [3]  # room again: the held heartbeat went on
        handlers.release(2)
        await settle()
        assert two_transport.correlation_ids() == [2, 3] and two_transport.reading
        assert budget.requests == 0

    run(scenario)


def test_bytes_of_frames_being_received_count_in_the_budget_until_dispatched() -> None:
    async def scenario() -> None:
        handlers = Handlers()
        budget = RequestBudget(max_requests=100, max_bytes=SCRATCH_BYTES)
        sender, _ = connect(handlers, budget=budget, port=1, max_request_bytes=4 * SCRATCH_BYTES)
        other, other_transport = connect(handlers, budget=budget, port=2)
        big = produce_records(5, bytes(2 * SCRATCH_BYTES))
        feed(sender, big[:1000])
        assert budget.bytes == SCRATCH_BYTES and budget.exhausted
        feed(other, heartbeat(6))  # a new request elsewhere waits for room
        assert handlers.seen == [] and not other_transport.reading
        feed(sender, big[1000:])  # a frame already begun is always finished
        assert len(handlers.records) == 1 and budget.bytes == 0
        await settle()
        assert handlers.seen == [6] and other_transport.reading
        sender.connection_lost(None)
        assert budget.bytes == 0 and budget.requests == 0

    run(scenario)
