"""Clickstream: page views per page per minute, from a topic of click events back to a topic.

    python examples/clickstream/pipeline.py [--bootstrap-servers localhost:9092] [--clicks 5000]

1. Synthetic click events (``{"user": "user-17", "page": "/cart", "time": <ms>}``, keyed by user) go to
   the topic ``clicks``, spread over the last few whole minutes.
2. A Structured Streaming query reads ``clicks`` with ``format("kafkalite")``, parses the JSON, and
   counts views per page in one-minute event-time windows with a 30-second watermark.
3. In append mode a window's count is written once, when the watermark passes the window's end: as
   ``{"window_start": ..., "window_end": ..., "page": ..., "views": n}`` keyed by page to the topic
   ``page-views-per-minute``, through the transactional kafkalite sink (no duplicates on retries).
4. ``kafkalite consume`` prints the results.

The query runs with ``trigger(availableNow=True)``: it reads what is there and stops, so the script
ends. The last clicks are two minutes after the others and move the watermark past every earlier
minute; their own minute stays open, as the current minute of a live stream does. Run it again and
the query resumes from its checkpoint: only new clicks are read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

PAGES = ("/", "/products", "/products/42", "/cart", "/checkout")
WEIGHTS = (40, 25, 15, 12, 8)
SOURCE_TOPIC = "clicks"
SINK_TOPIC = "page-views-per-minute"
MINUTE_MS = 60_000


def generate_clicks(count: int, minutes: int = 5, seed: int = 7, now_ms: int | None = None) -> list[dict[str, Any]]:
    """``count`` clicks over the ``minutes`` whole minutes before the current one, in time order, then
    three clicks two minutes later (they close the earlier windows)."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    first_minute = (now_ms // MINUTE_MS - minutes - 2) * MINUTE_MS
    times = sorted(first_minute + rng.randrange(minutes * MINUTE_MS) for _ in range(count))
    clicks = [{"user": f"user-{rng.randrange(100)}", "page": rng.choices(PAGES, WEIGHTS)[0], "time": stamp}
              for stamp in times]
    closing = first_minute + (minutes + 2) * MINUTE_MS
    clicks += [{"user": "user-0", "page": "/", "time": closing + index} for index in range(3)]
    return clicks


def expected_views(clicks: list[dict[str, Any]]) -> Counter[tuple[int, str]]:
    """The (window start ms, page) counts the query writes: every minute but the last one's."""
    counts: Counter[tuple[int, str]] = Counter(
        (click["time"] // MINUTE_MS * MINUTE_MS, click["page"]) for click in clicks)
    last = max(start for start, _ in counts)
    return Counter({key: value for key, value in counts.items() if key[0] != last})


def create_topics(bootstrap_servers: str, partitions: int = 2) -> None:
    from kafkalite.client import NewTopic
    from kafkalite.client.sync import Admin

    with Admin({"bootstrap.servers": bootstrap_servers}) as admin:
        existing = admin.list_topics()
        wanted = [NewTopic(name, partitions) for name in (SOURCE_TOPIC, SINK_TOPIC) if name not in existing]
        if wanted:
            for result in admin.create_topics(wanted).values():
                if result.error is not None:
                    raise result.error


def produce_clicks(bootstrap_servers: str, clicks: list[dict[str, Any]], topic: str = SOURCE_TOPIC) -> None:
    from kafkalite.client.sync import Producer

    with Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 10}) as producer:
        for click in clicks:
            producer.send(topic, json.dumps(click).encode(), key=click["user"], timestamp=click["time"])
        producer.flush(60)


def page_views_per_minute(spark: Any, bootstrap_servers: str, topic: str = SOURCE_TOPIC) -> Any:
    """The streaming DataFrame of results, as the sink takes them (key, value)."""
    from pyspark.sql import functions as f

    clicks = (spark.readStream.format("kafkalite")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .load())
    events = (clicks
              .select(f.from_json(f.col("value").cast("string"), "user STRING, page STRING, time LONG").alias("click"))
              .select("click.page", f.timestamp_millis("click.time").alias("event_time")))
    views = (events
             .withWatermark("event_time", "30 seconds")
             .groupBy(f.window("event_time", "1 minute"), "page")
             .count())
    return views.select(
        f.col("page").alias("key"),
        f.to_json(f.struct(
            f.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            f.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "page",
            f.col("count").alias("views"))).alias("value"))


def run_query(spark: Any, bootstrap_servers: str, checkpoint: str, source: str = SOURCE_TOPIC,
              sink: str = SINK_TOPIC) -> None:
    """Read what ``source`` has, write the closed windows to ``sink``, stop."""
    import kafkalite.spark.source

    writer = (page_views_per_minute(spark, bootstrap_servers, source).writeStream
              .format("kafkalite")
              .outputMode("append")
              .option("kafka.bootstrap.servers", bootstrap_servers)
              .option("topic", sink)
              .option("checkpointLocation", checkpoint))
    if kafkalite.spark.source.ReadMaxRows is not None:  # Spark 4.2+: Python sources take part in availableNow
        writer.trigger(availableNow=True).start().awaitTermination()
        return
    # Spark 4.0 and 4.1 run a Python source under availableNow as one micro-batch and stop before the
    # micro-batch without data that moves the watermark and closes the windows: run on a short
    # processing-time trigger until that one ran too (or nothing more comes), then stop.
    query = writer.trigger(processingTime="1 second").start()
    try:
        query.processAllAvailable()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batches = [progress for progress in query.recentProgress if progress.get("batchId") is not None]
            with_data = [progress["batchId"] for progress in batches if progress["numInputRows"]]
            if with_data and any(progress["batchId"] > max(with_data) for progress in batches):
                break
            time.sleep(0.5)
    finally:
        query.stop()


def spark_session(app_name: str = "clickstream") -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafkalite.spark

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(spark)
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description="page views per page per minute with Spark and kafkalite")
    parser.add_argument("--bootstrap-servers", default="localhost:9092")
    parser.add_argument("--clicks", type=int, default=5000)
    parser.add_argument("--checkpoint", default=str(Path(tempfile.gettempdir()) / "kafkalite-clickstream"),
                        help="the query's checkpoint (a second run resumes from it)")
    arguments = parser.parse_args()

    create_topics(arguments.bootstrap_servers)
    clicks = generate_clicks(arguments.clicks)
    produce_clicks(arguments.bootstrap_servers, clicks)
    print(f"produced {len(clicks)} clicks to {SOURCE_TOPIC}", flush=True)

    spark = spark_session()
    try:
        run_query(spark, arguments.bootstrap_servers, arguments.checkpoint)
    finally:
        spark.stop()
    print(f"the query is done; {SINK_TOPIC} holds:", flush=True)
    subprocess.run([sys.executable, "-m", "kafkalite", "consume", "-b", arguments.bootstrap_servers,
                    "-t", SINK_TOPIC, "--from-beginning", "--exit-at-end", "--isolation-level", "read_committed"],
                   check=True)


if __name__ == "__main__":
    main()
