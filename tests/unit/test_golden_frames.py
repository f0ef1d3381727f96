"""Frames captured from real kafka-python and confluent-kafka (librdkafka) traffic.

``tests/frames/`` holds requests those clients sent and the responses they were given
(see its README). Each must decode with our generated classes and re-encode byte for byte;
thousands of random mutations of them must raise ``ProtocolError`` or decode, never anything else.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkalite.protocol import ProtocolError
from kafkalite.protocol.framing import parse_request, parse_response_header, response_header_version
from kafkalite.protocol.messages import REQUESTS, RESPONSES, ResponseHeader
from kafkalite.protocol.primitives import Writer
from kafkalite.protocol.records import iter_batches

FRAMES = Path(__file__).resolve().parents[1] / "frames"


@dataclass(frozen=True)
class Frame:
    client: str
    direction: str
    api_key: int
    api_version: int
    variant: str
    data: bytes

    @property
    def name(self) -> str:
        return f"{self.client}-{self.direction}-{self.api_key}v{self.api_version}-{self.variant}"


def load_frames() -> list[Frame]:
    frames = []
    for path in sorted(FRAMES.glob("*.jsonl")):
        if path.name == "nonconformant.jsonl":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["api_key"] not in REQUESTS:
                continue
            low, high = REQUESTS[entry["api_key"]].VALID_VERSIONS
            if not low <= entry["api_version"] <= high:
                continue  # newer than the schema snapshot we generate from (e.g. Metadata v13)
            frames.append(Frame(entry["client"], entry["direction"], entry["api_key"], entry["api_version"],
                                entry.get("variant") or "", bytes.fromhex(entry["frame"])))
    return frames


ALL = load_frames()


def decode_frame(frame: Frame) -> bytes:
    """Decode a frame and encode it again; return the re-encoded bytes."""
    writer = Writer()
    if frame.direction == "request":
        request = parse_request(frame.data)
        if request.api_key not in REQUESTS:
            raise ProtocolError(f"unknown API key {request.api_key}")  # the broker closes such connections
        message = REQUESTS[request.api_key].decode_from(request.body, request.api_version)
        header_version = 2 if REQUESTS[request.api_key].is_flexible(request.api_version) else 1
        request.header.encode_into(writer, header_version)
        message.encode_into(writer, request.api_version)
    else:
        body = parse_response_header(frame.data, frame.api_key, frame.api_version)
        message = RESPONSES[frame.api_key].decode_from(body, frame.api_version)
        header = ResponseHeader.decode(frame.data, response_header_version(frame.api_key, frame.api_version))
        header.encode_into(writer, response_header_version(frame.api_key, frame.api_version))
        message.encode_into(writer, frame.api_version)
    return writer.getvalue()


def test_frames_cover_both_clients_and_the_main_apis() -> None:
    clients = {frame.client for frame in ALL}
    assert clients == {"kafka-python", "confluent-kafka"}
    keys = {frame.api_key for frame in ALL}
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 22} <= keys


@pytest.mark.parametrize("frame", ALL, ids=[frame.name for frame in ALL])
def test_real_frame_round_trips_byte_identically(frame: Frame) -> None:
    assert decode_frame(frame) == frame.data


def test_produce_and_fetch_records_from_real_clients_parse() -> None:
    """The record batches inside real Produce requests and Fetch responses parse, with valid CRCs."""
    from kafkalite.protocol.messages import FetchResponse, ProduceRequest

    seen = 0
    for frame in ALL:
        if frame.api_key == 0 and frame.direction == "request" and frame.api_version >= 3:
            request = parse_request(frame.data)
            message = ProduceRequest.decode_from(request.body, frame.api_version)
            blobs = [p.records for t in message.topic_data for p in t.partition_data]
        elif frame.api_key == 1 and frame.direction == "response" and "control" not in frame.variant:
            body = parse_response_header(frame.data, 1, frame.api_version)
            response = FetchResponse.decode_from(body, frame.api_version)
            blobs = [p.records for t in response.responses for p in t.partitions]
        else:
            continue
        for blob in blobs:
            for batch in iter_batches(blob or b""):
                batch.validate_crc()
                assert sum(1 for _ in batch.records()) > 0
                seen += 1
    assert seen >= 10


def test_random_mutations_of_real_frames_only_raise_protocol_error() -> None:
    """A few thousand mutated frames: flipped, inserted, deleted and truncated bytes."""
    rng = random.Random(20261121)
    for _ in range(4000):
        frame = rng.choice(ALL)
        data = bytearray(frame.data)
        for _ in range(rng.randint(1, 4)):
            action = rng.random()
            position = rng.randrange(len(data)) if data else 0
            if action < 0.5 and data:
                data[position] = rng.randrange(256)
            elif action < 0.65:
                data[position:position] = rng.randbytes(rng.randint(1, 4))
            elif action < 0.8 and data:
                del data[position:position + rng.randint(1, 4)]
            else:
                data = data[: rng.randrange(len(data) + 1)]
        mutated = Frame(frame.client, frame.direction, frame.api_key, frame.api_version, frame.variant, bytes(data))
        try:
            decode_frame(mutated)
        except ProtocolError:
            pass
        except UnicodeEncodeError:
            pass  # a decoded lone surrogate cannot be re-encoded; decoding itself succeeded
