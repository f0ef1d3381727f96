"""The hand-written Fetch codec against the generated one on every version: the response encoder gives
the same bytes and keeps large record sets as buffers of their own (the stored bytes, not a copy);
the request decoder (its general reader and its one-partition one) gives the same request, or the
same error type, for valid and mutated bodies."""

from __future__ import annotations

import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol import ProtocolError
from kafkalite.protocol.fetch_codec import (
    NO_CURRENT_LEADER,
    NO_DIVERGING_EPOCH,
    NO_SNAPSHOT_ID,
    ZERO_COPY_BYTES,
    _read_one_partition,
    _read_request,
    decode_fetch_request,
    encode_fetch_response,
)
from kafkalite.protocol.messages import FetchRequest, FetchResponse, ResponseHeader
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkalite.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    PartitionData,
)
from kafkalite.protocol.primitives import Reader, Writer
from tests.unit.message_factory import build
from tests.unit.test_codec_fuzz import mutated

VERSIONS = range(FetchResponse.VALID_VERSIONS[0], FetchResponse.VALID_VERSIONS[1] + 1)


def generic_frame(response: FetchResponse, version: int, correlation_id: int) -> bytes:
    writer = Writer()
    writer.int32(0)
    ResponseHeader(correlation_id).encode_into(writer, 1 if version >= 12 else 0)
    response.encode_into(writer, version)
    frame = bytearray(writer.getvalue())
    frame[:4] = (len(frame) - 4).to_bytes(4, "big")
    return bytes(frame)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(0, 2**32 - 1), st.integers(-(2**31), 2**31 - 1))
def test_a_random_response_encodes_as_the_generated_class_encodes_it(version: int, seed: int,
                                                                      correlation_id: int) -> None:
    response = build(random.Random(seed), FetchResponse, version)
    buffers = encode_fetch_response(response, version, correlation_id)
    if buffers is not None:  # None: left to the generated encoder
        assert b"".join(buffers) == generic_frame(response, version, correlation_id)


def broker_answer(records: object, aborted: list[AbortedTransaction] | None) -> FetchResponse:
    return FetchResponse(session_id=7, responses=[
        FetchableTopicResponse(topic="orders", topic_id=uuid.UUID(int=5), partitions=[
            PartitionData(partition_index=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
                          aborted_transactions=aborted, records=records),  # type: ignore[arg-type]
            PartitionData(partition_index=1, error_code=1, high_watermark=-1, last_stable_offset=-1,
                          log_start_offset=-1, records=b""),
        ]),
        FetchableTopicResponse(topic="ünïcode", topic_id=uuid.UUID(int=6), partitions=[
            PartitionData(partition_index=3, high_watermark=4, last_stable_offset=2, log_start_offset=1,
                          records=None)]),
    ])


def test_the_broker_s_answers_take_the_hand_written_path_on_every_version() -> None:
    large = bytes(range(256)) * (ZERO_COPY_BYTES // 256 + 1)
    for version in VERSIONS:
        for records in (b"small batch", [b"one", b"two"], [large, b"tail"], large):
            for aborted in (None, [], [AbortedTransaction(producer_id=3, first_offset=4)]):
                response = broker_answer(records, aborted)
                buffers = encode_fetch_response(response, version, 99)
                assert buffers is not None
                assert b"".join(buffers) == generic_frame(response, version, 99)
                if records is large or isinstance(records, list) and records[0] is large:
                    assert any(buffer is large for buffer in buffers)  # by reference, not copied


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(-(2**31), 2**31 - 1), st.text(max_size=140), st.uuids(),
       st.integers(0, 2**31 - 1), st.sampled_from([0, 1, 3]), st.integers(-1, 2**62), st.integers(-1, 2**62),
       st.integers(-1, 2**62), st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**31 - 1),
       st.sampled_from([0, 1, 126, 127, 128, 0x3FFE, 0x3FFF, ZERO_COPY_BYTES]),
       st.sampled_from([None, [], [AbortedTransaction(producer_id=3, first_offset=4)]]), st.booleans(), st.booleans())
def test_a_one_partition_answer_encodes_as_the_generated_class_encodes_it(
        version: int, correlation_id: int, name: str, topic_id: uuid.UUID, index: int, error_code: int,
        high_watermark: int, last_stable_offset: int, log_start_offset: int, session_id: int, throttle_time_ms: int,
        records_size: int, aborted: list[AbortedTransaction] | None, as_read: bool, shared: bool) -> None:
    """The answer to a consumer of one partition has a path of its own on the flexible versions, for its
    records as one buffer or as the broker reads them (a list of one), its tagged structs its own or
    the shared defaults the broker's answers hold."""
    batch = bytes(range(256)) * (records_size // 256) + bytes(records_size % 256)
    records: object = [batch] if as_read else batch
    response = FetchResponse(throttle_time_ms=throttle_time_ms, session_id=session_id, responses=[
        FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=[PartitionData(
            partition_index=index, error_code=error_code, high_watermark=high_watermark,
            last_stable_offset=last_stable_offset, log_start_offset=log_start_offset,
            aborted_transactions=aborted, records=records)])])  # type: ignore[arg-type]
    if shared:
        partition = response.responses[0].partitions[0]
        partition.diverging_epoch, partition.current_leader = NO_DIVERGING_EPOCH, NO_CURRENT_LEADER
        partition.snapshot_id = NO_SNAPSHOT_ID
    buffers = encode_fetch_response(response, version, correlation_id)
    assert buffers is not None
    assert b"".join(buffers) == generic_frame(response, version, correlation_id)
    if version >= 12 and not aborted and records_size < 0x3FFF and (version >= 13 or len(name.encode()) < 0x7F):
        assert len(buffers) == 1 and isinstance(buffers[0], bytes)  # one frame, from the one-partition path


def test_what_the_hand_written_encoder_leaves_to_the_generated_one() -> None:
    response = broker_answer(b"x", None)
    response.responses[0].partitions[0].current_leader = LeaderIdAndEpoch(1, 2)
    assert encode_fetch_response(response, 12, 1) is None
    response = broker_answer(b"x", None)
    response.unknown_tagged_fields = [(9, b"")]
    assert encode_fetch_response(response, 12, 1) is None


REQUEST_VERSIONS = range(FetchRequest.VALID_VERSIONS[0], FetchRequest.VALID_VERSIONS[1] + 1)


def decode_both(body: bytes, version: int) -> tuple[object, object]:
    """What each decoder makes of ``body``: the request and where the reader stopped, or the error type."""
    outcomes: list[object] = []
    for decode in (FetchRequest.decode_from, decode_fetch_request):
        reader = Reader(body)
        try:
            outcomes.append((decode(reader, version), reader.pos))
        except ProtocolError:
            outcomes.append(ProtocolError)
    return outcomes[0], outcomes[1]


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REQUEST_VERSIONS), st.integers(0, 2**32 - 1))
def test_a_valid_request_decodes_as_the_generated_class_decodes_it(version: int, seed: int) -> None:
    request = build(random.Random(seed), FetchRequest, version)
    generic, fast = decode_both(request.encode(version), version)
    assert fast == generic


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_mutated_request_decodes_or_fails_as_the_generated_class(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(REQUEST_VERSIONS), label="version")
    request = build(random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")), FetchRequest, version)
    body = data.draw(mutated(request.encode(version)), label="body")
    generic, fast = decode_both(body, version)
    assert fast == generic


def test_a_consumer_s_request_takes_the_hand_written_path() -> None:
    for version in REQUEST_VERSIONS:
        request = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_id=3,
                               session_epoch=4, rack_id="r", topics=[FetchTopic(
                                   topic="orders", topic_id=uuid.UUID(int=9), partitions=[FetchPartition(
                                       partition=2, current_leader_epoch=0, fetch_offset=123, last_fetched_epoch=0,
                                       log_start_offset=-1, partition_max_bytes=1 << 20)])])
        body = request.encode(version)
        reader = Reader(body)
        assert _read_request(reader, version) == FetchRequest.decode(body, version) and reader.pos == len(body)


ONE_PARTITION_VERSIONS = range(12, FetchRequest.VALID_VERSIONS[1] + 1)


def one_partition_request(draw: st.DrawFn, version: int) -> FetchRequest:
    """A consumer's request for one partition of one topic, fields drawn over their whole ranges."""
    int32, int64 = st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
    return FetchRequest(
        replica_id=draw(int32) if version <= 14 else -1, max_wait_ms=draw(int32), min_bytes=draw(int32),
        max_bytes=draw(int32), isolation_level=draw(st.integers(-128, 127)), session_id=draw(int32),
        session_epoch=draw(int32), rack_id=draw(st.sampled_from(["", "r", "rack-ü", "x" * 126, "x" * 127])),
        topics=[FetchTopic(
            topic=draw(st.sampled_from(["", "orders", "ünïcode", "t" * 126, "t" * 127])) if version <= 12 else "",
            topic_id=draw(st.uuids()) if version >= 13 else uuid.UUID(int=0),
            partitions=[FetchPartition(
                partition=draw(int32), current_leader_epoch=draw(int32), fetch_offset=draw(int64),
                last_fetched_epoch=draw(int32), log_start_offset=draw(int64), partition_max_bytes=draw(int32))])])


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_one_partition_request_decodes_as_the_generated_class_decodes_it(data: st.DataObject) -> None:
    """Every v12+ consumer's request for one partition takes the path without loops (when its
    lengths fit one byte), and that path reads what the generated class reads."""
    version = data.draw(st.sampled_from(ONE_PARTITION_VERSIONS), label="version")
    request = one_partition_request(data.draw, version)
    body = request.encode(version)
    generic, fast = decode_both(body, version)
    assert fast == generic
    one = _read_one_partition(memoryview(body), 0, version)
    short_lengths = len(request.rack_id.encode()) < 0x7F and len(request.topics[0].topic.encode()) < 0x7F
    assert (one is not None) == short_lengths
    if one is not None:
        assert one == FetchRequest.decode(body, version)


@settings(max_examples=600, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_mutated_one_partition_request_decodes_or_fails_as_the_generated_class(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(ONE_PARTITION_VERSIONS), label="version")
    body = data.draw(mutated(one_partition_request(data.draw, version).encode(version)), label="body")
    generic, fast = decode_both(body, version)
    assert fast == generic


def test_what_the_one_partition_reader_leaves_to_the_general_one() -> None:
    """Two partitions, two topics, a forgotten topic, tagged fields: the general reader's, same result."""
    partition = FetchPartition(partition=1, fetch_offset=5, partition_max_bytes=100)
    requests = [
        FetchRequest(topics=[FetchTopic(topic="a", topic_id=uuid.UUID(int=1), partitions=[partition, partition])]),
        FetchRequest(topics=[FetchTopic(topic="a", topic_id=uuid.UUID(int=1), partitions=[partition]),
                             FetchTopic(topic="b", topic_id=uuid.UUID(int=2), partitions=[partition])]),
        FetchRequest(topics=[FetchTopic(topic="a", topic_id=uuid.UUID(int=1), partitions=[partition])],
                     forgotten_topics_data=[ForgottenTopic(topic="b", topic_id=uuid.UUID(int=2), partitions=[0])]),
        FetchRequest(cluster_id="c", topics=[FetchTopic(topic="a", topic_id=uuid.UUID(int=1),
                                                        partitions=[partition])]),
        FetchRequest(topics=[]),
    ]
    for version in ONE_PARTITION_VERSIONS:
        for request in requests:
            body = request.encode(version)
            assert _read_one_partition(memoryview(body), 0, version) is None
            generic, fast = decode_both(body, version)
            assert fast == generic
