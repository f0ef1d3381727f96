"""A long-polling Fetch woken by an append answers from the batch that append stored, without a log
read, only when that is exactly what the log read gives: randomised fetches and appends, on the
memory and the disk log, answered byte for byte as when every woken fetch reads the log."""

from __future__ import annotations

import asyncio
import gc
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.core.log.region import read_pieces
from kafkalite.broker.core.partition import AppendedBatch, Partition, ReadInfo
from kafkalite.broker.handlers.delayed import DelayedAnswer, begin_dispatch, run_after_dispatch
from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.handlers.registry import RequestContext
from kafkalite.protocol.fetch_codec import encode_fetch_response
from kafkalite.protocol.messages import FetchRequest, FetchResponse
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkalite.protocol.records import RecordBatchBuilder

TOPIC = "woken"
TOPIC_ID = uuid.UUID(int=7)
PARTITIONS = 3
NOW = 1_700_000_000_000
PRODUCER_ID = 4000


def make_cluster(storage: str, directory: Path) -> Cluster:
    cluster = Cluster(BrokerConfig({"log.storage": storage, "log.dirs": str(directory)}))
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    cluster.topics.create(TOPIC, PARTITIONS, topic_id=TOPIC_ID)
    return cluster


def build(rng: random.Random, transactional: bool) -> bytearray:
    builder = RecordBatchBuilder(producer_id=PRODUCER_ID if transactional else -1,
                                 producer_epoch=0 if transactional else -1, is_transactional=transactional)
    big = rng.random() < 0.1  # at or above the disk log's file region threshold
    for number in range(rng.randrange(1, 4)):
        size = rng.randrange(70_000, 90_000) if big and number == 0 else rng.randrange(0, 300)
        builder.append(timestamp=NOW + number, key=None, value=bytes(rng.getrandbits(8) for _ in range(min(size, 8)))
                       * (size // 8 + 1))
    return builder.build()


class Scenario:
    """One broker driven by a seed: fetches parked at the partitions' ends, then appends (and markers,
    and moved log start offsets) dispatched as one read, and each answer's bytes."""

    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.open_transaction: set[int] = set()
        self.session_id = 0
        self.session_epoch = 0

    def partition(self, index: int) -> Partition:
        partition = self.cluster.topics.partition(TOPIC, index)
        assert partition is not None
        return partition

    def change(self) -> None:
        """An append (transactional or not), a transaction's marker, or DeleteRecords."""
        rng = self.rng
        index = rng.randrange(PARTITIONS)
        partition = self.partition(index)
        roll = rng.random()
        if roll < 0.1 and index in self.open_transaction:
            partition.append_marker(PRODUCER_ID, 0, rng.random() < 0.5, 0, NOW)
            self.open_transaction.discard(index)
        elif roll < 0.15 and partition.log_end_offset > partition.log_start_offset:
            partition.log.delete_records_before(rng.randrange(partition.log_start_offset,
                                                              partition.log_end_offset + 1))
        else:
            transactional = rng.random() < 0.2
            partition.append_internal(build(rng, transactional), NOW)
            if transactional:
                self.open_transaction.add(index)

    def request(self, version: int, read_committed: bool) -> FetchRequest:
        rng = self.rng
        positions = []
        for index in rng.sample(range(PARTITIONS), rng.randrange(1, PARTITIONS + 1)):
            partition = self.partition(index)
            end = max(partition.last_stable_offset if read_committed else partition.high_watermark,
                      partition.log_start_offset)
            offset = end if rng.random() < 0.85 else rng.randrange(partition.log_start_offset, end + 1)
            positions.append(FetchPartition(partition=index, fetch_offset=offset,
                                            partition_max_bytes=rng.choice([0, 60, 400, 1048576])))
        session_epoch = -1
        if version >= 7 and rng.random() < 0.5:  # a new session, or (v7+) an incremental fetch in the last one
            session_epoch = self.session_epoch if self.session_id and rng.random() < 0.7 else 0
        return FetchRequest(
            replica_id=-1, max_wait_ms=30_000, min_bytes=rng.choice([1, 1, 1, 200, 5000]),
            max_bytes=rng.choice([0, 150, 700, 52428800]), isolation_level=int(read_committed),
            session_id=self.session_id if session_epoch > 0 else 0, session_epoch=session_epoch,
            topics=[FetchTopic(topic=TOPIC if version < 13 else "", topic_id=TOPIC_ID if version >= 13 else uuid.UUID(
                int=0), partitions=positions)])

    def answers(self, rounds: int) -> Iterator[bytes]:
        rng = self.rng
        for _ in range(rounds):
            for _ in range(rng.randrange(0, 3)):
                self.change()
            version = rng.choice([4, 7, 11, 12, 13, 15, 17])
            request = self.request(version, rng.random() < 0.3)
            context = RequestContext(self.cluster, 1, version, 9, "test", "127.0.0.1:5555",
                                     file_regions=rng.random() < 0.5)
            result = handle_fetch(context, request)
            for _ in range(4):  # reads of one to three requests, until the fetch is answered
                if not isinstance(result, DelayedAnswer) or result.done:
                    break
                begin_dispatch()
                for _ in range(rng.randrange(1, 4)):
                    self.change()
                run_after_dispatch()
            if isinstance(result, DelayedAnswer):
                if not result.done:
                    result.cancel()
                    yield b"still waiting"
                    continue
                result = result.result()  # type: ignore[assignment]
            assert isinstance(result, FetchResponse)
            if request.session_epoch >= 0 and result.session_id:
                self.session_id = result.session_id
                self.session_epoch = (request.session_epoch or 0) + 1
            pieces = encode_fetch_response(result, version, 9)
            assert pieces is not None
            yield b"".join(read_pieces(pieces))


@pytest.mark.parametrize("storage", ["memory", "disk"])
@pytest.mark.parametrize("seed", range(8))
def test_a_woken_fetch_answers_as_a_log_read_would(seed: int, storage: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    answered_from_append: list[ReadInfo] = []
    original = Partition.read_appended

    def counting(self: Partition, *args: Any, **kwargs: Any) -> ReadInfo | None:
        read = original(self, *args, **kwargs)
        if read is not None:
            answered_from_append.append(read)
        return read

    def run(directory: Path) -> list[bytes]:
        async def scenario() -> list[bytes]:
            cluster = make_cluster(storage, directory)
            try:
                return list(Scenario(cluster, seed).answers(120))
            finally:
                cluster.close()
        return asyncio.run(scenario())

    monkeypatch.setattr(Partition, "read_appended", counting)
    from_appends = run(tmp_path / "handed")
    assert len(answered_from_append) >= 10  # the scenario does exercise the hand-over
    monkeypatch.setattr(Partition, "read_appended", lambda self, *args, **kwargs: None)
    from_the_log = run(tmp_path / "read")
    assert len(from_appends) == len(from_the_log)
    for number, (woken, read) in enumerate(zip(from_appends, from_the_log, strict=True)):
        assert woken == read, f"answer {number}"


def test_only_the_batch_at_the_fetch_position_and_still_last_is_used(tmp_path: Path) -> None:
    """The cases the hand-over must refuse, each against the log read it stands for."""
    async def scenario() -> None:
        cluster = make_cluster("memory", tmp_path)
        try:
            partition = cluster.topics.partition(TOPIC, 0)
            assert partition is not None
            handed: list[AppendedBatch] = []

            def keep(appended_to: Partition, size: int) -> None:
                if appended_to.appended is not None and (copy := AppendedBatch.of(appended_to.appended)):
                    handed.append(copy)

            partition.add_listener(keep)
            rng = random.Random(1)
            partition.append_internal(build(rng, False), NOW)
            first = handed[-1]
            assert partition.appended is None  # only while the listeners are told
            fresh = partition.read(0, 1 << 20, min_one_batch=True)
            from_append = partition.read_appended(first, 0, 1 << 20, min_one_batch=True)
            assert from_append is not None and from_append.records == [b"".join(fresh.buffers())]
            assert (from_append.size, from_append.high_watermark, from_append.last_stable_offset,
                    from_append.log_start_offset) == (fresh.size, fresh.high_watermark, fresh.last_stable_offset,
                                                      fresh.log_start_offset)
            assert partition.read_appended(first, 1, 1 << 20, min_one_batch=True) is None  # not at the position
            too_small = len(first.records) - 1
            assert partition.read_appended(first, 0, too_small, min_one_batch=False) is None  # beyond the limit
            assert partition.read(0, too_small, min_one_batch=False).size == 0
            assert partition.read_appended(first, 0, too_small, min_one_batch=True) is not None  # KIP-74
            partition.log.delete_records_before(1)  # DeleteRecords past it
            assert partition.read_appended(first, 0, 1 << 20, min_one_batch=True) is None
            partition.append_internal(build(rng, False), NOW)
            second = handed[-1]
            assert partition.read_appended(second, second.base_offset, 1 << 20, min_one_batch=True) is not None
            partition.append_internal(build(rng, False), NOW)
            assert partition.read_appended(second, second.base_offset, 1 << 20, min_one_batch=True) is None  # not last
            last = partition.high_watermark - 1
            big = AppendedBatch(b"\0" * 70_000, last, last)  # the disk log may answer with a file region
            assert partition.read_appended(big, big.base_offset, 1 << 20, min_one_batch=True) is None
        finally:
            cluster.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("session", [False, True], ids=["sessionless", "session"])
def test_a_long_poll_leaves_nothing_for_the_cyclic_collector(session: bool, tmp_path: Path) -> None:
    """Answered by an append, by its timer, or cancelled: a parked fetch is freed as soon as it is done
    (its listeners and timer are taken back), not left in a reference cycle for the collector."""
    def parked(cluster: Cluster, max_wait_ms: int) -> DelayedAnswer:
        partition = cluster.topics.partition(TOPIC, 0)
        assert partition is not None
        request = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=0 if session else -1,
                               topics=[FetchTopic(topic=TOPIC, partitions=[FetchPartition(
                                   partition=0, fetch_offset=partition.log_end_offset, partition_max_bytes=1 << 20)])])
        answer = handle_fetch(RequestContext(cluster, 1, 12, 9, "test", "127.0.0.1:5555"), request)
        assert isinstance(answer, DelayedAnswer) and not answer.done
        return answer

    async def scenario() -> list[int]:
        cluster = make_cluster("memory", tmp_path)
        partition = cluster.topics.partition(TOPIC, 0)
        assert partition is not None
        rng = random.Random(3)
        garbage = []
        try:
            for _ in range(3):  # woken by an append
                answer = parked(cluster, 30_000)
                begin_dispatch()
                partition.append_internal(build(rng, False), NOW)
                run_after_dispatch()
                assert answer.done and isinstance(answer.result(), FetchResponse)
                del answer
                garbage.append(gc.collect())
            answer = parked(cluster, 1)  # answered by its timer
            deadline = asyncio.get_running_loop().time() + 10
            while not answer.done and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.005)
            assert answer.done and isinstance(answer.result(), FetchResponse)
            del answer
            garbage.append(gc.collect())
            answer = parked(cluster, 30_000)  # its connection closed
            answer.cancel()
            del answer
            garbage.append(gc.collect())
            assert not partition._listeners  # every listener was taken back
        finally:
            cluster.close()
        return garbage

    gc.collect()
    gc.disable()
    try:
        garbage = asyncio.run(scenario())
    finally:
        gc.enable()
    assert garbage == [0] * 5
