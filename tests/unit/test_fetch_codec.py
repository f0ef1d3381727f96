"""The hand-written Fetch response encoder gives the generated encoder's bytes on every version, and
keeps large record sets as buffers of their own (the stored bytes, not a copy)."""

from __future__ import annotations

import random
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol.fetch_codec import ZERO_COPY_BYTES, encode_fetch_response
from kafkalite.protocol.messages import FetchResponse, ResponseHeader
from kafkalite.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    PartitionData,
)
from kafkalite.protocol.primitives import Writer
from tests.unit.message_factory import build

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


def test_what_the_hand_written_encoder_leaves_to_the_generated_one() -> None:
    response = broker_answer(b"x", None)
    response.responses[0].partitions[0].current_leader = LeaderIdAndEpoch(1, 2)
    assert encode_fetch_response(response, 12, 1) is None
    response = broker_answer(b"x", None)
    response.unknown_tagged_fields = [(9, b"")]
    assert encode_fetch_response(response, 12, 1) is None
