"""Producer state per partition: sequence checks, duplicates, open transactions, LSO, snapshots, restarts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.log.producer_state import (
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
)
from kafkalite.broker.core.log.txn_index import names_ending_with
from kafkalite.broker.core.partition import Partition
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

INT32_MAX = 2**31 - 1
NOW = int(time.time() * 1000)


def batch(producer_id: int, epoch: int, sequence: int, count: int = 1, *, transactional: bool = False,
          value: bytes = b"v") -> bytearray:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                 is_transactional=transactional)
    for index in range(count):
        builder.append(timestamp=NOW + index, key=None, value=value)
    return builder.build()


def open_cluster(tmp_path: Path | None, **extra: str) -> Cluster:
    settings_map = {"log.storage": "memory"} if tmp_path is None else {"log.dirs": str(tmp_path)}
    settings_map.update(extra)
    cluster = Cluster(BrokerConfig(settings_map))
    cluster.open()
    return cluster


def make_partition(cluster: Cluster, name: str = "orders", **configs: str) -> Partition:
    topic = cluster.topics.get(name) or cluster.topics.create(name, 1, configs)
    return topic.partitions[0]


def stored_batches(partition: Partition) -> list[RecordBatch]:
    read = partition.log.read(partition.log_start_offset, 1 << 30, min_one_batch=True)
    return [b for b in iter_batches(b"".join(read.chunks)) if isinstance(b, RecordBatch)]


def refused(partition: Partition, data: bytearray, code: ErrorCode, **kwargs: object) -> None:
    with pytest.raises(KafkaError) as info:
        partition.append_from_client(data, NOW, **kwargs)  # type: ignore[arg-type]
    assert info.value.error_code == code, info.value.message


# --- sequences and duplicates -------------------------------------------------------------------


def test_in_order_batches_are_appended_and_gaps_refused() -> None:
    partition = make_partition(open_cluster(None))
    assert partition.append_from_client(batch(7, 0, 0, 3), NOW).base_offset == 0
    assert partition.append_from_client(batch(7, 0, 3, 2), NOW).base_offset == 3
    refused(partition, batch(7, 0, 6), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # 5 is missing
    assert partition.log_end_offset == 5


def test_a_duplicate_of_any_of_the_last_five_batches_gets_its_original_offset_and_is_not_written() -> None:
    partition = make_partition(open_cluster(None))
    offsets = [partition.append_from_client(batch(7, 0, seq * 2, 2), NOW).base_offset for seq in range(6)]
    end = partition.log_end_offset
    for index in range(1, 6):  # the last five batches
        assert partition.append_from_client(batch(7, 0, index * 2, 2), NOW).base_offset == offsets[index]
    assert partition.log_end_offset == end
    # The oldest batch is no longer remembered: its retry is out of order, as in Kafka.
    refused(partition, batch(7, 0, 0, 2), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    # A retry with the same first sequence but a different size is no duplicate either.
    refused(partition, batch(7, 0, 10, 1), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def test_epochs_fence_older_producers_and_restart_sequences() -> None:
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(7, 3, 0, 5), NOW)
    refused(partition, batch(7, 2, 5), ErrorCode.INVALID_PRODUCER_EPOCH)
    refused(partition, batch(7, 4, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # a new epoch starts at 0
    partition.append_from_client(batch(7, 4, 0), NOW)
    refused(partition, batch(7, 3, 5), ErrorCode.INVALID_PRODUCER_EPOCH)
    entry = partition.producer_state.producers[7]
    assert (entry.epoch, entry.last_seq) == (4, 0)


def test_an_unknown_producer_may_start_at_any_sequence_as_kafka_accepts_it() -> None:
    partition = make_partition(open_cluster(None))
    assert partition.append_from_client(batch(9, 0, 1234), NOW).base_offset == 0
    refused(partition, batch(9, 0, 1236), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    partition.append_from_client(batch(9, 0, 1235), NOW)


def test_sequences_wrap_around_from_int32_max_to_zero() -> None:
    assert in_sequence(INT32_MAX, 0) and in_sequence(4, 5) and not in_sequence(INT32_MAX, 1)
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(5, 0, INT32_MAX - 2, 2), NOW)  # INT32_MAX-2 .. INT32_MAX-1
    partition.append_from_client(batch(5, 0, INT32_MAX, 3), NOW)  # INT32_MAX, 0, 1
    assert partition.producer_state.producers[5].last_seq == 1
    assert partition.append_from_client(batch(5, 0, INT32_MAX, 3), NOW).base_offset == 2  # duplicate
    partition.append_from_client(batch(5, 0, 2), NOW)
    assert partition.log_end_offset == 6


def test_batches_without_producer_id_skip_the_producer_state() -> None:
    partition = make_partition(open_cluster(None))
    plain = RecordBatchBuilder()
    plain.append(timestamp=NOW, key=None, value=b"x")
    partition.append_from_client(plain.build(), NOW)
    assert partition.producer_state.producers == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 4), st.booleans()), min_size=1, max_size=40))
def test_retries_of_in_flight_batches_never_duplicate_records(steps: list[tuple[int, int, bool]]) -> None:
    """A producer with up to five batches in flight, retrying any of them: each batch is stored once."""
    partition = make_partition(open_cluster(None))
    sent: list[tuple[int, int, int]] = []  # (first sequence, count, base offset)
    sequence = 0
    for count, back, retry in steps:
        if retry and sent:
            first, size, offset = sent[-1 - min(back, len(sent) - 1)]
            assert partition.append_from_client(batch(3, 0, first, size), NOW).base_offset == offset
        else:
            offset = partition.append_from_client(batch(3, 0, sequence, count), NOW).base_offset
            sent.append((sequence, count, offset))
            sequence += count
    stored = stored_batches(partition)
    assert [(b.base_sequence, b.records_count, b.base_offset) for b in stored] == sent


# --- transactions and the last stable offset ----------------------------------------------------


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker() -> None:
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(1, 0, 0, 2), NOW)  # idempotent, offsets 0-1
    partition.append_from_client(batch(2, 0, 0, 3, transactional=True), NOW)  # offsets 2-4
    partition.append_from_client(batch(1, 0, 2), NOW)  # offset 5
    assert partition.high_watermark == 6 and partition.last_stable_offset == 2
    read = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert [b.base_offset for b in iter_batches(b"".join(read.records))] == [0]
    assert read.last_stable_offset == 2 and read.aborted_transactions == []
    marker_offset = partition.append_marker(2, 0, True, 0, NOW)
    assert marker_offset == 6 and partition.last_stable_offset == 7
    (marker,) = [b for b in stored_batches(partition) if b.is_control]
    # Well-formed as Kafka writes it: transactional control batch, one record, no compression,
    # CreateTime, no sequence, the producer's id and epoch, key (version 0, COMMIT=1), value
    # (version 0, coordinator epoch), a valid CRC and this partition's leader epoch.
    marker.validate_crc()
    assert (marker.is_transactional, marker.records_count, marker.compression, marker.timestamp_type.name) == (
        True, 1, Compression.NONE, "CREATE_TIME")
    assert (marker.producer_id, marker.producer_epoch, marker.base_sequence, marker.partition_leader_epoch) == (
        2, 0, -1, 0)
    (record,) = marker.records()
    assert (record.key, record.value) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
    assert marker.end_transaction_marker().control_type.name == "COMMIT"


def test_aborted_transactions_are_listed_for_read_committed_fetches_in_range() -> None:
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(2, 0, 0, 2, transactional=True), NOW)  # 0-1
    partition.append_from_client(batch(3, 0, 0, 1, transactional=True), NOW)  # 2
    partition.append_marker(2, 0, False, 0, NOW)  # 3: abort producer 2
    assert partition.last_stable_offset == 2  # producer 3 still open
    partition.append_marker(3, 0, True, 0, NOW)  # 4
    partition.append_from_client(batch(2, 0, 2, 1, transactional=True), NOW)  # 5
    partition.append_marker(2, 0, False, 0, NOW)  # 6
    read = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in read.aborted_transactions] == [(2, 0, 3),
                                                                                                    (2, 5, 6)]
    assert partition.producer_state.aborted.entries[0].last_stable_offset == 2
    later = partition.read(4, 1 << 20, min_one_batch=True, read_committed=True)
    assert [t.first_offset for t in later.aborted_transactions] == [5]
    assert partition.read(0, 1 << 20, min_one_batch=True).aborted_transactions is None


def test_non_transactional_write_inside_an_open_transaction_is_refused() -> None:
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(2, 0, 0, transactional=True), NOW)
    refused(partition, batch(2, 0, 1), ErrorCode.INVALID_TXN_STATE)


def test_the_first_transactional_batch_is_verified_with_the_coordinator() -> None:
    partition = make_partition(open_cluster(None))
    asked: list[tuple[int, int]] = []

    def verify(producer_id: int, epoch: int, _: Partition) -> ErrorCode:
        asked.append((producer_id, epoch))
        return ErrorCode.NONE if producer_id == 2 else ErrorCode.TRANSACTION_ABORTABLE

    partition.append_from_client(batch(2, 0, 0, transactional=True), NOW, verify)
    partition.append_from_client(batch(2, 0, 1, transactional=True), NOW, verify)  # already open: not asked
    refused(partition, batch(4, 0, 0, transactional=True), ErrorCode.TRANSACTION_ABORTABLE, verify_transaction=verify)
    assert asked == [(2, 0), (4, 0)]
    assert partition.log_end_offset == 2


def test_markers_from_an_older_epoch_are_refused() -> None:
    partition = make_partition(open_cluster(None))
    partition.append_from_client(batch(2, 5, 0, transactional=True), NOW)
    with pytest.raises(KafkaError) as info:
        partition.append_marker(2, 4, True, 0, NOW)
    assert info.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    partition.append_marker(2, 6, False, 0, NOW)  # a fencing abort with a bumped epoch
    refused(partition, batch(2, 5, 1, transactional=True), ErrorCode.INVALID_PRODUCER_EPOCH)


def test_idle_producers_expire_but_not_with_an_open_transaction() -> None:
    partition = make_partition(open_cluster(None, **{"producer.id.expiration.ms": "1000"}))
    partition.append_from_client(batch(1, 0, 0), NOW)
    partition.append_from_client(batch(2, 0, 0, transactional=True), NOW)
    assert partition.remove_expired_producers(NOW + 999, 1000) == 0
    assert partition.remove_expired_producers(NOW + 5000, 1000) == 1
    assert list(partition.producer_state.producers) == [2]
    partition.append_from_client(batch(1, 0, 77), NOW)  # forgotten: any sequence again


# --- snapshots and restarts ---------------------------------------------------------------------


def test_names_ending_with_finds_what_path_glob_finds(tmp_path: Path) -> None:
    for name in ("00000000000000000005.snapshot", ".snapshot", "a.snapshot.tmp", "b.SNAPSHOT", ".hidden.snapshot",
                 "00000000000000000000.txnindex", "x.log"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "dir.snapshot").mkdir()
    for suffix in (".snapshot", ".txnindex"):
        assert sorted(names_ending_with(tmp_path, suffix)) == sorted(
            path.name for path in tmp_path.glob("*" + suffix))
    assert names_ending_with(tmp_path / "missing", ".snapshot") == list((tmp_path / "missing").glob("*.snapshot")) == []
    assert names_ending_with(tmp_path / "x.log", ".snapshot") == list((tmp_path / "x.log").glob("*.snapshot")) == []


def test_snapshot_format_round_trips_and_detects_corruption() -> None:
    entry = ProducerStateEntry(42, 3)
    entry.coordinator_epoch, entry.last_timestamp, entry.txn_first_offset = 0, NOW, 17
    manager = ProducerStateManager("t-0", None)
    manager.producers[42] = entry
    manager.on_data_batch(42, 3, 0, 4, 17, 21, NOW, True)
    data = encode_snapshot(manager.producers.values())
    (decoded,) = decode_snapshot(data)
    assert (decoded.producer_id, decoded.epoch, decoded.txn_first_offset, decoded.batches) == (
        42, 3, 17, entry.batches)
    with pytest.raises(ValueError):
        decode_snapshot(data[:-1])
    with pytest.raises(ValueError):
        decode_snapshot(data[:10] + bytes([data[10] ^ 1]) + data[11:])


def restart(cluster: Cluster, tmp_path: Path, clean: bool) -> Cluster:
    if clean:
        cluster.close(clean=True)
    else:  # a crash: nothing is flushed or snapshotted, files stay as they are
        for partition_log in cluster.log_manager.logs.values():
            partition_log.close(flush=False)
    return open_cluster(tmp_path)


@pytest.mark.parametrize("clean", [True, False])
def test_duplicates_and_open_transactions_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    cluster = open_cluster(tmp_path)
    partition = make_partition(cluster)
    partition.append_from_client(batch(7, 0, 0, 2), NOW)
    partition.append_from_client(batch(7, 0, 2, 2), NOW)
    partition.append_from_client(batch(8, 1, 0, 3, transactional=True), NOW)  # 4-6
    partition.append_from_client(batch(9, 0, 0, 1, transactional=True), NOW)  # 7
    partition.append_marker(9, 0, False, 0, NOW)  # 8: abort
    cluster = restart(cluster, tmp_path, clean)
    partition = make_partition(cluster)
    snapshots = sorted(p.name for p in (tmp_path / "orders-0").glob("*.snapshot"))
    assert snapshots == ["00000000000000000009.snapshot"]
    assert partition.append_from_client(batch(7, 0, 2, 2), NOW).base_offset == 2  # still a duplicate
    assert partition.log_end_offset == 9
    assert partition.last_stable_offset == 4  # producer 8's transaction is still open
    refused(partition, batch(7, 0, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    aborted = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True).aborted_transactions
    assert aborted == []  # nothing below the LSO yet
    partition.append_marker(8, 1, True, 0, NOW)
    read = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(9, 7)]
    assert (tmp_path / "orders-0" / "00000000000000000000.txnindex").stat().st_size == 34


def test_a_corrupt_or_stale_snapshot_falls_back_to_replaying_the_log(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    partition = make_partition(cluster)
    partition.append_from_client(batch(7, 0, 0, 2), NOW)
    cluster = restart(cluster, tmp_path, clean=True)
    directory = tmp_path / "orders-0"
    (directory / "00000000000000000002.snapshot").write_bytes(b"garbage")
    (directory / "00000000000000000050.snapshot").write_bytes(b"beyond the log end")
    cluster.close(clean=False)
    cluster = open_cluster(tmp_path)
    partition = make_partition(cluster)
    assert not (directory / "00000000000000000050.snapshot").exists()
    assert partition.append_from_client(batch(7, 0, 0, 2), NOW).base_offset == 0  # rebuilt by replay
    assert decode_snapshot((directory / "00000000000000000002.snapshot").read_bytes())[0].producer_id == 7


def test_a_segment_roll_writes_a_snapshot_and_only_two_are_kept(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    partition = make_partition(cluster, **{"segment.bytes": "200"})
    for sequence in range(6):
        partition.append_from_client(batch(7, 0, sequence, value=b"x" * 100), NOW)
    snapshots = sorted(int(p.stem) for p in (tmp_path / "orders-0").glob("*.snapshot"))
    assert len(snapshots) == 2 and snapshots[-1] == partition.log_end_offset
    bases = partition.log.segment_base_offsets()  # type: ignore[attr-defined]
    assert len(bases) == 6


def test_retention_drops_aborted_transactions_and_index_files_of_deleted_segments(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    partition = make_partition(cluster, **{"segment.bytes": "300"})
    for producer_id in range(3):
        partition.append_from_client(batch(producer_id + 10, 0, 0, transactional=True, value=b"y" * 100), NOW)
        partition.append_marker(producer_id + 10, 0, False, 0, NOW)
    files = sorted((tmp_path / "orders-0").glob("*.txnindex"))
    assert len(files) >= 2
    partition.log.delete_records_before(partition.log_end_offset - 1)
    partition.remove_expired_producers(NOW, 86_400_000)
    assert [t.producer_id for t in partition.producer_state.aborted.entries] == [12]
    assert len(sorted((tmp_path / "orders-0").glob("*.txnindex"))) == 1
