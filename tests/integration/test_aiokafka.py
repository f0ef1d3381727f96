"""aiokafka (the asyncio client from PyPI) against a real broker over real sockets.

aiokafka asks ApiVersions (v0) and then sends each request at the highest version both sides
support. Recorded from these tests with aiokafka 0.14.0: Produce v7, Fetch v11, Metadata v5,
ListOffsets v3, JoinGroup v5, SyncGroup v3, Heartbeat v1, LeaveGroup v1, OffsetCommit v3,
OffsetFetch v3, FindCoordinator v1, DescribeGroups v3, CreateTopics v3, DeleteTopics v3,
DescribeConfigs v2, AlterConfigs v1, CreatePartitions v1, v0 of every transaction API
(InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit), and one flexible
version, DeleteRecords v2.

Covered: the producer with acks=all and every codec aiokafka has (gzip, snappy, lz4, zstd; the
batches are checked on disk), topics whose compression.type makes the broker re-encode aiokafka's
batches, the idempotent producer (producer id and sequences checked on disk), a consumer group of
two members with manual commits and a new member resuming, a static member (``group_instance_id``)
coming back without a rebalance, transactions (commit, abort, ``send_offsets_to_transaction``,
fencing, a read_committed consumer stopping at the last stable offset), consume-transform-produce
from an active group, and the admin client.

aiokafka's own limits met here: ``send()`` refuses a record whose key and value are both null;
``ConfigResource`` is not exported by ``aiokafka.admin`` and ``describe_configs`` wants the config
names as the keys of a dict; a static member sends no LeaveGroup when it stops (KIP-345, as the
Java client does).

Every test drives its own event loop with ``asyncio.run`` and a deadline (``run``); every wait polls
with a deadline, nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is not installed (pip install aiokafka)")

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete  # noqa: E402
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: E402
from aiokafka.errors import ProducerFenced  # noqa: E402

from kafkalite.protocol.records import Compression, RecordBatch, iter_batches  # noqa: E402

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

T = TypeVar("T")
TIMEOUT_S = 20.0
GROUP_ARGS = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 200, "max_poll_interval_ms": 10000,
              "metadata_max_age_ms": 1000, "fetch_max_wait_ms": 100}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 45.0) -> T:
    """Run a test body on a fresh event loop, failing it at the deadline."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def eventually(condition: Callable[[], Awaitable[T] | T], what: str, timeout: float = TIMEOUT_S) -> T:
    """Poll ``condition`` (sync or async) until it is truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


async def consume(consumer: AIOKafkaConsumer, count: int, what: str = "records",
                  timeout: float = TIMEOUT_S) -> list[ConsumerRecord]:
    """``getmany`` until ``count`` records arrived (fails at the deadline)."""
    records: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {count} {what}, got {len(records)}")
        for batch in (await consumer.getmany(timeout_ms=100)).values():
            records.extend(batch)
    return records


async def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
                   expected: int | None = None) -> list[ConsumerRecord]:
    """Every record of the topic up to the current end offsets (the LSO for read_committed), no group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                                auto_offset_reset="earliest", fetch_max_wait_ms=100)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)

        async def caught_up() -> bool:
            return all([await consumer.position(tp) >= ends[tp] for tp in tps])

        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + TIMEOUT_S
        while not await caught_up() or (expected is not None and len(records) < expected):
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out reading {topic} up to {ends}; got {len(records)}")
            for batch in (await consumer.getmany(timeout_ms=100)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[RecordBatch]:
    """The batches the broker wrote to disk for one partition (the shared broker stores on disk)."""
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    return [batch for segment in sorted(directory.glob("*.log")) for batch in iter_batches(segment.read_bytes())]


async def create_topic(bootstrap: str, topic: str, partitions: int = 3, configs: dict[str, str] | None = None) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
        assert [error for _, error, *_ in response.topic_errors] == [0], response
    finally:
        await admin.close()


def by_partition(records: Iterable[ConsumerRecord]) -> dict[int, list[ConsumerRecord]]:
    out: dict[int, list[ConsumerRecord]] = {}
    for record in records:
        out.setdefault(record.partition, []).append(record)
    return out


# ------------------------------------------------------------------------------------------ admin
def test_admin_client_topic_lifecycle_and_configs(broker: BrokerProcess) -> None:
    async def body() -> None:
        topic = unique("aio-admin")
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            created = await admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "123456",
                                                                                        "cleanup.policy": "delete"})])
            assert [(name, error) for name, error, *_ in created.topic_errors] == [(topic, 0)]
            again = await admin.create_topics([NewTopic(topic, 3, 1)])
            assert [error for _, error, *_ in again.topic_errors] == [36]  # TOPIC_ALREADY_EXISTS
            assert topic in await admin.list_topics()

            [described] = await admin.describe_topics([topic])
            assert described["error_code"] == 0
            assert sorted((p["partition"], p["leader"], p["replicas"], p["isr"]) for p in described["partitions"]) \
                == [(p, 1, [1], [1]) for p in range(3)]
            cluster = await admin.describe_cluster()
            assert cluster["controller_id"] == 1
            assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, *broker.address)]

            [configs] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                                     {"retention.ms": None, "segment.bytes": None})])
            [resource] = configs.resources
            assert resource[0] == 0, resource
            entries = {entry[0]: entry[1] for entry in resource[4]}
            assert entries["retention.ms"] == "123456"
            assert entries["segment.bytes"] == str(1024 ** 3)
            [broker_configs] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                                            include_synonyms=True)
            [broker_resource] = broker_configs.resources
            assert broker_resource[0] == 0
            assert {entry[0] for entry in broker_resource[4]} >= {"num.partitions", "log.retention.hours"}

            altered = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                                {"retention.ms": "654321"})])
            assert [r[0] for r in altered[0].resources] == [0]
            [configs] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                                     {"retention.ms": None})])
            assert [(e[0], e[1]) for e in configs.resources[0][4]] == [("retention.ms", "654321")]

            grown = await admin.create_partitions({topic: NewPartitions(5)})
            assert [error for _, error, *_ in grown.topic_errors] == [0]
            [described] = await admin.describe_topics([topic])
            assert len(described["partitions"]) == 5

            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
            await producer.start()
            try:
                for index in range(10):
                    await producer.send(topic, b"%d" % index, partition=0)
                await producer.flush()
            finally:
                await producer.stop()
            low = await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(before_offset=4)})
            assert low == {TopicPartition(topic, 0): 4}

            deleted = await admin.delete_topics([topic])
            assert [tuple(entry) for entry in deleted.topic_error_codes] == [(topic, 0)]
            assert topic not in await admin.list_topics()
            again = await admin.delete_topics([topic])
            assert [tuple(entry) for entry in again.topic_error_codes] == [(topic, 3)]  # UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await admin.close()

    run(body())


# --------------------------------------------------------------------------------------- producing
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_producer_codecs_round_trip_with_acks_all(broker: BrokerProcess, codec: str | None) -> None:
    """Keyed records with headers (null keys and values too), acks=all, one codec per run: the
    batches are stored with that codec as sent, and come back intact and in order."""
    async def body() -> None:
        topic = unique(f"aio-codec-{codec}")
        await create_topic(broker.bootstrap, topic, 3)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type=codec,
                                    linger_ms=5)
        await producer.start()
        sent: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        try:
            futures = []
            payloads = []
            for index in range(90):
                key = None if index % 10 == 3 else b"key-%d" % (index % 7)
                # (aiokafka refuses a record whose key and value are both null)
                value = None if index % 15 == 14 else b"value-%d-" % index + b"z" * (index * 11)
                headers = [("index", b"%d" % index), ("kind", b"aiokafka"), ("dup", b"1"), ("dup", b"2")]
                futures.append(await producer.send(topic, value, key=key, headers=headers,
                                                   partition=None if key is not None else index % 3))
                payloads.append((key, value, headers))
            for future, (key, value, headers) in zip(futures, payloads, strict=True):
                metadata = await future
                sent.append((metadata.partition, metadata.offset, key, value, headers))
        finally:
            await producer.stop()

        records = await read_all(broker.bootstrap, topic, 3, expected=len(sent))
        got = {(r.partition, r.offset): (r.key, r.value, list(r.headers)) for r in records}
        assert got == {(p, o): (k, v, h) for p, o, k, v, h in sent}
        for partition, mine in by_partition(records).items():
            assert [r.offset for r in mine] == list(range(len(mine))), partition
        expected_codec = Compression.NONE if codec is None else Compression[codec.upper()]
        codecs = {batch.compression for p in range(3) for batch in stored_batches(broker, topic, p)}
        assert codecs == {expected_codec}

    run(body())


@pytest.mark.parametrize("topic_codec", ["zstd", "snappy", "lz4"])
def test_a_topic_compression_type_recompresses_aiokafka_batches(broker: BrokerProcess, topic_codec: str) -> None:
    """The topic's compression.type differs from the producer's, so the broker decodes aiokafka's
    batches (xerial-framed snappy, lz4 frames, zstd, gzip; values up to 100 KB span several snappy
    and lz4 blocks) and re-encodes them; aiokafka decodes what the broker wrote."""
    async def body() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            for codec in (None, "gzip", "snappy", "lz4", "zstd"):
                topic = unique(f"aio-recompress-{topic_codec}-{codec}")
                response = await admin.create_topics([NewTopic(topic, 1, 1,
                                                               topic_configs={"compression.type": topic_codec})])
                assert [error for _, error, *_ in response.topic_errors] == [0]
                values = [bytes(range(97, 123)) * (index * 200 + 1) + b"%d" % index for index in range(20)]
                producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type=codec,
                                            max_batch_size=1 << 20, max_request_size=1 << 21)
                await producer.start()
                try:
                    futures = [await producer.send(topic, value, key=b"%d" % index)
                               for index, value in enumerate(values)]
                    for future in futures:
                        await future
                finally:
                    await producer.stop()
                records = await read_all(broker.bootstrap, topic, 1, expected=len(values))
                assert [(r.offset, r.key, r.value) for r in records] \
                    == [(index, b"%d" % index, value) for index, value in enumerate(values)], codec
                assert {b.compression for b in stored_batches(broker, topic, 0)} == {Compression[topic_codec.upper()]}
        finally:
            await admin.close()

    run(body())


def test_idempotent_producer_writes_each_record_once_in_sequence(broker: BrokerProcess) -> None:
    """enable_idempotence=True: InitProducerId, then batches with a producer id, epoch and sequences
    that continue per partition; every record lands exactly once, in send order per partition."""
    async def body() -> None:
        topic = unique("aio-idem")
        await create_topic(broker.bootstrap, topic, 3)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                    compression_type="lz4", linger_ms=2, max_batch_size=2048)
        await producer.start()
        try:
            futures = [await producer.send(topic, b"m-%03d" % i + b"." * 40, key=b"k%d" % (i % 9))
                       for i in range(300)]
            results = [await future for future in futures]
        finally:
            await producer.stop()

        records = await read_all(broker.bootstrap, topic, 3, expected=300)
        assert sorted(r.value[:5] for r in records) == sorted(b"m-%03d" % i for i in range(300))
        sent_order = {p: [i for i, md in enumerate(results) if md.partition == p] for p in range(3)}
        for partition, mine in by_partition(records).items():
            assert [r.offset for r in mine] == list(range(len(mine)))
            assert [int(r.value[2:5]) for r in mine] == sent_order[partition]

        producer_ids = set()
        for partition in range(3):
            batches = stored_batches(broker, topic, partition)
            assert len(batches) > 1  # several batches, so sequences must continue across them
            expected_sequence = 0
            for batch in batches:
                producer_ids.add((batch.producer_id, batch.producer_epoch))
                assert batch.base_sequence == expected_sequence, (partition, batch)
                assert batch.compression == Compression.LZ4
                expected_sequence += batch.records_count
        [(producer_id, epoch)] = producer_ids
        assert producer_id >= 0 and epoch == 0

    run(body())


# ------------------------------------------------------------------------------------------ groups
def test_group_of_two_commits_and_a_new_member_resumes(fresh_broker: Callable[..., BrokerProcess]) -> None:
    async def body(process: BrokerProcess) -> None:
        topic, group = unique("aio-group"), unique("aio-group")
        await create_topic(process.bootstrap, topic, 3)
        members = [AIOKafkaConsumer(topic, bootstrap_servers=process.bootstrap, group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest", **FAST_GROUP)
                   for _ in range(2)]
        producer = AIOKafkaProducer(bootstrap_servers=process.bootstrap, acks="all")
        await producer.start()
        admin = AIOKafkaAdminClient(bootstrap_servers=process.bootstrap)
        await admin.start()
        try:
            for member in members:
                await member.start()

            # Both members hold a share of the same generation (getmany drives nothing here: the
            # coordinator task rebalances in the background).
            def balanced() -> bool:
                shares = [member.assignment() for member in members]
                return all(shares) and not (shares[0] & shares[1]) and len(shares[0] | shares[1]) == 3
            await eventually(balanced, "both members assigned disjoint partitions")
            shares = [{tp.partition for tp in member.assignment()} for member in members]

            for index in range(60):
                await producer.send(topic, b"first-%d" % index, key=b"%d" % index)
            await producer.flush()
            consumed: list[list[ConsumerRecord]] = [[], []]
            deadline = time.monotonic() + TIMEOUT_S
            while sum(map(len, consumed)) < 60:
                assert time.monotonic() < deadline, f"consumed only {sum(map(len, consumed))} of 60"
                results = await asyncio.gather(*(member.getmany(timeout_ms=100) for member in members))
                for i, result in enumerate(results):
                    for batch in result.values():
                        consumed[i].extend(batch)
            for i, member in enumerate(members):
                assert {r.partition for r in consumed[i]} <= shares[i]
                await member.commit()
            assert sorted(r.value for mine in consumed for r in mine) == sorted(b"first-%d" % i for i in range(60))

            [description] = (await admin.describe_consumer_groups([group]))[0].groups
            assert description[0] == 0 and description[2] == "Stable" and len(description[5]) == 2
            for member in members:
                await member.stop()
            members.clear()

            ends = await end_offsets(process.bootstrap, topic, 3)
            committed = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: om.offset for tp, om in committed.items()} == ends

            for index in range(15):
                await producer.send(topic, b"second-%d" % index, key=b"%d" % index)
            await producer.flush()
            newcomer = AIOKafkaConsumer(topic, bootstrap_servers=process.bootstrap, group_id=group,
                                        enable_auto_commit=False, auto_offset_reset="earliest", **FAST_GROUP)
            members.append(newcomer)
            await newcomer.start()
            resumed = await consume(newcomer, 15, "records after the committed offsets")
            assert sorted(r.value for r in resumed) == sorted(b"second-%d" % i for i in range(15))
            for tp in newcomer.assignment():
                assert await newcomer.committed(tp) == ends[tp.partition]
        finally:
            for member in members:
                await member.stop()
            await producer.stop()
            await admin.close()

    run(body(fresh_broker(*GROUP_ARGS)))


async def end_offsets(bootstrap: str, topic: str, partitions: int,
                      isolation: str = "read_uncommitted") -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    await consumer.start()
    try:
        found = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: offset for tp, offset in found.items()}
    finally:
        await consumer.stop()


def test_static_member_comes_back_without_a_rebalance(fresh_broker: Callable[..., BrokerProcess]) -> None:
    """A static member (group_instance_id) leaves no LeaveGroup behind when it stops; the same
    instance rejoining replaces its old member id in the Stable group and resumes from its commits."""
    async def body(process: BrokerProcess) -> None:
        topic, group = unique("aio-static"), unique("aio-static")
        await create_topic(process.bootstrap, topic, 3)
        producer = AIOKafkaProducer(bootstrap_servers=process.bootstrap, acks="all")
        admin = AIOKafkaAdminClient(bootstrap_servers=process.bootstrap)
        await producer.start()
        await admin.start()

        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(topic, bootstrap_servers=process.bootstrap, group_id=group,
                                    group_instance_id="instance-1", enable_auto_commit=False,
                                    auto_offset_reset="earliest", **FAST_GROUP)

        async def describe() -> Any:
            [description] = (await admin.describe_consumer_groups([group]))[0].groups
            return description

        try:
            for index in range(20):
                await producer.send(topic, b"a%d" % index, key=b"%d" % index)
            await producer.flush()
            first = make()
            await first.start()
            try:
                assert len(await consume(first, 20)) == 20
                await first.commit()
            finally:
                await first.stop()
            before = await describe()
            assert before[2] == "Stable" and len(before[5]) == 1  # still a member: no LeaveGroup
            [old_member_id] = [member[0] for member in before[5]]
            assert old_member_id.startswith("instance-1-")

            for index in range(5):
                await producer.send(topic, b"b%d" % index, key=b"%d" % index)
            await producer.flush()
            second = make()
            await second.start()
            try:
                resumed = await consume(second, 5)
                assert sorted(r.value for r in resumed) == sorted(b"b%d" % i for i in range(5))
                assert {tp.partition for tp in second.assignment()} == {0, 1, 2}
            finally:
                await second.stop()
            after = await describe()
            assert after[2] == "Stable" and len(after[5]) == 1
            assert after[5][0][0] != old_member_id and after[5][0][0].startswith("instance-1-")
        finally:
            await producer.stop()
            await admin.close()

    run(body(fresh_broker(*GROUP_ARGS)))


# ------------------------------------------------------------------------------------ transactions
def test_transactions_commit_abort_and_offsets_with_read_committed(broker: BrokerProcess) -> None:
    async def body() -> None:
        topic, group = unique("aio-txn"), unique("aio-txn-offsets")
        await create_topic(broker.bootstrap, topic, 2)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("aio-txn"))
        await producer.start()
        try:
            async with producer.transaction():
                for index in range(6):
                    await producer.send(topic, b"committed-%d" % index, partition=index % 2)
            await producer.begin_transaction()
            for index in range(6):
                await producer.send(topic, b"aborted-%d" % index, partition=index % 2, headers=[("h", b"x")])
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, b"with-offsets", partition=0)
                await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 3,
                                                            TopicPartition(topic, 1): 1}, group)
        finally:
            await producer.stop()

        committed = await read_all(broker.bootstrap, topic, 2, "read_committed")
        assert sorted(r.value for r in committed) == sorted([b"committed-%d" % i for i in range(6)] + [b"with-offsets"])
        everything = await read_all(broker.bootstrap, topic, 2, "read_uncommitted")
        assert sorted(r.value for r in everything) == sorted(
            [b"committed-%d" % i for i in range(6)] + [b"aborted-%d" % i for i in range(6)] + [b"with-offsets"])
        # control batches take offsets but are never returned: 3 + 1 + 3 + 1 + (1 + 1) on partition 0
        assert await end_offsets(broker.bootstrap, topic, 2) == {0: 10, 1: 8}

        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 3, 1: 1}
        finally:
            await admin.close()

    run(body())


def test_an_open_transaction_holds_read_committed_at_the_last_stable_offset(broker: BrokerProcess) -> None:
    async def body() -> None:
        topic = unique("aio-lso")
        await create_topic(broker.bootstrap, topic, 1)
        tp = TopicPartition(topic, 0)
        plain = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        transactional = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("aio-lso"))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                    enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await plain.start()
        await transactional.start()
        await consumer.start()
        try:
            await plain.send_and_wait(topic, b"before-0")
            await plain.send_and_wait(topic, b"before-1")
            await transactional.begin_transaction()
            await transactional.send_and_wait(topic, b"txn-0", partition=0)
            await transactional.send_and_wait(topic, b"txn-1", partition=0)
            await plain.send_and_wait(topic, b"after-open")

            assert await end_offsets(broker.bootstrap, topic, 1, "read_committed") == {0: 2}
            assert await end_offsets(broker.bootstrap, topic, 1, "read_uncommitted") == {0: 5}
            consumer.assign([tp])
            before = await consume(consumer, 2)
            assert [r.value for r in before] == [b"before-0", b"before-1"]
            # The fetch responses report the high watermark and the last stable offset separately.
            await eventually(lambda: consumer.last_stable_offset(tp) == 2 and consumer.highwater(tp) == 5,
                             "LSO 2 and high watermark 5 in a fetch response")
            assert await consumer.getmany(timeout_ms=300) == {}
            assert await consumer.position(tp) == 2

            await transactional.commit_transaction()
            rest = await consume(consumer, 3)
            assert [(r.offset, r.value) for r in rest] == [(2, b"txn-0"), (3, b"txn-1"), (4, b"after-open")]
            await eventually(lambda: consumer.last_stable_offset(tp) == 6 == consumer.highwater(tp),
                             "LSO and high watermark past the commit marker")
        finally:
            await consumer.stop()
            await transactional.stop()
            await plain.stop()

    run(body())


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(broker: BrokerProcess) -> None:
    async def body() -> None:
        topic, transactional_id = unique("aio-fence"), unique("aio-fence")
        await create_topic(broker.bootstrap, topic, 1)
        zombie = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
        fresh = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait(topic, b"zombie", partition=0)
            await fresh.start()  # InitProducerId bumps the epoch and aborts the zombie's transaction
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
            async with fresh.transaction():
                await fresh.send_and_wait(topic, b"fresh", partition=0)
        finally:
            await fresh.stop()
            await zombie.stop()
        assert [r.value for r in await read_all(broker.bootstrap, topic, 1, "read_committed")] == [b"fresh"]

    run(body())


def test_consume_transform_produce_from_an_active_group(fresh_broker: Callable[..., BrokerProcess]) -> None:
    """Each polled batch is processed in a transaction that writes the output and commits the input
    offsets for the (active) group with send_offsets_to_transaction; a second worker resumes exactly
    where the first stopped."""
    async def body(process: BrokerProcess) -> None:
        source, sink, group = unique("aio-eos-in"), unique("aio-eos-out"), unique("aio-eos")
        await create_topic(process.bootstrap, source, 3)
        await create_topic(process.bootstrap, sink, 3)
        feeder = AIOKafkaProducer(bootstrap_servers=process.bootstrap, acks="all")
        await feeder.start()

        async def worker(label: bytes, expected: int) -> list[bytes]:
            consumer = AIOKafkaConsumer(source, bootstrap_servers=process.bootstrap, group_id=group,
                                        enable_auto_commit=False, auto_offset_reset="earliest",
                                        isolation_level="read_committed", **FAST_GROUP)
            producer = AIOKafkaProducer(bootstrap_servers=process.bootstrap, transactional_id=unique("aio-eos"))
            await consumer.start()
            await producer.start()
            processed: list[bytes] = []
            try:
                deadline = time.monotonic() + TIMEOUT_S
                while len(processed) < expected:
                    assert time.monotonic() < deadline, f"processed {len(processed)} of {expected}"
                    batches = await consumer.getmany(timeout_ms=100)
                    if not batches:
                        continue
                    async with producer.transaction():
                        for _tp, records in batches.items():
                            for record in records:
                                await producer.send(sink, label + b":" + record.value, key=record.key)
                                processed.append(record.value)
                        await producer.send_offsets_to_transaction(
                            {tp: records[-1].offset + 1 for tp, records in batches.items()}, group)
            finally:
                await producer.stop()
                await consumer.stop()
            return processed

        try:
            for index in range(30):
                await feeder.send(source, b"a%d" % index, key=b"%d" % index)
            await feeder.flush()
            first = await worker(b"first", 30)
            for index in range(10):
                await feeder.send(source, b"b%d" % index, key=b"%d" % index)
            await feeder.flush()
            second = await worker(b"second", 10)
        finally:
            await feeder.stop()
        assert sorted(first) == sorted(b"a%d" % i for i in range(30))
        assert sorted(second) == sorted(b"b%d" % i for i in range(10))
        output = await read_all(process.bootstrap, sink, 3, "read_committed", expected=40)
        assert sorted(r.value for r in output) == sorted([b"first:a%d" % i for i in range(30)]
                                                         + [b"second:b%d" % i for i in range(10)])
        admin = AIOKafkaAdminClient(bootstrap_servers=process.bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        ends = await end_offsets(process.bootstrap, source, 3)
        assert {tp.partition: om.offset for tp, om in offsets.items()} == ends

    run(body(fresh_broker(*GROUP_ARGS)))
