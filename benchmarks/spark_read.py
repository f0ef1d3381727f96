"""Reading a topic into Spark with the kafkalite format, against the bundled consumer reading it alone.

    python benchmarks/spark_read.py [--records 1000000] [--size 100] [--partitions 2] [--runs 3]

Starts ``kafkalite serve`` (in-memory storage) in a subprocess, writes ``--records`` records of
``--size`` bytes over ``--partitions`` partitions, then reads them all:

* with the bundled blocking consumer (``kafkalite.client.sync.Consumer``, both partitions assigned,
  one process), counting records: the client's own records/s;
* with ``spark.read.format("kafkalite")...load().count()`` in ``local[2]``: one task per partition,
  each a consumer in a Spark Python worker handing Arrow batches to the JVM.

The Spark session's start and a first warm-up count (Python workers starting) are left out; each
figure is the best of ``--runs``. Both are printed, with their ratio. Needs the ``spark`` extra and Java.
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
from kafkalite.client.sync import Consumer, Producer  # noqa: E402
from kafkalite.testing import BrokerProcess  # noqa: E402

TOPIC = "spark-read"


def fill(bootstrap: str, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144,
                         "compression.type": "none"})
    value = b"x" * size
    for start in range(0, records, 50_000):  # keyless: whole batches go to one partition after another
        producer.send_many(TOPIC, [value] * min(50_000, records - start))
    producer.flush(120)
    producer.close()


def consumer_rate(bootstrap: str, records: int, partitions: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "max.poll.records": 20_000, "enable.auto.commit": False})
    assigned = [TopicPartition(TOPIC, partition) for partition in range(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    seen = 0
    started = time.perf_counter()
    while seen < records:
        seen += len(consumer.poll(timeout_ms=1000))
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def spark_rate(bootstrap: str, records: int, runs: int) -> tuple[float, list[float]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    import kafkalite.spark

    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-spark-read")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    try:
        frame = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", TOPIC).load())
        started = time.perf_counter()
        counted = frame.count()
        warm_up = time.perf_counter() - started
        assert counted == records, (counted, records)
        rates = []
        for _ in range(runs):
            started = time.perf_counter()
            counted = frame.count()
            rates.append(counted / (time.perf_counter() - started))
            assert counted == records, (counted, records)
        return records / warm_up, rates
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work) / "data", {"num.partitions": arguments.partitions}, memory=True,
                               admin=False).start()
        try:
            bootstrap = broker.bootstrap_servers
            broker.create_topic(TOPIC, partitions=arguments.partitions)
            started = time.perf_counter()
            fill(bootstrap, arguments.records, arguments.size)
            print(f"wrote {arguments.records:,} records of {arguments.size} B over {arguments.partitions} partitions "
                  f"in {time.perf_counter() - started:.1f} s")
            consumer = max(consumer_rate(bootstrap, arguments.records, arguments.partitions)
                           for _ in range(arguments.runs))
            print(f"bundled consumer (one process):      {consumer:>12,.0f} records/s")
            cold, rates = spark_rate(bootstrap, arguments.records, arguments.runs)
            best = max(rates)
            print(f"spark count() local[2], first run:   {cold:>12,.0f} records/s (Python workers starting)")
            print(f"spark count() local[2], best of {arguments.runs}:   {best:>12,.0f} records/s "
                  f"(median {statistics.median(rates):,.0f})")
            print(f"spark / consumer: {best / consumer:.0%}")
        finally:
            broker.close()


if __name__ == "__main__":
    main()
