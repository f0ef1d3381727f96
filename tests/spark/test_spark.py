"""The kafkalite Spark format against a real broker: batch and streaming reads, the transactional sink,
restarts from a checkpoint, a killed micro-batch, malformed options, and examples/clickstream end to end.
Counts are asserted exactly.

One module, so that ``make test`` (pytest-xdist, a module per worker) keeps every Spark test on the
worker that started the one SparkSession."""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkalite.testing import wait_for

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 90


def read_limits() -> bool:
    """Whether this Spark hands Python sources read limits (4.2+), so maxOffsetsPerTrigger caps availableNow."""
    from kafkalite.spark import source

    return source.ReadMaxRows is not None


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def reader(spark: Any, broker: Any, **options: str) -> Any:
    read = spark.read.format("kafkalite").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        read = read.option(key, value)
    return read


def stream(spark: Any, broker: Any, **options: str) -> Any:
    read = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        read = read.option(key, value)
    return read.load()


def produce_to_partition(broker: Any, topic: str, values: list[bytes], partition: int) -> None:
    """With a new producer, which sees partitions added since the broker's own producer started."""
    from kafkalite.client.sync import Producer

    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for value in values:
            producer.send(topic, value, partition=partition)
        producer.flush(30)


def values(broker: Any, topic: str, isolation_level: str = "read_committed") -> list[bytes]:
    return [record.value for record in broker.consume(topic, isolation_level=isolation_level)]


def test_batch_read_between_offsets_with_headers_and_more_tasks_than_partitions(spark: Any, kafka_broker: Any) -> None:
    topic = unique("batch-in")
    kafka_broker.create_topic(topic, partitions=2)
    for partition in (0, 1):
        kafka_broker.produce(topic, [b"p%d-%d" % (partition, index) for index in range(50)], partition=partition,
                             key=b"k", headers=[("source", b"test")])
    whole = reader(spark, kafka_broker, subscribe=topic, includeHeaders="true", minPartitions="6").load()
    assert whole.rdd.getNumPartitions() >= 6
    rows = whole.collect()
    assert len(rows) == 100
    row = next(row for row in rows if (row.partition, row.offset) == (1, 3))
    assert (row.key, row.value, row.topic, row.timestampType) == (b"k", b"p1-3", topic, 0)
    assert [(header.key, header.value) for header in row.headers] == [("source", b"test")]
    assert "headers" not in reader(spark, kafka_broker, subscribe=topic).load().columns

    ranged = reader(spark, kafka_broker, assign=f'{{"{topic}": [0, 1]}}',
                    startingOffsets=f'{{"{topic}": {{"0": 10, "1": -2}}}}',
                    endingOffsets=f'{{"{topic}": {{"0": 20, "1": -1}}}}').load()
    offsets = [(row.partition, row.offset) for row in ranged.select("partition", "offset").collect()]
    assert Counter(partition for partition, _ in offsets) == {0: 10, 1: 50}
    assert sorted(offset for partition, offset in offsets if partition == 0) == list(range(10, 20))


def test_batch_write_takes_topic_key_headers_and_partition_columns(spark: Any, kafka_broker: Any) -> None:
    first, second = unique("out-a"), unique("out-b")
    kafka_broker.create_topic(first, partitions=3)
    kafka_broker.create_topic(second, partitions=1)
    rows = [(first if index % 2 else second, f"key-{index}", f"value-{index}".encode(), index % 2 * 2,
             [("n", str(index).encode())]) for index in range(40)]
    frame = spark.createDataFrame(rows, "topic string, key string, value binary, partition int, "
                                        "headers array<struct<key: string, value: binary>>")
    (frame.write.format("kafkalite").mode("append")
     .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers).save())
    written = kafka_broker.consume(first, isolation_level="read_committed")
    assert len(written) == 20 and {record.partition for record in written} == {2}
    record = next(record for record in written if record.key == b"key-3")
    assert record.value == b"value-3" and record.headers == (("n", b"3"),)
    assert len(kafka_broker.consume(second, isolation_level="read_committed")) == 20


def test_pyspark_kafkalite_makes_the_format_known_without_register(spark: Any, kafka_broker: Any) -> None:
    """The session's Python workers have packaging/pyspark-kafkalite on their path, as an installed
    pyspark-kafkalite puts it: Spark's discovery registered format("kafkalite") by itself. A new session
    has what discovery found and nothing that register() added to the fixture's session."""
    topic = unique("discovered")
    kafka_broker.create_topic(topic, partitions=1)
    kafka_broker.produce(topic, [b"a", b"b", b"c"])
    fresh = spark.newSession()
    assert fresh._jsparkSession.sessionState().dataSourceManager().dataSourceExists("kafkalite")
    frame = (fresh.read.format("kafkalite").option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
             .option("subscribe", topic).load())
    assert sorted(row.value for row in frame.select("value").collect()) == [b"a", b"b", b"c"]


def _copy_query(frame: Any, broker: Any, sink: str, checkpoint: Path, data_source: str = "kafkalite") -> Any:
    return (frame.selectExpr("key", "value").writeStream.format(data_source)
            .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", sink)
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())


def test_a_restarted_query_resumes_from_its_checkpoint_with_no_loss_and_no_duplicates(
        spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    source, sink = unique("resume-in"), unique("resume-out")
    kafka_broker.create_topic(source, partitions=2)
    kafka_broker.create_topic(sink, partitions=2)
    kafka_broker.produce(source, [b"a%d" % index for index in range(300)])
    checkpoint = tmp_path / "checkpoint"

    query = _copy_query(stream(spark, kafka_broker, subscribe=source, startingOffsets="earliest",
                               maxOffsetsPerTrigger="100"), kafka_broker, sink, checkpoint)
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    batches = [progress for progress in query.recentProgress if progress["numInputRows"]]
    if read_limits():  # before Spark 4.2, availableNow runs a source without read limits as one micro-batch
        assert len(batches) >= 3 and max(progress["numInputRows"] for progress in batches) <= 101
    assert sorted(values(kafka_broker, sink)) == sorted(b"a%d" % index for index in range(300))

    kafka_broker.produce(source, [b"b%d" % index for index in range(200)])
    kafka_broker.admin.create_partitions({source: 3})
    produce_to_partition(kafka_broker, source, [b"c%d" % index for index in range(20)], 2)
    query = _copy_query(stream(spark, kafka_broker, subscribe=source, startingOffsets="earliest"),
                        kafka_broker, sink, checkpoint)
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    written = Counter(values(kafka_broker, sink))
    expected = {b"a%d" % index for index in range(300)} | {b"b%d" % index for index in range(200)} | {
        b"c%d" % index for index in range(20)}
    duplicates = sum(count - 1 for count in written.values())
    print(f"sink records: {sum(written.values())}, distinct: {len(written)}, duplicates: {duplicates}")
    assert set(written) == expected and duplicates == 0


def test_a_processing_time_trigger_follows_new_records_and_new_partitions(
        spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    source = unique("live-in")
    kafka_broker.create_topic(source, partitions=1)
    name = f"live_{uuid.uuid4().hex[:8]}"
    query = (stream(spark, kafka_broker, subscribePattern=f"{source}.*").writeStream.format("memory")
             .queryName(name).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        def seen() -> int:
            return int(spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n)

        wait_for(lambda: query.lastProgress is not None, QUERY_TIMEOUT_S, "the query's first batch")
        kafka_broker.produce(source, [b"x%d" % index for index in range(30)])
        wait_for(lambda: seen() == 30, QUERY_TIMEOUT_S, "the first 30 records in the query's output")
        kafka_broker.admin.create_partitions({source: 2})
        produce_to_partition(kafka_broker, source, [b"y%d" % index for index in range(5)], 1)
        wait_for(lambda: seen() == 35, QUERY_TIMEOUT_S, "the new partition's records in the query's output")
        partitions = spark.sql(f"SELECT DISTINCT partition FROM {name}").collect()
        assert {row.partition for row in partitions} == {0, 1}
    finally:
        query.stop()


# --- a micro-batch killed after its Kafka transaction committed -------------------------------------------


def _crashing_source() -> Any:
    """The kafkalite format with a sink that dies at set points of batch 1 (its classes go to the workers by value)."""
    from pyspark import TaskContext

    from kafkalite.spark.source import KafkaliteDataSource
    from kafkalite.spark.writing import TaskSink

    def point() -> tuple[int, int, int]:
        context = TaskContext.get()
        return int(context.getLocalProperty("streaming.sql.batchId")), context.partitionId(), context.attemptNumber()

    class CrashingSink(TaskSink):
        def write_task(self, chunks: Any, batch_id: int) -> Any:
            if point()[:2] == (1, 0) and point()[2] > 0:
                raise RuntimeError("the batch fails for good: the query stops with its batch half done")
            return super().write_task(chunks, batch_id)

        def _before_commit(self) -> None:
            if point() == (1, 1, 0):
                os._exit(3)  # killed with its transaction open

        def _after_commit(self) -> None:
            if point() == (1, 0, 0):
                os._exit(3)  # killed after its transaction committed, before Spark heard of it

    class CrashingDataSource(KafkaliteDataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkalite_crashing"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
            writer = super().streamWriter(schema, overwrite)
            writer.sink.__class__ = CrashingSink
            return writer

    return CrashingDataSource


def test_a_killed_micro_batch_run_again_writes_no_duplicate(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(_crashing_source())
    source, sink = unique("killed-in"), unique("killed-out")
    kafka_broker.create_topic(source, partitions=2)
    kafka_broker.create_topic(sink, partitions=1)
    checkpoint = tmp_path / "checkpoint"
    for partition in (0, 1):  # batch 0: these 40 (one micro-batch, with or without read limits)
        kafka_broker.produce(source, [b"%d-%d" % (partition, index) for index in range(20)], partition=partition)
    first = _copy_query(stream(spark, kafka_broker, subscribe=source, startingOffsets="earliest",
                               maxOffsetsPerTrigger="40"), kafka_broker, sink, checkpoint)
    assert first.awaitTermination(QUERY_TIMEOUT_S)
    for partition in (0, 1):  # batch 1, the one that is killed: both partitions have records, so two tasks
        kafka_broker.produce(source, [b"%d-%d" % (partition, index) for index in range(20, 60)], partition=partition)

    failing = _copy_query(stream(spark, kafka_broker, subscribe=source, startingOffsets="earliest",
                                 maxOffsetsPerTrigger="40"), kafka_broker, sink, checkpoint, "kafkalite_crashing")
    with pytest.raises(Exception, match="fails for good"):
        failing.awaitTermination(QUERY_TIMEOUT_S)
    committed_so_far = len(values(kafka_broker, sink))
    assert committed_so_far > 40  # batch 0, and task 0 of batch 1 (committed before its process died)

    query = _copy_query(stream(spark, kafka_broker, subscribe=source, startingOffsets="earliest",
                               maxOffsetsPerTrigger="40"), kafka_broker, sink, checkpoint)
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    written = Counter(values(kafka_broker, sink))
    everything = len(values(kafka_broker, sink, "read_uncommitted"))
    duplicates = sum(count - 1 for count in written.values())
    print(f"read_committed: {sum(written.values())} records, {duplicates} duplicates; "
          f"read_uncommitted: {everything} (the aborted attempt's records included)")
    assert set(written) == {b"%d-%d" % (partition, index) for partition in (0, 1) for index in range(60)}
    assert duplicates == 0
    assert everything > sum(written.values())  # the attempt killed with its transaction open was aborted


# --- malformed options ---------------------------------------------------------------------------------


def test_malformed_options_fail_the_query_at_its_start_naming_the_option(spark: Any, kafka_broker: Any,
                                                                         tmp_path: Path) -> None:
    topic = unique("options")
    kafka_broker.create_topic(topic, partitions=1)
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, kafka_broker, subscribe=topic, startingOffsets="newest").load().count()
    with pytest.raises(Exception, match="subscribe"):
        reader(spark, kafka_broker).load().count()
    with pytest.raises(Exception, match="kafka.fetch.max.bytes"):
        reader(spark, kafka_broker, subscribe=topic, **{"kafka.fetch.max.bytes": "plenty"}).load().count()
    with pytest.raises(Exception, match="maxOffsetsPerTrigger"):
        query = (stream(spark, kafka_broker, subscribe=topic, maxOffsetsPerTrigger="-5").writeStream
                 .format("memory").queryName(f"bad_{uuid.uuid4().hex[:8]}")
                 .option("checkpointLocation", str(tmp_path / "bad-read")).start())
        query.awaitTermination(QUERY_TIMEOUT_S)
    frame = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="'value' column"):
        (frame.write.format("kafkalite").mode("append")
         .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers).option("topic", topic).save())
    with pytest.raises(Exception, match="kafka.acks"):
        query = (stream(spark, kafka_broker, subscribe=topic).selectExpr("value").writeStream.format("kafkalite")
                 .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers).option("topic", topic)
                 .option("kafka.acks", "some").option("checkpointLocation", str(tmp_path / "bad-write")).start())
        query.awaitTermination(QUERY_TIMEOUT_S)


# --- examples/clickstream ----------------------------------------------------------------------------


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream" / "pipeline.py"


def load_pipeline() -> Any:
    spec = importlib.util.spec_from_file_location("clickstream_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ms(text: str) -> int:
    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_the_clickstream_example_counts_page_views_per_minute(spark: Any, kafka_broker: Any, tmp_path: Path) -> None:
    pipeline = load_pipeline()
    suffix = uuid.uuid4().hex[:8]
    source, sink = f"clicks-{suffix}", f"page-views-{suffix}"
    kafka_broker.create_topic(source, partitions=2)
    kafka_broker.create_topic(sink, partitions=2)
    clicks = pipeline.generate_clicks(600, minutes=3)
    pipeline.produce_clicks(kafka_broker.bootstrap_servers, clicks, source)

    pipeline.run_query(spark, kafka_broker.bootstrap_servers, str(tmp_path / "checkpoint"), source, sink)

    results = [json.loads(record.value) for record in kafka_broker.consume(sink, isolation_level="read_committed")]
    written = {(_ms(result["window_start"]), result["page"]): result["views"] for result in results}
    expected = pipeline.expected_views(clicks)
    print(f"{len(results)} window counts written, {sum(written.values())} views of {len(clicks)} clicks")
    assert len(results) == len(written)  # each window and page once
    assert written == dict(expected)
    assert all(_ms(result["window_end"]) - _ms(result["window_start"]) == 60_000 for result in results)

    printed = subprocess.run(
        [sys.executable, "-m", "kafkalite", "consume", "-b", kafka_broker.bootstrap_servers, "-t", sink,
         "--from-beginning", "--exit-at-end", "--isolation-level", "read_committed", "-K", " "],
        capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    assert len(printed) == len(results)
    page, _, value = printed[0].partition(" ")
    assert json.loads(value)["page"] == page
