"""Fetch answers that carry stored batches as file regions, sent with ``os.sendfile``.

* A disk log read that asks for file regions gives the same bytes as one that does not, as regions
  for runs of at least ``REGION_MIN_BYTES`` and as bytes below; the memory log always gives bytes.
* A region keeps its own descriptor: the segment deleted by retention (or DeleteRecords) after the
  read still reads the bytes that were read, and the descriptor closes with the last region. With
  no descriptor left for the duplicate, the read gives bytes instead. A compaction that swaps the
  segment out leaves the region's bytes as they were.
* ``send_now`` sends buffers and regions in order to a socket that takes only part of them, and what
  it hands back, sent later, completes the stream byte for byte.
* ``encode_fetch_response`` puts a region in the answer as an item of its own, counted in the sizes:
  with the region read in its place, the frame is the one the plain bytes give.
* ``KafkaConnection`` on a real socket (a transport that buffers as uvloop's does): Fetch answers
  with regions go out whole and in order with the answers around them, answered in one read
  (corked) or in a read of their own while the socket is full.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.log import region as region_module
from kafkalite.broker.core.log.disk import REGION_MIN_BYTES, DiskLog
from kafkalite.broker.core.log.memory import MemoryLog
from kafkalite.broker.core.log.partition_log import LogConfig
from kafkalite.broker.core.log.region import FileRegion, OwnedDescriptor, RegionTruncated, read_pieces, send_now
from kafkalite.broker.handlers.registry import ApiHandler, RequestContext
from kafkalite.broker.net import KafkaConnection
from kafkalite.protocol.fetch_codec import encode_fetch_response
from kafkalite.protocol.framing import encode_request, parse_response_header
from kafkalite.protocol.messages import FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse
from kafkalite.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkalite.protocol.records import RecordBatchBuilder, iter_batches

T0 = 1_700_000_000_000


def make_batch(records: int, value_size: int, seed: int) -> bytearray:
    builder = RecordBatchBuilder()
    for index in range(records):
        value = bytes((seed + index + position) % 251 for position in range(value_size))
        builder.append(timestamp=T0 + index, key=b"k%d" % index, value=value)
    return builder.build()


def descriptors_of_deleted_files(directory: Path) -> int:
    """This process's descriptors on files of ``directory`` that no longer have a name (Linux)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)) and target.endswith(" (deleted)"):
            count += 1
    return count


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of TCP sockets on the loopback interface."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
    return sender, receiver


def filled_log(path: Path, segment_bytes: int = 256 * 1024, batches: int = 40) -> DiskLog:
    partition_log = DiskLog.create(path, LogConfig(segment_bytes=segment_bytes), T0)
    for number in range(batches):
        partition_log.append(make_batch(10, 2000, number), T0)
    return partition_log


def test_a_read_with_file_regions_gives_the_same_bytes(tmp_path: Path) -> None:
    partition_log = filled_log(tmp_path / "events-0")
    try:
        for offset in (0, 5, 37, 150, 390):
            for max_bytes in (100, 30_000, REGION_MIN_BYTES, 200_000, 1 << 22):
                plain = partition_log.read(offset, max_bytes, min_one_batch=True)
                pieces = partition_log.read(offset, max_bytes, min_one_batch=True, file_regions=True)
                assert (pieces.size, pieces.first_offset, pieces.next_offset) == (
                    plain.size, plain.first_offset, plain.next_offset)
                assert pieces.to_bytes() == plain.to_bytes()
                for piece in pieces.chunks:
                    assert isinstance(piece, FileRegion) == (len(piece) >= REGION_MIN_BYTES)
        assert any(isinstance(piece, FileRegion)
                   for piece in partition_log.read(0, 1 << 22, min_one_batch=True, file_regions=True).chunks)
    finally:
        partition_log.close()


def test_without_a_descriptor_to_spare_a_read_gives_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    partition_log = filled_log(tmp_path / "events-0")
    try:
        plain = partition_log.read(0, 1 << 20, min_one_batch=True).to_bytes()

        def out_of_descriptors(descriptor: int) -> int:
            raise OSError(errno.EMFILE, "Too many open files")

        monkeypatch.setattr(region_module.os, "dup", out_of_descriptors)
        result = partition_log.read(0, 1 << 20, min_one_batch=True, file_regions=True)
        assert not any(isinstance(piece, FileRegion) for piece in result.chunks)
        assert result.to_bytes() == plain
    finally:
        partition_log.close()


def test_the_memory_log_gives_bytes() -> None:
    partition_log = MemoryLog("events-0", LogConfig(), T0)
    for number in range(10):
        partition_log.append(make_batch(10, 2000, number), T0)
    result = partition_log.read(0, 1 << 22, min_one_batch=True, file_regions=True)
    assert result.size > REGION_MIN_BYTES
    assert all(isinstance(chunk, (bytes, bytearray, memoryview)) for chunk in result.chunks)


@pytest.mark.parametrize("how", ["retention", "delete_records"])
def test_a_region_outlives_its_segment(tmp_path: Path, how: str) -> None:
    partition_log = filled_log(tmp_path / "events-0")
    try:
        result = partition_log.read(0, 1 << 22, min_one_batch=True, file_regions=True)
        expected = b"".join(os.pread(piece.file.descriptor, piece.length, piece.position)
                            if isinstance(piece, FileRegion) else piece for piece in result.chunks)
        doomed = [path for path in (tmp_path / "events-0").glob("*.log")]
        if how == "retention":
            partition_log.update_config(LogConfig(segment_bytes=256 * 1024, retention_ms=1))
            assert partition_log.enforce_retention(T0 + 10_000) > 0
        else:
            partition_log.delete_records_before(partition_log.log_end_offset)
        assert partition_log.log_start_offset > 0
        assert not all(path.exists() for path in doomed)
        assert descriptors_of_deleted_files(tmp_path) > 0  # the regions hold the deleted segments' files
        assert b"".join(read_pieces(result.chunks)) == expected
        batches = list(iter_batches(expected))
        assert batches[0].base_offset == 0
        for batch in batches:
            batch.validate_crc()
        del result, batches
        assert descriptors_of_deleted_files(tmp_path) == 0  # closed with the last region
    finally:
        partition_log.close()


def test_a_region_of_a_file_that_ends_early_is_never_sent_short(tmp_path: Path) -> None:
    path = tmp_path / "short"
    path.write_bytes(b"x" * 1000)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        region = FileRegion(OwnedDescriptor(descriptor), 500, 1000)
    finally:
        os.close(descriptor)
    with pytest.raises(RegionTruncated):
        region.read()
    sender, receiver = socket.socketpair()
    try:
        sender.setblocking(False)
        with pytest.raises(RegionTruncated):  # what sendfile did not send is read: the file has no more
            read_pieces(send_now(sender.fileno(), [region]))
        with pytest.raises(RegionTruncated):
            region.after(500).send_to(sender.fileno())
    finally:
        sender.close()
        receiver.close()


def test_send_now_stops_where_the_socket_is_full_and_the_rest_completes_the_stream(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    path = tmp_path / "data"
    path.write_bytes(payload)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        owned = OwnedDescriptor(descriptor)
    finally:
        os.close(descriptor)
    pieces: list[object] = [b"head", FileRegion(owned, 100, 400_000), bytearray(b"middle"),
                            FileRegion(owned, 600_000, 300_000), memoryview(b"tail")]
    expected = b"head" + payload[100:400_100] + b"middle" + payload[600_000:900_000] + b"tail"
    sender, receiver = socket.socketpair()
    try:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        sender.setblocking(False)
        received = bytearray()
        rest = send_now(sender.fileno(), pieces)
        rounds = 0
        assert rest, "a socket with 16 KiB of buffers took 700 KB at once"
        while rest and rounds < 100_000:  # take what is there, send more: a slow reader
            rounds += 1
            received += receiver.recv(65536)
            rest = send_now(sender.fileno(), rest)
        assert not rest
        sender.close()
        while chunk := receiver.recv(65536):
            received += chunk
        assert bytes(received) == expected
    finally:
        sender.close()
        receiver.close()


def test_send_now_hands_back_everything_when_the_socket_takes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"r" * 5000)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        region = FileRegion(OwnedDescriptor(descriptor), 0, 5000)
    finally:
        os.close(descriptor)
    sender, receiver = tcp_pair()
    try:
        sender.setblocking(False)
        for size in (65536, 1):  # fill the socket's buffers
            while True:
                try:
                    sender.send(b"f" * size)
                except BlockingIOError:
                    break
        pieces: list[object] = [b"head", region, b"tail"]
        rest = send_now(sender.fileno(), pieces)
        assert b"".join(read_pieces(rest)) == b"head" + b"r" * 5000 + b"tail"
    finally:
        sender.close()
        receiver.close()


def test_the_codec_keeps_a_region_as_an_item_of_its_own(tmp_path: Path) -> None:
    partition_log = filled_log(tmp_path / "events-0")
    try:
        small = partition_log.read(0, 100, min_one_batch=True).to_bytes()
        regions = partition_log.read(0, 1 << 20, min_one_batch=True, file_regions=True)
        plain = partition_log.read(0, 1 << 20, min_one_batch=True)
        assert any(isinstance(piece, FileRegion) for piece in regions.chunks)

        def response(second: object) -> FetchResponse:
            return FetchResponse(session_id=7, responses=[FetchableTopicResponse(topic="events", partitions=[
                PartitionData(partition_index=0, high_watermark=400, records=small),
                PartitionData(partition_index=1, high_watermark=400, records=second),  # type: ignore[arg-type]
                PartitionData(partition_index=2, high_watermark=400, records=small)])])

        for version in (4, 11, 12, 16, 17):
            with_regions = encode_fetch_response(response(regions.chunks), version, 99)
            with_bytes = encode_fetch_response(response(plain.chunks), version, 99)
            assert with_regions is not None and with_bytes is not None
            assert any(isinstance(piece, FileRegion) for piece in with_regions)
            assert b"".join(read_pieces(with_regions)) == b"".join(with_bytes)
    finally:
        partition_log.close()


def test_a_region_keeps_its_bytes_when_compaction_swaps_its_segment(tmp_path: Path) -> None:
    cluster = Cluster(BrokerConfig({"log.dirs": str(tmp_path), "log.cleaner.backoff.ms": "0"}))
    cluster.open()
    try:
        partition = cluster.topics.create("compacted", 1, {
            "cleanup.policy": "compact", "segment.bytes": str(300 * 1024), "min.cleanable.dirty.ratio": "0.01",
        }).partitions[0]
        for round_number in range(8):  # the same ten keys again and again: most records are superseded
            builder = RecordBatchBuilder()
            for key in range(10):
                builder.append(timestamp=T0, key=b"key-%d" % key, value=bytes([round_number]) * 8000)
            partition.append_internal(builder.build(), T0)
        read = partition.read(0, 1 << 22, min_one_batch=True, file_regions=True)
        assert any(isinstance(piece, FileRegion) for piece in read.records)
        expected = b"".join(read_pieces(list(read.records)))
        size_before = partition.log.size_bytes()
        assert cluster.log_cleaner.clean_now(T0 + 1) == 1
        assert partition.log.size_bytes() < size_before
        assert b"".join(read_pieces(list(read.records))) == expected
        assert [batch.base_offset for batch in iter_batches(expected)][:2] == [0, 10]
    finally:
        cluster.close()


# the connection ------------------------------------------------------------------------------------

class SocketTransport(asyncio.Transport):
    """A transport over a real non-blocking socket that behaves like uvloop's: a write with nothing
    buffered goes to the socket at once, what the socket does not take is buffered (and counted by
    ``get_write_buffer_size``) until ``pump`` sends it."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.socket = sock
        self.buffer = bytearray()
        self.written = 0  # bytes given to the transport
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "socket": self.socket}.get(name, default)

    def write(self, data: Any) -> None:
        self.writelines([data])

    def writelines(self, buffers: Any) -> None:
        for buffer in buffers:
            self.buffer += buffer
            self.written += len(buffer)
        self.pump()

    def pump(self) -> None:
        while self.buffer:
            try:
                sent = self.socket.send(self.buffer)
            except BlockingIOError:
                return
            del self.buffer[:sent]

    def get_write_buffer_size(self) -> int:
        return len(self.buffer)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def test_a_connection_sends_region_answers_whole_and_in_order(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    sent_from_files: list[int] = []
    sendfile = os.sendfile

    def counting_sendfile(out_descriptor: int, in_descriptor: int, offset: int, count: int) -> int:
        sent = sendfile(out_descriptor, in_descriptor, offset, count)
        sent_from_files.append(sent)
        return sent

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    payload = os.urandom(600_000)
    path = tmp_path / "segment"
    path.write_bytes(payload)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        owned = OwnedDescriptor(descriptor)
    finally:
        os.close(descriptor)
    offered: list[bool] = []

    def fetch(context: RequestContext, request: FetchRequest) -> FetchResponse:
        offered.append(context.file_regions)
        position = 1000 * context.correlation_id
        return FetchResponse(responses=[FetchableTopicResponse(topic="events", partitions=[PartitionData(
            partition_index=0, high_watermark=9, records=[  # type: ignore[arg-type]
                b"small", FileRegion(owned, position, 500_000), payload[:100]])])])

    def heartbeat(context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        return HeartbeatResponse()

    handlers = {1: ApiHandler(1, "Fetch", 4, 17, FetchRequest, FetchResponse, fetch),
                12: ApiHandler(12, "Heartbeat", 0, 4, HeartbeatRequest, HeartbeatResponse, heartbeat)}
    sender, receiver = tcp_pair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sender.setblocking(False)
    receiver.settimeout(10)
    transport = SocketTransport(sender)
    connection = KafkaConnection(None, max_request_bytes=1 << 20, idle_ms=0, handlers=handlers)  # type: ignore[arg-type]
    try:
        connection.connection_made(transport)
        requests = [(HeartbeatRequest(group_id="g"), 1), (FetchRequest(), 12), (HeartbeatRequest(group_id="g"), 1),
                    (FetchRequest(), 12), (FetchRequest(), 12), (HeartbeatRequest(group_id="g"), 1)]
        data = b"".join(encode_request(request, version, correlation_id, "tests")
                        for correlation_id, (request, version) in enumerate(requests, start=1))
        buffer = connection.get_buffer(-1)
        buffer[:len(data)] = data
        connection.buffer_updated(len(data))  # one read: answers corked, then written in order
        later = encode_request(FetchRequest(), 12, 7, "tests")  # a read of its own, the socket still full
        buffer = connection.get_buffer(-1)
        buffer[:len(later)] = later
        connection.buffer_updated(len(later))
        received = bytearray()
        frames: list[bytes] = []
        while len(frames) < 7:  # a slow reader: 64 KiB at a time, the transport sending more between reads
            transport.pump()
            chunk = receiver.recv(65536)
            assert chunk, "the connection closed"
            received += chunk
            frames = _frames_of(received)
        assert not transport.buffer
        assert sum(sent_from_files) > 0 and transport.written > 0  # both paths were taken
    finally:
        sender.close()
        receiver.close()
    assert offered == [True, True, True, True]
    assert [struct.unpack_from(">i", frame)[0] for frame in frames] == [1, 2, 3, 4, 5, 6, 7]
    for correlation_id, frame in zip(range(1, 8), frames, strict=True):
        if correlation_id in (2, 4, 5, 7):
            answer = FetchResponse.decode_from(parse_response_header(frame, 1, 12), 12)
            position = 1000 * correlation_id
            records = answer.responses[0].partitions[0].records
            assert isinstance(records, memoryview | bytes)
            assert bytes(records) == b"small" + payload[position:position + 500_000] + payload[:100]
        else:
            assert HeartbeatResponse.decode_from(parse_response_header(frame, 12, 1), 1).error_code == 0


def _frames_of(data: bytearray) -> list[bytes]:
    """The whole frames at the front of ``data`` (size prefixes removed)."""
    frames, position = [], 0
    while len(data) - position >= 4:
        (size,) = struct.unpack_from(">i", data, position)
        if len(data) - position - 4 < size:
            break
        frames.append(bytes(data[position + 4:position + 4 + size]))
        position += 4 + size
    return frames
