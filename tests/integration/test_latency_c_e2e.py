"""The raw end-to-end client of ``benchmarks/latency.py`` written in C (``benchmarks/rawe2e.c``), against
a broker and librdkafka's mock cluster: it compiles without warnings, every record its Produce requests
carry comes back to its consumer with the times it was sent and due, each acknowledged record is
counted once on both sides, and a closed connection ends it with one line on stderr."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import benchmarks.rawclients as rawclients
from kafkalite.testing.process import BrokerProcess

SOURCE = Path(__file__).resolve().parents[2] / "benchmarks" / "rawe2e.c"
RATE, SECONDS = 1000, 1.0


@pytest.fixture(scope="module")
def c_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client compiled as ``latency.py --c-e2e`` compiles it, with ``-Wall -Wextra`` on top."""
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) on PATH to build benchmarks/rawe2e.c")
    binary = tmp_path_factory.mktemp("rawe2e") / "rawe2e"
    done = subprocess.run([compiler, "-O2", "-Wall", "-Wextra", "-o", str(binary), str(SOURCE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    return binary


def run(binary: Path, bootstrap: str, *options: str, topic: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), "--bootstrap", bootstrap, "--topic", topic or f"c-e2e-{uuid.uuid4().hex[:8]}",
                           "--rate", str(RATE), "--seconds", str(SECONDS), *options],
                          capture_output=True, text=True, timeout=120)


def check_counts(result: dict[str, Any], most_a_request: int) -> None:
    """What a run's line says is consistent: every record sent acknowledged and consumed once."""
    assert result["failures"] == 0
    assert result["sent"] == int(RATE * (SECONDS + rawclients.WARMUP_S))
    assert result["max_records"] == most_a_request
    assert result["sent"] / most_a_request <= result["requests"] <= result["sent"]
    assert 0 <= result["held"] <= result["sent"] and 0 <= result["late"] <= result["sent"]
    assert result["fetches"] > 0 and result["cpu"] > 0
    counted = len(result["acked"])
    assert counted > 0
    assert len(result["ends"]) == len(result["acked_from_due"]) == len(result["ends_from_due"]) == counted
    assert all(latency > 0 for latency in result["ends"] + result["acked"])
    # a record leaves at or after its time: counted from when it was due, each of its latencies is as long
    assert all(due >= sent for sent, due in zip(result["ends"], result["ends_from_due"], strict=True))
    assert all(due >= sent for sent, due in zip(result["acked"], result["acked_from_due"], strict=True))


@pytest.mark.parametrize(("options", "most_a_request"), [
    ([], rawclients.records_per_batch()),
    (["--max-batch-records", "3", "--max-in-flight", "1"], 3),
    (["--one-record-per-request"], 1)], ids=["batched", "three-at-most", "one-a-request"])
@pytest.mark.parametrize("acks", ["1", "all"])
def test_every_acknowledged_record_reaches_the_consumer(c_client: Path, broker: BrokerProcess, options: list[str],
                                                        most_a_request: int, acks: str) -> None:
    done = run(c_client, broker.bootstrap_servers, "--acks", acks, *options)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""
    (line,) = done.stdout.splitlines()
    check_counts(json.loads(line), most_a_request)


def test_its_records_read_back_with_another_client(c_client: Path, broker: BrokerProcess) -> None:
    """librdkafka decodes what the C client wrote: 100-byte values that start with the send and due
    times (the send at or after the due time, both in this run) and go on with ``x``, no keys."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"c-e2e-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter_ns()  # the client's clock is CLOCK_MONOTONIC, as perf_counter_ns here
    done = run(c_client, broker.bootstrap_servers, "--acks", "all", "--max-batch-records", "7", topic=topic)
    ended = time.perf_counter_ns()
    assert done.returncode == 0, done.stderr[-2000:]
    sent = json.loads(done.stdout)["sent"]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < sent and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.2):
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    assert [message.offset() for message in messages] == list(range(sent))
    for message in messages:
        value = message.value()
        assert message.key() is None and len(value) == 100 and value[16:] == b"x" * 84
        sent_ns, due_ns = struct.unpack_from(">qq", value)
        assert started < due_ns <= sent_ns < ended


def test_against_librdkafka_mock_cluster(c_client: Path, mock_cluster: Any) -> None:
    cluster = mock_cluster(1)
    done = run(c_client, cluster.bootstrap, "--acks", "all")
    assert done.returncode == 0, done.stderr[-2000:]
    check_counts(json.loads(done.stdout), rawclients.records_per_batch())


@pytest.fixture
def closing_server() -> Iterator[str]:
    """A server on 127.0.0.1 that closes each connection it accepts at once (for a bounded while)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        try:
            connection, _ = listener.accept()
            connection.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        thread.join(5)


def test_a_closed_connection_ends_the_run_with_one_line(c_client: Path, closing_server: str) -> None:
    done = run(c_client, closing_server)
    assert done.returncode == 1
    assert done.stdout == ""
    # the server closed the connection, or reset it before the request went out (no SIGPIPE)
    assert done.stderr.count("\n") == 1 and "producer's connection" in done.stderr, done.stderr
