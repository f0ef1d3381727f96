"""What survives a broker restart: a clean stop (SIGTERM), kill -9, a torn tail, many segments.

Each test runs its own broker on a data directory in the test's tmp dir and restarts it on that
directory. Records are written and read back with confluent-kafka (librdkafka) over real sockets.

* A clean restart keeps every record at its offset (keys, values, headers, timestamps), the log
  start and end offsets, topic ids, partition counts (added partitions too), config overrides (set
  at creation or altered later), and deleted topics stay deleted; new records continue the offsets.
* kill -9 during an acks=all run: every acknowledged record is found at its acknowledged offset.
* A torn tail (half a batch, or a whole batch with a bad CRC) is cut off at restart, logged, and
  the offsets continue where the intact log ends.
* kill -9 after acks=all records answered with ``log.flush.on.ack=true`` (records synced, indexes
  and recovery point not): every acknowledged record survives and the rebuilt indexes agree with
  the records.
* With a small ``log.segment.bytes``, several segments (``.log``, ``.index``, ``.timeindex`` each)
  survive a clean restart and a kill, and timestamp lookups through their time indexes still agree.

A caveat on kill -9: it ends the broker process, not the machine, so the page cache survives and a
write the broker made before dying is still there afterwards. These tests therefore prove that an
acknowledged record was written before it was acknowledged and that recovery keeps it; they cannot
prove the fsync itself (``log.flush.on.ack=true`` is on in the acks=all test so the code path that
waits for the fsync runs under a kill). The torn-tail test writes the torn bytes itself.
"""

from __future__ import annotations

import functools
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from kafkalite.broker.core.log.manager import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

if TYPE_CHECKING:
    from tests.integration.conftest import BrokerProcess

WaitUntil = Callable[..., object]
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Stored:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


# helpers ------------------------------------------------------------------------------------------

def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, count: int, *, prefix: str = "record",
            **config: Any) -> list[tuple[int, int]]:
    """``count`` keyed records with headers, acks=all; the acknowledged (partition, offset) of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "partitioner": "murmur2_random", **config})
    acks: list[tuple[int, int] | None] = [None] * count
    errors: list[KafkaError] = []

    def delivered(index: int, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            errors.append(error)
        else:
            acks[index] = (message.partition(), message.offset())

    for index in range(count):
        producer.produce(topic, key=f"{prefix}-{index}".encode(), value=f"{prefix} value {index} ".encode() * 3,
                         headers=[("index", str(index).encode())], on_delivery=functools.partial(delivered, index))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0, "not every record was delivered in time"
    assert not errors, errors[:5]
    return acks  # type: ignore[return-value]


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(log start offset, high watermark) per partition, through ListOffsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return {partition: consumer.get_watermark_offsets(ConfluentTopicPartition(topic, partition),
                                                          timeout=TIMEOUT_S, cached=False)
                for partition in range(partitions)}
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], Stored]:
    """Every record of the topic by (partition, offset), read from each log start to its high watermark."""
    ends = watermarks(bootstrap, topic, partitions)
    expected = {partition: high - low for partition, (low, high) in ends.items()}
    # librdkafka wants a group.id to make a Consumer; with assign() and no commits it never joins the group.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    records: dict[tuple[int, int], Stored] = {}
    counts = dict.fromkeys(expected, 0)
    try:
        consumer.assign([ConfluentTopicPartition(topic, partition, OFFSET_BEGINNING) for partition in expected])
        deadline = time.monotonic() + TIMEOUT_S
        while counts != expected and time.monotonic() < deadline:
            wanted = sum(expected.values()) - sum(counts.values())  # consume() returns early only when full
            for message in consumer.consume(num_messages=min(10_000, wanted), timeout=0.5):
                assert message.error() is None, message.error()
                counts[message.partition()] += 1
                records[(message.partition(), message.offset())] = Stored(
                    message.key(), message.value(), tuple(message.headers() or ()), message.timestamp()[1])
    finally:
        consumer.close()
    assert counts == expected, f"read {counts} records per partition, the watermarks say {expected}"
    for partition, (low, high) in ends.items():  # each offset once, no gaps
        assert sorted(offset for p, offset in records if p == partition) == list(range(low, high))
    return records


def offsets_for_times(bootstrap: str, targets: list[ConfluentTopicPartition]) -> list[int]:
    """The offset ListOffsets finds for each (topic, partition, timestamp)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        # One partition per call: librdkafka merges a partition named twice in one request.
        return [consumer.offsets_for_times([target], timeout=TIMEOUT_S)[0].offset for target in targets]
    finally:
        consumer.close()


def topic_facts(bootstrap: str, topic: str) -> tuple[str, int, dict[str, str]]:
    """(topic id, partition count, the topic's own config overrides)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=TIMEOUT_S)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    overrides = {name: entry.value for name, entry in configs.items()
                 if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return str(description.topic_id), len(description.partitions), overrides


def segment_files(partition_dir: Path) -> list[str]:
    return sorted(path.name for path in partition_dir.iterdir() if re.fullmatch(r"\d{20}\.(log|index|timeindex)",
                                                                                path.name))


# tests --------------------------------------------------------------------------------------------

def test_clean_restart_keeps_records_offsets_topic_ids_and_configs(fresh_broker: Callable[..., BrokerProcess]) -> None:
    """SIGTERM, start again on the same data: everything an admin or a consumer can see is the same."""
    broker = fresh_broker()
    configured, purged, doomed = unique("restart-configured"), unique("restart-purged"), unique("restart-deleted")
    create_topic(broker.bootstrap, configured, 3, {"retention.ms": "86400000", "max.message.bytes": "2000000",
                                                   "cleanup.policy": "delete", "segment.bytes": "1048576"})
    create_topic(broker.bootstrap, purged, 1, {"message.timestamp.type": "LogAppendTime"})
    create_topic(broker.bootstrap, doomed, 1)
    produce(broker.bootstrap, configured, 3000, **{"compression.type": "lz4"})
    produce(broker.bootstrap, purged, 500)
    produce(broker.bootstrap, doomed, 10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [deleted] = admin.delete_records([ConfluentTopicPartition(purged, 0, 120)]).values()
    assert deleted.result(timeout=TIMEOUT_S).low_watermark == 120  # the new log start offset
    admin.create_partitions([NewPartitions(configured, 4)])[configured].result(timeout=TIMEOUT_S)
    resource = ConfigResource(ResourceType.TOPIC, configured, incremental_configs=[
        ConfigEntry("retention.ms", "172800000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    admin.delete_topics([doomed])[doomed].result(timeout=TIMEOUT_S)

    def state() -> dict[str, Any]:
        return {topic: {"id, partitions, overrides": topic_facts(broker.bootstrap, topic),
                        "watermarks": watermarks(broker.bootstrap, topic, partitions),
                        "records": read_all(broker.bootstrap, topic, partitions)}
                for topic, partitions in ((configured, 4), (purged, 1))}

    def listed() -> set[str]:
        return set(AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=TIMEOUT_S).topics)

    before = state()
    assert before[purged]["watermarks"] == {0: (120, 500)}
    assert before[configured]["id, partitions, overrides"][1:] == (4, {
        "retention.ms": "172800000", "max.message.bytes": "2000000", "cleanup.policy": "delete",
        "segment.bytes": "1048576"})
    assert before[configured]["watermarks"][3] == (0, 0)  # the added partition
    assert doomed not in listed()

    assert broker.stop() == 0
    mark = broker.log_mark()
    broker.restart()
    assert "after a clean shutdown" in broker.log_text(since=mark)
    after = state()
    for topic in (configured, purged):
        for facet in ("id, partitions, overrides", "watermarks", "records"):  # records: each at its offset
            assert after[topic][facet] == before[topic][facet], f"{topic}: {facet} changed across the restart"
    assert doomed not in listed(), "a deleted topic came back"
    assert not (broker.data_dir / f"{doomed}-0").exists()

    # New records continue the old offsets; none is handed out twice.
    assert produce(broker.bootstrap, purged, 1, prefix="after-restart") == [(0, 500)]


def test_every_acknowledged_record_survives_kill_9_during_acks_all(
        fresh_broker: Callable[..., BrokerProcess], wait_until: WaitUntil,
        record_property: Callable[[str, object], None]) -> None:
    """A producer keeps writing with acks=all (and fsync before the answer) while the broker is
    killed with SIGKILL and restarted; every record it was told is written is there afterwards."""
    broker = fresh_broker("log.flush.on.ack=true")
    topic = unique("kill-acks-all")
    create_topic(broker.bootstrap, topic, 3)
    acknowledged: list[tuple[bytes, bytes, int, int]] = []  # key, value, partition, offset
    failures: list[KafkaError] = []
    stop = threading.Event()

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        if error is None:
            acknowledged.append((message.key(), message.value(), message.partition(), message.offset()))
        else:
            failures.append(error)

    def run_producer() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                             "enable.idempotence": False, "partitioner": "murmur2_random",
                             "message.timeout.ms": 60_000, "reconnect.backoff.ms": 20,
                             "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
                             "queue.buffering.max.messages": 5_000})
        sequence = 0
        while not stop.is_set() and sequence < 500_000:
            try:
                producer.produce(topic, key=f"key-{sequence}".encode(), value=f"value-{sequence}".encode() * 4,
                                 on_delivery=on_delivery)
                sequence += 1
                producer.poll(0)
            except BufferError:  # the local queue is full: wait for deliveries
                producer.poll(0.05)
        producer.flush(TIMEOUT_S)

    thread = threading.Thread(target=run_producer, name="acks-all-producer", daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acknowledged) >= 2000, TIMEOUT_S, "the producer got no acknowledgements")
        mark = broker.log_mark()
        broker.kill()  # SIGKILL by PID, with produce requests in flight
        acknowledged_at_kill = len(acknowledged)
        broker.restart()  # same data dir, same port: the producer reconnects by itself
        wait_until(lambda: len(acknowledged) >= acknowledged_at_kill + 2000, TIMEOUT_S,
                   "the producer did not resume after the restart")
    finally:
        stop.set()
        thread.join(TIMEOUT_S + 10)
    assert not thread.is_alive()
    assert "after an unclean shutdown" in broker.log_text(since=mark)
    assert not failures, failures[:5]
    record_property("acknowledged_before_kill", acknowledged_at_kill)
    record_property("acknowledged_in_all", len(acknowledged))

    stored = read_all(broker.bootstrap, topic, 3)

    def found(partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        record = stored.get((partition, offset))
        return None if record is None else (record.key, record.value)

    missing = [(key, partition, offset) for key, value, partition, offset in acknowledged
               if found(partition, offset) != (key, value)]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged records are not where they were " \
                        f"acknowledged, e.g. {missing[:5]}"


def check_indexes(partition_dir: Path, stored: dict[int, Stored]) -> int:
    """Every ``.index`` entry of the partition's segments names the batch stored at its position (its
    last offset), and every ``.timeindex`` entry the largest timestamp up to its offset; the number of
    entries checked."""
    checked = 0
    for log_file in sorted(partition_dir.glob("*.log")):
        base = int(log_file.name[:20])
        starts: dict[int, int] = {}  # position -> last offset of the batch there
        position = 0
        for batch in iter_batches(log_file.read_bytes()):
            assert isinstance(batch, RecordBatch)
            starts[position] = batch.last_offset
            position += batch.size
        index = log_file.with_suffix(".index").read_bytes()
        for relative, where in struct.iter_unpack(">ii", index):
            assert starts.get(where) == base + relative, (log_file.name, relative, where)
            checked += 1
        largest = -1
        largest_so_far: dict[int, int] = {}
        for offset in sorted(offset for offset in stored if offset >= base and offset < base + 2**31):
            largest = max(largest, stored[offset].timestamp)
            largest_so_far[offset] = largest
        for timestamp, relative in struct.iter_unpack(">qi", log_file.with_suffix(".timeindex").read_bytes()):
            assert largest_so_far.get(base + relative) == timestamp, (log_file.name, timestamp, relative)
            checked += 1
    return checked


def test_kill_9_after_flush_on_ack_leaves_every_acknowledged_record_and_consistent_indexes(
        fresh_broker: Callable[..., BrokerProcess]) -> None:
    """With ``log.flush.on.ack=true`` a Produce is answered once its records are synced, but the
    indexes are not, and the recovery point stays where the periodic flushes (rolled segments) put
    it. After kill -9 the restart validates everything above the recovery point and re-indexes it:
    every acknowledged record is at its offset, every index entry names the batch it points at, and
    timestamp lookups agree with the records."""
    broker = fresh_broker("log.flush.on.ack=true", "log.segment.bytes=32768", "log.index.interval.bytes=512")
    topic = unique("flush-on-ack-kill")
    create_topic(broker.bootstrap, topic, 2)
    mark = broker.log_mark()
    acks = produce(broker.bootstrap, topic, 3000, **{"batch.size": 2048, "linger.ms": 1})
    broker.kill()  # at once: the periodic task moves a recovery point up to what was synced only seconds later
    ends = {partition: 1 + max(offset for p, offset in acks if p == partition) for partition in range(2)}
    recovery_points = {partition: offset for (name, partition), offset
                       in read_offset_checkpoint(broker.data_dir / RECOVERY_POINT_CHECKPOINT).items() if name == topic}
    # The answers' syncs did not move the recovery points to the end: recovery has a tail to validate.
    assert all(recovery_points.get(partition, 0) < ends[partition] for partition in range(2)), recovery_points
    broker.restart()
    assert "after an unclean shutdown" in broker.log_text(since=mark)
    after = read_all(broker.bootstrap, topic, 2)
    assert len(after) == len(acks) == 3000
    for index, (partition, offset) in enumerate(acks):
        assert after[(partition, offset)].key == f"record-{index}".encode()
    checked = 0
    for partition in range(2):
        records = {offset: record for (p, offset), record in after.items() if p == partition}
        checked += check_indexes(broker.data_dir / f"{topic}-{partition}", records)
    assert checked > 100  # several segments, an entry every 512 bytes
    targets = [ConfluentTopicPartition(topic, partition, after[(partition, offset)].timestamp)
               for partition in range(2) for offset in (0, 400, 900, 1300) if (partition, offset) in after]
    for target, offset in zip(targets, offsets_for_times(broker.bootstrap, targets), strict=True):
        assert offset == min(o for (p, o), record in after.items()
                             if p == target.partition and record.timestamp >= target.offset), (target, offset)


def torn_half_batch(base_offset: int) -> bytes:
    """The first half of a valid batch: a write cut short by a crash."""
    batch = RecordBatchBuilder(base_offset=base_offset)
    for index in range(20):
        batch.append(timestamp=int(time.time() * 1000), key=b"torn-%d" % index, value=b"never acknowledged" * 5)
    data = batch.build()
    return bytes(data[:len(data) // 2])


def corrupt_whole_batch(base_offset: int) -> bytes:
    """A complete batch whose CRC does not match its contents (a sector that never made it to disk)."""
    batch = RecordBatchBuilder(base_offset=base_offset)
    batch.append(timestamp=int(time.time() * 1000), key=b"corrupt", value=b"flipped bits")
    data = batch.build()
    data[-3] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("damage", [torn_half_batch, corrupt_whole_batch], ids=["half-batch", "bad-crc"])
def test_a_torn_tail_is_truncated_at_restart(fresh_broker: Callable[..., BrokerProcess],
                                            damage: Callable[[int], bytes]) -> None:
    broker = fresh_broker()
    topic = unique("torn-tail")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 200)
    before = read_all(broker.bootstrap, topic, 1)
    broker.kill()

    segment = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"  # Kafka's layout
    intact_size = segment.stat().st_size
    garbage = damage(200)
    with open(segment, "ab") as log_file:
        log_file.write(garbage)

    mark = broker.log_mark()
    broker.restart()
    restart_log = broker.log_text(since=mark)
    assert re.search(rf"Recovered {re.escape(topic)}-0 from offset \d+: truncated {len(garbage)} bytes at offset 200",
                     restart_log), restart_log
    assert segment.stat().st_size == intact_size
    assert watermarks(broker.bootstrap, topic, 1) == {0: (0, 200)}
    assert read_all(broker.bootstrap, topic, 1) == before
    assert produce(broker.bootstrap, topic, 1, prefix="after-recovery") == [(0, 200)]


def test_many_segments_survive_a_clean_restart_and_a_kill(fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker("log.segment.bytes=32768")
    topic = unique("segments")
    create_topic(broker.bootstrap, topic, 2)
    # Batches must stay below the segment size (a bigger one is refused, as Kafka does).
    produce(broker.bootstrap, topic, 6000, **{"batch.size": 16384})
    before = read_all(broker.bootstrap, topic, 2)
    assert len(before) == 6000

    files: dict[int, list[str]] = {}
    for partition in range(2):
        names = segment_files(broker.data_dir / f"{topic}-{partition}")
        bases = sorted({int(name[:20]) for name in names})
        assert len(bases) >= 4, f"partition {partition} has only {len(bases)} segments"
        assert all(f"{base:020d}{suffix}" in names for base in bases for suffix in (".log", ".index", ".timeindex"))
        assert bases[0] == 0
        # Each segment starts right after the previous one ends: its base offset is a record's offset.
        assert all((partition, base) in before for base in bases)
        files[partition] = names

    # Timestamp lookups go through the time indexes of every segment; they must survive restarts.
    targets = [ConfluentTopicPartition(topic, partition, before[(partition, offset)].timestamp)
               for partition in range(2) for offset in (0, 777, 1500, 2400)
               if (partition, offset) in before]
    lookups = offsets_for_times(broker.bootstrap, targets)
    for target, offset in zip(targets, lookups, strict=True):
        first_at_or_after = min(o for (p, o), record in before.items()
                                if p == target.partition and record.timestamp >= target.offset)
        assert offset == first_at_or_after, (target, offset)

    assert broker.stop() == 0
    broker.restart()
    assert read_all(broker.bootstrap, topic, 2) == before
    assert {partition: segment_files(broker.data_dir / f"{topic}-{partition}") for partition in range(2)} == files
    assert offsets_for_times(broker.bootstrap, targets) == lookups

    produce(broker.bootstrap, topic, 500, prefix="second-run", **{"batch.size": 16384})
    expected = read_all(broker.bootstrap, topic, 2)
    mark = broker.log_mark()
    broker.kill()
    broker.restart()
    assert "after an unclean shutdown" in broker.log_text(since=mark)
    assert read_all(broker.bootstrap, topic, 2) == expected
    assert len(expected) == 6500
    assert offsets_for_times(broker.bootstrap, targets) == lookups


def test_dynamic_configs_of_topics_and_the_broker_survive_kill_9(fresh_broker: Callable[..., BrokerProcess]) -> None:
    """AlterConfigs and IncrementalAlterConfigs on topics and on the broker, then SIGKILL: after the restart
    DescribeConfigs reports every change with its source (the cluster-wide default across a restart is
    in test_admin_answers.py, which sends it raw: confluent-kafka cannot name the default resource)."""
    broker = fresh_broker()
    legacy_topic, incremental_topic = unique("configs-legacy"), unique("configs-incremental")
    create_topic(broker.bootstrap, legacy_topic, 1, {"retention.ms": "86400000"})
    create_topic(broker.bootstrap, incremental_topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def settle(futures: dict[ConfigResource, Any]) -> None:
        for future in futures.values():
            future.result(timeout=TIMEOUT_S)

    # The legacy AlterConfigs replaces a topic's overrides.
    settle(admin.alter_configs([ConfigResource(ResourceType.TOPIC, legacy_topic,
                                               set_config={"max.message.bytes": "123456"})]))
    settle(admin.incremental_alter_configs([
        ConfigResource(ResourceType.TOPIC, incremental_topic, incremental_configs=[
            ConfigEntry("segment.bytes", "2097152", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET)]),
        ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)]),
    ]))
    before = (topic_facts(broker.bootstrap, legacy_topic), topic_facts(broker.bootstrap, incremental_topic))
    assert before[0][2] == {"max.message.bytes": "123456"}
    assert before[1][2] == {"segment.bytes": "2097152", "cleanup.policy": "compact,delete"}

    broker.kill()
    mark = broker.log_mark()
    broker.restart()
    assert "after an unclean shutdown" in broker.log_text(since=mark)
    assert (topic_facts(broker.bootstrap, legacy_topic), topic_facts(broker.bootstrap, incremental_topic)) == before
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    node = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert (node["log.cleaner.threads"].value, node["log.cleaner.threads"].source) == (
        "2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (node["log.retention.ms"].value, node["log.retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # The broker's new default reaches a topic that does not override it.
    resource = ConfigResource(ResourceType.TOPIC, incremental_topic)
    topic_configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert topic_configs["retention.ms"].value == "7200000"
