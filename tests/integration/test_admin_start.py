"""A start with ``admin.listener`` set: Kafka first, then the admin endpoint, failing as it always did.

The broker binds the endpoint's socket and puts its request observer in place before it listens, and
starts the HTTP server (whose libraries take a few hundred milliseconds to import) once it does. These
tests check what users rely on around that: Kafka requests are answered and counted, the endpoint
answers once it says so, a taken port or a missing extra fails the start as before with no Kafka
listener left open, and a fault set over HTTP reaches the request path.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import struct
import sys
import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaProducer

from kafkalite.broker.config import BrokerConfig, ConfigError
from kafkalite.broker.server import BrokerServer
from kafkalite.testing import EmbeddedBroker, wait_for
from kafkalite.testing.process import BrokerProcess

TIMEOUT_S = 30.0
# ApiVersions v0, correlation id 7, client id "start-test"
_BODY = struct.pack(">hhih", 18, 0, 7, 10) + b"start-test"
API_VERSIONS = struct.pack(">i", len(_BODY)) + _BODY


def api_versions_answered(port: int) -> bool:
    """Whether an ApiVersions v0 request on a new connection gets its answer (correlation id 7, no error)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as connection:
        connection.sendall(API_VERSIONS)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
    correlation_id, error_code = struct.unpack_from(">ih", data, 4)
    return correlation_id == 7 and error_code == 0


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
        assert answer.status == 200
        return json.loads(answer.read())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_kafka_serve_answers_kafka_then_http(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", admin=True)
    try:
        broker.start()
        assert broker.serves_admin
        assert api_versions_answered(broker.port)
        url = broker.admin_url  # waits for "admin endpoint on", logged once it answers
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert get_json(f"{url}/v1/broker")
        assert api_versions_answered(broker.port)
        lines = broker.log_text().splitlines()
        listening = [index for index, line in enumerate(lines) if "listening on" in line]
        admin = [index for index, line in enumerate(lines) if "admin endpoint on http://" in line]
        assert len(listening) == 1 and len(admin) == 1 and listening[0] < admin[0], lines
        assert broker.stop() == 0
    finally:
        broker.close()


def test_in_process_the_admin_port_is_known_at_start_and_serving_waits_for_answers() -> None:
    async def scenario() -> None:
        server = BrokerServer(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.storage": "memory",
                                            "admin.listener": "127.0.0.1:0"}))
        await server.start()
        try:
            assert server.admin is not None and server.admin.port > 0
            observer = server.observer
            assert observer is not None  # in place before the first Kafka request
            assert await asyncio.to_thread(api_versions_answered, server.bound[0].port)
            assert [row["api"] for row in observer_requests(server)] == ["ApiVersions"]
            await asyncio.wait_for(server.admin.serving(), TIMEOUT_S)
            broker = await asyncio.to_thread(get_json, f"http://127.0.0.1:{server.admin.port}/v1/broker")
            assert isinstance(broker, dict)
        finally:
            await server.stop(grace_s=1)

    asyncio.run(scenario())


def observer_requests(server: BrokerServer) -> list[dict[str, object]]:
    from kafkalite.broker.admin.views import requests_view

    assert server.observer is not None
    rows: list[dict[str, object]] = requests_view(server.observer, limit=10)
    return rows


def test_a_taken_admin_port_fails_the_start_and_leaves_no_kafka_listener() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        admin_port, kafka_port = taken.getsockname()[1], free_port()
        with pytest.raises(OSError, match=rf"admin\.listener\) cannot listen on 127\.0\.0\.1:{admin_port}"):
            EmbeddedBroker({"admin.listener": f"127.0.0.1:{admin_port}"}, port=kafka_port).start()
        assert refused(kafka_port)


def test_kafka_serve_with_a_taken_admin_port_says_so_and_exits(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        admin_port = taken.getsockname()[1]
        broker = BrokerProcess(tmp_path / "data", {"admin.listener": f"127.0.0.1:{admin_port}"})
        try:
            broker.spawn()
            assert broker.process is not None
            assert broker.process.wait(TIMEOUT_S) == 1
            log = broker.log_text()
            assert "cannot start: " in log and \
                f"the admin endpoint (admin.listener) cannot listen on 127.0.0.1:{admin_port}" in log, log
            assert "listening on" not in log
        finally:
            broker.close()


@pytest.mark.parametrize("package", ["aiohttp", "prometheus_client"])
def test_without_the_admin_extra_the_start_is_a_config_error(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if it were not installed: find_spec finds nothing
    kafka_port = free_port()
    with pytest.raises(ConfigError, match=rf"admin extra \(pip install 'kafkalite\[admin\]'\): .*{package}"):
        EmbeddedBroker({"admin.listener": "127.0.0.1:0"}, port=kafka_port).start()
    assert refused(kafka_port)


def test_a_fault_set_over_http_right_after_the_start_applies(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"num.partitions": 1}, admin=True)
    try:
        broker.start()
        broker.create_topic("payments", 1)
        with broker.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1) as fault:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="start-app", retries=5,
                                     retry_backoff_ms=50)
            try:
                producer.send("payments", b"paid").get(TIMEOUT_S)
            finally:
                producer.close()
            assert fault.info() is None  # used up
        answers = [row["error"] for row in reversed(broker.faults.requests(api="Produce", client_id="start-app"))]
        assert answers == ["NOT_LEADER_OR_FOLLOWER", "NONE"]
        records = wait_for(lambda: broker.consume("payments", 1), TIMEOUT_S, "the record was not read back")
        assert [record.value for record in records] == [b"paid"]
    finally:
        broker.close()


def test_the_admin_endpoint_starts_later_when_its_libraries_cannot_be_loaded_at_first(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Out of descriptors just after the start (a flood of connections), the import fails with EMFILE:
    the broker keeps serving Kafka and tries again later, as its log cleaner does."""
    from kafkalite.broker.admin import endpoint

    attempts: list[int] = []
    real_import = endpoint._import_http_libraries

    def import_once_out_of_descriptors() -> None:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        real_import()

    monkeypatch.setattr(endpoint, "_import_http_libraries", import_once_out_of_descriptors)
    monkeypatch.setattr(endpoint, "RETRY_S", 0.05)
    caplog.set_level(logging.INFO, logger="kafkalite.server")

    async def scenario() -> None:
        server = BrokerServer(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.storage": "memory",
                                            "admin.listener": "127.0.0.1:0"}))
        await server.start()
        try:
            assert server.admin is not None
            await asyncio.wait_for(server.admin.serving(), TIMEOUT_S)
            assert await asyncio.to_thread(api_versions_answered, server.bound[0].port)
            assert await asyncio.to_thread(get_json, f"http://127.0.0.1:{server.admin.port}/v1/broker")
        finally:
            await server.stop(grace_s=1)

    asyncio.run(scenario())
    assert len(attempts) == 2
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("the admin endpoint could not start yet, trying again in 0.05 s: ")
               for message in messages), messages
    assert sum(message.startswith("admin endpoint on http://127.0.0.1:") for message in messages) == 1, messages
