"""A disk that refuses writes: Produce answers KAFKA_STORAGE_ERROR, nothing acknowledged is lost,
reads go on, and appends work again once there is room.

The broker runs under a small file-size limit (``RLIMIT_FSIZE``, which any user may set for a child
process): a segment file that reaches it can grow no more, and a write past it fails with EFBIG,
as a full disk fails with ENOSPC. The topic's segments are larger than the limit, so the active
segment is what fills up. Raising the limit of the running broker (``prlimit``) gives the room back.
Requests are sent raw, so every answer's error code is seen as the broker wrote it.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkalite.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches
from kafkalite.testing.process import BrokerProcess

TOPIC = "filling-up"
LIMIT = 1024 * 1024  # RLIMIT_FSIZE of the broker: the largest file it may write
RECORD = b"x" * 1000
TIMEOUT_S = 30.0


class Raw:
    """One connection; requests built from the generated classes, answers decoded."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.socket = socket.create_connection(address, timeout=TIMEOUT_S)
        self.correlation_id = 0

    def request(self, request: Message, response_type: type[Message], version: int) -> Message:
        self.correlation_id += 1
        self.socket.sendall(encode_request(request, version, self.correlation_id, "disk-trouble"))
        size = struct.unpack(">i", self._exactly(4))[0]
        frame = self._exactly(size)
        return response_type.decode_from(parse_response_header(frame, response_type.API_KEY, version), version)

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.socket.recv(count - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def produce(self, sequence: int) -> tuple[int, int]:
        """One batch of 10 records whose values carry ``sequence``; (error code, base offset)."""
        builder = RecordBatchBuilder()
        for index in range(10):
            builder.append(timestamp=int(time.time() * 1000), key=b"%d-%d" % (sequence, index),
                           value=b"%d-%d " % (sequence, index) + RECORD)
        request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[TopicProduceData(
            name=TOPIC, partition_data=[PartitionProduceData(index=0, records=builder.build())])])
        response = self.request(request, ProduceResponse, 9)
        answer = response.responses[0].partition_responses[0]  # type: ignore[attr-defined]
        return answer.error_code, answer.base_offset

    def read_keys(self) -> list[tuple[int, bytes]]:
        """(offset, key) of every record from offset 0 to the end."""
        found: list[tuple[int, bytes]] = []
        offset = 0
        while True:
            request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=8 * 1024 * 1024, topics=[FetchTopic(
                topic=TOPIC, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                        partition_max_bytes=4 * 1024 * 1024)])])
            response = self.request(request, FetchResponse, 12)
            partition = response.responses[0].partitions[0]  # type: ignore[attr-defined]
            assert partition.error_code == ErrorCode.NONE, ErrorCode(partition.error_code)
            batches = [batch for batch in iter_batches(partition.records or b"") if isinstance(batch, RecordBatch)]
            if not batches:
                return found
            for batch in batches:
                batch.validate_crc()  # no torn batch is ever served
                found += [(record.offset, record.key or b"") for record in batch.records()]
            offset = batches[-1].last_offset + 1


def test_a_full_disk_refuses_appends_keeps_reads_and_recovers(tmp_path: Path,
                                                              record_property: Callable[[str, object], None]
                                                              ) -> None:
    broker = BrokerProcess(tmp_path / "data", {"log.flush.on.ack": "true"}, fsize=LIMIT)
    broker.start()
    try:
        client = Raw(broker.address)
        created = client.request(CreateTopicsRequest(topics=[CreatableTopic(
            name=TOPIC, num_partitions=1, replication_factor=1,
            configs=[CreatableTopicConfig("segment.bytes", str(16 * LIMIT))])], timeout_ms=10_000),
            CreateTopicsResponse, 5)
        assert created.topics[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]

        acknowledged: list[tuple[int, int]] = []  # (sequence, base offset)
        refused = 0
        sequence = 0
        while refused < 3:  # until the segment is full, and a few requests more
            error, base_offset = client.produce(sequence)
            if error == ErrorCode.NONE:
                acknowledged.append((sequence, base_offset))
            else:
                assert error == ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode(error)
                refused += 1
            sequence += 1
            assert sequence < 10 * LIMIT // len(RECORD), "the file-size limit never refused a write"
        record_property("acknowledged_before_full", len(acknowledged))

        # Reads go on while the disk is full: every acknowledged record, once, in order, no torn batch.
        expected = [(base + index, b"%d-%d" % (number, index)) for number, base in acknowledged for index in range(10)]
        assert client.read_keys() == expected
        segment = broker.data_dir / f"{TOPIC}-0" / f"{0:020d}.log"
        assert segment.stat().st_size <= LIMIT

        broker.set_file_size_limit(None)  # room again
        error, base_offset = client.produce(sequence)
        assert error == ErrorCode.NONE and base_offset == acknowledged[-1][1] + 10  # no gap, no hole
        acknowledged.append((sequence, base_offset))
        log_text = broker.log_text()
        assert "cannot append (answering KAFKA_STORAGE_ERROR until it can)" in log_text
        assert log_text.count("cannot append") == 1 and "appends work again" in log_text
        assert "Traceback" not in log_text

        # And after a crash, everything acknowledged is there, exactly once.
        broker.fsize = None
        broker.restart(kill=True)
        expected = [(base + index, b"%d-%d" % (number, index)) for number, base in acknowledged for index in range(10)]
        assert Raw(broker.address).read_keys() == expected
    finally:
        broker.close()
