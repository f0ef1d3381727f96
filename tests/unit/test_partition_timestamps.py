"""Batch timestamps on the produce path, as Kafka's log validator sets them: the CreateTime max
timestamp from the records (also when the client's header disagrees), LogAppendTime stamping,
``message.timestamp.before.max.ms`` / ``after.max.ms`` with per-record errors, time retention of
segments without timestamps, and the time index that follows the stored values."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.partition import Partition, RecordValidationError
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.protocol._crc32c import crc32c
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import ProduceRequest
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.records import NO_TIMESTAMP, RecordBatch, RecordBatchBuilder, TimestampType, iter_batches

NOW = int(time.time() * 1000)
HOUR = 3_600_000
DAY = 24 * HOUR
_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35


def batch(*timestamps: int, compression: Compression = Compression.NONE, header_max: int | None = None,
          timestamp_type: TimestampType = TimestampType.CREATE_TIME, log_append_time: int | None = None) -> bytearray:
    """A batch of one record per timestamp; ``header_max`` overwrites the header's max timestamp
    (the CRC is recomputed, as a client that wrote it would have)."""
    builder = RecordBatchBuilder(compression=compression, timestamp_type=timestamp_type,
                                 log_append_time=log_append_time)
    for index, timestamp in enumerate(timestamps):
        builder.append(timestamp=timestamp, key=b"key-%d" % index, value=b"value-%d" % index)
    data = builder.build()
    if header_max is not None:
        _MAX_TIMESTAMP.pack_into(data, 35, header_max)
        struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return data


def open_cluster(tmp_path: Path | None = None, **extra: str) -> Cluster:
    settings = {"log.storage": "memory"} if tmp_path is None else {"log.dirs": str(tmp_path)}
    cluster = Cluster(BrokerConfig({**settings, **extra}))
    cluster.open()
    return cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    cluster = open_cluster()
    yield cluster
    cluster.close()


def partition_of(cluster: Cluster, name: str = "events", **configs: str) -> Partition:
    topic = cluster.topics.get(name) or cluster.topics.create(name, 1, configs)
    return topic.partitions[0]


def stored(partition: Partition) -> list[RecordBatch]:
    read = partition.log.read(partition.log_start_offset, 1 << 30, min_one_batch=True)
    return [item for item in iter_batches(b"".join(read.chunks)) if isinstance(item, RecordBatch)]


# the CreateTime max timestamp ------------------------------------------------------------------

@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_a_right_header_is_stored_byte_for_byte(cluster: Cluster, compression: Compression) -> None:
    partition = partition_of(cluster)
    data = batch(NOW - 5, NOW, NOW - 3, compression=compression)
    sent = bytes(data)
    partition.append_from_client(data, NOW)
    [kept] = stored(partition)
    assert kept.max_timestamp == NOW
    assert bytes(kept.buffer[21:]) == sent[21:]  # attributes, timestamps, CRC and records untouched


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.SNAPPY])
def test_records_without_timestamps_under_a_max_timestamp_of_0_are_stored_as_kafka_does(
        cluster: Cluster, compression: Compression) -> None:
    """librdkafka 2.0 sends records with timestamp -1 under a header max timestamp of 0: Kafka
    stores -1 (no timestamp), not 1970."""
    partition = partition_of(cluster)
    partition.append_from_client(batch(-1, -1, compression=compression, header_max=0), NOW)
    [kept] = stored(partition)
    assert (kept.base_timestamp, kept.max_timestamp, kept.timestamp_type) == (-1, NO_TIMESTAMP,
                                                                               TimestampType.CREATE_TIME)
    kept.validate_crc()
    assert [record.timestamp for record in kept.records()] == [-1, -1]


@pytest.mark.parametrize(("timestamps", "header_max", "expected"), [
    ((NOW - 10, NOW - 5), 0, NOW - 5),  # an unset max timestamp (Sarama before it computed one)
    ((NOW - 10, NOW - 5), NOW - 11, NOW - 5),  # below the first timestamp
    ((NOW,), NOW + 7, NOW),  # one record whose max is not its own timestamp
    ((-5, -7), -5, NO_TIMESTAMP),  # timestamps below -1: Kafka's max starts at -1
    ((NOW - 10, -1), NOW - 10, NOW - 10),  # a plausible, right header
], ids=["unset-max", "max-below-first", "max-not-its-own", "below-minus-one", "right-header"])
def test_the_max_timestamp_comes_from_the_records_when_the_header_is_implausible(
        cluster: Cluster, timestamps: tuple[int, ...], header_max: int, expected: int) -> None:
    partition = partition_of(cluster)
    partition.append_from_client(batch(*timestamps, compression=Compression.LZ4, header_max=header_max), NOW)
    [kept] = stored(partition)
    assert kept.max_timestamp == expected
    kept.validate_crc()
    assert [record.timestamp for record in kept.records()] == list(timestamps)


def test_a_client_batch_flagged_log_append_time_is_stored_as_create_time(cluster: Cluster) -> None:
    """Kafka reads every record of such a batch with the header's max timestamp, then writes the
    batch back as CreateTime with that max timestamp."""
    partition = partition_of(cluster)
    partition.append_from_client(batch(NOW - 10, NOW - 9, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                       log_append_time=NOW - 1), NOW)
    [kept] = stored(partition)
    assert (kept.timestamp_type, kept.max_timestamp) == (TimestampType.CREATE_TIME, NOW - 1)
    kept.validate_crc()


def test_a_compressed_batch_with_a_wrong_header_is_recompressed_with_the_right_max(cluster: Cluster) -> None:
    partition = partition_of(cluster, "gzip-topic", **{"compression.type": "gzip"})
    partition.append_from_client(batch(-1, compression=Compression.LZ4, header_max=0), NOW)
    [kept] = stored(partition)
    assert (kept.compression, kept.max_timestamp) == (Compression.GZIP, NO_TIMESTAMP)


# LogAppendTime ------------------------------------------------------------------------------------

@pytest.mark.parametrize("topic_codec", ["producer", "zstd"])
def test_log_append_time_stamps_the_header_as_kafka_does(cluster: Cluster, topic_codec: str) -> None:
    partition = partition_of(cluster, f"append-{topic_codec}", **{"message.timestamp.type": "LogAppendTime",
                                                                   "compression.type": topic_codec})
    appended = partition.append_from_client(batch(1, 978_307_200_000), NOW)  # 1970 and 2001
    assert appended.log_append_time == NOW
    [kept] = stored(partition)
    assert (kept.timestamp_type, kept.max_timestamp, kept.base_timestamp) == (
        TimestampType.LOG_APPEND_TIME, NOW, 1)  # the first timestamp stays the client's
    kept.validate_crc()
    assert [record.timestamp for record in kept.records()] == [NOW, NOW]
    assert partition.log.max_timestamp() == (0, NOW)  # the first record holding it


def test_log_append_time_refuses_batches_the_client_flagged_log_append_time(cluster: Cluster) -> None:
    partition = partition_of(cluster, "append", **{"message.timestamp.type": "LogAppendTime"})
    with pytest.raises(RecordValidationError) as refused:
        partition.append_from_client(batch(NOW, NOW, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                           log_append_time=NOW), NOW)
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert refused.value.message == "One or more records have been rejected due to invalid timestamp"
    assert [index for index, _ in refused.value.record_errors] == [0, 1]
    assert refused.value.record_errors[0][1] == (
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=5 bytes, value=7 bytes). "
        "Producer should not set timestamp type to LogAppendTime.")
    assert stored(partition) == []


# message.timestamp.before.max.ms / after.max.ms (KIP-937) ----------------------------------------

def test_records_too_far_in_the_past_are_refused_one_by_one(cluster: Cluster) -> None:
    partition = partition_of(cluster, "recent", **{"message.timestamp.before.max.ms": str(DAY)})
    with pytest.raises(RecordValidationError) as refused:
        partition.append_from_client(batch(NOW, NOW - 2 * DAY, -1, NOW - 3 * DAY), NOW)
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert refused.value.record_errors == [
        (1, f"Timestamp {NOW - 2 * DAY} of message with offset 1 is out of range. "
            f"The timestamp should be within [{NOW - DAY}, {NOW + HOUR}]"),
        (3, f"Timestamp {NOW - 3 * DAY} of message with offset 3 is out of range. "
            f"The timestamp should be within [{NOW - DAY}, {NOW + HOUR}]"),
    ]  # the record without a timestamp (-1) is not checked
    partition.append_from_client(batch(NOW - DAY, -1), NOW)  # at the bound: accepted


def test_records_too_far_in_the_future_are_refused_by_the_default_after_max(cluster: Cluster) -> None:
    partition = partition_of(cluster)
    with pytest.raises(RecordValidationError) as refused:
        partition.append_from_client(batch(NOW, NOW + 2 * HOUR), NOW)
    assert [index for index, _ in refused.value.record_errors] == [1]
    assert "should be within [" in refused.value.record_errors[0][1]
    assert refused.value.record_errors[0][1].endswith(f", {NOW + HOUR}]")
    # The bound is read from the records even when the header hides the future one under 0.
    with pytest.raises(RecordValidationError):
        partition.append_from_client(batch(NOW, NOW + 2 * HOUR, header_max=0), NOW)
    unbounded = partition_of(cluster, "unbounded", **{"message.timestamp.after.max.ms": str(2**63 - 1)})
    unbounded.append_from_client(batch(NOW + 100 * DAY), NOW)


def test_produce_v8_reports_the_refused_records(cluster: Cluster) -> None:
    partition_of(cluster, "recent", **{"message.timestamp.before.max.ms": str(DAY)})
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[TopicProduceData(name="recent", partition_data=[
        PartitionProduceData(index=0, records=bytes(batch(NOW, NOW - 2 * DAY)))])])
    handler = HANDLERS[0]
    for version in (7, 8, 11):
        decoded = handler.request_type.decode(request.encode(version), version)
        response = handler.handle(RequestContext(cluster, 0, version, 1, "test", "127.0.0.1:1"), decoded)
        answer = handler.response_type.decode(response.encode(version), version)  # type: ignore[union-attr]
        [[result]] = [topic.partition_responses for topic in answer.responses]
        assert result.error_code == ErrorCode.INVALID_TIMESTAMP
        if version >= 8:
            assert result.error_message == "One or more records have been rejected due to invalid timestamp"
            assert [(error.batch_index, error.batch_index_error_message[:23]) for error in result.record_errors] == [
                (1, f"Timestamp {NOW - 2 * DAY}"[:23])]


# retention and the time index ---------------------------------------------------------------------

def test_a_segment_without_timestamps_is_retained_by_its_modification_time(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path, **{"log.initial.task.delay.ms": "0"})
    try:
        undated = partition_of(cluster, "undated", **{"retention.ms": str(HOUR)})
        dated = partition_of(cluster, "dated", **{"retention.ms": str(HOUR)})
        undated.append_from_client(batch(-1, header_max=0), NOW)  # 1970 by its header, no timestamp by Kafka's
        dated.append_from_client(batch(NOW - 2 * HOUR), NOW)
        first_check = cluster.log_manager.next_retention_check_ms
        assert first_check is not None and first_check >= NOW
        assert cluster.log_manager.run_periodic(first_check) == 1  # only the dated segment is past retention
        assert (undated.log_start_offset, dated.log_start_offset) == (0, 1)
        assert cluster.log_manager.run_periodic(NOW + HOUR + 1) == 1
        assert undated.log_start_offset == 1  # an hour after its last write
    finally:
        cluster.close()


def test_the_time_index_follows_the_stored_max_timestamps(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    try:
        partition = partition_of(cluster, "indexed", **{"segment.bytes": "200", "index.interval.bytes": "1"})
        partition.append_from_client(batch(NOW - 30, header_max=NOW - 31), NOW)  # corrected to NOW - 30
        partition.append_from_client(batch(-1, header_max=0), NOW)  # corrected to -1
        partition.append_from_client(batch(NOW - 10), NOW)
        assert partition.log.offset_for_timestamp(NOW - 30) == (0, NOW - 30)
        assert partition.log.offset_for_timestamp(NOW - 29) == (2, NOW - 10)
        assert partition.log.max_timestamp() == (2, NOW - 10)
        cluster.close()
        cluster = open_cluster(tmp_path)  # indexes read back from the files
        reopened = cluster.topics.partition("indexed", 0)
        assert reopened is not None
        assert reopened.log.offset_for_timestamp(NOW - 29) == (2, NOW - 10)
        assert [kept.max_timestamp for kept in stored(reopened)] == [NOW - 30, NO_TIMESTAMP, NOW - 10]
    finally:
        cluster.close()


def test_malformed_records_behind_an_implausible_header_are_corrupt(cluster: Cluster) -> None:
    partition = partition_of(cluster)
    data = batch(NOW, NOW, header_max=0)
    struct.pack_into(">i", data, 57, 3)  # three records claimed, two present
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    with pytest.raises(KafkaError) as refused:
        partition.append_from_client(data, NOW)
    assert refused.value.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)


def test_a_stored_batch_whose_records_do_not_decode_is_corrupt_message_for_list_offsets(cluster: Cluster) -> None:
    """A zstd batch with a right header and CRC but a corrupt stream is stored without decoding (as
    every batch is); ListOffsets by timestamp then has to decode it, and answers CORRUPT_MESSAGE for
    that partition instead of failing the request."""
    from kafkalite.protocol.messages import ListOffsetsRequest
    from kafkalite.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    partition = partition_of(cluster)
    data = batch(NOW - 5, NOW, compression=Compression.ZSTD)
    data[61:] = bytes(len(data) - 61)  # the records: zeros, which no zstd frame starts with
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    partition.append_from_client(data, NOW)
    handler = HANDLERS[2]
    for timestamp in (NOW - 1, -3):
        request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic("events", [
            ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
        context = RequestContext(cluster, 2, 9, 1, "test", "127.0.0.1:1")
        response = handler.handle(context, handler.request_type.decode(request.encode(9), 9))
        assert response.topics[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
