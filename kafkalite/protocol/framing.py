"""Request and response framing: size prefixes and the header versions that go with each API.

Every frame on a Kafka connection is an int32 size followed by that many bytes. A request starts
with a request header (v1, or v2 when the request version is flexible); a response with a
response header (v0, or v1 when the response version is flexible), except that an ApiVersions
response always uses header v0 so a client can read it before versions are agreed (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import REQUESTS, RESPONSES, RequestHeader, ResponseHeader
from kafkalite.protocol.primitives import Reader, Writer

__all__ = [
    "API_VERSIONS_KEY",
    "RequestFrame",
    "encode_request",
    "encode_request_buffers",
    "encode_response",
    "parse_request",
    "parse_response_header",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version a client uses for this request (1 or 2)."""
    request_type = REQUESTS.get(api_key)
    if request_type is not None and request_type.is_flexible(api_version):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version for this request's answer (0 or 1)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    response_type = RESPONSES.get(api_key)
    if response_type is not None and response_type.is_flexible(api_version):
        return 1
    return 0


@dataclass(slots=True)
class RequestFrame:
    """A request whose header is decoded and whose body is still bytes (``body`` onwards)."""

    header: RequestHeader
    body: Reader

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def parse_request(frame: bytes | bytearray | memoryview) -> RequestFrame:
    """Decode the request header of one frame (without its size prefix)."""
    try:
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    except struct.error:
        raise ProtocolError(f"request frame of {len(frame)} bytes is too short for a header") from None
    reader = Reader(frame)
    header = RequestHeader.decode_from(reader, request_header_version(api_key, api_version))
    return RequestFrame(header, reader)


def encode_request(
    request: Message, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A complete request frame: size prefix, header and body."""
    writer = Writer()
    writer.int32(0)
    header = RequestHeader(request.API_KEY, api_version, correlation_id, client_id)
    header.encode_into(writer, request_header_version(request.API_KEY, api_version))
    request.encode_into(writer, api_version)
    frame = bytearray(writer.getvalue())
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)


def encode_request_buffers(
    request: Message, api_version: int, correlation_id: int, client_id: str | None
) -> list[bytes | bytearray | memoryview]:
    """A complete request frame as buffers for ``writelines``: size prefix, header, body.

    Like :func:`encode_response`, large values (a Produce request's record batches) stay separate
    buffers, so a request carrying megabytes of records is not copied into one frame.
    """
    writer = Writer()
    writer.int32(0)
    header = RequestHeader(request.API_KEY, api_version, correlation_id, client_id)
    header.encode_into(writer, request_header_version(request.API_KEY, api_version))
    request.encode_into(writer, api_version)
    buffers = writer.buffers()
    _SIZE.pack_into(buffers[0], 0, len(writer) - 4)
    return buffers


def encode_response(
    response: Message, api_key: int, api_version: int, correlation_id: int
) -> list[bytes | bytearray | memoryview]:
    """A complete response frame as buffers for ``writelines``: size prefix, header, body.

    Large record sets stay separate buffers (see ``Writer``), so stored batches are not copied.
    """
    writer = Writer()
    writer.int32(0)
    ResponseHeader(correlation_id).encode_into(writer, response_header_version(api_key, api_version))
    response.encode_into(writer, api_version)
    buffers = writer.buffers()
    _SIZE.pack_into(buffers[0], 0, len(writer) - 4)
    return buffers


def parse_response_header(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Reader:
    """Skip the response header of one frame; return a reader positioned at the body."""
    reader = Reader(frame)
    ResponseHeader.decode_from(reader, response_header_version(api_key, api_version))
    return reader
