"""The ``kafkalite`` sink: rows to records, one Kafka transaction per task, idempotent across retries.

Columns, as Spark's Kafka sink takes them: ``value`` (string or binary, required), ``key`` (string or
binary), ``topic`` (string; the ``topic`` option, when set, wins), ``partition`` (int; null: the key
decides, as the producer's partitioner does), ``headers`` (array of struct<key string, value binary>).
Other columns are ignored. A missing or mistyped column fails the query at its start.

Theory of operation (the guarantee is in the package docstring). Each task of a write (a batch
write, or one micro-batch of a streaming write) writes its rows in one transaction of a transactional
producer whose ``transactional.id`` is ``<prefix>-<task partition id>``. The prefix is the same for
every micro-batch and every restart of a query (``transactionalIdPrefix``, else derived from the
query's ``checkpointLocation``), so:

1. ``init_transactions()`` fences any earlier attempt of the same task (one killed, or a zombie) and
   aborts the transaction it left open; its records never become visible to ``read_committed``.
2. The task reads its marker: the offsets committed by a bookkeeping consumer group of the same name
   (``require_stable``: nothing of an open transaction is pending any more after step 1). The marker
   is the id of the last micro-batch whose rows this task partition committed. When it is at least
   the current batch id, an earlier attempt already committed this batch's rows: the task writes
   nothing.
3. Otherwise it begins a transaction, sends its rows, and adds the marker to the same transaction
   (``send_offsets_to_transaction``: TxnOffsetCommit of offset = batch id, for partition 0 of the
   first topic written, a partition that exists, as Kafka requires of committed offsets), then
   commits. Records and marker become visible together or not at all.

The driver's ``commit()`` of a micro-batch has nothing left to do; ``abort()`` neither (a failed
task's transaction is aborted by its retry's ``init_transactions()`` or the coordinator's
``transaction.timeout.ms``).
"""

from __future__ import annotations

import hashlib
import itertools
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _datasource
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kafkalite.client.metadata import TopicPartition
from kafkalite.spark.arrow import batch_by_topic, batch_to_columns, columns_by_topic, rows_to_columns
from kafkalite.spark.options import OptionError, SinkOptions

__all__ = ["BatchWriter", "SinkCommitMessage", "StreamWriter", "TaskSink", "check_input_schema",
           "stream_transactional_prefix"]

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # the local property Spark sets on a micro-batch's jobs
_ROWS_PER_CHUNK = 4096
_PENDING_CHECK = 20_000
_DEFAULT_TRANSACTION_TIMEOUT_MS = "600000"
_STABLE_WAIT_S = 30.0

# Spark 4.1 hands a streaming writer Arrow batches; Spark 4.0 rows.
_StreamWriterBase: Any = getattr(_datasource, "DataSourceStreamArrowWriter", _datasource.DataSourceStreamWriter)


@dataclass(frozen=True, slots=True)
class SinkCommitMessage(WriterCommitMessage):
    """What one task did: its partition id, the records it committed, whether an earlier attempt had."""

    partition_id: int
    records: int
    already_committed: bool


def _string_or_binary(data_type: Any) -> bool:
    return isinstance(data_type, (StringType, BinaryType))


def check_input_schema(schema: StructType, options: SinkOptions) -> None:
    """The columns a write needs, with the types it takes; a ValueError names the column otherwise."""
    fields = {field.name: field.dataType for field in schema.fields}
    if "value" not in fields:
        raise OptionError("a kafkalite write needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in fields and not _string_or_binary(fields[name]):
            raise OptionError(f"column {name!r} must be string or binary, not {fields[name].simpleString()}")
    if options.topic is None:
        if "topic" not in fields:
            raise OptionError("a kafkalite write needs the option 'topic' or a 'topic' column")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError(f"column 'topic' must be string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(f"column 'partition' must be int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        headers = fields["headers"]
        element = headers.elementType if isinstance(headers, ArrayType) else None
        names = {field.name: field.dataType for field in element.fields} if isinstance(element, StructType) else {}
        if not (isinstance(names.get("key"), StringType) and isinstance(names.get("value"), BinaryType)):
            raise OptionError("column 'headers' must be array<struct<key: string, value: binary>>, not "
                              f"{headers.simpleString()}")


def stream_transactional_prefix(options: SinkOptions, raw: Mapping[str, str]) -> str:
    """The prefix of a streaming query's transactional ids: the same across restarts of the query."""
    if options.transactional_id_prefix is not None:
        return options.transactional_id_prefix
    checkpoint = {str(key).lower(): value for key, value in raw.items()}.get("checkpointlocation")
    if checkpoint:
        return "kafkalite-spark-" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:20]
    return f"kafkalite-spark-{uuid.uuid4()}"


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class TaskSink:
    """One task's write: fence, read the marker, write the rows and the marker in one transaction."""

    def __init__(self, options: SinkOptions, column_names: Sequence[str], prefix: str) -> None:
        self.options = options
        self.column_names = list(column_names)
        self.prefix = prefix

    def write_task(self, chunks: Iterator[Any], batch_id: int) -> SinkCommitMessage:
        from kafkalite.client.sync import Admin, Producer

        partition_id = _partition_id()
        first = next(chunks, None)
        if first is None:
            return SinkCommitMessage(partition_id, 0, False)
        transactional_id = f"{self.prefix}-{partition_id}"
        producer_config = {"client.id": "kafkalite-spark-sink", "batch.size": 262144,
                           "transaction.timeout.ms": _DEFAULT_TRANSACTION_TIMEOUT_MS, **self.options.producer,
                           "transactional.id": transactional_id}
        producer = Producer(producer_config)
        try:
            producer.init_transactions()
            with Admin(self.options.admin) as admin:
                done = _committed_batch(admin, transactional_id)
            if done is not None and done >= batch_id:
                return SinkCommitMessage(partition_id, 0, True)
            producer.begin_transaction()
            count, marker_topic = self._send_all(producer, itertools.chain([first], chunks))
            self._before_commit()
            if marker_topic is not None:
                producer.send_offsets_to_transaction({TopicPartition(marker_topic, 0): batch_id}, transactional_id)
            producer.commit_transaction()
            self._after_commit()
            return SinkCommitMessage(partition_id, count, False)
        finally:
            producer.close()

    def _send_all(self, producer: Any, chunks: Iterator[Any]) -> tuple[int, str | None]:
        """Send every row; the count and the first topic written (where the marker goes)."""
        pending: list[Any] = []
        count = 0
        marker_topic: str | None = None
        for chunk in chunks:
            if _is_arrow(chunk):
                groups = batch_by_topic(chunk, self.options.topic)
                columns = batch_to_columns(chunk) if groups is None else None
                count += chunk.num_rows
            else:
                columns = rows_to_columns(chunk, self.column_names)
                groups = columns_by_topic(columns, self.options.topic)
                count += len(chunk)
            if groups is not None:  # the many-records path: one call per topic of the chunk
                for group in groups:
                    marker_topic = marker_topic or group.topic
                    pending += producer.send_many(group.topic, group.values, group.keys)
            else:
                assert columns is not None
                first_topic = self._send_rows(producer, columns, pending)
                marker_topic = marker_topic or first_topic
            if len(pending) >= _PENDING_CHECK:
                pending = _settled(pending)
        producer.flush()
        _settled(pending)
        return count, marker_topic

    def _send_rows(self, producer: Any, columns: dict[str, list[Any]], pending: list[Any]) -> str | None:
        """Record by record (rows that name a partition or carry headers)."""
        fixed_topic = self.options.topic
        values = columns["value"]
        size = len(values)
        topics = [fixed_topic] * size if fixed_topic is not None else columns["topic"]
        keys = columns.get("key") or [None] * size
        partitions = columns.get("partition") or [None] * size
        headers = columns.get("headers") or [None] * size
        send = producer.send
        for index in range(size):
            topic = topics[index]
            if topic is None:
                raise ValueError("a row has a null topic and the option 'topic' is not set")
            row_headers = headers[index]
            if row_headers:
                row_headers = [_header(header) for header in row_headers]
            pending.append(send(topic, values[index], keys[index], partitions[index], row_headers or None))
        return topics[0] if size else None

    def _before_commit(self) -> None:
        """Called with the rows sent and the transaction still open (a place for fault tests)."""

    def _after_commit(self) -> None:
        """Called once the transaction committed, before Spark hears of it (a place for fault tests)."""


def _is_arrow(chunk: Any) -> bool:
    return hasattr(chunk, "schema") and hasattr(chunk, "num_rows")  # a pyarrow.RecordBatch


def _header(header: Any) -> tuple[str, Any]:
    if isinstance(header, Mapping):
        return header["key"], header["value"]
    return header[0], header[1]


def _settled(futures: list[Any]) -> list[Any]:
    """Raise the first failed send; keep the futures not answered yet."""
    waiting = []
    for future in futures:
        if not future.done():
            waiting.append(future)
        elif future.exception() is not None:
            raise future.exception()
    return waiting


def _committed_batch(admin: Any, group_id: str) -> int | None:
    """The marker: the last batch id this task partition committed (None: never)."""
    from kafkalite.client.errors import KafkaError

    deadline = time.monotonic() + _STABLE_WAIT_S
    while True:
        try:
            offsets = admin.list_consumer_group_offsets(group_id, require_stable=True)
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        return max((entry.offset for entry in offsets.values()), default=None)


def _chunks_of_rows(rows: Iterator[Any]) -> Iterator[list[Any]]:
    while True:
        chunk = list(itertools.islice(rows, _ROWS_PER_CHUNK))
        if not chunk:
            return
        yield chunk


def _as_chunks(iterator: Iterator[Any]) -> Iterator[Any]:
    """Arrow batches as they come; rows grouped into lists."""
    items = iter(iterator)
    first = next(items, None)
    if first is None:
        return iter(())
    if _is_arrow(first):
        return itertools.chain([first], items)
    return _chunks_of_rows(itertools.chain([first], items))


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalite")``: each task's rows in one transaction (a retried task is not doubled)."""

    def __init__(self, options: SinkOptions, column_names: Sequence[str], prefix: str) -> None:
        self.sink = TaskSink(options, column_names, prefix)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return self.sink.write_task(_as_chunks(iterator), 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task committed its own transaction."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Tasks that committed stay committed (Kafka has no way to take back a committed transaction)."""


class StreamWriter(_StreamWriterBase):  # type: ignore[misc]
    """``writeStream.format("kafkalite")``: each micro-batch task's rows in one transaction, once."""

    def __init__(self, options: SinkOptions, column_names: Sequence[str], prefix: str) -> None:
        self.sink = TaskSink(options, column_names, prefix)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if batch_id is None:
            raise RuntimeError(f"a streaming write task without the local property {BATCH_ID_PROPERTY!r}")
        return self.sink.write_task(_as_chunks(iterator), int(batch_id))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        """Every task committed its own transaction and marker."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        """A retry of the batch skips the tasks that committed (their markers say so)."""
