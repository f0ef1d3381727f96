"""Starting, stopping and version negotiation, against a real broker process over real sockets."""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]

IO_TIMEOUT_S = 10.0


# a raw Kafka client: enough for ApiVersions ----------------------------------------------------
def read_frame(connection: socket.socket) -> bytes:
    """One response frame (without its size); b"" when the broker closed the connection."""
    header = _read_exactly(connection, 4)
    if not header:
        return b""
    (size,) = struct.unpack(">i", header)
    return _read_exactly(connection, size)


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return b""
        data += chunk
    return bytes(data)


def api_versions(connection: socket.socket, version: int = 3, correlation_id: int = 1) -> ApiVersionsResponse:
    request = ApiVersionsRequest(client_software_name="kafkalite-tests", client_software_version="1.0")
    connection.sendall(encode_request(request, version, correlation_id, "startup-test"))
    frame = read_frame(connection)
    assert frame, "the broker closed the connection instead of answering ApiVersions"
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    return ApiVersionsResponse.decode_from(parse_response_header(frame, 18, version), version)


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(broker.address, timeout=IO_TIMEOUT_S)


def served_api_keys(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    with connect(broker) as connection:
        response = api_versions(connection)
    return {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# start and stop ---------------------------------------------------------------------------------
def test_starts_and_answers_api_versions(fresh_broker: Callable[..., BrokerProcess], wait_until: WaitUntil,
                                         capsys: pytest.CaptureFixture[str],
                                         record_property: Callable[[str, object], None]) -> None:
    broker = fresh_broker(wait=False)
    port = free_port()
    spawned = time.perf_counter()
    broker.spawn(port)

    def round_trip() -> ApiVersionsResponse | None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as connection:
                return api_versions(connection, version=0)
        except ConnectionRefusedError:
            assert broker.running, broker.log_text()
            return None

    response = wait_until(round_trip, 20.0, "the broker never answered ApiVersions", interval=0.001)
    elapsed_ms = (time.perf_counter() - spawned) * 1000
    assert isinstance(response, ApiVersionsResponse) and response.error_code == ErrorCode.NONE
    assert broker.wait_until_listening() == port
    record_property("startup_ms", round(elapsed_ms))
    with capsys.disabled():  # reported, never asserted: timings are not test outcomes
        print(f"\n[startup] spawn -> first ApiVersions answer: {elapsed_ms:.0f} ms")


# What a bare start loads: the code of APIs no client asked for stays on disk.
NOT_IMPORTED_BY_A_BARE_START = (
    "kafkalite.broker.core.group", "kafkalite.broker.core.share.manager",
    "kafkalite.broker.core.txn",  # the whole transaction room, producer ids included
    "kafkalite.broker.security",
    "kafkalite.broker.admin", "kafkalite.client", "kafkalite.cli.app", "click",
    # the config keys of what a single node does not do, and DescribeConfigs' rows (kafkalite.broker.config.table)
    "kafkalite.broker.config.kafka_keys", "kafkalite.broker.config.entries", "difflib",
    # rooms the cluster builds on first use: the first Fetch, the cleaner's first slice after the start
    "kafkalite.broker.core.fetch_sessions", "kafkalite.broker.core.log_cleaner",
    # the compression codecs' libraries, imported by the first batch of each codec
    "cramjam", "lz4", "zstandard", "zlib",
    "encodings.idna",  # (listen.py gives getaddrinfo an ASCII host as bytes)
    "argparse", "gettext",  # plain arguments are read without argparse (cli/serve.py)
    "kafkalite.broker.core.log.memory",  # the logs of log.storage=memory, on its first log
    "kafkalite.protocol.legacy_records",  # magic 0/1 batches, on the first one
    "kafkalite.protocol.decoded_records",  # Record and EndTransactionMarker, on the first record or marker decoded
    "shutil", "bz2", "lzma",  # (shutil imports both) removing a partition's files is not a start's work
    "importlib.util",  # (protocol/_crc32c.py loads the CRC-32C extension with importlib.machinery)
)


def test_a_bare_start_imports_only_what_the_first_answer_needs(tmp_path: Path, wait_until: WaitUntil) -> None:
    """With an empty data directory and a PLAINTEXT listener, a start and an ApiVersions answer import
    the ApiVersions handler and its messages, and no other handler, message or room of rarer APIs."""
    from tests.integration.conftest import REPO_ROOT

    port = free_port()
    # the broker's own entry, and at its exit (SIGTERM stops it cleanly) the names of every module loaded;
    # the import of the rest ahead of use, half a second after the start, is put off for the test
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print(*sorted(sys.modules), sep='\\n', file=sys.stderr))\n"
              "import kafkalite.broker.server\n"
              "kafkalite.broker.server.WARM_UP_DELAY_S = 3600\n"
              "from kafkalite.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    command = [sys.executable, "-c", script, "serve", "--port", str(port),
               "--listeners", f"PLAINTEXT://127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def round_trip() -> ApiVersionsResponse | None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as connection:
                    return api_versions(connection, version=0)
            except ConnectionRefusedError:
                assert process.poll() is None, "the broker exited"
                return None

        response = wait_until(round_trip, 20.0, "the broker never answered ApiVersions", interval=0.005)
        assert isinstance(response, ApiVersionsResponse) and len(response.api_keys) > 50
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert process.returncode == 0, errors.decode()
    modules = set(errors.decode().split())
    assert "kafkalite.broker.server" in modules
    assert sorted(name for name in modules if name.startswith("kafkalite.broker.handlers.")) == [
        "kafkalite.broker.handlers.api_versions",
        "kafkalite.broker.handlers.delayed",  # net.py writes delayed answers
        "kafkalite.broker.handlers.registry"]
    assert sorted(name for name in modules if name.startswith("kafkalite.protocol.messages.")) == [
        f"kafkalite.protocol.messages.{name}"
        for name in ("api_versions_request", "api_versions_response", "request_header")]
    assert sorted(name for name in modules if name.startswith(NOT_IMPORTED_BY_A_BARE_START)) == []


def test_sigterm_exits_zero_and_leaves_the_clean_shutdown_marker(fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()
    with connect(broker) as connection:
        api_versions(connection)
    assert broker.stop() == 0
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    log = broker.log_text()
    assert "Traceback" not in log, log
    broker.restart()  # the same data dir opens again
    assert served_api_keys(broker)


def test_sigkill_then_restart_recovers(fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker()
    broker.kill()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    broker.restart()
    assert served_api_keys(broker)


def test_a_taken_port_is_a_clear_start_failure(fresh_broker: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    first = fresh_broker()
    second = fresh_broker(wait=False, data_dir=tmp_path / "second")
    second.spawn(first.port)
    with pytest.raises(RuntimeError, match="exited with status 1"):
        second.wait_until_listening()
    assert "cannot start" in second.log_text()


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess) -> None:
    versions = [index % 5 for index in range(300)]  # more than the per-connection in-flight limit
    requests = b"".join(
        encode_request(ApiVersionsRequest(client_software_name="pipeline", client_software_version="1"),
                       version, correlation_id, "pipeline")
        for correlation_id, version in enumerate(versions))
    with connect(broker) as connection:
        connection.sendall(requests)
        answered = [struct.unpack_from(">i", read_frame(connection))[0] for _ in versions]
    assert answered == list(range(len(versions)))


# bad input ---------------------------------------------------------------------------------------
def test_garbage_closes_that_connection_only(broker: BrokerProcess, wait_until: WaitUntil) -> None:
    mark = broker.log_mark()
    with connect(broker) as healthy, connect(broker) as garbage:
        assert api_versions(healthy, correlation_id=1).error_code == ErrorCode.NONE
        garbage.sendall(b"\x00\x00\x00\x06\xde\xad\xbe\xef\x00\x00")  # too short for a request header
        assert read_frame(garbage) == b""  # closed by the broker
        assert api_versions(healthy, correlation_id=2).error_code == ErrorCode.NONE
    wait_until(lambda: "closing connection from 127.0.0.1:" in broker.log_text(since=mark), IO_TIMEOUT_S,
             "the broker did not log the closed connection")
    assert broker.running


def test_oversized_request_is_refused(broker: BrokerProcess) -> None:
    with connect(broker) as connection:
        connection.sendall(struct.pack(">i", 200 * 1024 * 1024))  # above socket.request.max.bytes
        assert read_frame(connection) == b""
    assert served_api_keys(broker)


def test_api_versions_v5_gets_a_v0_error_reply_listing_the_keys(broker: BrokerProcess) -> None:
    client_id = b"future-client"
    body = (struct.pack(">hhih", 18, 5, 42, len(client_id)) + client_id + b"\x00"  # header v2
            + b"\x05name" + b"\x041.0" + b"\x00")
    with connect(broker) as connection:
        connection.sendall(struct.pack(">i", len(body)) + body)
        frame = read_frame(connection)
        assert struct.unpack_from(">i", frame)[0] == 42
        response = ApiVersionsResponse.decode(frame[4:], 0)  # header v0, body v0
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        listed = {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}
        assert listed[18] == (0, 4)
        assert api_versions(connection, version=4, correlation_id=43).error_code == ErrorCode.NONE  # retry lower
    assert listed == served_api_keys(broker)


def test_api_versions_v3_rejects_an_invalid_software_name(broker: BrokerProcess) -> None:
    request = ApiVersionsRequest(client_software_name="bad name!", client_software_version="1.0")
    with connect(broker) as connection:
        connection.sendall(encode_request(request, 3, 7, "test"))
        frame = read_frame(connection)
    response = ApiVersionsResponse.decode_from(parse_response_header(frame, 18, 3), 3)
    assert response.error_code == ErrorCode.INVALID_REQUEST


# real clients ------------------------------------------------------------------------------------
def require_metadata(broker: BrokerProcess) -> None:
    if 3 not in served_api_keys(broker):
        pytest.xfail("Metadata (API key 3) is not registered yet; clients cannot bootstrap")


def test_kafka_python_negotiates_versions(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient
    from kafka.net.compat import KafkaNetClient

    require_metadata(broker)
    mark = broker.log_mark()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="startup-test",
                             request_timeout_ms=10_000, bootstrap_timeout_ms=10_000)
    try:
        negotiated = {int(key): versions for key, versions in admin.api_versions().items()}
        assert negotiated == served_api_keys(broker)
        assert admin._manager.broker_version is not None  # the broker version was identified
        cluster = admin.describe_cluster()
        assert [(node["host"], node["port"]) for node in cluster["brokers"]] == [broker.address]
    finally:
        admin.close()
    client = KafkaNetClient(bootstrap_servers=broker.bootstrap, client_id="startup-test")
    try:  # the KafkaClient-compatible check_version, for the bootstrap and for node 1
        assert client.check_version(timeout_ms=10_000) == client.check_version(node_id=1, timeout_ms=10_000)
    finally:
        client.close()
    assert "closing connection" not in broker.log_text(since=mark)


def test_confluent_kafka_negotiates_versions(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    require_metadata(broker)
    mark = broker.log_mark()
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    librdkafka_log = logging.getLogger("kafkalite.tests.librdkafka")
    librdkafka_log.propagate = False
    librdkafka_log.setLevel(logging.DEBUG)
    librdkafka_log.addHandler(Collect())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "debug": "protocol,broker", "logger": librdkafka_log})
    metadata = admin.list_topics(timeout=10)
    admin.poll(0)  # librdkafka hands its log lines over in poll()
    assert [(node.host, node.port) for node in metadata.brokers.values()] == [broker.address]
    assert metadata.cluster_id
    text = "\n".join(lines)
    assert "Received ApiVersionResponse (v3" in text, text[-3000:]  # its first choice was accepted
    assert "UNSUPPORTED_VERSION" not in text
    assert "closing connection" not in broker.log_text(since=mark)
