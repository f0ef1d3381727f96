"""The hand-written Produce codec gives exactly what the generated classes give, on every version.

``decode_produce_request`` against ``ProduceRequest.decode_from`` (random valid requests, then the
same mutated: the same message or the same error type), ``encode_produce_response`` against the
generic ``ProduceResponse`` encoding (random responses, and the common answers of the broker), and
``parse_request``'s header against ``RequestHeader.decode_from``.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol import ProtocolError
from kafkalite.protocol.framing import encode_request, parse_request, request_header_version
from kafkalite.protocol.messages import ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkalite.protocol.primitives import Reader, Writer
from kafkalite.protocol.produce_codec import (
    _one_partition,
    _read_one_partition,
    decode_produce_request,
    encode_produce_response,
)
from tests.unit.message_factory import build
from tests.unit.test_codec_fuzz import mutated

VERSIONS = range(ProduceRequest.VALID_VERSIONS[0], ProduceRequest.VALID_VERSIONS[1] + 1)
CHECKS = settings(max_examples=300, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def generic_response_frame(response: ProduceResponse, version: int, correlation_id: int) -> bytes:
    writer = Writer()
    writer.int32(0)
    ResponseHeader(correlation_id).encode_into(writer, 1 if version >= 9 else 0)
    response.encode_into(writer, version)
    frame = bytearray(writer.getvalue())
    frame[:4] = (len(frame) - 4).to_bytes(4, "big")
    return bytes(frame)


def decode_both(body: bytes, version: int) -> tuple[object, object]:
    """What each decoder makes of ``body``: the request and where the reader stopped, or the error type."""
    outcomes = []
    for decode in (ProduceRequest.decode_from, decode_produce_request):
        reader = Reader(body)
        try:
            outcomes.append((decode(reader, version), reader.pos))
        except ProtocolError:
            outcomes.append(ProtocolError)
    return outcomes[0], outcomes[1]


@CHECKS
@given(st.sampled_from(VERSIONS), st.integers(0, 2**32 - 1))
def test_a_valid_request_decodes_as_the_generated_class_decodes_it(version: int, seed: int) -> None:
    request = build(random.Random(seed), ProduceRequest, version)
    generic, fast = decode_both(request.encode(version), version)
    assert fast == generic


@CHECKS
@given(st.data())
def test_a_mutated_request_decodes_or_fails_as_the_generated_class(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(VERSIONS), label="version")
    request = build(random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")), ProduceRequest, version)
    body = data.draw(mutated(request.encode(version)), label="body")
    generic, fast = decode_both(body, version)
    assert fast == generic


@CHECKS
@given(st.data(), st.sampled_from([v for v in VERSIONS if v >= 9]), st.none() | st.text(max_size=130),
       st.text(max_size=130), st.integers(-(2**31), 2**31 - 1), st.none() | st.binary(max_size=300),
       st.sampled_from([-1, 0, 1]), st.booleans())
def test_a_one_partition_request_decodes_or_fails_as_the_generated_class(
        data: st.DataObject, version: int, transactional_id: str | None, name: str, index: int,
        records: bytes | None, acks: int, mutate: bool) -> None:
    """The request almost every producer sends (one topic, one partition) has a path of its own."""
    request = ProduceRequest(transactional_id, acks, 30_000, [TopicProduceData(name, [
        PartitionProduceData(index, records)])])
    body = request.encode(version)
    if mutate:
        body = data.draw(mutated(body), label="body")
    elif records is not None and len(name.encode()) < 0x7F and len((transactional_id or "").encode()) < 0x7F:
        assert _read_one_partition(memoryview(body), 0) is not None  # it takes the path of its own
    generic, fast = decode_both(body, version)
    assert fast == generic


def test_records_stay_a_view_into_the_frame() -> None:
    frame = bytearray(ProduceRequest(acks=1, timeout_ms=100, topic_data=[TopicProduceData("t", [
        PartitionProduceData(0, b"batch bytes")])]).encode(9))
    decoded = decode_produce_request(Reader(memoryview(frame)), 9)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and bytes(records) == b"batch bytes"


@CHECKS
@given(st.sampled_from(VERSIONS), st.integers(0, 2**32 - 1), st.integers(-(2**31), 2**31 - 1))
def test_a_random_response_encodes_as_the_generated_class_encodes_it(version: int, seed: int,
                                                                      correlation_id: int) -> None:
    response = build(random.Random(seed), ProduceResponse, version)
    frame = encode_produce_response(response, version, correlation_id)
    if frame is not None:  # None: left to the generated encoder
        assert frame == generic_response_frame(response, version, correlation_id)


def test_the_broker_s_answers_take_the_hand_written_path_on_every_version() -> None:
    for version in VERSIONS:
        for message in (None, "m", "é" * 40):
            response = ProduceResponse(responses=[
                TopicProduceResponse("topic-a", [
                    PartitionProduceResponse(0, 0, 12345, -1, 0),
                    PartitionProduceResponse(1, 87, -1, -1, 7, error_message=message),
                ]),
                TopicProduceResponse("tópico", [PartitionProduceResponse(2, 0, 2**40, 1_700_000_000_000, 3)]),
            ])
            frame = encode_produce_response(response, version, 77)
            assert frame is not None
            assert frame == generic_response_frame(response, version, 77)


@CHECKS
@given(st.sampled_from(VERSIONS), st.integers(-(2**31), 2**31 - 1), st.text(max_size=140),
       st.integers(0, 2**31 - 1), st.sampled_from([0, 1, 87]), st.integers(-1, 2**62), st.integers(-1, 2**62),
       st.integers(-1, 2**62), st.integers(0, 2**31 - 1), st.sampled_from([None, "", "m", "é" * 70]))
def test_a_one_partition_answer_encodes_as_the_generated_class_encodes_it(
        version: int, correlation_id: int, name: str, index: int, error_code: int, base_offset: int,
        log_append_time_ms: int, log_start_offset: int, throttle_time_ms: int, message: str | None) -> None:
    """The answer almost every Produce gets (one topic, one partition) has a path of its own."""
    response = ProduceResponse(responses=[TopicProduceResponse(name, [PartitionProduceResponse(
        index, error_code, base_offset, log_append_time_ms, log_start_offset, error_message=message)])],
        throttle_time_ms=throttle_time_ms)
    for _ in range(2):  # the second time with the layout it keeps for the name
        frame = encode_produce_response(response, version, correlation_id)
        if len(name.encode()) < 0x7F and (message is None or len(message.encode()) < 0x7F):
            assert frame is not None
        if len(name.encode()) < 0x7F and message is None:  # it takes the path of its own
            assert _one_partition(response.responses[0], throttle_time_ms, version, correlation_id) == frame
        if frame is not None:
            assert frame == generic_response_frame(response, version, correlation_id)


def test_what_the_hand_written_encoder_leaves_to_the_generated_one() -> None:
    left = [
        PartitionProduceResponse(0, record_errors=[BatchIndexAndErrorMessage(0, "bad")]),
        PartitionProduceResponse(0, current_leader=LeaderIdAndEpoch(1, 2)),
        PartitionProduceResponse(0, error_message="x" * 200),
    ]
    for partition in left:
        response = ProduceResponse(responses=[TopicProduceResponse("t", [partition])])
        assert encode_produce_response(response, 11, 1) is None


@CHECKS
@given(st.data())
def test_request_headers_parse_as_the_generated_header_reads_them(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(VERSIONS), label="version")
    client_id = data.draw(st.none() | st.text(max_size=20), label="client id")
    frame = encode_request(ProduceRequest(acks=1), version, data.draw(st.integers(-(2**31), 2**31 - 1)),
                           client_id)[4:]
    frame = data.draw(mutated(frame), label="frame")
    outcomes = []
    for parse in (parse_request, generic_parse_request):
        try:
            parsed = parse(frame)
            outcomes.append((parsed.header, parsed.body.pos))
        except ProtocolError:
            outcomes.append(ProtocolError)
    assert outcomes[0] == outcomes[1]


def generic_parse_request(frame: bytes) -> Reader:
    if len(frame) < 4:
        raise ProtocolError("too short")
    reader = Reader(frame)
    api_key, api_version = int.from_bytes(frame[:2], "big", signed=True), int.from_bytes(frame[2:4], "big",
                                                                                           signed=True)
    header = RequestHeader.decode_from(reader, request_header_version(api_key, api_version))

    class Parsed:
        pass

    parsed = Parsed()
    parsed.header, parsed.body = header, reader  # type: ignore[attr-defined]
    return parsed  # type: ignore[return-value]
