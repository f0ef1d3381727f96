"""Incremental fetch sessions (KIP-227) on the broker, without sockets: an idle incremental fetch visits
none of its session's partitions, an append or a moved offset brings exactly that partition back, a
parked fetch waits on its session, and the answers are those of a fetch that reads every partition."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import kafkalite.broker.handlers  # noqa: F401  (registers every handler)
from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster, Endpoint
from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import TopicManager
from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.handlers.registry import RequestContext
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import FetchRequest, FetchResponse
from kafkalite.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkalite.protocol.records import RecordBatchBuilder

VERSION = 13
TOPIC = "many"
PARTITIONS = 1000

Positions = dict[tuple[object, int], int]


def make_cluster() -> Cluster:
    cluster = Cluster(BrokerConfig({"log.storage": "memory"}))
    cluster.endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    cluster.open()
    return cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = make_cluster()
    made.topics.create(TOPIC, PARTITIONS)
    yield made
    made.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Partition]:
    """Every partition a fetch reads (a visit), in order: each is checked against the request's
    leader epoch before it is read (a caught-up partition is answered without a log read)."""
    visited: list[Partition] = []
    original = Partition.check_leader_epoch

    def counting(self: Partition, *args: Any, **kwargs: Any) -> Any:
        visited.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Partition, "check_leader_epoch", counting)
    return visited


def append(cluster: Cluster, topic: str, index: int, *values: bytes) -> None:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(timestamp=1_700_000_000_000, key=None, value=value)
    partition = cluster.topics.partition(topic, index)
    assert partition is not None
    partition.append_internal(builder.build(), 1_700_000_000_000)


def request(version: int, positions: Positions, session_id: int, epoch: int, *, forgotten: Positions | None = None,
            max_bytes: int = 52428800, partition_max_bytes: int = 1048576, isolation_level: int = 0,
            max_wait_ms: int = 0, min_bytes: int = 1) -> FetchRequest:
    by_id = version >= 13

    def grouped(keys: Any) -> dict[object, list[tuple[int, int]]]:
        topics: dict[object, list[tuple[int, int]]] = {}
        for (topic, index), offset in keys:
            topics.setdefault(topic, []).append((index, offset))
        return topics

    listed = [FetchTopic(topic="" if by_id else str(topic), topic_id=topic if by_id else uuid.UUID(int=0),  # type: ignore[arg-type]
                         partitions=[FetchPartition(partition=index, fetch_offset=offset,
                                                    partition_max_bytes=partition_max_bytes)
                                     for index, offset in entries])
              for topic, entries in grouped(positions.items()).items()]
    forgot = [ForgottenTopic(topic="" if by_id else str(topic), topic_id=topic if by_id else uuid.UUID(int=0),  # type: ignore[arg-type]
                             partitions=[index for index, _ in entries])
              for topic, entries in grouped((forgotten or {}).items()).items()]
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_id=session_id, session_epoch=epoch,
                        topics=listed, forgotten_topics_data=forgot)


async def fetch(cluster: Cluster, fetch_request: FetchRequest, version: int = VERSION) -> FetchResponse:
    context = RequestContext(cluster, 1, version, 7, "test-client", "127.0.0.1:5555")
    result = handle_fetch(context, fetch_request)
    if not isinstance(result, FetchResponse):
        result = await asyncio.wait_for(result, 5)  # type: ignore[arg-type]
    return FetchResponse.decode(result.encode(version), version)


def answered(response: FetchResponse) -> dict[int, Any]:
    return {partition.partition_index: partition for topic in response.responses for partition in topic.partitions}


def every_partition(cluster: Cluster, topic: str = TOPIC) -> Positions:
    found = cluster.topics.get(topic)
    assert found is not None
    return {(found.topic_id, index): 0 for index in range(len(found.partitions))}


def test_an_idle_incremental_fetch_visits_no_partition(cluster: Cluster, reads: list[Partition],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    lookups: list[object] = []
    for name in ("get", "by_id"):
        original = getattr(TopicManager, name)
        monkeypatch.setattr(TopicManager, name, lambda self, key, _original=original: lookups.append(key)
                            or _original(self, key))

    async def scenario() -> None:
        full = await fetch(cluster, request(VERSION, every_partition(cluster), 0, 0))
        assert full.session_id and len(answered(full)) == PARTITIONS
        assert len(reads) == PARTITIONS
        reads.clear()
        lookups.clear()
        for epoch in range(1, 4):
            idle = await fetch(cluster, request(VERSION, {}, full.session_id, epoch))
            assert (idle.error_code, idle.session_id, answered(idle)) == (ErrorCode.NONE, full.session_id, {})
        assert reads == [] and lookups == []

        # An append brings back that partition, and only it.
        append(cluster, TOPIC, 417, b"news")
        news = await fetch(cluster, request(VERSION, {}, full.session_id, 4))
        assert list(answered(news)) == [417] and answered(news)[417].high_watermark == 1
        assert [partition.index for partition in reads] == [417]
        reads.clear()
        # Its records were returned but the client has not moved: it is read (and answered) again.
        again = await fetch(cluster, request(VERSION, {}, full.session_id, 5))
        assert list(answered(again)) == [417] and [partition.index for partition in reads] == [417]
        reads.clear()
        topic_id = cluster.topics.get(TOPIC).topic_id  # type: ignore[union-attr]
        moved = await fetch(cluster, request(VERSION, {(topic_id, 417): 1}, full.session_id, 6))
        assert answered(moved) == {} and [partition.index for partition in reads] == [417]
        reads.clear()
        quiet = await fetch(cluster, request(VERSION, {}, full.session_id, 7))
        assert answered(quiet) == {} and reads == []

    asyncio.run(scenario())


def test_a_moved_log_start_offset_brings_its_partition_back(cluster: Cluster, reads: list[Partition]) -> None:
    async def scenario() -> None:
        append(cluster, TOPIC, 3, b"a", b"b")
        topic_id = cluster.topics.get(TOPIC).topic_id  # type: ignore[union-attr]
        full = await fetch(cluster, request(VERSION, {(topic_id, 3): 2, (topic_id, 4): 0}, 0, 0))
        assert sorted(answered(full)) == [3, 4]
        reads.clear()
        assert answered(await fetch(cluster, request(VERSION, {}, full.session_id, 1))) == {} and reads == []
        partition = cluster.topics.partition(TOPIC, 3)
        assert partition is not None
        partition.log.delete_records_before(1)  # DeleteRecords: no append, the log start offset moves
        moved = answered(await fetch(cluster, request(VERSION, {}, full.session_id, 2)))
        assert list(moved) == [3] and (moved[3].log_start_offset, moved[3].records) == (1, b"")
        reads.clear()
        assert answered(await fetch(cluster, request(VERSION, {}, full.session_id, 3))) == {} and reads == []

    asyncio.run(scenario())


def test_a_parked_incremental_fetch_waits_on_its_session(cluster: Cluster) -> None:
    async def scenario() -> None:
        full = await fetch(cluster, request(VERSION, every_partition(cluster), 0, 0))
        parked = asyncio.ensure_future(fetch(cluster, request(VERSION, {}, full.session_id, 1, max_wait_ms=30_000)))
        session = cluster.fetch_sessions.get(full.session_id)
        assert session is not None
        for _ in range(100):
            if session.waiters:
                break
            await asyncio.sleep(0)
        # One waiter on the session, no listener on any partition.
        assert len(session.waiters) == 1
        assert all(not partition._listeners for partition in cluster.topics.get(TOPIC).partitions)  # type: ignore[union-attr]
        # The log start offset moving does not answer it; an append to a partition it did not read does.
        partition = cluster.topics.partition(TOPIC, 5)
        assert partition is not None
        partition.offsets_moved()
        await asyncio.sleep(0)
        assert not parked.done()
        append(cluster, TOPIC, 999, b"wake")
        woken = await parked
        assert list(answered(woken)) == [999] and answered(woken)[999].high_watermark == 1
        assert session.waiters == []

    asyncio.run(scenario())


def test_a_partition_cut_by_max_bytes_is_answered_by_the_next_fetch(cluster: Cluster) -> None:
    async def scenario() -> None:
        topic_id = cluster.topics.get(TOPIC).topic_id  # type: ignore[union-attr]
        full = await fetch(cluster, request(VERSION, {(topic_id, 0): 0, (topic_id, 1): 0}, 0, 0))
        append(cluster, TOPIC, 0, b"x" * 200)
        append(cluster, TOPIC, 1, b"y" * 200)
        first = answered(await fetch(cluster, request(VERSION, {}, full.session_id, 1, max_bytes=10)))
        assert sorted(first) == [0, 1] and first[0].records and not first[1].records
        second = answered(await fetch(cluster, request(VERSION, {(topic_id, 0): 1}, full.session_id, 2,
                                                       max_bytes=10)))
        assert list(second) == [1] and second[1].records

    asyncio.run(scenario())


def test_dropped_sessions_and_forgotten_partitions_leave_no_watcher(cluster: Cluster) -> None:
    async def scenario() -> None:
        partitions = cluster.topics.get(TOPIC).partitions  # type: ignore[union-attr]
        full = await fetch(cluster, request(VERSION, every_partition(cluster), 0, 0))
        assert all(len(partition._watchers) == 1 for partition in partitions)
        topic_id = cluster.topics.get(TOPIC).topic_id  # type: ignore[union-attr]
        await fetch(cluster, request(VERSION, {}, full.session_id, 1, forgotten={(topic_id, 7): 0}))
        assert not partitions[7]._watchers and len(partitions[8]._watchers) == 1
        await fetch(cluster, request(VERSION, {}, full.session_id, -1))  # closes the session
        assert all(not partition._watchers for partition in partitions)

    asyncio.run(scenario())


# The same answers as reading every partition of the session -----------------------------------------------

TOPICS = {"alpha": 3, "beta": 2, "gamma": 4}


def _operations(seed: int, version: int) -> Iterator[tuple[str, Any]]:
    """A random run of appends, offset moves, topic changes and fetches (the same for both brokers)."""
    rng = random.Random(seed)
    ids = {name: uuid.UUID(int=number + 1) for number, name in enumerate([*TOPICS, "missing"])}
    keys = [(name, index) for name, count in TOPICS.items() for index in range(count + 1)] + [("missing", 0)]

    def key(name: str, index: int) -> tuple[object, int]:
        return (ids[name] if version >= 13 else name, index)

    epoch = 0
    for step in range(400):
        roll = rng.random()
        name, index = rng.choice(keys)
        if roll < 0.35:
            yield "append", (name, index, [bytes(rng.randrange(1, 60)) for _ in range(rng.randrange(1, 4))])
        elif roll < 0.40:
            yield "delete_records", (name, index, rng.randrange(0, 6))
        elif roll < 0.42:
            yield "recreate", (name, ids.get(name))
        elif roll < 0.43:
            yield "add_partition", name
        else:
            if epoch == 0 or rng.random() < 0.03:
                positions = {key(n, i): rng.randrange(0, 3) for n, i in rng.sample(keys, rng.randrange(1, len(keys)))}
                yield "fetch", (positions, {}, 0, rng.choice([0, 1]), rng.choice([30, 52428800]))
                epoch = 1
                continue
            positions = {key(n, i): rng.randrange(0, 8) for n, i in rng.sample(keys, rng.randrange(0, 3))}
            forgotten = {key(n, i): 0 for n, i in rng.sample(keys, 1)} if rng.random() < 0.05 else {}
            isolation = 1 if rng.random() < 0.05 else 0
            yield "fetch", (positions, forgotten, epoch, isolation, rng.choice([30, 200, 52428800]))
            epoch += 1
        del step


@pytest.mark.parametrize("version", [12, 13])
@pytest.mark.parametrize("seed", range(6))
def test_incremental_answers_match_reading_every_partition(seed: int, version: int) -> None:
    ids = {name: uuid.UUID(int=number + 1) for number, name in enumerate([*TOPICS, "missing"])}
    brokers = [make_cluster(), make_cluster()]  # the second reads every partition of its session on each fetch
    for broker in brokers:
        for name, count in TOPICS.items():
            broker.topics.create(name, count, topic_id=ids[name])
    session_ids = [0, 0]

    async def scenario() -> None:
        for operation, arguments in _operations(seed, version):
            answers = []
            for number, broker in enumerate(brokers):
                if operation == "append":
                    name, index, values = arguments
                    if broker.topics.partition(name, index) is not None:
                        append(broker, name, index, *values)
                elif operation == "delete_records":
                    name, index, offset = arguments
                    partition = broker.topics.partition(name, index)
                    if partition is not None:
                        partition.log.delete_records_before(offset)
                elif operation == "recreate":
                    name, topic_id = arguments
                    if broker.topics.get(name) is not None:
                        broker.topics.delete(name)
                    elif name in TOPICS:
                        broker.topics.create(name, TOPICS[name], topic_id=topic_id)
                elif operation == "add_partition":
                    topic = broker.topics.get(arguments)
                    if topic is not None and len(topic.partitions) <= TOPICS.get(arguments, 0):
                        broker.topics.create_partitions(arguments, len(topic.partitions) + 1)
                else:
                    positions, forgotten, epoch, isolation, max_bytes = arguments
                    if number == 1 and epoch > 0:
                        session = broker.fetch_sessions.get(session_ids[number])
                        assert session is not None
                        session.to_visit.update(session.partitions.values())
                    response = await fetch(broker, request(version, positions, session_ids[number], epoch,
                                                           forgotten=forgotten, max_bytes=max_bytes,
                                                           isolation_level=isolation), version)
                    session_ids[number] = response.session_id
                    answers.append(response)
            if answers:
                first, second = answers
                second.session_id = first.session_id
                assert first.encode(version) == second.encode(version), arguments

    try:
        asyncio.run(scenario())
    finally:
        for broker in brokers:
            broker.close()
