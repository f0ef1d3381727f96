"""Log compaction with Kafka's semantics, on both storage engines, driven without sockets or sleeps.

The latest record of each key is kept at its offset; tombstones get a delete horizon and go once it
has passed; aborted transactions are removed and markers only once safe; the dirty ratio, the
compaction lags and the cleaner checkpoint decide what is cleaned; a cleaning interrupted at any
point of its swap is completed or discarded at the next start; appends and reads go on between the
slices of a cleaning; the internal topics are compacted and still replay to the same state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.core.log.disk import DiskLog
from kafkalite.broker.core.partition import Partition
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

NOW = 1_800_000_000_000
DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": str(DAY)}


def open_cluster(data_dir: Path | None, **extra: str) -> Cluster:
    settings = {"log.storage": "memory"} if data_dir is None else {"log.dirs": str(data_dir)}
    cluster = Cluster(BrokerConfig({**settings, "log.cleaner.backoff.ms": "0", **extra}))
    cluster.open()
    return cluster


@pytest.fixture(params=["disk", "memory"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    opened = open_cluster(tmp_path if request.param == "disk" else None)
    yield opened
    opened.close()


def topic(cluster: Cluster, name: str = "compacted", **configs: str) -> Partition:
    created = cluster.topics.get(name) or cluster.topics.create(name, 1, {**COMPACT, **configs})
    return created.partitions[0]


def write(partition: Partition, *records: tuple[bytes | None, bytes | None], now: int = NOW, producer_id: int = -1,
          sequence: int = -1, transactional: bool = False) -> int:
    """One batch of ``(key, value)`` records; its base offset."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=sequence, is_transactional=transactional)
    for key, value in records:
        builder.append(timestamp=now, key=key, value=value)
    return partition.append_internal(builder.build(), now)


def stored(partition: Partition) -> list[RecordBatch]:
    partition_log = partition.log
    read = partition_log.read(partition_log.log_start_offset, 1 << 30, min_one_batch=True)
    return [batch for batch in iter_batches(read.to_bytes()) if isinstance(batch, RecordBatch)]


def records(partition: Partition) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(record.offset, record.key, record.value) for batch in stored(partition) if not batch.is_control
            for record in batch.records()]


def clean(cluster: Cluster, now: int = NOW) -> int:
    return cluster.log_cleaner.clean_now(now)


# the latest record per key -----------------------------------------------------------------------

def test_the_latest_record_of_each_key_is_kept_at_its_offset(cluster: Cluster) -> None:
    partition = topic(cluster)
    for round_ in range(6):
        for key in (b"a", b"b", b"c"):
            write(partition, (key, b"%s-%d" % (key, round_)))
    write(partition, (b"d", b"only"))  # the active segment, never cleaned
    before = records(partition)
    assert clean(cluster) == 1
    after = records(partition)
    active_base = partition.log.active_segment_base_offset
    latest = {key: offset for offset, key, _ in before if offset < active_base}  # the last one wins
    assert [r for r in after if r[0] < active_base] == [r for r in before if active_base > r[0] == latest[r[1]]]
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert partition.log.log_end_offset == 19 and partition.log.segment_count() < 10
    # Offsets are kept: a consumer resuming anywhere finds its place.
    assert partition.read(5, 1 << 20, min_one_batch=True).size > 0


def test_a_second_cleaning_merges_clean_segments_and_keeps_every_latest_value(cluster: Cluster) -> None:
    partition = topic(cluster)
    latest: dict[bytes, bytes] = {}
    for round_ in range(30):
        key = b"k%d" % (round_ % 5)
        latest[key] = b"v%d" % round_
        write(partition, (key, latest[key]))
        if round_ % 10 == 9:
            clean(cluster)
    write(partition, (b"x", b"x"))
    clean(cluster)
    kept = {key: value for _, key, value in records(partition) if key != b"x"}
    assert kept == latest
    assert partition.log.segment_count() <= 4


# tombstones ---------------------------------------------------------------------------------------

def test_a_tombstone_is_kept_until_its_delete_horizon_then_removed_with_its_key(cluster: Cluster) -> None:
    partition = topic(cluster)
    write(partition, (b"gone", b"v1"))
    write(partition, (b"kept", b"v1"))
    write(partition, (b"gone", b"v2"))
    tombstone = write(partition, (b"gone", None))
    for index in range(4):  # push the tombstone out of the active segment
        write(partition, (b"filler-%d" % index, b"f" * 100))
    clean(cluster, NOW)
    keys = [(offset, key, value) for offset, key, value in records(partition) if key in (b"gone", b"kept")]
    assert keys == [(1, b"kept", b"v1"), (tombstone, b"gone", None)]
    [batch] = [b for b in stored(partition) if b.base_offset == tombstone]
    assert batch.has_delete_horizon and batch.base_timestamp == NOW + DAY

    write(partition, (b"more", b"m" * 300))
    write(partition, (b"more", b"m" * 300))
    clean(cluster, NOW + DAY - 1)  # not yet
    assert (tombstone, b"gone", None) in records(partition)
    write(partition, (b"more", b"m" * 300))
    clean(cluster, NOW + DAY + 1)
    assert [key for _, key, _ in records(partition)].count(b"gone") == 0


def test_keyless_records_are_refused_on_a_compacted_topic(cluster: Cluster) -> None:
    partition = topic(cluster)
    builder = RecordBatchBuilder()
    builder.append(timestamp=NOW, key=b"k", value=b"v")
    builder.append(timestamp=NOW, key=None, value=b"no key")
    with pytest.raises(KafkaError) as refused:
        partition.append_from_client(builder.build(), NOW)
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert "Compacted topic cannot accept message without key" in refused.value.message


# transactions -------------------------------------------------------------------------------------

def test_aborted_transactions_go_and_markers_stay_until_safe(cluster: Cluster) -> None:
    partition = topic(cluster)
    write(partition, (b"k", b"committed-1"), producer_id=7, sequence=0, transactional=True)
    partition.append_marker(7, 0, True, 0, NOW)
    write(partition, (b"k", b"aborted"), producer_id=7, sequence=1, transactional=True)
    write(partition, (b"other", b"aborted too"), producer_id=7, sequence=2, transactional=True)
    abort = partition.append_marker(7, 0, False, 0, NOW)
    # A later transaction of the same producer: the aborted batches are no longer its last (which the
    # cleaner would keep, emptied, for the producer's sake).
    write(partition, (b"later", b"committed-2"), producer_id=7, sequence=3, transactional=True)
    partition.append_marker(7, 0, True, 0, NOW)
    for index in range(4):
        write(partition, (b"filler-%d" % index, b"f" * 100))
    assert [txn.producer_id for txn in partition.producer_state.aborted_transactions(0, 100)] == [7]
    clean(cluster, NOW)
    values = [value for _, key, value in records(partition) if key in (b"k", b"other")]
    assert values == [b"committed-1"]  # the aborted data is gone, the committed value stays
    markers = [(batch.base_offset, next(batch.records()).key) for batch in stored(partition) if batch.is_control
               and batch.records_count]
    assert abort in [offset for offset, _ in markers]  # kept: its batches were removed only now

    write(partition, (b"more", b"m" * 300))
    write(partition, (b"more", b"m" * 300))
    clean(cluster, NOW)  # the abort has no batch left: safe, its index entry goes, its horizon is set
    assert partition.producer_state.aborted_transactions(0, 100) == []
    [marker] = [batch for batch in stored(partition) if batch.base_offset == abort]
    assert marker.has_delete_horizon
    write(partition, (b"more", b"m" * 300))
    clean(cluster, NOW + DAY + 1)
    assert abort not in [batch.base_offset for batch in stored(partition)]
    read = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert read.aborted_transactions == []


def test_the_last_batch_of_an_active_producer_is_kept_empty(cluster: Cluster) -> None:
    partition = topic(cluster)
    write(partition, (b"k", b"v0"), producer_id=9, sequence=0)
    write(partition, (b"k", b"v1"), producer_id=9, sequence=1)
    write(partition, (b"k", b"v2"), producer_id=10, sequence=0)  # supersedes producer 9's last record
    for index in range(4):
        write(partition, (b"filler-%d" % index, b"f" * 100))
    clean(cluster)
    by_offset = {batch.base_offset: batch for batch in stored(partition)}
    assert 0 not in by_offset  # producer 9's first batch: gone
    assert by_offset[1].records_count == 0 and by_offset[1].producer_id == 9 and by_offset[1].base_sequence == 1
    assert by_offset[2].records_count == 1  # the latest value
    # A retry of producer 9's last batch is still recognised after the producer state is rebuilt from the log.
    partition.producer_state.producers.clear()
    partition.producer_state.load(partition.log, NOW, 7 * DAY)
    assert partition.producer_state.producers[9].last_seq == 1


# what is cleaned, and when ------------------------------------------------------------------------

def test_the_dirty_ratio_and_the_lags_decide_what_is_cleaned(cluster: Cluster) -> None:
    partition = topic(cluster, "lagging", **{"min.cleanable.dirty.ratio": "0.9"})
    for index in range(8):
        write(partition, (b"k", b"v%d" % index + b"x" * 200))
    dirtiness = cluster.log_cleaner.dirtiness(partition, NOW)
    assert dirtiness is not None and dirtiness.ratio == 1.0 and dirtiness.first_dirty_offset == 0
    cluster.topics.set_configs("lagging", {**COMPACT, "min.compaction.lag.ms": str(DAY)})
    assert cluster.log_cleaner.dirtiness(partition, NOW).dirty_bytes == 0  # too recent to clean
    assert clean(cluster, NOW) == 0
    assert clean(cluster, NOW + DAY + 1) == 1
    dirtiness = cluster.log_cleaner.dirtiness(partition, NOW + DAY + 1)
    assert dirtiness.dirty_bytes == 0 and dirtiness.first_dirty_offset == partition.log.active_segment_base_offset
    write(partition, (b"k", b"one more" + b"x" * 200))
    cluster.topics.set_configs("lagging", {**COMPACT, "min.cleanable.dirty.ratio": "0.99"})
    assert clean(cluster, NOW + DAY + 2) == 0  # below the ratio


def test_max_compaction_lag_rolls_the_active_segment_and_forces_a_cleaning(cluster: Cluster) -> None:
    partition = topic(cluster, "overdue", **{"segment.bytes": "100000", "max.compaction.lag.ms": "1000",
                                             "min.cleanable.dirty.ratio": "0.99"})
    write(partition, (b"k", b"v1"), now=NOW)
    write(partition, (b"k", b"v2"), now=NOW + 10)
    assert partition.log.roll_deadline_ms() is not None
    write(partition, (b"k", b"v3"), now=NOW + 2000)  # past max.compaction.lag.ms: rolls first
    assert partition.log.segment_count() == 2
    assert cluster.log_cleaner.dirtiness(partition, NOW + 2000).overdue
    assert clean(cluster, NOW + 2000) == 1
    assert [value for _, _, value in records(partition)] == [b"v2", b"v3"]


# the checkpoint, and crashes ----------------------------------------------------------------------

def fill(partition: Partition, rounds: int = 8) -> None:
    for round_ in range(rounds):
        for key in (b"a", b"b"):
            write(partition, (key, b"%s-%d" % (key, round_) + b"x" * 100))


def test_the_cleaner_checkpoint_survives_a_restart(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    partition = topic(cluster)
    fill(partition)
    assert clean(cluster) == 1
    cleaned_to = cluster.log_manager.cleaner_offsets[("compacted", 0)]
    cluster.log_manager.run_periodic(int(time.time() * 1000))
    cluster.close(clean=False)
    assert (tmp_path / "cleaner-offset-checkpoint").read_text().endswith(f"compacted 0 {cleaned_to}\n")
    reopened = open_cluster(tmp_path)
    try:
        partition = topic(reopened)
        assert reopened.log_manager.cleaner_offsets[("compacted", 0)] == cleaned_to
        assert reopened.log_cleaner.dirtiness(partition, NOW).dirty_bytes == 0
    finally:
        reopened.close()


class Crash(Exception):
    """The process dies here: nothing more happens, nothing is closed."""


@pytest.mark.parametrize("crash_after", ["written", "committed", "old-removed", "indexes-renamed"])
def test_a_swap_interrupted_by_a_crash_is_completed_or_discarded(tmp_path: Path, crash_after: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap renames the cleaned log to .swap (1, the commit point), removes the old segments,
    renames the cleaned indexes (2, 3) and the .swap into place (4); a crash anywhere is repaired."""
    cluster = open_cluster(tmp_path)
    partition = topic(cluster)
    fill(partition)
    real_replace = os.replace
    calls = [0]

    def replace(source: object, target: object) -> None:
        calls[0] += 1
        if crash_after == "old-removed" and calls[0] == 2:
            raise Crash
        real_replace(source, target)  # type: ignore[arg-type]
        if (crash_after, calls[0]) in (("committed", 1), ("indexes-renamed", 3)):
            raise Crash

    def refuse(*args: object) -> None:
        raise Crash

    if crash_after == "written":
        monkeypatch.setattr(DiskLog, "_commit_cleaned", refuse)
    else:
        monkeypatch.setattr(os, "replace", replace)
    before = records(partition)
    with pytest.raises(Crash):
        clean(cluster)
    monkeypatch.undo()
    reopened = open_cluster(tmp_path)
    try:
        partition = topic(reopened)
        names = sorted(path.name for path in (tmp_path / "compacted-0").iterdir())
        assert not [name for name in names if name.endswith((".cleaned", ".swap"))], names
        after = records(partition)
        if crash_after == "written":
            assert after == before  # discarded: the log as it was
        else:
            assert {key: value for _, key, value in after} == {key: value for _, key, value in before}
            assert len(after) < len(before)
            offsets = [offset for offset, _, _ in after]
            assert offsets == sorted(offsets) and set(offsets) <= {offset for offset, _, _ in before}
        clean(reopened)  # and it can be cleaned again
        assert {key: value for _, key, value in records(partition)} == {key: value for _, key, value in before}
    finally:
        reopened.close()


# slices, and changes under a cleaning -------------------------------------------------------------

def test_appends_reads_and_retention_go_on_between_slices(cluster: Cluster) -> None:
    partition = topic(cluster, **{"cleanup.policy": "compact,delete", "retention.ms": str(DAY)})
    fill(partition, 12)
    cleaner = cluster.log_cleaner
    slices = 0
    while True:
        delay = cleaner.run_slice(NOW, budget_s=0.0)  # the smallest slice: one step of work
        slices += 1
        write(partition, (b"during", b"%d" % slices))
        assert partition.read(partition.log_start_offset, 1 << 20, min_one_batch=True).size > 0
        if cleaner.cleanings or slices > 10_000:
            break
        assert delay is not None
    assert slices > 2 and cleaner.cleanings == 1
    latest = {key: value for _, key, value in records(partition)}
    assert latest[b"a"].startswith(b"a-11") and latest[b"during"] == b"%d" % slices


def test_a_group_changed_under_the_cleaning_is_not_swapped_in(cluster: Cluster) -> None:
    partition = topic(cluster, **{"cleanup.policy": "compact,delete"})
    fill(partition)
    cleaner = cluster.log_cleaner
    cleaner.run_slice(NOW, budget_s=0.0)
    partition.log.delete_records_before(partition.log.active_segment_base_offset)  # every cleanable segment goes
    for _ in range(10_000):
        if cleaner.run_slice(NOW, budget_s=0.0) != 0.0 or cleaner._running is None:
            break
    assert [offset for offset, _, _ in records(partition)] == list(range(partition.log.log_start_offset,
                                                                         partition.log.log_end_offset))


# the internal topics ------------------------------------------------------------------------------

def test_committed_offsets_are_compacted_and_replay_to_the_same_state(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path, **{"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4096"})
    try:
        cluster.topics.create("orders", 4)
        for round_ in range(300):
            cluster.group_coordinator.commit_offsets("g", -1, "", None,
                                                     [OffsetToCommit("orders", p, round_ * 10 + p) for p in range(4)])
        offsets_partition = cluster.topics.get("__consumer_offsets").partitions[0]
        size_before = offsets_partition.log.size_bytes()
        assert clean(cluster) == 1
        assert offsets_partition.log.size_bytes() < size_before / 4
    finally:
        cluster.close()
    reopened = open_cluster(tmp_path, **{"offsets.topic.num.partitions": "1"})
    try:
        _, committed = reopened.group_coordinator.fetch_offsets("g", None)
        assert {(item.partition, item.offset) for item in committed} == {(p, 2990 + p) for p in range(4)}
    finally:
        reopened.close()

