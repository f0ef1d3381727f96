"""Out of file descriptors: a new connection is refused, a topic is not created, the broker goes on.

The broker runs under a hard and soft ``RLIMIT_NOFILE`` of 64, so raising the limit cannot help, and
the test takes the descriptors left with idle connections until the broker refuses one. Then:

* every connection already open is still answered, the refusals are logged in one line (not one
  per attempt, no traceback), and once connections close a new one is served again;
* a CreateTopics that needs a file it cannot open answers KAFKA_STORAGE_ERROR on an open
  connection, with one log line, leaves nothing of the topic behind, and the same topic can be
  created once descriptors are free again; a restart lists exactly the topics that were created.

Requests are sent raw, so every answer's error code is seen as the broker wrote it.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from pathlib import Path

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkalite.protocol.messages.create_topics_request import CreatableTopic
from kafkalite.testing.embedded import EmbeddedBroker
from kafkalite.testing.process import BrokerProcess, wait_for

NOFILE = 64
MOST_CONNECTIONS = 200  # more than the limit allows: the filling stops at the first refusal
TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 5.0
REFUSED = "cannot accept connections on"


class Raw:
    """One connection; requests built from the generated classes, answers decoded."""

    def __init__(self, address: tuple[str, int], timeout: float = TIMEOUT_S) -> None:
        self.socket = socket.create_connection(address, timeout=timeout)
        self.correlation_id = 0

    def request(self, request: Message, response_type: type[Message], version: int) -> Message:
        self.correlation_id += 1
        self.socket.sendall(encode_request(request, version, self.correlation_id, "exhaustion"))
        size = struct.unpack(">i", self._exactly(4))[0]
        frame = self._exactly(size)
        return response_type.decode_from(parse_response_header(frame, response_type.API_KEY, version), version)

    def api_versions(self) -> None:
        response = self.request(ApiVersionsRequest(), ApiVersionsResponse, 0)
        assert response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]

    def create_topic(self, name: str, partitions: int) -> tuple[int, str | None]:
        response = self.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10_000), CreateTopicsResponse, 5)
        result = response.topics[0]  # type: ignore[attr-defined]
        return result.error_code, result.error_message

    def topics(self) -> dict[str, int]:
        response = self.request(MetadataRequest(topics=None), MetadataResponse, 12)
        return {topic.name: len(topic.partitions) for topic in response.topics}  # type: ignore[attr-defined]

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.socket.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.socket.close()


def connect(address: tuple[str, int]) -> Raw | None:
    """A connection the broker answered, or None if it refused it."""
    try:
        connection = Raw(address, timeout=CONNECT_TIMEOUT_S)
    except OSError:
        return None
    try:
        connection.api_versions()
    except OSError:
        connection.close()
        return None
    return connection


def take_every_descriptor(address: tuple[str, int]) -> list[Raw]:
    """Idle connections until the broker refuses one (it has no descriptor left for it)."""
    held: list[Raw] = []
    for _ in range(MOST_CONNECTIONS):
        connection = connect(address)
        if connection is None:
            return held
        held.append(connection)
    raise AssertionError(f"the broker accepted {MOST_CONNECTIONS} connections under an open-file limit of {NOFILE}")


def test_a_new_connection_without_a_descriptor_is_refused_in_one_line_and_open_ones_are_served(
        tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", nofile=NOFILE) as broker:
        held = take_every_descriptor(broker.address)
        assert held, "not even one connection was accepted"
        refused = sum(connect(broker.address) is None for _ in range(20))  # a storm of attempts
        assert refused == 20
        for connection in held:  # every open connection is still served
            connection.api_versions()
        log = broker.log_text()
        assert 1 <= log.count(REFUSED) <= 2, log  # the first refusal, then at most one line per 10 s
        assert "Traceback" not in log
        for connection in held[:10]:
            connection.close()
        again = wait_for(lambda: connect(broker.address), TIMEOUT_S, "no new connection was served after others closed")
        again.api_versions()
        again.close()
        for connection in held[10:]:
            connection.close()
        assert "Traceback" not in broker.log_text()


def test_create_topics_without_a_descriptor_answers_storage_error_and_leaves_nothing_behind(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", nofile=NOFILE)
    try:
        broker.start()
        admin = Raw(broker.address)
        assert admin.create_topic("before", 3) == (ErrorCode.NONE, None)
        assert admin.topics() == {"before": 3}  # Metadata's code loaded (the warm-up may not have run yet)
        held = take_every_descriptor(broker.address)
        mark = broker.log_mark()

        error_code, message = admin.create_topic("starved", 3)
        assert error_code == ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode(error_code)
        assert message is not None and "starved" in message
        assert "starved" not in admin.topics()  # the connection is still served, and the topic is not there
        log = broker.log_text(since=mark)
        assert log.count("cannot create topic starved") == 1, log
        assert "Traceback" not in log

        for connection in held:
            connection.close()

        def created() -> bool:
            return admin.create_topic("starved", 3)[0] == ErrorCode.NONE

        wait_for(created, TIMEOUT_S, "the topic could not be created once descriptors were free")
        assert admin.topics() == {"before": 3, "starved": 3}
        admin.close()
        broker.restart()
        after = Raw(broker.address)
        assert {name: count for name, count in after.topics().items() if not name.startswith("__")} == {
            "before": 3, "starved": 3}
        after.close()
        assert "Traceback" not in broker.log_text()
        assert "exists but was not loaded" not in broker.log_text()
    finally:
        broker.close()


def test_the_log_cleaner_starts_later_when_its_code_cannot_be_loaded_at_first(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The cleaner is built by its first slice, after the start; out of descriptors then, its import
    fails. That is one warning line, and the next slice builds it: compaction is not off for good."""
    import kafkalite.broker.server
    from kafkalite.broker.core.cluster import Cluster

    built = Cluster.__dict__["log_cleaner"]
    attempts: list[int] = []

    def flaky(cluster: Cluster) -> object:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return built.__get__(cluster, Cluster)

    monkeypatch.setattr(Cluster, "log_cleaner", property(flaky))
    monkeypatch.setattr(kafkalite.broker.server, "WARM_UP_DELAY_S", 0.01)
    monkeypatch.setattr(kafkalite.broker.server, "CLEANER_OFF_CHECK_S", 0.05)
    caplog.set_level(logging.WARNING, logger="kafkalite")
    with EmbeddedBroker() as broker:
        assert broker.server is not None and broker.server.cluster is not None
        cluster = broker.server.cluster
        wait_for(lambda: "log_cleaner" in cluster.__dict__, TIMEOUT_S, "the cleaner was never built")
    warnings = [r.getMessage() for r in caplog.records if "log cleaner could not start" in r.getMessage()]
    assert len(warnings) == 1 and "Too many open files" in warnings[0], warnings
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
