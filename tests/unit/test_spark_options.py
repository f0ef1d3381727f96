"""The Spark format's options, offsets and Arrow schema, without Spark: what a query start checks and plans."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from kafkalite.client.metadata import TopicPartition
from kafkalite.spark.offsets import (
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    split_ranges,
)
from kafkalite.spark.options import EARLIEST, LATEST, OptionError, parse_sink_options, parse_source_options

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming: bool = True, **options: str):
    return parse_source_options({**SERVERS, **options}, streaming=streaming)


def test_the_defaults_are_sparks() -> None:
    streaming = source(subscribe="a, b")
    assert streaming.subscribe == ("a", "b")
    assert streaming.starting.kind == "latest"
    assert not streaming.include_headers and streaming.fail_on_data_loss and not streaming.read_committed
    batch = source(False, subscribe="a")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"


def test_option_names_are_case_insensitive_as_in_spark() -> None:
    options = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "127.0.0.1:9092", "SUBSCRIBE": "t",
                                    "includeheaders": "TRUE", "kafka.isolation.level": "read_committed"},
                                   streaming=True)
    assert options.subscribe == ("t",) and options.include_headers and options.read_committed


def test_per_partition_json_offsets_and_assign() -> None:
    options = source(assign='{"t": [1, 0], "u": [2]}', startingOffsets='{"t": {"0": 23, "1": -2}, "u": {"2": -1}}')
    assert options.assign == (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 2))
    assert options.starting.offset_map() == {TopicPartition("t", 0): 23, TopicPartition("t", 1): EARLIEST,
                                             TopicPartition("u", 2): LATEST}


def test_timestamps_take_precedence_over_offsets() -> None:
    options = source(subscribe="t", startingOffsets="earliest", startingTimestamp="1700000000000")
    assert options.starting.kind == "timestamp" and options.starting.timestamp == 1700000000000
    by_partition = source(False, subscribe="t", endingOffsetsByTimestamp='{"t": {"0": 5}}')
    assert by_partition.ending.kind == "timestamp" and by_partition.ending.offset_map() == {TopicPartition("t", 0): 5}


def test_client_options_go_to_the_clients_that_know_them() -> None:
    options = source(subscribe="t", **{"kafka.fetch.max.bytes": "1000", "kafka.client.id": "me"})
    assert options.consumer["fetch.max.bytes"] == "1000" and options.admin == {
        "bootstrap.servers": "127.0.0.1:9092", "client.id": "me"}
    sink = parse_sink_options({**SERVERS, "topic": "out", "kafka.linger.ms": "20"})
    assert sink.topic == "out" and sink.producer["linger.ms"] == "20" and "linger.ms" not in sink.admin


@pytest.mark.parametrize(("options", "named"), [
    ({}, "subscribe"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "subscribe"),
    ({"subscribe": " , "}, "subscribe"),
    ({"subscribePattern": "("}, "subscribePattern"),
    ({"assign": '{"a": 0}'}, "assign"),
    ({"assign": "not json"}, "assign"),
    ({"subscribe": "a", "startingOffsets": "newest"}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -7}}'}, "startingOffsets"),
    ({"subscribe": "a", "startingTimestamp": "soon"}, "startingTimestamp"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"subscribe": "a", "minPartitions": "many"}, "minPartitions"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "a", "endingOffsets": "latest"}, "endingOffsets"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "10"}, "minOffsetsPerTrigger"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset"),
    ({"subscribe": "a", "kafka.linger.ms": "5"}, "kafka.linger.ms"),
    ({"subscribe": "a", "kafka.fetch.max.bytes": "lots"}, "kafka.fetch.max.bytes"),
    ({"subscribe": "a", "kafka.isolation.level": "dirty"}, "kafka.isolation.level"),
])
def test_malformed_source_options_are_named(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named.replace(".", r"\.")):
        source(**options)


def test_batch_reads_refuse_what_only_streams_take_and_the_reverse() -> None:
    with pytest.raises(OptionError, match="startingOffsets"):
        source(False, subscribe="a", startingOffsets="latest")
    with pytest.raises(OptionError, match="endingOffsets"):
        source(False, subscribe="a", endingOffsets='{"a": {"0": -2}}')
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        source(False, subscribe="a", maxOffsetsPerTrigger="10")


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "a"}, streaming=True)
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        parse_sink_options({"topic": "a"})


@pytest.mark.parametrize(("options", "named"), [
    ({"topic": " "}, "topic"),
    ({"subscribe": "a"}, "subscribe"),
    ({"kafka.transactional.id": "x"}, "kafka.transactional.id"),
    ({"kafka.value.serializer": "x"}, "kafka.value.serializer"),
    ({"kafka.fetch.max.bytes": "1"}, "kafka.fetch.max.bytes"),
    ({"kafka.acks": "some"}, "kafka.acks"),
])
def test_malformed_sink_options_are_named(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named.replace(".", r"\.")):
        parse_sink_options({**SERVERS, **options})


def test_offsets_round_trip_as_sparks_json() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 10): 3, TopicPartition("a", 2): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert list(as_json) == ["a", "b"] and list(as_json["a"]) == ["2", "10"]
    assert offsets_from_json(as_json) == offsets


def test_ranges_skip_empty_partitions_and_new_partitions_start_at_zero() -> None:
    start = {TopicPartition("t", 0): 5, TopicPartition("t", 1): 9}
    end = {TopicPartition("t", 0): 5, TopicPartition("t", 1): 12, TopicPartition("t", 2): 4}
    assert plan_ranges(start, end) == [OffsetRange("t", 1, 9, 12), OffsetRange("t", 2, 0, 4)]


def test_min_partitions_cuts_the_big_ranges_into_consecutive_pieces() -> None:
    ranges = split_ranges([OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 100, 110)], min_partitions=10)
    assert sum(offset_range.size for offset_range in ranges) == 100 and len(ranges) >= 10
    pieces = [offset_range for offset_range in ranges if offset_range.partition == 0]
    assert pieces[0].start == 0 and pieces[-1].end == 90
    assert all(left.end == right.start for left, right in zip(pieces, pieces[1:], strict=False))
    capped = split_ranges([OffsetRange("t", 0, 0, 10)], max_records_per_partition=3)
    assert len(capped) == 4 and all(offset_range.size <= 3 for offset_range in capped)
    assert sum(offset_range.size for offset_range in capped) == 10


def test_max_offsets_per_trigger_is_shared_in_proportion() -> None:
    start = {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0, TopicPartition("t", 2): 50}
    latest = {TopicPartition("t", 0): 300, TopicPartition("t", 1): 100, TopicPartition("t", 2): 50}
    limited = limit_offsets(start, latest, 100)
    assert limited == {TopicPartition("t", 0): 75, TopicPartition("t", 1): 25, TopicPartition("t", 2): 50}
    assert limit_offsets(start, latest, 1000) == latest
    assert limit_offsets({TopicPartition("t", 0): 0, TopicPartition("t", 1): 0},
                         {TopicPartition("t", 0): 1000, TopicPartition("t", 1): 1}, 10)[TopicPartition("t", 1)] == 1


def test_the_arrow_schema_is_the_one_spark_expects() -> None:
    pytest.importorskip("pyarrow")
    types = pytest.importorskip("pyspark.sql.types")
    arrow_types = pytest.importorskip("pyspark.sql.pandas.types")
    from kafkalite.spark.arrow import arrow_schema, source_ddl

    named = {"binary": types.BinaryType(), "string": types.StringType(), "int": types.IntegerType(),
             "bigint": types.LongType(), "timestamp": types.TimestampType(),
             "array<struct<key: string, value: binary>>": types.ArrayType(types.StructType([
                 types.StructField("key", types.StringType()), types.StructField("value", types.BinaryType())]))}
    # Spark 4.1+ names the session's time zone; 4.0 always makes timestamps UTC.
    utc = {"timezone": "UTC"} if "timezone" in inspect.signature(arrow_types.to_arrow_schema).parameters else {}
    for include_headers in (False, True):
        fields = [field.split(" ", 1) for field in source_ddl(include_headers).split(", ", 7)]
        spark_schema = types.StructType([types.StructField(name, named[kind]) for name, kind in fields])
        assert arrow_types.to_arrow_schema(spark_schema, **utc).equals(arrow_schema(include_headers))


def test_records_become_one_arrow_batch() -> None:
    pytest.importorskip("pyarrow")
    from kafkalite.client.consumer.records import ConsumerRecord
    from kafkalite.spark.arrow import arrow_schema, records_to_batch

    records = [ConsumerRecord("t", 3, 10 + index, 1_700_000_000_000 + index, 0, None if index else b"k",
                              b"v%d" % index, (("h", b"x"),) if index == 1 else (), None) for index in range(3)]
    batch = records_to_batch(records, arrow_schema(True), True)
    rows = batch.to_pylist()
    assert [row["offset"] for row in rows] == [10, 11, 12]
    assert rows[0]["key"] == b"k" and rows[1]["key"] is None and rows[2]["value"] == b"v2"
    assert rows[1]["headers"] == [{"key": "h", "value": b"x"}] and rows[0]["headers"] == []
    assert {row["topic"] for row in rows} == {"t"} and {row["partition"] for row in rows} == {3}
    assert rows[2]["timestamp"].timestamp() == 1_700_000_000.002


def test_spark_imports_only_the_client_and_the_codec() -> None:
    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "kafkalite" / "spark").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                if name.startswith("kafkalite"):
                    assert name.split(".")[1] in ("client", "protocol", "spark"), (path.name, name)


def test_offsets_with_gaps_and_mixed_timestamp_types_keep_their_values() -> None:
    pytest.importorskip("pyarrow")
    from kafkalite.client.consumer.records import ConsumerRecord
    from kafkalite.spark.arrow import arrow_schema, records_to_batch

    records = [ConsumerRecord("t", 0, offset, 1_000 + offset, offset % 2, None, None, (), None)
               for offset in (4, 7, 8)]
    rows = records_to_batch(records, arrow_schema(False), False).to_pylist()
    assert [(row["offset"], row["timestampType"], row["key"], row["value"]) for row in rows] == [
        (4, 0, None, None), (7, 1, None, None), (8, 0, None, None)]


def test_a_sink_batch_is_cut_per_topic_in_row_order_for_the_many_records_path() -> None:
    pa = pytest.importorskip("pyarrow")
    from kafkalite.spark.arrow import TopicRecords, batch_by_topic

    batch = pa.RecordBatch.from_pydict({"topic": ["a", "b", "a", "a"], "key": [b"1", None, b"3", b"4"],
                                        "value": ["w", "x", "y", None],
                                        "partition": pa.array([None] * 4, pa.int32())})
    assert batch_by_topic(batch, None) == [TopicRecords("a", ["w", "y", None], [b"1", b"3", b"4"]),
                                           TopicRecords("b", ["x"], None)]
    assert batch_by_topic(batch, "fixed") == [TopicRecords("fixed", ["w", "x", "y", None], [b"1", None, b"3", b"4"])]
    keyless = pa.RecordBatch.from_pydict({"key": pa.array([None, None], pa.binary()), "value": [b"v", b"w"]})
    assert batch_by_topic(keyless, "t") == [TopicRecords("t", [b"v", b"w"], None)]


def test_spark_4_0_streaming_rows_are_cut_per_topic_too() -> None:
    from kafkalite.spark.arrow import TopicRecords, columns_by_topic, rows_to_columns

    rows = [("a", b"1", "w", None), ("b", None, "x", None), ("a", b"3", "y", None)]
    columns = rows_to_columns(rows, ["topic", "key", "value", "partition"])
    assert columns_by_topic(columns, None) == [TopicRecords("a", ["w", "y"], [b"1", b"3"]),
                                               TopicRecords("b", ["x"], [None])]
    assert columns_by_topic(columns, "t") == [TopicRecords("t", ["w", "x", "y"], [b"1", None, b"3"])]
    assert columns_by_topic(rows_to_columns([(None, "v", 2)], ["key", "value", "partition"]), "t") is None
    assert columns_by_topic(rows_to_columns([("v", [("h", b"x")])], ["value", "headers"]), "t") is None
    with pytest.raises(ValueError, match="null topic"):
        columns_by_topic(rows_to_columns([(None, "v")], ["topic", "value"]), None)


def test_rows_with_a_partition_or_headers_go_record_by_record() -> None:
    pa = pytest.importorskip("pyarrow")
    from kafkalite.spark.arrow import batch_by_topic

    header = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
    partitioned = pa.RecordBatch.from_pydict({"value": [b"v", b"w"], "partition": pa.array([None, 1], pa.int32())})
    assert batch_by_topic(partitioned, "t") is None
    with_headers = pa.RecordBatch.from_pydict({"value": [b"v", b"w"],
                                               "headers": pa.array([[], [{"key": "h", "value": b"x"}]], header)})
    assert batch_by_topic(with_headers, "t") is None
    empty_headers = pa.RecordBatch.from_pydict({"value": [b"v"], "headers": pa.array([[]], header)})
    assert batch_by_topic(empty_headers, "t") is not None
    null_topic = pa.RecordBatch.from_pydict({"topic": ["a", None], "value": [b"v", b"w"]})
    with pytest.raises(ValueError, match="null topic"):
        batch_by_topic(null_topic, None)
