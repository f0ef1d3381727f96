"""Records to Arrow and back: the one place that builds ``pyarrow.RecordBatch`` or takes one apart.

The source hands Spark one Arrow batch per ``poll()`` of the bundled consumer (column by column, no
Python object per cell besides the key and value bytes the consumer decoded), in exactly the schema
Spark expects of its Kafka source (:data:`SOURCE_FIELDS`; Arrow's form is what
``pyspark.sql.pandas.types.to_arrow_schema`` makes of it, checked in the unit tests).

The sink takes Spark's rows as Arrow batches where Spark gives them (``DataSourceArrowWriter``).
:func:`batch_by_topic` cuts a batch into one list of values (and keys) per topic, in row order, for
the producer's many-records path, when no row names a partition or carries headers (the common
case); otherwise :func:`batch_to_columns` turns it into plain lists per column, sent record by
record. :func:`rows_to_columns` and :func:`columns_by_topic` do the same for ``Row`` objects (the
row-based stream writer of Spark 4.0).
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow

__all__ = ["SINK_COLUMNS", "SOURCE_FIELDS", "TopicRecords", "arrow_schema", "batch_by_topic", "batch_to_columns",
           "columns_by_topic", "records_to_batch", "rows_to_columns", "source_ddl"]

# Spark's Kafka source schema: (name, Spark SQL type).
SOURCE_FIELDS: tuple[tuple[str, str], ...] = (
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
)
HEADERS_FIELD = ("headers", "array<struct<key: string, value: binary>>")
SINK_COLUMNS = ("topic", "key", "value", "headers", "partition")


def source_ddl(include_headers: bool) -> str:
    fields = [*SOURCE_FIELDS, HEADERS_FIELD] if include_headers else list(SOURCE_FIELDS)
    return ", ".join(f"{name} {kind}" for name, kind in fields)


def arrow_schema(include_headers: bool) -> pyarrow.Schema:
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()),
                                                              pa.field("value", pa.binary())]))))
    return pa.schema(fields)


_OFFSET, _TIMESTAMP, _TIMESTAMP_TYPE, _KEY, _VALUE, _HEADERS = (itemgetter(index) for index in (2, 3, 4, 5, 6, 7))


def _int64_array(values: Iterable[int], count: int) -> Any:
    """An int64 Arrow array filled at C speed (``array.array`` reads the iterable; Arrow takes its buffer)."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(array.array("q", values))])


def records_to_batch(records: Sequence[Any], schema: pyarrow.Schema, include_headers: bool) -> pyarrow.RecordBatch:
    """Consumer records (``ConsumerRecord`` tuples of one partition) as one Arrow batch of ``schema``.

    Each column is one pass of ``map(itemgetter)`` over the records; the common cases skip work:
    consecutive offsets are a range, keys all null an Arrow null array, one timestamp type a repeat.
    """
    import pyarrow as pa

    count = len(records)
    first = records[0]
    topic, partition, first_offset = first[0], first[1], first[2]
    last_offset = records[-1][2]
    if last_offset - first_offset == count - 1:  # offsets only grow, so these are consecutive
        offsets = _int64_array(range(first_offset, last_offset + 1), count)
    else:
        offsets = _int64_array(map(_OFFSET, records), count)
    keys = list(map(_KEY, records))
    key_array = pa.nulls(count, pa.binary()) if keys.count(None) == count else pa.array(keys, pa.binary())
    types = list(map(_TIMESTAMP_TYPE, records))
    type_array = (pa.repeat(pa.scalar(types[0], pa.int32()), count) if types.count(types[0]) == count
                  else pa.array(types, pa.int32()))
    timestamps = _int64_array(map(_TIMESTAMP, records), count).cast(pa.timestamp("ms", tz="UTC"))
    columns = [
        key_array,
        pa.array(list(map(_VALUE, records)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        timestamps.cast(pa.timestamp("us", tz="UTC")),
        type_array,
    ]
    if include_headers:
        columns.append(pa.array([[{"key": name, "value": value} for name, value in headers]
                                 for headers in map(_HEADERS, records)], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


@dataclass(frozen=True, slots=True)
class TopicRecords:
    """The records of one topic cut from an Arrow batch, in row order (``keys`` None: all null)."""

    topic: str
    values: list[Any]
    keys: list[Any] | None


def _all_null(column: Any) -> bool:
    return bool(column.null_count == len(column))


def batch_by_topic(batch: pyarrow.RecordBatch, topic: str | None) -> list[TopicRecords] | None:
    """The batch's records per topic (``topic``, the option, wins over the column), or ``None`` when a
    row names its partition or has headers (those go record by record). A null topic is a ValueError."""
    import pyarrow.compute as pc

    names = batch.schema.names
    if "partition" in names and not _all_null(batch.column("partition")):
        return None
    if "headers" in names:
        headers = batch.column("headers")
        if not _all_null(headers) and (pc.max(pc.list_value_length(headers)).as_py() or 0) > 0:
            return None
    if topic is None:
        topics = batch.column("topic")
        if topics.null_count:
            raise ValueError("a row has a null topic and the option 'topic' is not set")
        distinct = pc.unique(topics).to_pylist()
        if len(distinct) > 1:
            return [_records(batch.filter(pc.equal(topics, name)), name) for name in distinct]
        if not distinct:
            return []
        topic = distinct[0]
    return [_records(batch, topic)]


def _records(batch: pyarrow.RecordBatch, topic: str) -> TopicRecords:
    keys = None
    if "key" in batch.schema.names and not _all_null(batch.column("key")):
        keys = batch.column("key").to_pylist()
    return TopicRecords(topic, batch.column("value").to_pylist(), keys)


def batch_to_columns(batch: pyarrow.RecordBatch) -> dict[str, list[Any]]:
    """The sink's columns of an Arrow batch as Python lists (only the columns the sink reads)."""
    names = set(batch.schema.names)
    return {name: batch.column(name).to_pylist() for name in SINK_COLUMNS if name in names}


def rows_to_columns(rows: Iterable[Any], names: Sequence[str]) -> dict[str, list[Any]]:
    """Spark ``Row`` objects (or tuples in ``names`` order) as the sink's columns."""
    wanted = [(index, name) for index, name in enumerate(names) if name in SINK_COLUMNS]
    columns: dict[str, list[Any]] = {name: [] for _, name in wanted}
    for row in rows:
        for index, name in wanted:
            columns[name].append(row[index])
    return columns


def columns_by_topic(columns: dict[str, list[Any]], topic: str | None) -> list[TopicRecords] | None:
    """:func:`batch_by_topic` for columns of Python lists (from :func:`rows_to_columns`)."""
    if any(partition is not None for partition in columns.get("partition", ())):
        return None
    if any(columns.get("headers", ())):
        return None
    values = columns["value"]
    keys = columns.get("key")
    if keys is not None and keys.count(None) == len(keys):
        keys = None
    if topic is not None:
        return [TopicRecords(topic, values, keys)]
    topics = columns["topic"]
    if None in topics:
        raise ValueError("a row has a null topic and the option 'topic' is not set")
    distinct = list(dict.fromkeys(topics))
    if len(distinct) == 1:
        return [TopicRecords(distinct[0], values, keys)]
    groups = []
    for name in distinct:
        rows = [index for index, row_topic in enumerate(topics) if row_topic == name]
        group_keys = [keys[index] for index in rows] if keys is not None else None
        groups.append(TopicRecords(name, [values[index] for index in rows], group_keys))
    return groups
