"""Several listeners: a client is told the advertised address of the listener it connected to.

This is how one broker serves clients on the host (``localhost:9092``) and other containers on a
compose network (``kafkalite:29092``) at once, as Kafka does.
"""

from __future__ import annotations

import socket
import struct

from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafkalite.testing import EmbeddedBroker

TIMEOUT_S = 10.0


def _ask(port: int, request: object, api_key: int, version: int, response_type: type) -> object:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as connection:
        connection.sendall(encode_request(request, version, 1, "listeners-test"))
        size = struct.unpack(">i", connection.recv(4))[0]
        frame = b""
        while len(frame) < size:
            frame += connection.recv(size - len(frame))
    return response_type.decode_from(parse_response_header(frame, api_key, version), version)


def test_each_listener_advertises_its_own_address() -> None:
    configs = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://localhost:0,INTERNAL://kafkalite:29092",
    }
    with EmbeddedBroker(configs) as broker:
        assert broker.server is not None
        ports = {listener.name: listener.port for listener in broker.server.bound}
        for name, expected in (("PLAINTEXT", ("localhost", ports["PLAINTEXT"])), ("INTERNAL", ("kafkalite", 29092))):
            metadata = _ask(ports[name], MetadataRequest(topics=[]), 3, 12, MetadataResponse)
            assert [(b.host, b.port) for b in metadata.brokers] == [expected], name
            coordinator = _ask(ports[name], FindCoordinatorRequest(key="g", key_type=0), 10, 3,
                               FindCoordinatorResponse)
            assert (coordinator.host, coordinator.port) == expected, name
            cluster = _ask(ports[name], DescribeClusterRequest(), 60, 0, DescribeClusterResponse)
            assert [(b.host, b.port) for b in cluster.brokers] == [expected], name
