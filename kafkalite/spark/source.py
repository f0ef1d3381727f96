"""The ``kafkalite`` data source: Spark's Python Data Source API on the bundled client.

:class:`KafkaliteDataSource` is what ``register()`` gives Spark. Spark makes it on the driver from the query's options
and pickles it, with the reader or writer it makes, to the Python workers of the tasks; so nothing
here holds a connection across that boundary: :mod:`.reading` and :mod:`.writing` connect inside
``read()`` / ``write()``.

Batch reads plan once: the partitions of the subscription, ``startingOffsets`` and ``endingOffsets``
resolved to offsets, one task per range (more with ``minPartitions``).

Streaming reads follow Spark's micro-batch protocol (:class:`StreamReader`): ``initialOffset()``
resolves ``startingOffsets`` for a new query; ``latestOffset(start, limit)`` lists the partitions
again (new ones join, from their earliest offset) and their latest offsets, capped by
``maxOffsetsPerTrigger`` (Spark hands it back as the read limit) or by the target fixed when
``trigger(availableNow=True)`` began; ``partitions(start, end)`` turns the two offsets into tasks.
Spark writes each batch's end offset to the checkpoint before running it, and a restarted query
replans from there: the offsets are the source's whole state, and ``commit()`` has nothing to do.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from kafkalite.client.metadata import TopicPartition
from kafkalite.spark.arrow import source_ddl
from kafkalite.spark.offsets import (
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    split_ranges,
)
from kafkalite.spark.options import SourceOptions, parse_sink_options, parse_source_options
from kafkalite.spark.reading import OffsetLookup, check_offsets, read_range

try:  # Spark 4.2+: admission control (read limits) and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - Spark 4.0 and 4.1
    ReadLimit = ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["KafkaliteDataSource", "RangePartition"]


class RangePartition(InputPartition):
    """One task's work: one partition's offsets ``[start, end)``."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


class KafkaliteDataSource(DataSource):
    """``format("kafkalite")``: read and write Kafka topics with the options of Spark's Kafka connector."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def _include_headers(self) -> bool:
        value = {str(key).lower(): value for key, value in self.options.items()}.get("includeheaders")
        return str(value).strip().lower() == "true"

    def schema(self) -> str:
        return source_ddl(self._include_headers())

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kafkalite.spark.writing import BatchWriter, check_input_schema

        options = parse_sink_options(self.options)
        check_input_schema(schema, options)
        return BatchWriter(options, schema.fieldNames(), f"kafkalite-spark-{uuid.uuid4()}")

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kafkalite.spark.writing import StreamWriter, check_input_schema, stream_transactional_prefix

        options = parse_sink_options(self.options)
        check_input_schema(schema, options)
        return StreamWriter(options, schema.fieldNames(), stream_transactional_prefix(options, self.options))


class BatchReader(DataSourceReader):
    """``spark.read.format("kafkalite")``: the offsets between ``startingOffsets`` and ``endingOffsets``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with OffsetLookup(options) as lookup:
            partitions = lookup.partitions()
            start = lookup.resolve(options.starting, partitions, what="startingOffsets")
            end = lookup.resolve(options.ending, partitions, what="endingOffsets")
        for partition in partitions:
            if end[partition] < start[partition]:
                raise ValueError(f"{partition}: the ending offset {end[partition]} is before the starting offset "
                                 f"{start[partition]} (startingOffsets / endingOffsets)")
        ranges = split_ranges(plan_ranges(start, end), options.min_partitions, options.max_records_per_partition)
        return [RangePartition(offset_range) for offset_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(partition.offset_range, self.options)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafkalite")``: micro-batches of offset ranges, offsets in the checkpoint."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._lookup: OffsetLookup | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow: read up to here
        self._last_end: dict[TopicPartition, int] | None = None

    def _cluster(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options)
        return self._lookup

    def initialOffset(self) -> dict[str, Any]:
        lookup = self._cluster()
        partitions = lookup.partitions()
        start = lookup.resolve(self.options.starting, partitions, what="startingOffsets")
        return offsets_to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        lookup = self._cluster()
        partitions = lookup.partitions()
        self._target = lookup.offsets(partitions, -1)

    def getDefaultReadLimit(self) -> Any:
        if self.options.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return super().getDefaultReadLimit()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        lookup = self._cluster()
        if start is None:  # Spark before 4.2 asks without the start: where the last batch of this run ended
            begin = self._last_end or {}
            max_rows = self.options.max_offsets_per_trigger if self._last_end is not None else None
        else:
            begin = offsets_from_json(start)
            max_rows = getattr(limit, "max_rows", None)
        partitions = lookup.partitions()
        latest = lookup.offsets(partitions, -1)
        if self._target is not None:
            latest = {partition: min(offset, self._target[partition])
                      for partition, offset in latest.items() if partition in self._target}
        check_offsets(begin, latest, self.options)
        new = [partition for partition in latest if partition not in begin]
        begin = {**{partition: offset for partition, offset in begin.items() if partition in latest},
                 **lookup.offsets(new, -2)}
        end = {partition: max(offset, begin[partition]) for partition, offset in latest.items()}
        if max_rows is not None:
            end = limit_offsets(begin, end, max_rows)
        self._last_end = end
        return offsets_to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [partition for partition in finish if partition not in begin]
        if new:
            begin.update(self._cluster().offsets(new, -2))
        ranges = split_ranges(plan_ranges(begin, finish), self.options.min_partitions,
                              self.options.max_records_per_partition)
        return [RangePartition(offset_range) for offset_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        return read_range(partition.offset_range, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets are in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        lookup, self._lookup = self._lookup, None
        if lookup is not None:
            lookup.close()

    def __getstate__(self) -> dict[str, Any]:  # a task gets the options, never the driver's connection
        return {"options": self.options, "_lookup": None, "_target": None, "_last_end": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

