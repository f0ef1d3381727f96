"""examples/clickstream end to end in local[2]: clicks in, page views per page per minute out, read back
by the bundled consumer and by ``kafkalite consume``; every closed minute's count is exact."""

from __future__ import annotations

import datetime
import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

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
