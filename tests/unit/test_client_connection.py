"""The broker connection driven through a fake transport: pipelining, correlation ids, timeouts."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from random import Random

import pytest

from kafkalite.client.connection import BrokerConnection, _api_versions_fallback, highest_common_version
from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.framing import encode_response, parse_request
from kafkalite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def writelines(self, buffers: object) -> None:
        for buffer in buffers:  # type: ignore[attr-defined]
            self.written += buffer

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def requests(self) -> list[tuple[int, int, int]]:
        """(api key, version, correlation id) of every request written so far."""
        found, position = [], 0
        while position < len(self.written):
            (size,) = struct.unpack_from(">i", self.written, position)
            frame = parse_request(bytes(self.written[position + 4: position + 4 + size]))
            found.append((frame.api_key, frame.api_version, frame.correlation_id))
            position += 4 + size
        return found


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def connected(loop: asyncio.AbstractEventLoop, timeout_ms: int = 1000) -> tuple[BrokerConnection, FakeTransport]:
    connection = BrokerConnection("h", 1, node_id=1, client_id="c", request_timeout_ms=timeout_ms)
    connection._loop = loop
    connection.closed = loop.create_future()
    transport = FakeTransport()
    connection.connection_made(transport)
    connection.api_versions = {3: (0, 12), 0: (3, 9)}
    return connection, transport


def answer(connection: BrokerConnection, correlation_id: int, response: MetadataResponse, version: int) -> None:
    connection.data_received(b"".join(bytes(part) for part in encode_response(response, 3, version, correlation_id)))


def test_pipelined_requests_are_answered_in_order(loop: asyncio.AbstractEventLoop) -> None:
    connection, transport = connected(loop)
    first = connection.send(MetadataRequest(topics=None))
    second = connection.send(MetadataRequest(topics=[]))
    assert [entry[:2] for entry in transport.requests()] == [(3, 12), (3, 12)]
    assert connection.in_flight_count == 2
    frames = b"".join(bytes(part) for correlation in (0, 1) for part in encode_response(
        MetadataResponse(cluster_id=f"c{correlation}"), 3, 12, correlation))
    connection.data_received(frames[:7])  # a frame split across reads
    connection.data_received(frames[7:])
    assert first.result().cluster_id == "c0" and second.result().cluster_id == "c1"
    assert connection.in_flight_count == 0


def test_a_wrong_correlation_id_closes_the_connection(loop: asyncio.AbstractEventLoop) -> None:
    connection, transport = connected(loop)
    first = connection.send(MetadataRequest(topics=None))
    second = connection.send(MetadataRequest(topics=None))
    answer(connection, 1, MetadataResponse(), 12)
    assert transport.closed
    assert isinstance(first.exception(), ProtocolError) or isinstance(first.exception(), KafkaConnectionError)
    assert second.exception() is not None
    assert connection.send(MetadataRequest(topics=None)).exception() is not None


def test_a_request_timeout_closes_the_connection(loop: asyncio.AbstractEventLoop) -> None:
    connection, transport = connected(loop, timeout_ms=10)
    first = connection.send(MetadataRequest(topics=None))
    second = connection.send(MetadataRequest(topics=None))
    loop.run_until_complete(asyncio.sleep(0.05))
    assert isinstance(first.exception(), KafkaTimeoutError)
    assert isinstance(second.exception(), KafkaConnectionError)
    assert transport.closed


def test_acks_zero_needs_no_response(loop: asyncio.AbstractEventLoop) -> None:
    connection, transport = connected(loop)
    future = connection.send(ProduceRequest(acks=0), expect_response=False)
    assert future.result() is None and connection.in_flight_count == 0
    assert transport.requests()[0][:2] == (0, 9)


def test_the_broker_closing_fails_what_is_in_flight(loop: asyncio.AbstractEventLoop) -> None:
    connection, _ = connected(loop)
    future = connection.send(MetadataRequest(topics=None))
    connection.connection_lost(None)
    assert isinstance(future.exception(), KafkaConnectionError)


def test_version_choice() -> None:
    assert highest_common_version(MetadataRequest, (0, 99)) == MetadataRequest.VALID_VERSIONS[1]
    assert highest_common_version(MetadataRequest, (0, 4)) == 4
    assert highest_common_version(ProduceRequest, (0, 11), min_version=3) == 11
    with pytest.raises(UnsupportedVersionError, match="Produce versions 0-2"):
        highest_common_version(ProduceRequest, (0, 2), min_version=3)
    with pytest.raises(UnsupportedVersionError, match="does not support the Metadata API"):
        highest_common_version(MetadataRequest, None)


def test_api_versions_fallback() -> None:
    v0 = b"".join(bytes(part) for part in encode_response(
        ApiVersionsResponse(error_code=35, api_keys=[]), 18, 0, 0))[4:]
    assert _api_versions_fallback(v0, 4) == 0
    from kafkalite.protocol.messages.api_versions_response import ApiVersion

    with_range = b"".join(bytes(part) for part in encode_response(
        ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 2)]), 18, 0, 0))[4:]
    assert _api_versions_fallback(with_range, 4) == 2
    # librdkafka's mock cluster answers in a layout no version decodes: start over at v0
    assert _api_versions_fallback(bytes.fromhex("0000000100230100120000000200000000"), 3) == 0
    assert ApiVersionsRequest.VALID_VERSIONS[1] >= 3


def received(connection: BrokerConnection, data: bytes, chunks: list[int]) -> None:
    """``data`` as a socket would hand it over: into ``get_buffer``, in pieces of the given sizes."""
    position = 0
    for size in chunks:
        if position >= len(data) or connection.close_reason is not None:
            return
        buffer = connection.get_buffer(-1)
        count = min(size, len(buffer), len(data) - position)
        buffer[:count] = data[position:position + count]
        connection.buffer_updated(count)
        position += count
    assert position >= len(data) or connection.close_reason is not None


@pytest.mark.parametrize("seed", range(6))
def test_answers_small_and_larger_than_the_scratch_buffer_arrive_whole(loop: asyncio.AbstractEventLoop,
                                                                      seed: int) -> None:
    random = Random(seed)
    connection, _ = connected(loop)
    names = [f"{'t' * random.choice([1, 50, 3000])}{index}" for index in range(12)]  # some answers > 64 KiB
    responses = [MetadataResponse(cluster_id=name * random.choice([1, 1, 40])) for name in names]
    futures = [connection.send(MetadataRequest(topics=None)) for _ in responses]
    data = b"".join(bytes(part) for correlation, response in enumerate(responses)
                    for part in encode_response(response, 3, 12, correlation))
    received(connection, data, [random.choice([1, 3, 4, 100, 5000, 70000, 300000]) for _ in range(len(data))])
    assert [future.result().cluster_id for future in futures] == [response.cluster_id for response in responses]
    assert connection.close_reason is None and connection.in_flight_count == 0
    assert len(connection.get_buffer(-1)) == 64 * 1024  # nothing left over, no large buffer kept


def test_an_impossible_frame_size_closes_the_connection(loop: asyncio.AbstractEventLoop) -> None:
    connection, transport = connected(loop)
    future = connection.send(MetadataRequest(topics=None))
    received(connection, struct.pack(">i", -5) + b"\0" * 10, [2, 12])
    assert transport.closed and isinstance(future.exception(), (ProtocolError, KafkaConnectionError))
