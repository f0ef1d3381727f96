"""Records to Arrow and back: the one place that builds ``pyarrow.RecordBatch`` or takes one apart.

The source hands Spark one Arrow batch per ``poll()`` of the bundled consumer (column by column, no
Python object per cell besides the key and value bytes the consumer decoded), in exactly the schema
Spark expects of its Kafka source (:data:`SOURCE_FIELDS`; Arrow's form is what
``pyspark.sql.pandas.types.to_arrow_schema`` makes of it, checked in the unit tests).

The sink takes Spark's rows as Arrow batches where Spark gives them (``DataSourceArrowWriter``) and
turns each into plain lists per column; :func:`rows_to_columns` does the same for ``Row`` objects
(the row-based stream writer of Spark before 4.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow

__all__ = ["SINK_COLUMNS", "SOURCE_FIELDS", "arrow_schema", "batch_to_columns", "records_to_batch",
           "rows_to_columns", "source_ddl"]

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


_MILLISECONDS: Any = None
_MICROSECONDS: Any = None


def records_to_batch(records: Sequence[Any], schema: pyarrow.Schema, include_headers: bool) -> pyarrow.RecordBatch:
    """Consumer records (``ConsumerRecord`` tuples of one partition) as one Arrow batch of ``schema``."""
    import pyarrow as pa

    global _MILLISECONDS, _MICROSECONDS
    if _MICROSECONDS is None:
        _MILLISECONDS, _MICROSECONDS = pa.timestamp("ms", tz="UTC"), pa.timestamp("us", tz="UTC")
    count = len(records)
    first = records[0]
    topic, partition = first[0], first[1]
    offsets = pa.array([record[2] for record in records], pa.int64())
    timestamps = pa.array([record[3] for record in records], _MILLISECONDS).cast(_MICROSECONDS)
    timestamp_types = [record[4] for record in records]
    columns = [
        pa.array([record[5] for record in records], pa.binary()),
        pa.array([record[6] for record in records], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        timestamps,
        pa.array(timestamp_types, pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array([[{"key": name, "value": value} for name, value in record[7]] for record in records],
                                schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


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
