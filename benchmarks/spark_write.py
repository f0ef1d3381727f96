"""Writing a DataFrame to a topic with the kafkalite format, against the bundled producer writing alone.

    python benchmarks/spark_write.py [--records 1000000] [--size 100] [--partitions 2] [--runs 3] [--keys]

Starts ``kafkalite serve`` (in-memory storage) in a subprocess, then writes ``--records`` values of
``--size`` bytes to a topic of ``--partitions`` partitions:

* with the bundled blocking producer (``kafkalite.client.sync.Producer.send_many``, transactional as
  the sink's are, the sink's ``batch.size``, one transaction, one process): the client's own records/s;
* with ``df.write.format("kafkalite")`` in ``local[2]``, the DataFrame made by Spark itself
  (``spark.range`` over two partitions, each value a 100-byte binary): two tasks, each a transactional
  producer in a Spark Python worker taking Arrow batches from the JVM.

``--keys`` adds a 10-byte key to every record (the producer then hashes each key to its partition).
Each run writes to a new topic. The Spark session's start and a first warm-up write (Python workers
starting) are left out; each figure is the best of ``--runs``. Both are printed, with their ratio.
Needs the ``spark`` extra and Java.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafkalite.client.metadata import TopicPartition  # noqa: E402
from kafkalite.client.sync import Admin, Producer  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402

SINK_BATCH_BYTES = 262144  # the sink's batch.size


def records_in(bootstrap: str, topic: str, partitions: int) -> int:
    """The topic's end offsets added up (each task's commit marker counts one per partition it wrote)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        found = admin.list_offsets({TopicPartition(topic, partition): -1 for partition in range(partitions)})
    return sum(answer.offset for answer in found.values())


def check_written(bootstrap: str, topic: str, partitions: int, records: int, writers: int) -> None:
    total = records_in(bootstrap, topic, partitions)
    assert records <= total <= records + writers * partitions, (topic, total, records)


def producer_rate(broker: BrokerProcess, topic: str, records: int, size: int, partitions: int, keys: bool) -> float:
    bootstrap = broker.bootstrap_servers
    broker.create_topic(topic, partitions=partitions)
    values = [b"%0*d" % (size, index) for index in range(records)]
    key_list = [b"%010d" % (index % 1000) for index in range(records)] if keys else None
    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": SINK_BATCH_BYTES,
                         "transactional.id": f"bench-{topic}"})
    producer.init_transactions()
    started = time.perf_counter()
    producer.begin_transaction()
    futures = []
    for start in range(0, records, 4096):  # as the sink gets them: Spark's Arrow batches hold up to 10,000 rows
        futures += producer.send_many(topic, values[start:start + 4096],
                                      key_list[start:start + 4096] if key_list is not None else None)
    producer.commit_transaction()
    elapsed = time.perf_counter() - started
    for future in futures:
        future.result()
    producer.close()
    check_written(bootstrap, topic, partitions, records, 1)
    return records / elapsed


def spark_rates(broker: BrokerProcess, records: int, size: int, partitions: int, keys: bool,
                runs: int) -> tuple[float, list[float]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import kafkalite.spark

    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-spark-write")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    bootstrap = broker.bootstrap_servers
    columns = [f"CAST(lpad(CAST(id AS STRING), {size}, '0') AS BINARY) AS value"]
    if keys:
        columns.append("CAST(lpad(CAST(id % 1000 AS STRING), 10, '0') AS BINARY) AS key")
    frame = spark.range(0, records, numPartitions=2).selectExpr(*columns)

    def write(run: int) -> float:
        topic = f"spark-write-{run}"
        broker.create_topic(topic, partitions=partitions)
        started = time.perf_counter()
        (frame.write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).save())
        elapsed = time.perf_counter() - started
        check_written(bootstrap, topic, partitions, records, 2)
        return records / elapsed

    try:
        cold = write(0)
        return cold, [write(run) for run in range(1, runs + 1)]
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keys", action="store_true", help="a 10-byte key on every record")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work) / "data", {"num.partitions": arguments.partitions}, memory=True,
                               admin=False).start()
        try:
            keyed = " with 10 B keys" if arguments.keys else ""
            what = f"{arguments.records:,} records of {arguments.size} B{keyed}"
            print(f"writing {what} to {arguments.partitions} partitions")
            producer = [producer_rate(broker, f"producer-{run}", arguments.records, arguments.size,
                                      arguments.partitions, arguments.keys) for run in range(arguments.runs)]
            print(f"bundled producer send_many (one process): {max(producer):>12,.0f} records/s "
                  f"(median {statistics.median(producer):,.0f})")
            cold, rates = spark_rates(broker, arguments.records, arguments.size, arguments.partitions,
                                      arguments.keys, arguments.runs)
            best = max(rates)
            print(f"spark df.write local[2], first run:       {cold:>12,.0f} records/s (Python workers starting)")
            print(f"spark df.write local[2], best of {arguments.runs}:       {best:>12,.0f} records/s "
                  f"(median {statistics.median(rates):,.0f})")
            print(f"spark / producer: {best / max(producer):.0%}")
        finally:
            broker.close()


if __name__ == "__main__":
    main()
