"""The consumer's fetch path without sockets: decoding, draining, transactions, sessions, responses.

Batches are built with the codec's own builders (every codec, control batches, legacy magic 0/1 message
sets); Fetch responses are generated message objects handed to the fetcher's response handling.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from kafkalite.client.config import ConsumerConfig, parse_config
from kafkalite.client.consumer.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchPosition, FetchSessionHandler
from kafkalite.client.consumer.fetcher import Fetcher, _InFlight
from kafkalite.client.consumer.records import CompletedFetch, decode_batch
from kafkalite.client.consumer.subscription import OffsetResetStrategy, SubscriptionState
from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.legacy_records import build_legacy_message_set
from kafkalite.protocol.messages import FetchResponse
from kafkalite.protocol.messages import fetch_response as fetch
from kafkalite.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    TimestampType,
    build_end_transaction_marker,
    build_record_batch,
)

TP = TopicPartition("t", 0)


def records(count: int, base: int = 0, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    made = []
    for index in range(count):
        key = None if index % 4 == 0 else rng.randbytes(rng.choice([1, 5, 80, 300]))
        value = None if index % 9 == 0 else rng.randbytes(rng.choice([0, 3, 100, 200, 70000]))
        headers = tuple((f"h{n}é", None if n == 1 else rng.randbytes(n * 90)) for n in range(index % 3))
        made.append(Record(base + index, 1_700_000_000_000 + rng.randint(-5000, 10**9), key, value, headers))
    return made


def batch_bytes(items: list[Record], **options: Any) -> bytes:
    return bytes(build_record_batch(items, **options))


def completed(data: bytes, fetch_offset: int = 0, **options: Any) -> CompletedFetch:
    return CompletedFetch(TP, object(), fetch_offset, memoryview(data), **options)


def drain_all(fetched: CompletedFetch, step: int = 1000) -> list[Any]:
    out = []
    while not fetched.exhausted:
        out.extend(fetched.drain(step))
    return out


# --- decoding --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_decode_batch_matches_the_codec_for_every_codec(codec: Compression) -> None:
    items = records(60, base=1000)
    batch = RecordBatch(batch_bytes(items, base_offset=1000, compression=codec, partition_leader_epoch=7))
    decoded = decode_batch(batch, "t", 0)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert {r.timestamp_type for r in decoded} == {TimestampType.CREATE_TIME}
    assert {r.leader_epoch for r in decoded} == {7}
    assert decoded[0].topic_partition == TP


def test_log_append_time_gives_every_record_the_batch_time() -> None:
    batch = RecordBatch(batch_bytes(records(5), timestamp_type=TimestampType.LOG_APPEND_TIME,
                                    log_append_time=1_234))
    decoded = decode_batch(batch, "t", 0)
    assert {(r.timestamp, r.timestamp_type) for r in decoded} == {(1_234, TimestampType.LOG_APPEND_TIME)}
    assert {r.leader_epoch for r in decoded} == {None}


def test_a_corrupt_batch_is_a_clear_error_and_check_crcs_finds_flipped_bits() -> None:
    data = bytearray(batch_bytes(records(10)))
    data[-3] ^= 0xFF
    with pytest.raises(KafkaError, match="t-0 at offset 0.*CRC") as caught:
        completed(bytes(data)).drain(100)
    assert caught.value.error_code is ErrorCode.CORRUPT_MESSAGE
    truncated = bytearray(batch_bytes(records(10)))
    truncated[70] = 0x7F  # a record length that runs past the end, CRC unchecked
    with pytest.raises(KafkaError) as caught:
        completed(bytes(truncated), check_crcs=False).drain(100)
    assert caught.value.error_code is ErrorCode.CORRUPT_MESSAGE


# --- draining --------------------------------------------------------------------------------------------


def test_drain_respects_max_records_and_tracks_positions() -> None:
    first = batch_bytes(records(30), base_offset=0)
    second = batch_bytes(records(20, base=30), base_offset=30)
    fetched = completed(first + second + second[:40])  # the response ends with a partial batch
    assert fetched.end_offset == 50
    got = fetched.drain(25)
    assert [r.offset for r in got] == list(range(25)) and fetched.next_offset == 25
    got = fetched.drain(25)
    assert [r.offset for r in got] == list(range(25, 50)) and fetched.next_offset == 50
    assert fetched.drain(25) == [] and fetched.exhausted


def test_a_fetch_starting_inside_a_batch_skips_the_earlier_records() -> None:
    data = batch_bytes(records(10, base=100), base_offset=100, compression=Compression.LZ4)
    got = drain_all(completed(data, fetch_offset=104))
    assert [r.offset for r in got] == list(range(104, 110))


def test_control_batches_are_never_returned_and_advance_the_position() -> None:
    data = (batch_bytes(records(3), base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0,
                        is_transactional=True)
            + bytes(build_end_transaction_marker(EndTransactionMarker(ControlRecordType.COMMIT, 0), producer_id=9,
                                                 producer_epoch=0, timestamp=5, base_offset=3)))
    fetched = completed(data)
    assert [r.offset for r in drain_all(fetched)] == [0, 1, 2]
    assert fetched.next_offset == 4 == fetched.end_offset


def transactional(producer_id: int, base: int, count: int = 2) -> bytes:
    return batch_bytes(records(count, base=base), base_offset=base, producer_id=producer_id, producer_epoch=0,
                       base_sequence=base, is_transactional=True)


def marker(producer_id: int, offset: int, kind: ControlRecordType) -> bytes:
    return bytes(build_end_transaction_marker(EndTransactionMarker(kind, 0), producer_id=producer_id,
                                              producer_epoch=0, timestamp=1, base_offset=offset))


def test_read_committed_drops_aborted_transactions_only() -> None:
    # offsets: 0-1 p1 (aborted), 2-3 p2 (committed), 4 ABORT p1, 5 COMMIT p2, 6-7 plain, 8-9 p1 again (committed), 10
    data = (transactional(1, 0) + transactional(2, 2) + marker(1, 4, ControlRecordType.ABORT)
            + marker(2, 5, ControlRecordType.COMMIT) + batch_bytes(records(2, base=6), base_offset=6)
            + transactional(1, 8) + marker(1, 10, ControlRecordType.COMMIT))
    committed = completed(data, read_committed=True, aborted_transactions=[(1, 0)])
    assert [r.offset for r in drain_all(committed, step=3)] == [2, 3, 6, 7, 8, 9]
    assert committed.next_offset == 11
    uncommitted = completed(data)
    assert [r.offset for r in drain_all(uncommitted)] == [0, 1, 2, 3, 6, 7, 8, 9]


def test_read_committed_with_an_abort_list_of_several_producers() -> None:
    data = transactional(1, 0) + transactional(2, 2) + marker(2, 4, ControlRecordType.ABORT) + marker(
        1, 5, ControlRecordType.ABORT) + transactional(3, 6)
    got = drain_all(completed(data, read_committed=True, aborted_transactions=[(2, 2), (1, 0)]))
    assert [r.offset for r in got] == [6, 7]


@pytest.mark.parametrize(("magic", "codec"), [(0, Compression.NONE), (1, Compression.NONE), (0, Compression.GZIP),
                                              (1, Compression.SNAPPY), (1, Compression.LZ4)])
def test_legacy_message_sets_are_read(magic: int, codec: Compression) -> None:
    items = [Record(offset, 1_600_000_000_000 + offset, f"k{offset}".encode(), f"v{offset}".encode())
             for offset in range(5)]
    data = bytes(build_legacy_message_set(items, magic=magic, compression=codec))
    got = drain_all(completed(data, fetch_offset=1))
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (offset, f"k{offset}".encode(), f"v{offset}".encode(), ()) for offset in range(1, 5)]
    expected_type = TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME
    assert {r.timestamp_type for r in got} == {expected_type}
    if magic == 1:
        assert [r.timestamp for r in got] == [1_600_000_000_000 + offset for offset in range(1, 5)]


def test_deserializers_apply_to_keys_and_values_not_to_nulls() -> None:
    data = batch_bytes([Record(0, 1, b"1", b"x"), Record(1, 1, None, None)])
    got = drain_all(completed(data, key_deserializer=int, value_deserializer=bytes.decode))
    assert [(r.key, r.value) for r in got] == [(1, "x"), (None, None)]


# --- fetch sessions --------------------------------------------------------------------------------------


def test_fetch_session_full_then_incremental_then_forget() -> None:
    handler = FetchSessionHandler(1)
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    first = handler.build({a: FetchPosition(0, 100), b: FetchPosition(0, 100)})
    assert first.is_full and first.epoch == INITIAL_EPOCH and set(first.to_send) == {a, b}
    assert handler.handle_response(first, 0, session_id=77)
    second = handler.build({a: FetchPosition(10, 100), b: FetchPosition(0, 100)})
    assert (second.session_id, second.epoch) == (77, 1)
    assert set(second.to_send) == {a} and second.to_forget == []  # b did not change
    assert handler.handle_response(second, 0, session_id=77)
    third = handler.build({a: FetchPosition(10, 100)})
    assert third.epoch == 2 and third.to_send == {} and third.to_forget == [b]
    assert handler.handle_response(third, 0, session_id=77)
    # the broker lost the session: the next request is full again, closing the old one
    fourth = handler.build({a: FetchPosition(12, 100)})
    assert not handler.handle_response(fourth, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    fifth = handler.build({a: FetchPosition(12, 100)})
    assert fifth.is_full and fifth.session_id == 77 and fifth.epoch == INITIAL_EPOCH


def test_fetch_session_refused_by_the_broker_stays_full() -> None:
    handler = FetchSessionHandler(1)
    request = handler.build({TP: FetchPosition(0, 10)})
    assert handler.handle_response(request, 0, session_id=0)
    assert handler.build({TP: FetchPosition(5, 10)}).is_full
    sessionless = FetchSessionHandler(2, use_sessions=False).build({TP: FetchPosition(0, 10)})
    assert sessionless.epoch == FINAL_EPOCH and sessionless.session_id == 0


# --- the fetcher's response handling ---------------------------------------------------------------------


class FakeClient:
    def __init__(self) -> None:
        self.metadata_updates = 0

    def request_metadata_update(self) -> None:
        self.metadata_updates += 1


def make_fetcher(**config: Any) -> tuple[Fetcher, SubscriptionState, FakeClient]:
    consumer_config = parse_config(ConsumerConfig, config)
    subscriptions = SubscriptionState(OffsetResetStrategy(consumer_config.auto_offset_reset))
    client = FakeClient()
    fetcher = Fetcher(client, subscriptions, consumer_config)  # type: ignore[arg-type]
    return fetcher, subscriptions, client


def response(*partitions: fetch.PartitionData, topic_id: uuid.UUID | None = None) -> FetchResponse:
    return FetchResponse(session_id=5, responses=[fetch.FetchableTopicResponse(
        topic="" if topic_id else "t", topic_id=topic_id or uuid.UUID(int=0), partitions=list(partitions))])


def in_flight(fetch_offset: int, names: dict[uuid.UUID, str] | None = None) -> _InFlight:
    handler = FetchSessionHandler(1)
    return _InFlight(handler.build({TP: FetchPosition(fetch_offset, 1 << 20)}), names or {})


def test_fetched_data_is_buffered_and_drained_into_positions() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, _ = make_fetcher()
        subscriptions.assign_from_user([TP])
        state = subscriptions.state(TP)
        state.seek(0)
        data = batch_bytes(records(10))
        topic_id = uuid.uuid4()
        fetcher._handle_partitions(response(fetch.PartitionData(partition_index=0, high_watermark=10,
                                                                last_stable_offset=10, records=memoryview(data)),
                                            topic_id=topic_id), in_flight(0, {topic_id: "t"}))
        assert state.fetch_offset == 10 and state.buffered == 1 and state.high_watermark == 10
        assert fetcher.data_available.is_set()
        assert TP not in {s.topic_partition for s in subscriptions.fetchable()} or state.buffered < 2
        chunks = fetcher.collect(4)
        assert [(len(records_), end) for _, records_, end, _ in chunks] == [(4, 4)]
        state.position = 4
        chunks = fetcher.collect(100)
        assert [(len(records_), end) for _, records_, end, _ in chunks] == [(6, 10)]
        assert state.buffered == 0 and not fetcher.buffer

    asyncio.run(scenario())


def test_a_response_for_a_position_that_moved_is_dropped() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, _ = make_fetcher()
        subscriptions.assign_from_user([TP])
        subscriptions.state(TP).seek(50)  # the request went out for offset 0, then the application seeked
        fetcher._handle_partitions(response(fetch.PartitionData(
            partition_index=0, records=memoryview(batch_bytes(records(3)))), ), in_flight(0))
        assert not fetcher.buffer and subscriptions.state(TP).fetch_offset == 50

    asyncio.run(scenario())


def test_out_of_range_resets_by_policy_or_raises_with_none() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, _ = make_fetcher(auto_offset_reset="earliest")
        subscriptions.assign_from_user([TP])
        subscriptions.state(TP).seek(500)
        fetcher._handle_partitions(response(fetch.PartitionData(
            partition_index=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)), in_flight(500))
        assert subscriptions.state(TP).reset_strategy is OffsetResetStrategy.EARLIEST
        strict, strict_subscriptions, _ = make_fetcher(auto_offset_reset="none")
        strict_subscriptions.assign_from_user([TP])
        strict_subscriptions.state(TP).seek(500)
        strict._handle_partitions(response(fetch.PartitionData(
            partition_index=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)), in_flight(500))
        with pytest.raises(KafkaError, match="out of range") as caught:
            strict.raise_errors()
        assert caught.value.error_code is ErrorCode.OFFSET_OUT_OF_RANGE

    asyncio.run(scenario())


def test_leadership_errors_ask_for_metadata_and_other_errors_reach_poll() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, client = make_fetcher()
        subscriptions.assign_from_user([TP])
        subscriptions.state(TP).seek(0)
        fetcher._handle_partitions(response(fetch.PartitionData(
            partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)), in_flight(0))
        assert client.metadata_updates == 1 and not fetcher.errors
        fetcher._handle_partitions(response(fetch.PartitionData(
            partition_index=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)), in_flight(0))
        with pytest.raises(KafkaError) as caught:
            fetcher.raise_errors()
        assert caught.value.error_code is ErrorCode.TOPIC_AUTHORIZATION_FAILED

    asyncio.run(scenario())


def test_paused_partitions_keep_their_data_until_resumed() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, _ = make_fetcher()
        subscriptions.assign_from_user([TP])
        state = subscriptions.state(TP)
        state.seek(0)
        fetcher._handle_partitions(response(fetch.PartitionData(
            partition_index=0, records=memoryview(batch_bytes(records(3))))), in_flight(0))
        state.paused = True
        assert fetcher.collect(10) == [] and len(fetcher.buffer) == 1
        assert state not in subscriptions.fetchable()
        state.paused = False
        assert sum(len(chunk[1]) for chunk in fetcher.collect(10)) == 3

    asyncio.run(scenario())


def test_a_reset_that_failed_is_tried_again_after_the_back_off() -> None:
    async def scenario() -> None:
        fetcher, subscriptions, _ = make_fetcher(retry_backoff_ms=50)
        subscriptions.assign_from_user([TP])
        state = subscriptions.state(TP)
        state.request_reset(OffsetResetStrategy.EARLIEST)
        state.next_reset_ms = float("inf")  # as after a failed lookup: not due yet
        assert fetcher._maybe_reset() is not None and fetcher._reset_task is None
        from kafkalite.client.network import monotonic_ms

        state.next_reset_ms = monotonic_ms() + 50
        wait = fetcher._maybe_reset()
        assert wait is not None and 0 < wait <= 0.05  # the fetch loop sleeps exactly until it is due

    asyncio.run(scenario())


def test_a_negative_length_is_corrupt_even_in_one_byte() -> None:
    batch = bytearray(batch_bytes([Record(0, 1, b"k", b"v")]))
    key_length_at = 61 + 1 + 1 + 1 + 1  # record length, attributes, timestamp delta, offset delta
    assert batch[key_length_at] == 2  # zig-zag 1
    batch[key_length_at] = 3  # zig-zag -2: no such length
    with pytest.raises(KafkaError) as caught:
        completed(bytes(batch), check_crcs=False).drain(10)
    assert caught.value.error_code is ErrorCode.CORRUPT_MESSAGE
