"""``kafkalite serve --security``: a secured development broker from one command, run as a subprocess,
reached with the client configs it prints (confluent-kafka, kafka-python and the bundled client)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from kafkalite.client.admin_types import NewTopic
from kafkalite.client.sync import Admin

pytest.importorskip("cryptography")
kafka = pytest.importorskip("kafka")

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0


class Served:
    def __init__(self, process: subprocess.Popen[str], configs: dict[str, dict[str, Any]]) -> None:
        self.process, self.configs = process, configs


def _serve(*arguments: str) -> Iterator[Served]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("KAFKALITE_")}
    environment["PYTHONPATH"] = str(ROOT)
    process = subprocess.Popen([sys.executable, "-m", "kafkalite", "serve", "--port", "0", *arguments],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=environment)
    try:
        configs: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + DEADLINE_S
        assert process.stdout is not None
        while "bundled client" not in configs:
            assert time.monotonic() < deadline, "the broker printed no client configs in time"
            line = process.stdout.readline()
            assert line, f"the broker exited ({process.poll()}) before printing its client configs"
            name, _, value = line.partition(": ")
            if name in ("confluent-kafka", "kafka-python", "bundled client"):
                configs[name] = ast.literal_eval(value.strip())
        yield Served(process, configs)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    yield from _serve("--security", "SASL_SSL:SCRAM-SHA-256", "--memory")


def test_the_printed_configs_reach_the_secured_broker(served: Served) -> None:
    topic = "served-securely"
    with Admin(served.configs["bundled client"]) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    producer = confluent_kafka.Producer(served.configs["confluent-kafka"])
    delivered: list[Any] = []
    producer.produce(topic, b"over SASL_SSL", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(20)
    assert delivered == [None]
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000,
                                   **served.configs["kafka-python"])
    try:
        assert next(iter(consumer)).value == b"over SASL_SSL"
    finally:
        consumer.close()


def test_a_wrong_password_is_refused(served: Served) -> None:
    config = {**served.configs["confluent-kafka"], "sasl.password": "wrong"}
    with pytest.raises(confluent_kafka.KafkaException):
        AdminClient(config).list_topics(timeout=5)


def test_certificates_in_the_data_dir_are_kept_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for _ in range(2):
        for served in _serve("--security", "SSL", "--data-dir", str(data)):
            assert served.configs["confluent-kafka"]["ssl.ca.location"] == str(data / "dev-certificates" / "ca.pem")
            admin = AdminClient(served.configs["confluent-kafka"])
            assert admin.list_topics(timeout=20).brokers
    assert (data / "dev-certificates" / "ca.pem").exists()


def test_security_and_listeners_do_not_mix() -> None:
    completed = subprocess.run([sys.executable, "-m", "kafkalite", "serve", "--security", "SSL", "--memory",
                                "--listeners", "PLAINTEXT://127.0.0.1:0"], capture_output=True, text=True,
                               timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert completed.returncode == 2 and "--security" in completed.stderr
