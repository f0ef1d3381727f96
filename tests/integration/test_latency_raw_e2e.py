"""The raw end-to-end client of ``benchmarks/latency.py`` against a broker: every record its Produce
requests carry, batched or one a request, comes back to its consumer with the times it was sent and
due, and each acknowledged record is counted once on both sides."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kafkalite.testing.process import BrokerProcess

LATENCY = Path(__file__).resolve().parents[2] / "benchmarks" / "latency.py"
RATE, SECONDS, WARMUP_S = 4000, 0.5, 1.0


@pytest.mark.parametrize("mode", [[], ["--max-batch-records", "3"], ["--one-record-per-request"]],
                         ids=["batched", "three-at-most", "one-a-request"])
def test_every_acknowledged_record_reaches_the_consumer(broker: BrokerProcess, mode: list[str]) -> None:
    done = subprocess.run([sys.executable, str(LATENCY), "rawe2e", "--bootstrap", broker.bootstrap_servers,
                           "--topic", f"raw-e2e-{uuid.uuid4().hex[:8]}", "--rate", str(RATE), "--acks", "all",
                           "--seconds", str(SECONDS), "--max-in-flight", "1", *mode],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failures"] == 0
    assert result["sent"] == int(RATE * (SECONDS + WARMUP_S))
    expected_most = {"--one-record-per-request": 1, "--max-batch-records": 3}.get(mode[0] if mode else "", 148)
    assert result["max_records"] == expected_most
    assert result["sent"] / expected_most <= result["requests"] <= result["sent"]
    counted = len(result["acked"])
    assert counted > 0
    assert len(result["ends"]) == len(result["acked_from_due"]) == len(result["ends_from_due"]) == counted
    assert all(latency >= 0 for latency in result["ends"] + result["acked"])
    # a record leaves at or after its time: counted from when it was due, each of its latencies is as long
    assert all(due >= sent for sent, due in zip(result["ends"], result["ends_from_due"], strict=True))
    assert all(due >= sent for sent, due in zip(result["acked"], result["acked_from_due"], strict=True))
