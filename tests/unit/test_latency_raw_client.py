"""The raw end-to-end client of ``benchmarks/latency.py`` (``benchmarks/rawclients.py``): its stamped
frames are what the broker's codec reads (a valid batch CRC, the send time in the value), and its
in-place readers of Produce and Fetch answers agree with the generated codec, falling back to it on
answers of another shape."""

from __future__ import annotations

import struct

import pytest

import benchmarks.rawclients as rawclients
from kafkalite.protocol.framing import decode_request_body, encode_response, parse_request
from kafkalite.protocol.messages import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from kafkalite.protocol.messages.fetch_response import AbortedTransaction, FetchableTopicResponse, PartitionData
from kafkalite.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder

TOPIC = "lat-0-10000-all-rawe2e"


def answer_frame(response: ProduceResponse | FetchResponse, version: int, correlation_id: int) -> bytes:
    """An encoded answer without its size prefix, as the client's frame reader hands it out."""
    api_key = 0 if isinstance(response, ProduceResponse) else 1
    return b"".join(bytes(piece) for piece in encode_response(response, api_key, version, correlation_id))[4:]


def stamped_batch(produce: rawclients.ProduceFrame, sent_ns: int, due_ns: list[int], base_offset: int) -> bytes:
    """The batch a stamped Produce request carries, given the offset a server would write."""
    frame = bytes(produce.stamp(7, sent_ns, due_ns, 1_700_000_000_000))
    request = decode_request_body(ProduceRequest, parse_request(frame[4:]).body, 9)
    assert isinstance(request, ProduceRequest)
    batch = RecordBatch(bytearray(bytes(request.topic_data[0].partition_data[0].records or b"")))
    batch.set_base_offset(base_offset)
    return bytes(batch.buffer)


@pytest.mark.parametrize("count", [1, 2, 64, 70])  # offset deltas from 64 take two bytes
def test_a_stamped_produce_request_is_a_valid_batch_of_the_records_due(count: int) -> None:
    produce = rawclients.ProduceFrame(TOPIC, -1, max_records=70)
    for correlation_id, sent_ns in ((2, 123_456_789), (3, 987_654_321_012)):
        due_ns = [sent_ns - 5_000 + 100 * index for index in range(count)]
        frame = bytes(produce.stamp(correlation_id, sent_ns, due_ns, 1_700_000_000_123))
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        parsed = parse_request(frame[4:])
        assert (parsed.api_key, parsed.api_version, parsed.correlation_id) == (0, 9, correlation_id)
        request = decode_request_body(ProduceRequest, parsed.body, 9)
        assert isinstance(request, ProduceRequest)
        assert request.acks == -1 and request.topic_data[0].name == TOPIC
        batch = RecordBatch(request.topic_data[0].partition_data[0].records or b"")
        batch.validate_crc()
        assert (batch.base_timestamp, batch.max_timestamp) == (1_700_000_000_123, 1_700_000_000_123)
        records = list(batch.records())
        assert [record.offset for record in records] == list(range(count))
        assert all(record.value is not None and len(record.value) == rawclients.SIZE for record in records)
        assert [struct.unpack_from(">qq", record.value or b"") for record in records] == [
            (sent_ns, due) for due in due_ns]


def test_a_batch_holds_what_a_producers_default_batch_size_holds() -> None:
    count = rawclients.records_per_batch()
    produce = rawclients.ProduceFrame(TOPIC, 1, max_records=count + 1)
    sizes = sorted(produce.layouts)
    assert len(sizes) == count + 1 and sizes[count - 1] <= 16_384 < sizes[count]


def test_a_fetch_request_asks_from_the_offset_given() -> None:
    fetch = rawclients.FetchFrame(TOPIC)
    for correlation_id, offset in ((2, 0), (3, 41_207)):
        parsed = parse_request(bytes(fetch.at(correlation_id, offset))[4:])
        assert (parsed.api_key, parsed.api_version, parsed.correlation_id) == (1, 12, correlation_id)
        request = decode_request_body(FetchRequest, parsed.body, 12)
        assert isinstance(request, FetchRequest)
        assert (request.max_wait_ms, request.min_bytes, request.session_epoch) == (500, 1, -1)
        (partition,) = request.topics[0].partitions
        assert (request.topics[0].topic, partition.partition, partition.fetch_offset) == (TOPIC, 0, offset)


def no_codec(*_: object) -> None:
    raise AssertionError("the usual answer is read in place")


def test_produce_answers_read_in_place_and_through_the_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = rawclients.ProduceFrame(TOPIC, 1).answer_prefix
    usual = ProduceResponse(responses=[TopicProduceResponse(name=TOPIC, partition_responses=[
        PartitionProduceResponse(index=0, error_code=0, base_offset=1234)])])
    with monkeypatch.context() as patched:
        patched.setattr(ProduceResponse, "decode_from", no_codec)
        assert rawclients.produce_answer(answer_frame(usual, 9, 5), prefix) == (0, 1234)
    failed = ProduceResponse(responses=[TopicProduceResponse(name=TOPIC, partition_responses=[
        PartitionProduceResponse(index=0, error_code=6, base_offset=-1, error_message="not the leader")])])
    assert rawclients.produce_answer(answer_frame(failed, 9, 6), prefix) == (6, -1)
    other_topic = ProduceResponse(responses=[TopicProduceResponse(name="other", partition_responses=[
        PartitionProduceResponse(index=0, error_code=0, base_offset=99)])])  # not the usual shape: the codec
    assert rawclients.produce_answer(answer_frame(other_topic, 9, 7), prefix) == (0, 99)


def test_fetch_answers_give_each_records_send_time_and_the_next_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    produce = rawclients.ProduceFrame(TOPIC, 1, max_records=80)
    prefix = rawclients.FetchFrame(TOPIC).answer_prefix
    sent: list[tuple[int, int]] = []
    records = b""
    for count in [1] * 20 + [3, 80, 17, 1]:  # 121 records in 24 batches
        sent_ns = 1_000_000 + 17 * len(sent)
        due_ns = [sent_ns - 3 - index for index in range(count)]
        records += stamped_batch(produce, sent_ns, due_ns, 100 + len(sent))
        sent += [(sent_ns, due) for due in due_ns]
    assert len(sent) == 121
    builder = RecordBatchBuilder(base_offset=221)  # a batch of another shape: through the record decoder
    for sent_ns in (5, 6, 7):
        builder.append(timestamp=1, key=None, value=struct.pack(">qq", sent_ns, sent_ns - 1) + b"x" * 30)
    records += bytes(builder.build())

    def partition(**fields: object) -> FetchResponse:
        return FetchResponse(responses=[FetchableTopicResponse(topic=TOPIC, partitions=[
            PartitionData(partition_index=0, high_watermark=224, **fields)])])  # type: ignore[arg-type]

    for usual, response in (
        (True, partition(records=records[:len(records) - 5])),  # a partial batch at the end
        (True, partition(records=records)),
        (False, FetchResponse(throttle_time_ms=3, responses=partition(records=records).responses)),
        (False, partition(records=records, aborted_transactions=[AbortedTransaction(producer_id=1, first_offset=0)])),
    ):
        with monkeypatch.context() as patched:
            if usual:
                patched.setattr(FetchResponse, "decode_from", no_codec)
            error_code, view = rawclients.fetch_answer(answer_frame(response, 12, 9), prefix)
        assert error_code == 0
        times, next_offset = rawclients.send_times(view, produce.layouts)
        if len(view) < len(records):
            assert (times, next_offset) == (sent, 221)
        else:
            assert (times, next_offset) == ([*sent, (5, 4), (6, 5), (7, 6)], 224)
    error_code, view = rawclients.fetch_answer(answer_frame(partition(), 12, 10), prefix)  # nothing new
    assert error_code == 0 and rawclients.send_times(view, produce.layouts) == ([], -1)
    error_code, view = rawclients.fetch_answer(answer_frame(partition(error_code=1), 12, 11), prefix)
    assert error_code == 1
