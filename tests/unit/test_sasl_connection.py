"""SecureConnection driven without sockets: what a SASL listener serves before, during and after
authentication, with the real SASL handlers, a fake transport and the loop's timers."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from kafkalite.broker.handlers.registry import HANDLERS
from kafkalite.broker.quotas import ConnectionQuotas
from kafkalite.broker.security.connection import ListenerSecurity, SecureConnection
from kafkalite.broker.security.sasl import SaslSettings
from kafkalite.broker.security.scram import ScramCredentials
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

MAX_REQUEST_BYTES = 100 * 1024 * 1024


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

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
        pass

    def resume_reading(self) -> None:
        pass

    def frames(self) -> list[bytes]:
        frames, position = [], 0
        while position < len(self.written):
            (size,) = struct.unpack_from(">i", self.written, position)
            frames.append(bytes(self.written[position + 4:position + 4 + size]))
            position += 4 + size
        return frames


def connect(*, timeout_ms: int = 0, reauth_ms: int = 0, failure_delay_ms: int = 0,
            quotas: ConnectionQuotas | None = None) -> tuple[SecureConnection, FakeTransport]:
    settings = SaslSettings(("PLAIN",), {"alice": "alice-secret"}, ScramCredentials(None), reauth_ms=reauth_ms)
    security = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl=settings,
                                authentication_timeout_ms=timeout_ms, failed_authentication_delay_ms=failure_delay_ms)
    connection = SecureConnection(object(), security=security, max_request_bytes=MAX_REQUEST_BYTES,
                                  idle_ms=0, handlers=HANDLERS, quotas=quotas)
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, transport


def feed(connection: SecureConnection, data: bytes) -> None:
    position = 0
    while position < len(data):
        buffer = connection.get_buffer(-1)
        take = min(len(buffer), len(data) - position)
        buffer[:take] = data[position:position + take]
        position += take
        connection.buffer_updated(take)


def request(message: Message, version: int, correlation_id: int = 1) -> bytes:
    return bytes(encode_request(message, version, correlation_id, "test"))


def answer(transport: FakeTransport, index: int, response_type: Any, api_key: int, version: int) -> Any:
    frame = transport.frames()[index]
    return response_type.decode_from(parse_response_header(frame, api_key, version), version)


def authenticate(connection: SecureConnection, password: str = "alice-secret") -> None:
    feed(connection, request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1)
         + request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00" + password.encode()), 2, 2))


def run(test: Any) -> None:
    asyncio.run(test())


def test_only_api_versions_and_sasl_before_authentication() -> None:
    async def test() -> None:
        connection, transport = connect()
        feed(connection, request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3))
        assert not transport.closed and len(transport.frames()) == 1
        feed(connection, request(MetadataRequest(topics=None), 12, 2))
        assert transport.closed and len(transport.frames()) == 1  # no answer to Metadata

    run(test)


def test_plain_authentication_lifts_the_limits() -> None:
    async def test() -> None:
        connection, transport = connect()
        assert connection._max_request_bytes == 512 * 1024
        authenticate(connection)
        handshake = answer(transport, 0, SaslHandshakeResponse, 17, 1)
        assert handshake.error_code == ErrorCode.NONE and handshake.mechanisms == ["PLAIN"]
        assert answer(transport, 1, SaslAuthenticateResponse, 36, 2).error_code == ErrorCode.NONE
        assert connection.session.authenticated and str(connection.session.principal) == "User:alice"
        assert connection._max_request_bytes == MAX_REQUEST_BYTES and not transport.closed
        feed(connection, struct.pack(">i", 600 * 1024) + b"x" * 100)  # a large frame may now arrive
        assert not transport.closed

    run(test)


def test_a_wrong_password_is_answered_then_closed() -> None:
    async def test() -> None:
        connection, transport = connect()
        authenticate(connection, "wrong")
        refused = answer(transport, 1, SaslAuthenticateResponse, 36, 2)
        assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert refused.error_message == "Authentication failed: Invalid username or password"
        assert transport.closed and not connection.session.authenticated

    run(test)


async def _until(condition: Any, seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not within the deadline"
        await asyncio.sleep(0.005)


def test_a_failed_login_is_answered_and_closed_after_the_delay() -> None:
    async def test() -> None:
        connection, transport = connect(failure_delay_ms=50)
        ok, ok_transport = connect(failure_delay_ms=50)
        # the wrong password, then a request the connection must no longer read
        authenticate(connection, "wrong")
        feed(connection, request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 3))
        assert len(transport.frames()) == 1 and not transport.closed  # the handshake's answer only, for now
        assert connection._failure_close is not None
        authenticate(ok)  # the loop is not held: another connection is served meanwhile
        assert ok.session.authenticated and len(ok_transport.frames()) == 2
        await _until(lambda: transport.closed)
        frames = transport.frames()
        assert len(frames) == 2  # the failure's answer, written just before the close; nothing after it
        refused = answer(transport, 1, SaslAuthenticateResponse, 36, 2)
        assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert not ok_transport.closed

    run(test)


def test_a_connection_waiting_out_the_delay_still_counts_against_max_connections() -> None:
    async def test() -> None:
        quotas = ConnectionQuotas(lambda: (1, 1, ""))
        connection, transport = connect(failure_delay_ms=50, quotas=quotas)
        authenticate(connection, "wrong")
        _, refused = connect(quotas=quotas)
        assert refused.closed  # the one place is still taken while the failed login waits
        await _until(lambda: transport.closed)
        connection.connection_lost(None)
        _, admitted = connect(quotas=quotas)
        assert not admitted.closed

    run(test)


def test_a_malformed_sasl_request_still_closes_at_once_with_the_delay_on() -> None:
    async def test() -> None:
        connection, transport = connect(failure_delay_ms=60_000)
        feed(connection, request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1)
             + struct.pack(">i", 10) + struct.pack(">hhi", 36, 2, 2) + b"\xff\xff")  # a broken header
        assert transport.closed and connection._failure_close is None
        assert len(transport.frames()) == 1  # the handshake's answer, written before the close

    run(test)


def test_a_connection_closed_by_its_client_during_the_delay_leaves_no_timer() -> None:
    async def test() -> None:
        connection, transport = connect(failure_delay_ms=60_000)
        authenticate(connection, "wrong")
        assert connection._failure_close is not None
        connection.connection_lost(None)
        assert connection._failure_close is None

    run(test)


@pytest.mark.parametrize("size", [512 * 1024 + 1, 100 * 1024 * 1024, -1])
def test_an_oversized_frame_before_authentication_closes_before_it_is_buffered(size: int) -> None:
    async def test() -> None:
        connection, transport = connect()
        feed(connection, struct.pack(">i", size))
        assert transport.closed and connection._body is None

    run(test)


def test_handshake_v0_then_a_bare_token() -> None:
    async def test() -> None:
        connection, transport = connect()
        token = b"\x00alice\x00alice-secret"
        feed(connection, request(SaslHandshakeRequest(mechanism="PLAIN"), 0) + struct.pack(">i", len(token)) + token)
        assert answer(transport, 0, SaslHandshakeResponse, 17, 0).error_code == ErrorCode.NONE
        assert transport.frames()[1] == b""  # PLAIN's empty answer, as a bare frame
        assert connection.session.authenticated and not transport.closed

    run(test)


def test_an_unauthenticated_connection_is_closed_after_the_bound() -> None:
    async def test() -> None:
        connection, transport = connect(timeout_ms=20)
        for _ in range(500):
            if transport.closed:
                break
            await asyncio.sleep(0.01)
        assert transport.closed
        other, other_transport = connect(timeout_ms=20)
        authenticate(other)
        await asyncio.sleep(0.1)
        assert not other_transport.closed  # authenticated in time: the timer is gone

    run(test)


def test_an_expired_session_must_reauthenticate(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalite.broker.security.connection as module

    now = [1_000_000]
    monkeypatch.setattr(module, "_now_ms", lambda: now[0])

    async def test() -> None:
        connection, transport = connect(reauth_ms=5_000)
        authenticate(connection)
        assert answer(transport, 1, SaslAuthenticateResponse, 36, 2).session_lifetime_ms == 5_000
        now[0] += 4_000
        feed(connection, request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 3))
        assert not transport.closed
        authenticate(connection)  # re-authentication, same mechanism and principal
        assert answer(transport, 4, SaslAuthenticateResponse, 36, 2).error_code == ErrorCode.NONE
        now[0] += 6_000  # past the new session's end
        feed(connection, request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 4))
        assert transport.closed

    run(test)
