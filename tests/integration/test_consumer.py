"""The bundled consumer against a broker: assign, seek, poll, offsets, commits, iteration, the blocking facade.

Group membership in depth (rebalances, mixed groups, faults) is in ``test_consumer_groups.py``; these
tests use one broker with fast group settings for the whole module.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalite.client import (
    ClientClosedError,
    Consumer,
    NewTopic,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from kafkalite.client import sync as blocking
from kafkalite.testing.process import BrokerProcess

TIMEOUT_S = 30
FAST = {"fetch_max_wait_ms": 100, "session_timeout_ms": 6000, "heartbeat_interval_ms": 300,
        "metadata_max_age_ms": 2000}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("consumer")) / "data",
                            {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000})
    with process:
        yield process.bootstrap_servers


def fresh_topic(bootstrap: str, partitions: int = 3) -> str:
    name = f"consume-{uuid.uuid4().hex[:10]}"
    with blocking.Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3, prefix: str = "v") -> None:
    with blocking.Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        for index in range(count):
            producer.send(topic, f"{prefix}{index}".encode(), key=f"k{index}".encode(), partition=index % partitions,
                          headers={"index": str(index).encode()}, timestamp=1_700_000_000_000 + index)
        producer.flush()


async def poll_until(consumer: Consumer, count: int, timeout_s: float = TIMEOUT_S) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got.extend(await consumer.poll(timeout_ms=200))
    return got


def test_assign_poll_reads_every_record_with_its_fields(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap)
    produce(bootstrap, topic, 300)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
            consumer.assign([TopicPartition(topic, index) for index in range(3)])
            got = await poll_until(consumer, 300)
            assert sorted(int(record.value[1:]) for record in got) == list(range(300))
            for record in got:
                index = int(record.value[1:])
                assert record.topic == topic and record.partition == index % 3
                assert record.key == f"k{index}".encode() and record.headers == (("index", str(index).encode()),)
                assert record.timestamp == 1_700_000_000_000 + index and record.leader_epoch == 0
            for partition in range(3):
                assert await consumer.position(TopicPartition(topic, partition)) == 100
                assert consumer.highwater(TopicPartition(topic, partition)) == 100
            assert (await consumer.poll(timeout_ms=50)).count() == 0

    asyncio.run(scenario())


def test_seek_seek_to_beginning_end_and_offsets_for_times(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, 50, partitions=1)
    partition = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, **FAST) as consumer:
            consumer.assign([partition])
            assert await consumer.position(partition) == 50  # auto.offset.reset=latest
            consumer.seek(partition, 20)
            got = await poll_until(consumer, 30)
            assert [record.offset for record in got] == list(range(20, 50))
            consumer.seek_to_beginning()
            assert await consumer.position(partition) == 0
            first = await consumer.poll(timeout_ms=5000, max_records=5)
            assert [record.offset for record in first] == [0, 1, 2, 3, 4]
            consumer.seek_to_end(partition)
            assert await consumer.position(partition) == 50
            found = await consumer.offsets_for_times({partition: 1_700_000_000_000 + 33, (topic, 0): 0})
            assert found[partition] is not None and found[partition].offset == 0
            later = await consumer.offsets_for_times({partition: 1_700_000_000_000 + 33})
            assert later[partition] is not None and later[partition].offset == 33
            assert later[partition].timestamp == 1_700_000_000_000 + 33
            assert (await consumer.offsets_for_times({partition: 1_800_000_000_000}))[partition] is None
            assert await consumer.beginning_offsets([partition]) == {partition: 0}
            assert await consumer.end_offsets([partition]) == {partition: 50}
            assert await consumer.partitions_for(topic) == [0]
            assert topic in await consumer.list_topics()

    asyncio.run(scenario())


def test_pause_and_resume(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, 40, partitions=2)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
            first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
            consumer.assign([first, second])
            consumer.pause(second)
            assert consumer.paused() == {second}
            got = await poll_until(consumer, 20)
            assert {record.partition for record in got} == {0}
            assert (await consumer.poll(timeout_ms=300)).count() == 0
            consumer.resume(second)
            got = await poll_until(consumer, 20)
            assert {record.partition for record in got} == {1} and len(got) == 20

    asyncio.run(scenario())


def test_commits_explicit_sync_async_auto_and_on_close(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, 20, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", **FAST) as consumer:
            consumer.assign([first, second])
            assert await consumer.committed([first, second]) == {first: None, second: None}
            await consumer.commit({first: 3, (topic, 1): OffsetAndMetadata(4, "note")})
            committed = await consumer.committed([first, second])
            assert committed[first] is not None and committed[first].offset == 3
            assert committed[second] == OffsetAndMetadata(4, "note", -1)
            answers: list[Any] = []
            await consumer.commit_async({first: 5}, callback=lambda offsets, error: answers.append((offsets, error)))
            assert answers and answers[0][1] is None
            assert (await consumer.committed(first))[first].offset == 5  # type: ignore[union-attr]
            got = await poll_until(consumer, 11)  # from the committed offsets: 5 of partition 0, 6 of 1
            assert len(got) == 11
            await consumer.commit()
            assert {tp: value.offset for tp, value in (await consumer.committed([first, second])).items()
                    if value is not None} == {first: 10, second: 10}
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, auto_commit_interval_ms=100,
                            **FAST) as consumer:
            consumer.assign([first, second])
            consumer.seek(first, 1)
            assert len(await consumer.poll(timeout_ms=2000, max_records=2)) == 2
            consumer.pause(first)  # later polls return nothing more from it
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:  # auto-commit within auto.commit.interval.ms of a poll
                await consumer.poll(timeout_ms=50)
                value = (await consumer.committed(first))[first]
                if value is not None and value.offset == 3:
                    break
            assert (await consumer.committed(first))[first].offset == 3  # type: ignore[union-attr]
            consumer.seek(first, 7)
        # close() committed the position with auto-commit
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, **FAST) as consumer:
            assert (await consumer.committed(first))[first].offset == 7  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_the_iterator_counts_only_records_handed_out(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, 30, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    partition = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            **FAST) as consumer:
            consumer.assign([partition])
            seen = []
            async for record in consumer:
                seen.append(record.offset)
                if len(seen) == 7:
                    break
            assert await consumer.position(partition) == 7
        # close() auto-committed what the iterator handed out, not what it had fetched
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, **FAST) as consumer:
            assert (await consumer.committed(partition))[partition].offset == 7  # type: ignore[union-attr]
            consumer.assign([partition])
            more = []
            async for record in consumer:
                more.append(record.offset)
                if len(more) == 3:
                    break
            assert more == [7, 8, 9]
            got = await consumer.poll(timeout_ms=5000)  # poll() goes on where the iterator stopped
            assert [record.offset for record in got] == list(range(10, 30))

    asyncio.run(scenario())


def test_reset_none_raises_and_a_closed_consumer_refuses_calls(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=1)

    async def scenario() -> None:
        consumer = Consumer(bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:6]}",
                            auto_offset_reset="none", **FAST)
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(NoOffsetForPartitionError, match=topic):
            await consumer.poll(timeout_ms=2000)
        await consumer.close()
        with pytest.raises(ClientClosedError):
            await consumer.poll()

    asyncio.run(scenario())


def test_read_committed_skips_aborted_transactions_of_the_bundled_producer(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=2)

    async def scenario() -> None:
        async with Producer(bootstrap_servers=bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:6]}",
                            linger_ms=1) as producer:
            await producer.init_transactions()
            for round_number, commit in enumerate([True, False, True, False, True]):
                await producer.begin_transaction()
                for index in range(20):
                    await producer.send(topic, f"{round_number}-{index}".encode(), partition=index % 2)
                await producer.flush()
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
            await producer.begin_transaction()
            await producer.send(topic, b"open", partition=0)
            await producer.flush()  # an open transaction: read_committed stops before it
            async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                isolation_level="read_committed", **FAST) as committed, \
                    Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST) as everything:
                partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
                committed.assign(partitions)
                everything.assign(partitions)
                got = await poll_until(committed, 60)
                assert sorted(record.value for record in got) == sorted(
                    f"{round_number}-{index}".encode() for round_number in (0, 2, 4) for index in range(20))
                assert (await committed.poll(timeout_ms=300)).count() == 0
                all_records = await poll_until(everything, 101)
                assert len(all_records) == 101
                assert await committed.end_offsets(partitions) != await everything.end_offsets(partitions)
            await producer.abort_transaction()

    asyncio.run(scenario())


def test_out_of_range_after_delete_records_resets_to_earliest(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=1)
    produce(bootstrap, topic, 40, partitions=1)
    partition = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST) as consumer:
            consumer.assign([partition])
            with blocking.Admin(bootstrap_servers=bootstrap) as admin:
                admin.delete_records({partition: 25})
            consumer.seek(partition, 5)  # below the log start offset now
            got = await poll_until(consumer, 15)
            assert [record.offset for record in got] == list(range(25, 40))

    asyncio.run(scenario())


def test_group_subscribe_with_listener_and_close_leaves(bootstrap: str) -> None:
    topic = fresh_topic(bootstrap, partitions=4)
    produce(bootstrap, topic, 40, partitions=4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    events: list[tuple[str, list[TopicPartition]]] = []

    class Listener:
        async def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            events.append(("assigned", partitions))

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            events.append(("revoked", partitions))

    async def scenario() -> None:
        async with Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            **FAST) as consumer:
            consumer.subscribe(topic, listener=Listener())
            got = await poll_until(consumer, 40)
            assert len(got) == 40
            assert consumer.subscription() == {topic}
            assert consumer.assignment() == {TopicPartition(topic, index) for index in range(4)}
            metadata = consumer.group_metadata()
            assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id
        assert events[0] == ("assigned", [TopicPartition(topic, index) for index in range(4)])
        assert events[-1] == ("revoked", [TopicPartition(topic, index) for index in range(4)])
        with blocking.Admin(bootstrap_servers=bootstrap) as admin:
            description = admin.describe_groups([group])[group]
            assert description.state == "Empty"
            assert {tp.partition: value.offset for tp, value in admin.list_consumer_group_offsets(group).items()} == {
                index: 10 for index in range(4)}

    asyncio.run(scenario())


def test_blocking_consumer_poll_iterate_commit_and_listener_on_the_caller_thread(bootstrap: str) -> None:
    import threading

    topic = fresh_topic(bootstrap, partitions=2)
    produce(bootstrap, topic, 30, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    threads: list[str] = []

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            threads.append(threading.current_thread().name)
            consumer.commit()  # calling the consumer from the listener works

    with blocking.Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                           enable_auto_commit=False, **FAST) as consumer:
        consumer.subscribe([topic], listener=Listener())
        seen = []
        for record in consumer:
            seen.append(record)
            if len(seen) == 10:
                break
        assert threads == [threading.current_thread().name]
        consumer.commit()
        committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert sum(value.offset for value in committed.values() if value is not None) == 10
        rest = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(rest) < 20 and time.monotonic() < deadline:
            rest.extend(consumer.poll(timeout_ms=200))
        assert sorted(record.value for record in seen + rest) == sorted(f"v{index}".encode() for index in range(30))
        assert consumer.commit_async().result(TIMEOUT_S) is None
        assert consumer.position(TopicPartition(topic, 0)) == 15


def test_a_member_that_stops_polling_leaves_and_its_next_poll_rejoins(bootstrap: str) -> None:
    from kafkalite.testing.process import wait_for

    topic = fresh_topic(bootstrap, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    every = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    lost: list[list[TopicPartition]] = []

    class Listener:
        def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
            lost.append(partitions)

    config = {"group_id": group, **FAST, "heartbeat_interval_ms": 100}
    with blocking.Consumer(bootstrap_servers=bootstrap, max_poll_interval_ms=1500, **config) as slow, \
            blocking.Consumer(bootstrap_servers=bootstrap, **config) as steady:
        slow.subscribe([topic], listener=Listener())
        steady.subscribe([topic])

        def both_assigned() -> bool:
            slow.poll(timeout_ms=50)
            steady.poll(timeout_ms=50)
            return bool(slow.assignment()) and bool(steady.assignment())

        wait_for(both_assigned, TIMEOUT_S, "the two members never shared the partitions")
        # only the steady member polls now: the slow one leaves after max.poll.interval.ms
        wait_for(lambda: steady.poll(timeout_ms=50) is not None and steady.assignment() == every, TIMEOUT_S,
                 "the partitions of the member that stopped polling never moved")
        wait_for(both_assigned, TIMEOUT_S, "the slow member did not rejoin on its next poll")
        assert lost and set(lost[0]) and set(lost[0]) <= every  # its old partitions were reported lost
