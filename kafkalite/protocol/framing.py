"""Request and response framing: size prefixes and the header versions that go with each API.

Every frame on a Kafka connection is an int32 size followed by that many bytes. A request starts
with a request header (v1, or v2 when the request version is flexible); a response with a
response header (v0, or v1 when the response version is flexible), except that an ApiVersions
response always uses header v0 so a client can read it before versions are agreed (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import REQUESTS, RESPONSES, RequestHeader
from kafkalite.protocol.primitives import Reader, Writer

__all__ = [
    "API_VERSIONS_KEY",
    "RequestFrame",
    "decode_request_body",
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
_HEADER_V1 = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_HEADER_V1_SIZE = _HEADER_V1.size
_NEVER_FLEXIBLE = 1 << 16  # above every int16 version: no request header of this API key is v2
_flexible_from: dict[int, int] = {}  # API key -> first request version whose header is v2 (filled on first sight)
_response_header_versions: dict[tuple[int, int], int] = {}  # (api key, api version) -> response header version
_SIZE_AND_CORRELATION_ID = struct.Struct(">ii")  # a frame's size prefix, then response header v0
_SIZE_AND_HEADER = struct.Struct(">ihhi")  # a frame's size prefix, then request header v1's fixed part
_new = object.__new__


def request_header_version(api_key: int, api_version: int) -> int:
    """The request header version a client uses for this request (1 or 2)."""
    flexible_from = _flexible_from.get(api_key)
    return 2 if api_version >= (_first_flexible_version(api_key) if flexible_from is None else flexible_from) else 1


def _first_flexible_version(api_key: int) -> int:
    """The first version of this API whose request header is v2 (flexible), remembered for known keys."""
    request_type = REQUESTS.get(api_key)
    if request_type is None:
        return _NEVER_FLEXIBLE
    first = _NEVER_FLEXIBLE if request_type.FLEXIBLE_FROM is None else request_type.FLEXIBLE_FROM
    _flexible_from[api_key] = first  # bounded: the schemas' API keys only
    return first


def response_header_version(api_key: int, api_version: int) -> int:
    """The response header version for this request's answer (0 or 1)."""
    known = _response_header_versions.get((api_key, api_version))
    if known is not None:
        return known
    header_version = 0
    response_type = RESPONSES.get(api_key)
    if api_key != API_VERSIONS_KEY and response_type is not None and response_type.is_flexible(api_version):
        header_version = 1
    if response_type is not None and response_type.VALID_VERSIONS[0] <= api_version <= response_type.VALID_VERSIONS[1]:
        _response_header_versions[(api_key, api_version)] = header_version  # bounded: the schemas' versions only
    return header_version


class RequestFrame:
    """A request whose header is decoded and whose body is still bytes (``body`` onwards)."""

    __slots__ = ("header", "body")

    def __init__(self, header: RequestHeader, body: Reader) -> None:
        self.header = header
        self.body = body

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
    """Decode the request header of one frame (without its size prefix).

    Header v1 and v2 share their fixed part and the int16-length client id; v2 adds a tagged-field
    section. Read here with one ``unpack_from``, and the header and frame objects filled in without
    their ``__init__`` calls: this runs for every request."""
    try:
        api_key, api_version, correlation_id, client_id_size = _HEADER_V1.unpack_from(frame, 0)
    except struct.error:
        if len(frame) < 4:
            raise ProtocolError(f"request frame of {len(frame)} bytes is too short for a header") from None
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)  # v0 headers and truncated ones
        reader = Reader(frame)
        header = RequestHeader.decode_from(reader, request_header_version(api_key, api_version))
        return RequestFrame(header, reader)
    client_id: str | None = None
    if client_id_size >= 0:
        position = _HEADER_V1_SIZE + client_id_size
        if position > len(frame):
            raise ProtocolError(f"length {client_id_size} at byte {_HEADER_V1_SIZE} exceeds the "
                                f"{len(frame) - _HEADER_V1_SIZE} bytes that remain")
        try:
            client_id = str(frame[_HEADER_V1_SIZE:position], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string is not valid UTF-8: {exc}") from None
    elif client_id_size == -1:
        position = _HEADER_V1_SIZE
    else:
        raise ProtocolError(f"negative string length {client_id_size}")
    if type(frame) is memoryview and (frame.format != "B" or frame.ndim != 1):
        reader = Reader(frame, position)
    else:  # the reader of every frame net.py cuts: a view of a bytes-like, skipping Reader's checks
        reader = _new(Reader)
        reader.view, reader.pos = memoryview(frame), position
    unknown_tagged_fields = None
    flexible_from = _flexible_from.get(api_key)
    if api_version >= (_first_flexible_version(api_key) if flexible_from is None else flexible_from):
        view = reader.view
        if position < len(view) and view[position] == 0:  # no tagged fields: nearly every header
            reader.pos = position + 1
        else:
            try:
                unknown_tagged_fields = reader.skip_tagged_fields()
            except (struct.error, IndexError, ValueError, OverflowError) as exc:
                raise ProtocolError(f"malformed RequestHeader v2: {exc}") from None
    header = _new(RequestHeader)  # what RequestHeader(...) makes, without the __init__ call
    header.request_api_key, header.request_api_version, header.correlation_id = api_key, api_version, correlation_id
    header.client_id, header.unknown_tagged_fields = client_id, unknown_tagged_fields
    request = _new(RequestFrame)
    request.header, request.body = header, reader
    return request


_PRODUCE, _FETCH = 0, 1  # the API keys with hand-written codecs
# Each filled on the first use of its API: a start that answers ApiVersions needs neither, and the
# first Produce does not wait for Fetch's codec (nor the first Fetch for Produce's).
_produce_codec: dict[str, Any] = {}
_fetch_codec: dict[str, Any] = {}


def _load_produce_codec() -> dict[str, Any]:
    from kafkalite.protocol.messages.produce_response import ProduceResponse
    from kafkalite.protocol.produce_codec import decode_produce_request, encode_produce_response

    _produce_codec.update(decode=decode_produce_request, encode=encode_produce_response, response=ProduceResponse)
    return _produce_codec


def _load_fetch_codec() -> dict[str, Any]:
    from kafkalite.protocol.fetch_codec import decode_fetch_request, encode_fetch_response
    from kafkalite.protocol.messages.fetch_response import FetchResponse

    _fetch_codec.update(decode=decode_fetch_request, encode=encode_fetch_response, response=FetchResponse)
    return _fetch_codec


def decode_request_body(request_type: type[Message], reader: Reader, api_version: int) -> Message:
    """``request_type.decode_from(reader, api_version)``; Produce and Fetch through their hand-written
    decoders (``produce_codec``, ``fetch_codec``), which give the same messages faster."""
    api_key = request_type.API_KEY
    message: Message  # annotated rather than cast(): no call, no type built at run time, per request
    if api_key == _PRODUCE:
        message = (_produce_codec or _load_produce_codec())["decode"](reader, api_version)
    elif api_key == _FETCH:
        message = (_fetch_codec or _load_fetch_codec())["decode"](reader, api_version)
    else:
        message = request_type.decode_from(reader, api_version)
    return message


def _request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> Writer:
    """A writer holding a size prefix to fill in and the request header (v1, or v2 for a flexible
    request), written out as ``RequestHeader`` writes it: the client id keeps its int16 length in v2."""
    writer = Writer()
    writer.buf += _SIZE_AND_HEADER.pack(0, api_key, api_version, correlation_id)
    writer.nullable_string(client_id, False)
    if request_header_version(api_key, api_version) >= 2:
        writer.buf.append(0)  # no tagged fields
    return writer


def encode_request(
    request: Message, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A complete request frame: size prefix, header and body."""
    writer = _request_header(request.API_KEY, api_version, correlation_id, client_id)
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
    writer = _request_header(request.API_KEY, api_version, correlation_id, client_id)
    request.encode_into(writer, api_version)
    buffers = writer.buffers()
    _SIZE.pack_into(buffers[0], 0, len(writer) - 4)
    return buffers


def encode_response(
    response: Message, api_key: int, api_version: int, correlation_id: int
) -> list[bytes | bytearray | memoryview]:
    """A complete response frame as buffers for ``writelines``: size prefix, header, body.

    Large record sets stay separate buffers (see ``Writer``), so stored batches are not copied.
    Produce and Fetch answers are made by ``produce_codec`` and ``fetch_codec`` (the same bytes).
    """
    response_key = response.API_KEY
    if response_key == _PRODUCE:
        codec = _produce_codec or _load_produce_codec()
        if type(response) is codec["response"]:
            frame = codec["encode"](response, api_version, correlation_id)
            if frame is not None:
                return [frame]
    elif response_key == _FETCH:
        codec = _fetch_codec or _load_fetch_codec()
        if type(response) is codec["response"]:
            fetch_buffers: list[bytes | bytearray | memoryview] | None = codec["encode"](
                response, api_version, correlation_id)
            if fetch_buffers is not None:
                return fetch_buffers
    writer = Writer()
    writer.buf += _SIZE_AND_CORRELATION_ID.pack(0, correlation_id)  # ResponseHeader, written out:
    if response_header_version(api_key, api_version) >= 1:
        writer.buf.append(0)  # v1 adds a tagged-field section, empty
    response.encode_into(writer, api_version)
    buffers = writer.buffers()
    _SIZE.pack_into(buffers[0], 0, len(writer) - 4)
    return buffers


def parse_response_header(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Reader:
    """Skip the response header of one frame; return a reader positioned at the body."""
    reader = Reader(frame)
    if len(reader.view) < 4:
        raise ProtocolError(f"response frame of {len(reader.view)} bytes is too short for a header")
    reader.pos = 4  # the correlation id (the caller matched it)
    if response_header_version(api_key, api_version) >= 1:
        try:
            reader.skip_tagged_fields()
        except (struct.error, IndexError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"malformed ResponseHeader v1: {exc}") from None
    return reader
