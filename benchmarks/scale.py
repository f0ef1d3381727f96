"""Cost per request as partitions grow: Metadata and Fetch with 10 and 10,000 partitions, and an idle
consumer's poll with and without a fetch session. Prints numbers; asserts nothing about time.

    python benchmarks/scale.py [--partitions 10,10000] [--requests 200] [--storage memory|disk]

For each partition count, a fresh in-process ``Cluster`` (memory storage by default; ``--storage
disk`` puts the logs in a scratch directory) gets 10 topics sharing the partitions evenly, and one
``KafkaConnection`` with a transport that keeps what is written is fed whole request frames, as a
socket read delivers them. Each figure is the median CPU time of one request (framing, decoding,
the handler, the response encoded and written), over ``--requests`` requests:

* Metadata v12 for every topic, and for one topic;
* Fetch v13, full (no session: every partition listed, nothing to read, max_wait_ms 0);
* Fetch v13, incremental: a session is created by one full fetch, then each poll lists no partition
  (nothing changed, nothing to read): what an idle consumer sends while it polls;
* the same with one record appended to one partition of the session before each poll, the poll
  listing that partition at the record's offset (it is answered with that record): a consumer of
  topics where little happens.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.broker.config import BrokerConfig  # noqa: E402
from kafkalite.broker.core.cluster import Cluster, Endpoint  # noqa: E402
from kafkalite.broker.net import KafkaConnection, ReceiveScratch  # noqa: E402
from kafkalite.protocol.framing import encode_request, parse_response_header  # noqa: E402
from kafkalite.protocol.messages import FetchRequest, FetchResponse, MetadataRequest  # noqa: E402
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkalite.protocol.messages.metadata_request import MetadataRequestTopic  # noqa: E402
from kafkalite.protocol.records import RecordBatchBuilder  # noqa: E402

TOPICS = 10
FETCH_VERSION = 13


class KeepingTransport(asyncio.Transport):
    """Keeps the bytes written, so the last response can be read back."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: Any) -> None:
        self.written += data

    def writelines(self, buffers: Any) -> None:
        for buffer in buffers:
            self.written += buffer

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def fetch_request(topics: list[tuple[str, uuid.UUID, int]] | None, session_id: int, epoch: int) -> FetchRequest:
    listed = [] if topics is None else [
        FetchTopic(topic=name, topic_id=topic_id, partitions=[
            FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1048576) for index in range(count)])
        for name, topic_id, count in topics]
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=52428800, isolation_level=0,
                        session_id=session_id, session_epoch=epoch, topics=listed)


async def measure(partitions: int, requests: int, storage: str) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="kafkalite-scale-"))
    settings = {"log.storage": "memory"} if storage == "memory" else {"log.dirs": str(scratch)}
    cluster = Cluster(BrokerConfig(settings))
    cluster.open()
    cluster.endpoints[:] = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    topics = []
    for number in range(TOPICS):
        topic = cluster.topics.create(f"scale-{number}", partitions // TOPICS)
        topics.append((topic.name, topic.topic_id, len(topic.partitions)))
    transport = KeepingTransport()
    connection = KafkaConnection(cluster, max_request_bytes=2**28, idle_ms=0, scratch=ReceiveScratch())
    connection.connection_made(transport)

    def send(frame: bytes) -> None:
        transport.written.clear()
        position = 0
        while position < len(frame):
            buffer = connection.get_buffer(-1)
            take = min(len(buffer), len(frame) - position)
            buffer[:take] = frame[position:position + take]
            del buffer
            connection.buffer_updated(take)
            position += take

    async def cost(frame: bytes) -> float:
        times = []
        for _ in range(requests):
            start = time.process_time()
            send(frame)
            await asyncio.sleep(0)  # a handler answering later (Fetch) finishes here
            times.append(time.process_time() - start)
        return statistics.median(times)

    def last_fetch() -> FetchResponse:
        (size,) = struct.unpack_from(">i", transport.written)
        frame = bytes(transport.written[4:4 + size])
        return FetchResponse.decode_from(parse_response_header(frame, 1, FETCH_VERSION), FETCH_VERSION)

    figures = {}
    figures["Metadata, every topic"] = await cost(encode_request(MetadataRequest(topics=None), 12, 1, "scale"))
    figures["Metadata, one topic"] = await cost(encode_request(
        MetadataRequest(topics=[MetadataRequestTopic(name="scale-0")]), 12, 1, "scale"))
    figures["Fetch, full (no session)"] = await cost(encode_request(fetch_request(topics, 0, -1), FETCH_VERSION, 1,
                                                                     "scale"))
    send(encode_request(fetch_request(topics, 0, 0), FETCH_VERSION, 1, "scale"))  # a new session
    await asyncio.sleep(0)
    session_id = last_fetch().session_id
    epoch = [1]
    times = []
    for _ in range(requests):
        frame = encode_request(fetch_request(None, session_id, epoch[0]), FETCH_VERSION, 1, "scale")
        epoch[0] += 1
        start = time.process_time()
        send(frame)
        await asyncio.sleep(0)
        times.append(time.process_time() - start)
    response = last_fetch()
    if response.error_code != 0 or response.session_id != session_id:
        print(f"  (the incremental fetch was answered with error {response.error_code})")
    figures["Fetch, incremental (idle poll)"] = statistics.median(times)
    busy = cluster.topics.partition(topics[0][0], 0)
    assert busy is not None
    times = []
    for _ in range(requests):
        builder = RecordBatchBuilder()
        builder.append(timestamp=0, key=None, value=b"x" * 100)
        offset = busy.append_internal(builder.build(), 0)
        moved = FetchTopic(topic=topics[0][0], topic_id=topics[0][1], partitions=[
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1048576)])
        request = fetch_request(None, session_id, epoch[0])
        request.topics = [moved]  # the consumer's new position there: only the new record is read
        frame = encode_request(request, FETCH_VERSION, 1, "scale")
        epoch[0] += 1
        start = time.process_time()
        send(frame)
        await asyncio.sleep(0)
        times.append(time.process_time() - start)
    response = last_fetch()
    if response.error_code != 0 or sum(len(t.partitions) for t in response.responses) != 1:
        print(f"  (the incremental fetch after an append was answered with error {response.error_code})")
    figures["Fetch, incremental (1 appended)"] = statistics.median(times)
    connection.close()
    cluster.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="10,10000")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--storage", choices=["memory", "disk"], default="memory")
    a = parser.parse_args()
    counts = [int(c) for c in a.partitions.split(",")]
    results = {count: asyncio.run(measure(count, a.requests, a.storage)) for count in counts}
    names = list(next(iter(results.values())))
    print(f"CPU per request (median of {a.requests}), {TOPICS} topics, {a.storage} storage")
    print(f"{'request':32s}" + "".join(f"{f'{count} partitions':>18s}" for count in counts))
    for name in names:
        print(f"{name:32s}" + "".join(f"{results[count][name] * 1e3:>15.3f} ms" for count in counts))


if __name__ == "__main__":
    main()
