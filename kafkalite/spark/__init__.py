"""Spark's ``kafkalite`` format: read and write Kafka topics from PySpark (the ``spark`` extra).

::

    import kafkalite.spark
    kafkalite.spark.register(spark)          # once per session: format("kafkalite") from then on
    events = (spark.readStream.format("kafkalite")
              .option("kafka.bootstrap.servers", "localhost:9092")
              .option("subscribe", "clicks").load())
    (events.selectExpr("CAST(key AS STRING) AS key", "value").writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", "localhost:9092").option("topic", "copies")
        .option("checkpointLocation", "checkpoints/copies").start())

Built on Spark 4's Python Data Source API (``pyspark.sql.datasource``) and the bundled client, so it
needs no JVM package; it speaks the Kafka protocol and so works against any Kafka cluster. The
options are those of Spark's own Kafka connector (:mod:`.options`); the output schema is that of
Spark's Kafka source (key, value binary; topic; partition; offset; timestamp; timestampType;
headers with ``includeHeaders``). Data moves as Arrow batches, one per consumer poll.

Rooms: :mod:`.options` (the options, parsed and checked on the driver), :mod:`.offsets` (Spark's
offset JSON and offset ranges as tasks), :mod:`.arrow` (records to Arrow and back), :mod:`.reading`
(partitions and offsets from the cluster; one range read by one consumer), :mod:`.writing` (the
transactional sink), :mod:`.source` (the DataSource, its readers, the InputPartition). Only the
client and the codec are imported, never the broker.

The guarantee of a streaming write: each task of a micro-batch writes its rows and a marker (the
batch id) in one Kafka transaction, under a ``transactional.id`` that is the same for the same task
partition in every attempt, batch and restart of the query. A retried task, a retried micro-batch or
a query restarted from its checkpoint first fences the earlier attempt (its open transaction is
aborted) and skips the write when the marker says this batch is already committed. So a reader with
``isolation.level=read_committed`` sees each row of each micro-batch exactly once, provided a replayed
micro-batch gives each task partition the same rows (true of a deterministic query on a replayable
source such as this one, with an unchanged number of shuffle partitions). Records become visible
when their task commits, before Spark commits the whole micro-batch: a batch that fails for good
leaves the committed tasks' rows visible, and a restart completes the batch without repeating them.
A ``read_uncommitted`` reader may see the records of an aborted attempt.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DATA_SOURCE_NAME", "register"]

DATA_SOURCE_NAME = "kafkalite"


def register(spark: Any) -> None:
    """Make ``format("kafkalite")`` known to ``spark`` (a ``SparkSession``).

    Harmless where Spark already found it by itself (the ``pyspark-kafkalite`` distribution installed):
    Spark 4.1+ lets the call replace the discovered source with the same one, Spark 4.0 refuses it
    with ``DATA_SOURCE_ALREADY_EXISTS``, which is taken as done.
    """
    from pyspark.errors import AnalysisException

    from kafkalite.spark.source import KafkaliteDataSource

    try:
        spark.dataSource.register(KafkaliteDataSource)
    except AnalysisException as exc:
        condition = getattr(exc, "getCondition", exc.getErrorClass)()
        if condition != "DATA_SOURCE_ALREADY_EXISTS":
            raise
