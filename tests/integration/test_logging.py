"""The broker's log: JSON lines on request, and one line without a traceback for a client's mistake."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path

from kafkalite.protocol.framing import encode_request
from kafkalite.protocol.messages import ApiVersionsRequest
from kafkalite.testing import BrokerProcess, wait_for

TIMEOUT_S = 10.0


def test_json_log_lines_and_a_client_mistake_in_one_line(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", memory=True, extra_args=["--log-format", "json"]) as broker:
        with socket.create_connection(broker.address, timeout=TIMEOUT_S) as connection:
            request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
            connection.sendall(encode_request(request, 3, 1, "sloppy-app"))
            size = struct.unpack(">i", connection.recv(4))[0]
            while size > 0:
                size -= len(connection.recv(size))
            connection.sendall(struct.pack(">i", 12) + b"not a header")  # then garbage
            assert connection.recv(1) == b""  # the broker closed this connection
        wait_for(lambda: "malformed" in broker.log_text(), TIMEOUT_S, "the broker did not log the bad frame")
    lines = [json.loads(line) for line in broker.log_text().splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    complaints = [line for line in lines if "malformed" in line["message"]]
    assert len(complaints) == 1
    assert complaints[0]["level"] == "WARNING" and "traceback" not in complaints[0]
    assert "127.0.0.1:" in complaints[0]["message"] and "sloppy-app" in complaints[0]["message"]
    assert any(line["message"].startswith("listening on") for line in lines)
