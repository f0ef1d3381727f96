"""The Spark sink's task write against a real broker, without Spark running (no Java needed): one
transaction per task with its batch marker, a batch written again is skipped, the next one is not."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from kafkalite.spark.options import parse_sink_options  # noqa: E402
from kafkalite.spark.writing import TaskSink  # noqa: E402


def chunks(values: list[bytes]) -> Any:
    import pyarrow as pa

    return iter([pa.RecordBatch.from_pydict({"key": [b"k"] * len(values), "value": values})])


def test_a_batch_written_again_is_skipped_and_the_next_one_is_written(kafka_broker: Any) -> None:
    topic = f"sink-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    options = parse_sink_options({"kafka.bootstrap.servers": kafka_broker.bootstrap_servers, "topic": topic})
    prefix = f"test-sink-{uuid.uuid4().hex[:8]}"
    sink = TaskSink(options, ["key", "value"], prefix)

    first = sink.write_task(chunks([b"a", b"b", b"c"]), 7)
    again = sink.write_task(chunks([b"a", b"b", b"c"]), 7)
    older = sink.write_task(chunks([b"x"]), 6)
    following = sink.write_task(chunks([b"d"]), 8)
    empty = sink.write_task(iter([]), 9)

    assert (first.records, first.already_committed) == (3, False)
    assert (again.records, again.already_committed) == (0, True)
    assert older.already_committed and not following.already_committed and empty.records == 0
    written = sorted(record.value for record in kafka_broker.consume(topic, isolation_level="read_committed"))
    assert written == [b"a", b"b", b"c", b"d"]
    marker = kafka_broker.admin.list_consumer_group_offsets(f"{prefix}-0")
    assert [entry.offset for entry in marker.values()] == [8]


def test_arrow_batches_are_written_per_topic_and_rows_with_headers_one_by_one(kafka_broker: Any) -> None:
    import pyarrow as pa

    first, second = f"sink-a-{uuid.uuid4().hex[:8]}", f"sink-b-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(first, partitions=1)
    kafka_broker.create_topic(second, partitions=1)
    header = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
    plain = pa.RecordBatch.from_pydict({
        "topic": [first, second, first], "key": [b"k1", None, None], "value": ["one", "two", "three"],
        "headers": pa.array([[], None, []], header)})
    with_headers = pa.RecordBatch.from_pydict({
        "topic": [second, first], "key": [None, b"k5"], "value": ["four", "five"],
        "headers": pa.array([[{"key": "h", "value": b"x"}], []], header)})
    options = parse_sink_options({"kafka.bootstrap.servers": kafka_broker.bootstrap_servers})
    sink = TaskSink(options, ["topic", "key", "value", "headers"], f"test-sink-{uuid.uuid4().hex[:8]}")

    written = sink.write_task(iter([plain, with_headers]), 0)

    assert written.records == 5
    in_first = kafka_broker.consume(first, isolation_level="read_committed")
    assert [(record.key, record.value) for record in in_first] == [(b"k1", b"one"), (None, b"three"),
                                                                    (b"k5", b"five")]
    in_second = kafka_broker.consume(second, isolation_level="read_committed")
    assert [(record.value, record.headers) for record in in_second] == [(b"two", ()), (b"four", (("h", b"x"),))]
