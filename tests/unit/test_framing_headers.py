"""The headers framing writes, reads and skips by hand are the generated header messages' bytes and values.

``encode_request``/``encode_request_buffers`` write the request header and ``encode_response`` the
response header without a header message object, ``parse_request`` fills a ``RequestHeader`` in
without its ``__init__`` and ``parse_response_header`` skips a header without decoding it: each is
compared here with ``RequestHeader``/``ResponseHeader`` at both header versions.
"""

from __future__ import annotations

import struct

import pytest

from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.framing import (
    encode_request,
    encode_request_buffers,
    encode_response,
    parse_request,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from kafkalite.protocol.messages import (
    ApiVersionsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    RequestHeader,
    ResponseHeader,
)
from kafkalite.protocol.primitives import Reader, Writer

# (request, version): a non-flexible one (header v1) and a flexible one (header v2)
REQUESTS = [(HeartbeatRequest(group_id="g", generation_id=3, member_id="m"), 3),
            (HeartbeatRequest(group_id="g", generation_id=3, member_id="m"), 4),
            (MetadataRequest(topics=None), 12)]


@pytest.mark.parametrize(("request_message", "version"), REQUESTS)
@pytest.mark.parametrize("client_id", ["client-1", None, "", "klïent-ü"])
def test_request_frames_carry_the_generated_header(request_message: HeartbeatRequest, version: int,
                                                   client_id: str | None) -> None:
    api_key = request_message.API_KEY
    writer = Writer()
    RequestHeader(api_key, version, 77, client_id).encode_into(writer, request_header_version(api_key, version))
    body = writer.getvalue() + request_message.encode(version)
    expected = struct.pack(">i", len(body)) + body
    assert encode_request(request_message, version, 77, client_id) == expected
    assert b"".join(encode_request_buffers(request_message, version, 77, client_id)) == expected
    parsed = parse_request(expected[4:])
    assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.header.client_id) == (
        api_key, version, 77, client_id)


@pytest.mark.parametrize(("response", "api_key", "version"), [
    (HeartbeatResponse(error_code=27), 12, 3), (HeartbeatResponse(error_code=27), 12, 4),
    (ApiVersionsResponse(error_code=35), 18, 3)])  # an ApiVersions answer keeps header v0, though flexible
def test_response_frames_carry_the_generated_header_and_parse_back(response: HeartbeatResponse, api_key: int,
                                                                   version: int) -> None:
    header_version = response_header_version(api_key, version)
    writer = Writer()
    ResponseHeader(2**31 - 1).encode_into(writer, header_version)
    body = writer.getvalue() + response.encode(version)
    expected = struct.pack(">i", len(body)) + body
    assert b"".join(encode_response(response, api_key, version, 2**31 - 1)) == expected
    reader = parse_response_header(expected[4:], api_key, version)
    assert type(response).decode_from(reader, version) == response


def test_a_response_header_with_tagged_fields_is_skipped() -> None:
    writer = Writer()
    ResponseHeader(5, unknown_tagged_fields=[(9, b"xyz")]).encode_into(writer, 1)
    frame = writer.getvalue() + HeartbeatResponse(error_code=0).encode(4)
    reader = parse_response_header(frame, 12, 4)
    assert HeartbeatResponse.decode_from(reader, 4) == HeartbeatResponse(error_code=0)


@pytest.mark.parametrize("frame", [b"", b"\x00\x00\x00", b"\x00\x00\x00\x05", b"\x00\x00\x00\x05\x03\x01"])
def test_a_truncated_response_header_is_a_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        reader = parse_response_header(frame, 12, 4)  # header v1: correlation id, then tagged fields
        HeartbeatResponse.decode_from(reader, 4)


@pytest.mark.parametrize(("api_key", "version"), [(12, 3), (12, 4), (3, 12), (0, 9), (1, 17), (18, 3), (999, 2)])
@pytest.mark.parametrize("tagged", [None, [(3, b"ab"), (70, b"")]])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_parse_request_gives_the_header_request_header_decodes(
        api_key: int, version: int, tagged: list[tuple[int, bytes]] | None, kind: type) -> None:
    """Header and body position as ``RequestHeader.decode_from`` gives them, tagged fields (v2) kept,
    from every kind of buffer; an API key no schema has gets header v1."""
    header_version = request_header_version(api_key, version)
    first_flexible = {12: 4, 3: 9, 0: 9, 1: 12, 18: 3}  # the schemas' flexibleVersions
    assert header_version == (2 if version >= first_flexible.get(api_key, 1 << 16) else 1)
    header = RequestHeader(api_key, version, 41, "c-1", tagged if header_version == 2 else None)
    writer = Writer()
    header.encode_into(writer, header_version)
    frame = writer.getvalue() + b"body"
    parsed = parse_request(kind(frame))
    assert type(parsed.header) is RequestHeader
    assert parsed.header == RequestHeader.decode_from(Reader(frame), header_version) == header
    assert parsed.header.unknown_tagged_fields == header.unknown_tagged_fields
    assert bytes(parsed.body.view[parsed.body.pos:]) == b"body"
