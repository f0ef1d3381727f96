"""One TCP connection to one broker: framing, correlation ids, in-flight requests, versions.

A :class:`BrokerConnection` is an ``asyncio.BufferedProtocol``: the socket's bytes land in a 64 KiB
scratch buffer, and an answer larger than that (a Fetch answer of megabytes) in a buffer of exactly its
size, made from its size prefix, which its decoded response then reads from without a copy.
:meth:`~BrokerConnection.send` encodes a request with the next correlation id, writes it, and returns a
future for its response; requests are pipelined (the caller decides how many may be in flight,
``max.in.flight.requests.per.connection`` for the producer). Kafka answers in request order on a
connection, so the in-flight requests are a deque: each response must carry the correlation id at its
head, anything else is a protocol violation that closes the connection. Every request has a deadline
(``request.timeout.ms``); a request that misses it closes the connection, as the Java client does,
failing it with :class:`KafkaTimeoutError` and the requests behind it with :class:`KafkaConnectionError`,
which callers treat as retriable.

Opening a connection (:meth:`~BrokerConnection.open`) runs three steps: ``_open_transport`` (TCP,
with TLS when ``security`` has an ``ssl`` context), ``_negotiate_versions`` (ApiVersions, KIP-511)
and ``_authenticate`` (SaslHandshake and SaslAuthenticate on SASL listeners, see
:mod:`kafkalite.client.security`; nothing for PLAINTEXT and SSL). Versions: the broker answers ApiVersions with its
range per API; :meth:`~BrokerConnection.version_for` picks the highest version both sides know. A
broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION in v0 layout; we then
ask again at the version it names (or v0).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.framing import encode_request_buffers, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

if TYPE_CHECKING:
    from kafkalite.client.security import ClientSecurity

__all__ = ["BrokerConnection", "CLIENT_SOFTWARE_NAME", "CLIENT_SOFTWARE_VERSION"]

log = logging.getLogger("kafkalite.client")

CLIENT_SOFTWARE_NAME = "kafkalite-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_SIZE = struct.Struct(">i")
_CORRELATION_AND_ERROR = struct.Struct(">ih")
_API_VERSIONS = ApiVersionsRequest.API_KEY
_MAX_FRAME = 1 << 30  # a response larger than this is a broken stream, not data
_SCRATCH_BYTES = 64 * 1024  # per connection; a larger answer is received into a buffer of its own size


def _api_name(api_key: int) -> str:
    request_type = REQUESTS.get(api_key)
    return request_type.NAME.removesuffix("Request") if request_type is not None else f"API {api_key}"


def highest_common_version(request_type: type[Message], broker_range: tuple[int, int] | None,
                           max_version: int | None = None, min_version: int | None = None,
                           broker: str = "the broker", allow_unstable: bool = False) -> int:
    """The highest version of ``request_type`` that we and the broker both know (and within our bounds).

    A version the schemas mark unstable is left out unless ``allow_unstable`` (for one that Kafka
    releases since serve as stable, when the broker offers it).
    """
    name = request_type.NAME.removesuffix("Request")
    if broker_range is None:
        raise UnsupportedVersionError(f"{broker} does not support the {name} API, which this client needs")
    low, high = request_type.VALID_VERSIONS
    if request_type.LATEST_VERSION_UNSTABLE and not allow_unstable:
        high -= 1
    if max_version is not None:
        high = min(high, max_version)
    if min_version is not None:
        low = max(low, min_version)
    version = min(high, broker_range[1])
    if version < max(low, broker_range[0]):
        raise UnsupportedVersionError(
            f"{broker} serves {name} versions {broker_range[0]}-{broker_range[1]}; this client needs {low}-{high}")
    return version


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    response_type: type[Message] | None  # None: hand back the raw frame
    future: asyncio.Future[Any]
    timer: asyncio.TimerHandle | None
    timeout: float = 0.0


class BrokerConnection(asyncio.BufferedProtocol):
    """A connection to ``host:port`` (broker ``node_id``, or -1 for a bootstrap address)."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str, request_timeout_ms: int,
                 send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1,
                 security: ClientSecurity | None = None) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.closed: asyncio.Future[None] | None = None
        self.close_reason: BaseException | None = None
        self._transport: asyncio.Transport | None = None
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._scratch = bytearray(_SCRATCH_BYTES)  # received into; frames up to its size are copied out
        self._filled = 0
        self._frame: bytearray | None = None  # a larger answer being received in place
        self._frame_filled = 0
        self._next_correlation_id = 0
        self._close_callbacks: list[Callable[[BrokerConnection], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused = False
        self._drain_waiter: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"BrokerConnection(node {self.node_id} at {self.host}:{self.port})"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    @property
    def is_open(self) -> bool:
        return self._transport is not None and self.close_reason is None

    def on_close(self, callback: Callable[[BrokerConnection], None]) -> None:
        self._close_callbacks.append(callback)

    # --- opening ---------------------------------------------------------------------------------

    async def open(self, connect_timeout_ms: int) -> None:
        """Connect, agree on versions and authenticate; raise :class:`KafkaConnectionError` on failure."""
        self._loop = asyncio.get_running_loop()
        self.closed = self._loop.create_future()
        try:
            await asyncio.wait_for(self._open_transport(), connect_timeout_ms / 1000)
        except (OSError, TimeoutError) as exc:
            self.close(KafkaConnectionError(f"cannot connect to {self.address}: {exc or type(exc).__name__}"))
            raise self.close_reason from None  # type: ignore[misc]
        try:
            await self._negotiate_versions()
            await self._authenticate()
        except BaseException as exc:
            self.close(exc if isinstance(exc, Exception) else None)
            raise

    async def _open_transport(self) -> None:
        """Open the byte stream, with TLS when the security protocol asks for it."""
        assert self._loop is not None
        context = None if self.security is None else self.security.ssl_context
        if context is None:
            await self._loop.create_connection(lambda: self, self.host, self.port)
        else:
            await self._loop.create_connection(lambda: self, self.host, self.port, ssl=context,
                                               server_hostname=self.host)

    async def _authenticate(self) -> None:
        """SaslHandshake and SaslAuthenticate on SASL listeners; nothing otherwise."""
        security = self.security
        if security is None or not security.sasl:
            return
        await security.authenticate(self.send, self.version_for(SaslHandshakeRequest),
                                    self.version_for(SaslAuthenticateRequest), self.address)

    async def _negotiate_versions(self) -> None:
        version = ApiVersionsRequest.VALID_VERSIONS[1]
        for _ in range(3):
            request = ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                         client_software_version=CLIENT_SOFTWARE_VERSION)
            frame: bytes = await self.send(request, version, raw=True)
            _, error_code = _CORRELATION_AND_ERROR.unpack_from(frame, 0)
            if error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                version = _api_versions_fallback(frame, version)
                continue
            response = ApiVersionsResponse.decode_from(parse_response_header(frame, _API_VERSIONS, version), version)
            if response.error_code != ErrorCode.NONE:
                raise UnsupportedVersionError(
                    f"{self.address} refused ApiVersions v{version}: {ErrorCode.from_code(response.error_code).name}")
            self.api_versions = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
            return
        raise UnsupportedVersionError(f"{self.address} agrees on no ApiVersions version")

    def version_for(self, request_type: type[Message], max_version: int | None = None,
                    min_version: int | None = None, allow_unstable: bool = False) -> int:
        """The highest version of ``request_type`` both sides know; :class:`UnsupportedVersionError` if none."""
        return highest_common_version(request_type, self.api_versions.get(request_type.API_KEY), max_version,
                                      min_version, broker=f"broker {self.node_id} at {self.address}",
                                      allow_unstable=allow_unstable)

    def supports(self, request_type: type[Message]) -> bool:
        return request_type.API_KEY in self.api_versions

    # --- requests --------------------------------------------------------------------------------

    def send(self, request: Message, version: int | None = None, *, expect_response: bool = True,
             raw: bool = False, timeout_ms: float | None = None) -> asyncio.Future[Any]:
        """Write ``request`` and return a future for its decoded response.

        ``version`` defaults to :meth:`version_for`. Without ``expect_response`` (Produce with acks=0)
        the future resolves to ``None`` once the request is written. ``raw`` resolves to the frame
        (correlation id onwards) instead of a decoded response. ``timeout_ms`` replaces
        ``request.timeout.ms`` for this request (JoinGroup waits up to the rebalance timeout).
        """
        loop = self._loop
        assert loop is not None, "open() the connection first"
        future: asyncio.Future[Any] = loop.create_future()
        if self.close_reason is not None or self._transport is None:
            future.set_exception(KafkaConnectionError(f"connection to {self.address} is closed"))
            return future
        if version is None:
            version = self.version_for(type(request))
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        buffers = encode_request_buffers(request, version, correlation_id, self.client_id)
        self._transport.writelines(buffers)
        if not expect_response:
            future.set_result(None)
            return future
        response_type = None if raw else RESPONSES[request.API_KEY]
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
        timer = loop.call_later(timeout, self._request_timed_out, correlation_id)
        self._in_flight.append(_InFlight(correlation_id, request.API_KEY, version, response_type, future, timer,
                                         timeout))
        return future

    async def request(self, request: Message, version: int | None = None) -> Any:
        """Send and await the response."""
        return await self.send(request, version)

    async def drained(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._paused:
            assert self._loop is not None
            if self._drain_waiter is None or self._drain_waiter.done():
                self._drain_waiter = self._loop.create_future()
            await self._drain_waiter

    def _request_timed_out(self, correlation_id: int) -> None:
        for entry in self._in_flight:
            if entry.correlation_id == correlation_id:
                api = _api_name(entry.api_key)
                error = KafkaTimeoutError(
                    f"{api} request to {self.address} got no response within {entry.timeout * 1000:.0f} ms")
                entry.timer = None
                if not entry.future.done():
                    entry.future.set_exception(error)
                self.close(error)
                return

    # --- asyncio.BufferedProtocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.send_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
                if self.receive_buffer_bytes > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            except OSError:  # pragma: no cover - best effort
                pass
        self._transport.set_write_buffer_limits(high=4 << 20)

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:  # a large answer: the socket's bytes land in place
            return memoryview(frame)[self._frame_filled:]
        return memoryview(self._scratch)[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is None:
            self._filled += nbytes
            self._split_frames()
            return
        self._frame_filled += nbytes
        if self._frame_filled == len(frame):
            self._frame = None
            try:
                self._handle_frame(frame)
            except ProtocolError as exc:
                self.close(exc)

    def data_received(self, data: bytes) -> None:
        """Bytes handed over rather than received into :meth:`get_buffer` (the same framing)."""
        view = memoryview(data)
        while view and self.close_reason is None:
            buffer = self.get_buffer(len(view))
            count = min(len(buffer), len(view))
            buffer[:count] = view[:count]
            self.buffer_updated(count)
            view = view[count:]

    def _split_frames(self) -> None:
        """Handle every whole frame in the scratch buffer; a frame larger than the scratch gets a buffer
        of its own sized from its prefix, and the rest of it is received straight into that."""
        scratch = self._scratch
        end = self._filled
        position = 0
        try:
            while end - position >= 4:
                (size,) = _SIZE.unpack_from(scratch, position)
                if size < 4 or size > _MAX_FRAME:
                    raise ProtocolError(f"response frame size {size} from {self.address} is impossible")
                start = position + 4
                if end - start < size:
                    if 4 + size > len(scratch):
                        frame = bytearray(size)
                        frame[: end - start] = memoryview(scratch)[start:end]
                        self._frame, self._frame_filled = frame, end - start
                        position = end
                    break
                position = start + size
                self._handle_frame(bytes(memoryview(scratch)[start:position]))
                if self.close_reason is not None:
                    return
        except ProtocolError as exc:
            self.close(exc)
            return
        if position:  # what is left (the start of a frame) moves to the front
            left = end - position
            scratch[:left] = scratch[position:end]
            self._filled = left

    def _handle_frame(self, frame: bytes | bytearray) -> None:
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if not self._in_flight:
            raise ProtocolError(f"{self.address} sent a response (correlation id {correlation_id}) nobody asked for")
        entry = self._in_flight[0]
        if entry.correlation_id != correlation_id:
            raise ProtocolError(f"{self.address} answered correlation id {correlation_id}, "
                                f"expected {entry.correlation_id}")
        self._in_flight.popleft()
        if entry.timer is not None:
            entry.timer.cancel()
        if entry.future.done():  # cancelled by its caller
            return
        if entry.response_type is None:
            entry.future.set_result(bytes(frame) if isinstance(frame, bytearray) else frame)
            return
        try:
            reader = parse_response_header(frame, entry.api_key, entry.api_version)
            response = entry.response_type.decode_from(reader, entry.api_version)
        except ProtocolError as exc:
            entry.future.set_exception(exc)
            raise
        entry.future.set_result(response)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        reason = self.close_reason or KafkaConnectionError(
            f"connection to {self.address} was closed" + (f": {exc}" if exc else " by the broker"))
        self._fail_all(reason)

    # --- closing ---------------------------------------------------------------------------------

    def close(self, reason: BaseException | None = None) -> None:
        """Close the connection; every request still in flight fails (with ``reason`` if given)."""
        if self.close_reason is None:
            self.close_reason = reason or KafkaConnectionError(f"connection to {self.address} was closed")
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._fail_all(self.close_reason)

    def _fail_all(self, reason: BaseException) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        in_flight = self._in_flight
        while in_flight:
            entry = in_flight.popleft()
            if entry.timer is not None:
                entry.timer.cancel()
            if not entry.future.done():
                error = reason if isinstance(reason, (KafkaConnectionError, ProtocolError)) else (
                    KafkaConnectionError(f"connection to {self.address} closed: {reason}"))
                entry.future.set_exception(error)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)
            callbacks, self._close_callbacks = self._close_callbacks, []
            for callback in callbacks:
                callback(self)


def _api_versions_fallback(frame: bytes, tried: int) -> int:
    """The ApiVersions version to try after UNSUPPORTED_VERSION: the broker's highest, else 0."""
    try:
        response = ApiVersionsResponse.decode_from(parse_response_header(frame, _API_VERSIONS, 0), 0)
    except ProtocolError:
        return 0
    for entry in response.api_keys:
        if entry.api_key == _API_VERSIONS:
            return max(0, min(entry.max_version, tried - 1))
    return 0
