"""Every generated message, every valid version: encode/decode round trips, and bad input."""

from __future__ import annotations

import random
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import ProtocolError
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiVersionsResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
    ResponseHeader,
)
from kafkalite.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkalite.protocol.primitives import Reader, Writer
from tests.unit.message_factory import build

ALL_MESSAGES: list[type[Message]] = [
    *REQUESTS.values(),
    *RESPONSES.values(),
    RequestHeader,
    ResponseHeader,
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
]
CASES = [
    pytest.param(cls, version, id=f"{cls.NAME}-v{version}")
    for cls in ALL_MESSAGES
    for version in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def test_every_broker_api_has_request_and_response() -> None:
    assert set(REQUESTS) == set(RESPONSES)
    for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 19, 22, 24, 26, 28, 68):
        assert REQUESTS[key].API_KEY == key


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip(cls: type[Message], version: int) -> None:
    rng = random.Random(f"{cls.NAME}/{version}")
    for _ in range(8):
        message = build(rng, cls, version)
        encoded = message.encode(version)
        decoded = cls.decode(encoded, version)
        assert decoded == message
        assert decoded.encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES[::7])
def test_every_truncation_is_a_protocol_error(cls: type[Message], version: int) -> None:
    rng = random.Random(f"truncate/{cls.NAME}/{version}")
    encoded = build(rng, cls, version).encode(version)
    for cut in range(len(encoded)):
        try:
            cls.decode(encoded[:cut], version)
        except ProtocolError:
            pass
        # A prefix may also be a complete, shorter message (trailing fields optional): fine.


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), pick=st.integers(min_value=0, max_value=len(CASES) - 1))
def test_random_bytes_only_raise_protocol_error(data: bytes, pick: int) -> None:
    cls, version = CASES[pick].values
    try:
        cls.decode(data, version)
    except ProtocolError:
        pass


def test_huge_lengths_are_rejected_without_allocating() -> None:
    # A classic-encoded array claiming 2**31-1 elements in a 10-byte body.
    body = struct.pack(">hii", -1, 0, 0x7FFFFFFF)  # transactional_id null, acks, timeout... then count
    with pytest.raises(ProtocolError):
        ProduceRequest.decode(body + struct.pack(">i", 0x7FFFFFFF), 3)
    # A compact string whose varint length is larger than the frame.
    with pytest.raises(ProtocolError):
        RequestHeader.decode(struct.pack(">hhi", 3, 12, 1) + b"\xff\x7f", 2)
    # A varint that never ends.
    with pytest.raises(ProtocolError):
        Reader(b"\xff" * 10).uvarint()
    # Negative lengths other than -1.
    with pytest.raises(ProtocolError):
        Reader(struct.pack(">h", -2)).nullable_string(False)
    with pytest.raises(ProtocolError):
        Reader(struct.pack(">i", -5)).nullable_bytes(False)


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    writer = Writer()
    writer.int32(7)  # correlation id
    writer.uvarint(2)  # two tagged fields
    writer.uvarint(5)
    writer.uvarint(3)
    writer.buf += b"abc"
    writer.uvarint(9)
    writer.uvarint(0)
    encoded = writer.getvalue()
    header = ResponseHeader.decode(encoded, 1)
    assert header.correlation_id == 7
    assert header.unknown_tagged_fields == [(5, b"abc"), (9, b"")]
    assert header.encode(1) == encoded


def test_known_tagged_fields_are_written_only_when_not_default() -> None:
    partition = PartitionData(partition_index=1, records=b"")
    response = FetchResponse(responses=[FetchableTopicResponse(topic_id=uuid.UUID(int=5), partitions=[partition])])
    plain = response.encode(13)
    partition.current_leader.leader_id = 3
    partition.current_leader.leader_epoch = 4
    tagged = response.encode(13)
    assert len(tagged) > len(plain)
    decoded = FetchResponse.decode(tagged, 13)
    assert decoded.responses[0].partitions[0].current_leader.leader_id == 3


def test_records_decode_as_a_view_into_the_frame() -> None:
    from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

    records = bytes(range(256)) * 4096  # 1 MiB
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=records)])])
    frame = request.encode(9)
    decoded = ProduceRequest.decode(frame, 9)
    view = decoded.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview)
    assert view.obj is frame  # no copy: a slice of the frame itself
    assert view == records


def test_large_records_stay_separate_buffers_when_encoding() -> None:
    records = b"r" * (1 << 20)
    partition = PartitionData(partition_index=0, records=records)
    response = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[partition])])
    writer = Writer()
    response.encode_into(writer, 12)
    assert any(buffer is records for buffer in writer.buffers())
    assert b"".join(writer.buffers()) == response.encode(12)


def test_api_versions_response_and_metadata_request_defaults() -> None:
    assert MetadataRequest().allow_auto_topic_creation is True
    response = ApiVersionsResponse(error_code=35)
    assert ApiVersionsResponse.decode(response.encode(0), 0).error_code == 35


def test_version_out_of_range_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        ProduceRequest.decode(b"", 99)


def test_the_package_stub_declares_each_class_the_package_serves() -> None:
    """Type checkers read the package's names from ``messages/__init__.pyi``; the module itself imports
    each class on first use. Both list the same classes, under the name each module defines."""
    import ast
    from pathlib import Path

    import kafkalite.protocol.messages as messages

    stub = ast.parse(Path(messages.__file__).with_suffix(".pyi").read_text(encoding="utf-8"))
    declared = {alias.asname: (node.module, alias.name) for node in stub.body if isinstance(node, ast.ImportFrom)
                and node.module is not None and node.module.startswith("kafkalite.protocol.messages.")
                for alias in node.names}
    assert set(declared) == set(messages._MODULES) == set(messages.__all__) - {"API_NAMES", "REQUESTS", "RESPONSES"}
    for name, (module, defined) in declared.items():
        assert (module, defined) == (f"kafkalite.protocol.messages.{messages._MODULES[name]}", name)
        assert getattr(messages, name).__name__ == name
