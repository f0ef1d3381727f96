"""The transaction coordinator driven without sockets: a manual clock and a manual marker scheduler."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.core.txn.coordinator import TransactionCoordinator
from kafkalite.broker.core.txn.producer_ids import PRODUCER_ID_FILE
from kafkalite.broker.core.txn.state import (
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    prepare_complete,
)
from kafkalite.broker.handlers.registry import HANDLERS, RequestContext
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from kafkalite.protocol.messages.describe_producers_request import TopicRequest
from kafkalite.protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder, iter_batches

START = 1_000_000
S = TransactionState


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


class Harness:
    """A cluster whose transaction coordinator runs on a manual clock; markers wait for ``run_markers``."""

    def __init__(self, data_dir: Path | None = None, **configs: str) -> None:
        settings = {"log.storage": "memory"} if data_dir is None else {"log.dirs": str(data_dir)}
        settings.update({"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"})
        settings.update(configs)
        self.cluster = Cluster(BrokerConfig(settings))
        self.clock = Clock()
        self.pending: list[Callable[[], None]] = []
        self.coordinator = self.cluster.transactions = self.new_coordinator()
        self.cluster.open()
        if self.cluster.topics.get("out") is None:
            self.cluster.topics.create("out", 2)

    def new_coordinator(self) -> TransactionCoordinator:
        return self.cluster.build_transaction_coordinator(clock=self.clock, schedule=self.pending.append)

    def reopen_coordinator(self) -> TransactionCoordinator:
        coordinator = self.new_coordinator()
        coordinator.open()
        self.cluster.transactions = coordinator
        self.coordinator = coordinator
        return coordinator

    def run_markers(self) -> int:
        count = 0
        while self.pending:
            self.pending.pop(0)()
            count += 1
        return count

    def init(self, transactional_id: str | None = "tx", timeout_ms: int = 10_000, producer_id: int = -1,
             epoch: int = -1) -> tuple[ErrorCode, int, int]:
        result = self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id, epoch)
        return result.error, result.producer_id, result.producer_epoch

    def produce(self, producer_id: int, epoch: int, sequence: int, partition: int = 0) -> ErrorCode:
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                     is_transactional=True)
        builder.append(timestamp=self.clock.now, key=None, value=b"v")
        target = self.cluster.topics.partition("out", partition)
        assert target is not None
        try:
            target.append_from_client(builder.build(), self.clock.now, self.coordinator.verify_partition)
        except KafkaError as exc:
            return exc.error_code
        return ErrorCode.NONE

    def end(self, producer_id: int, epoch: int, commit: bool, transactional_id: str = "tx") -> tuple[
            ErrorCode | None, list[ErrorCode]]:
        answers: list[ErrorCode] = []
        error = self.coordinator.end_transaction(transactional_id, producer_id, epoch, commit, answers.append)
        return error, answers

    def markers(self, partition: int = 0) -> list[tuple[str, int, int]]:
        target = self.cluster.topics.partition("out", partition)
        assert target is not None
        read = target.log.read(0, 1 << 20, min_one_batch=True)
        found = []
        for batch in iter_batches(b"".join(read.chunks)):
            if isinstance(batch, RecordBatch) and batch.is_control:
                marker = batch.end_transaction_marker()
                assert marker is not None
                found.append((marker.control_type.name, batch.producer_id, batch.producer_epoch))
        return found


# --- InitProducerId -----------------------------------------------------------------------------


def test_idempotent_producers_get_fresh_ids_that_survive_restarts(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    ids = [harness.init(None)[1] for _ in range(3)]
    assert ids == sorted(set(ids)) and harness.init(None)[2] == 0
    assert "next.block.start=1000" in (tmp_path / PRODUCER_ID_FILE).read_text()
    harness.cluster.close()
    harness = Harness(tmp_path)
    assert harness.init(None)[1] >= 1000


def test_timeouts_are_checked_against_the_maximum() -> None:
    harness = Harness(**{"transaction.max.timeout.ms": "5000"})
    assert harness.init(timeout_ms=5001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert harness.init(timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert harness.init("")[0] == ErrorCode.INVALID_REQUEST
    assert harness.init(timeout_ms=5000)[0] == ErrorCode.NONE


def test_each_init_bumps_the_epoch_and_fences_the_older_producer() -> None:
    harness = Harness()
    error, producer_id, epoch = harness.init()
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert harness.coordinator.add_partitions("tx", producer_id, 0, [("out", 0)]) == ErrorCode.NONE
    assert harness.produce(producer_id, 0, 0) == ErrorCode.NONE
    # A second instance: the open transaction is aborted with a fencing epoch, the caller retries.
    assert harness.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert harness.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS  # markers still pending
    harness.run_markers()
    assert harness.markers() == [("ABORT", producer_id, 1)]
    assert harness.init() == (ErrorCode.NONE, producer_id, 2)
    # The zombie is fenced everywhere.
    assert harness.coordinator.add_partitions("tx", producer_id, 0, [("out", 1)]) == ErrorCode.PRODUCER_FENCED
    assert harness.end(producer_id, 0, True)[0] == ErrorCode.PRODUCER_FENCED
    assert harness.produce(producer_id, 0, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert harness.coordinator.add_partitions("tx", producer_id + 1, 2, [("out", 1)]) == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_kip360_epoch_bump_with_the_current_epoch_and_its_retry() -> None:
    harness = Harness()
    _, producer_id, _ = harness.init()
    assert harness.init(producer_id=producer_id, epoch=0) == (ErrorCode.NONE, producer_id, 1)
    assert harness.init(producer_id=producer_id, epoch=0) == (ErrorCode.NONE, producer_id, 1)  # a retry
    assert harness.init(producer_id=producer_id, epoch=5)[0] == ErrorCode.PRODUCER_FENCED
    assert harness.init(producer_id=producer_id + 100, epoch=1)[0] == ErrorCode.PRODUCER_FENCED
    harness.init()  # a new instance: the last epoch is forgotten
    assert harness.init(producer_id=producer_id, epoch=1)[0] == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    harness = Harness()
    _, producer_id, _ = harness.init()
    metadata = harness.coordinator.get("tx")
    assert metadata is not None
    harness.coordinator._store(TransactionMetadata("tx", producer_id, 32766, -1, -1, 10_000, S.EMPTY,
                                                   last_update_ms=START))
    error, new_id, epoch = harness.init()
    assert error == ErrorCode.NONE and new_id != producer_id and epoch == 0
    assert harness.coordinator.get("tx").previous_producer_id == producer_id  # type: ignore[union-attr]


# --- the transaction itself ---------------------------------------------------------------------


def test_commit_writes_markers_everywhere_then_completes_and_answers() -> None:
    harness = Harness()
    _, producer_id, epoch = harness.init()
    assert harness.produce(producer_id, epoch, 0, partition=0) == ErrorCode.TRANSACTION_ABORTABLE  # not added
    assert harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0), ("out", 1)]) == ErrorCode.NONE
    assert harness.coordinator.get("tx").state == S.ONGOING  # type: ignore[union-attr]
    assert harness.produce(producer_id, epoch, 0, partition=0) == ErrorCode.NONE
    out0 = harness.cluster.topics.partition("out", 0)
    assert out0 is not None and out0.last_stable_offset == 0
    error, answers = harness.end(producer_id, epoch, True)
    assert error is None and answers == []
    assert harness.coordinator.get("tx").state == S.PREPARE_COMMIT  # type: ignore[union-attr]
    # While the markers are pending, everything touching the transaction is told to retry.
    assert harness.end(producer_id, epoch, True)[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert harness.end(producer_id, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE
    assert harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)]) == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert harness.init()[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    harness.run_markers()
    assert answers == [ErrorCode.NONE]
    assert harness.markers(0) == [("COMMIT", producer_id, epoch)]
    assert harness.markers(1) == [("COMMIT", producer_id, epoch)]
    assert out0.last_stable_offset == out0.high_watermark == 2
    metadata = harness.coordinator.get("tx")
    assert metadata is not None and metadata.state == S.COMPLETE_COMMIT and not metadata.partitions
    assert harness.end(producer_id, epoch, True)[0] == ErrorCode.NONE  # a retry after completion
    assert harness.end(producer_id, epoch, False)[0] == ErrorCode.INVALID_TXN_STATE
    # The next transaction starts with AddPartitionsToTxn.
    harness.clock.now += 50
    assert harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 1)]) == ErrorCode.NONE
    assert harness.coordinator.get("tx").start_ms == START + 50  # type: ignore[union-attr]


def test_abort_lists_the_transaction_as_aborted_for_read_committed() -> None:
    harness = Harness()
    _, producer_id, epoch = harness.init()
    harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)])
    harness.produce(producer_id, epoch, 0)
    harness.produce(producer_id, epoch, 1)
    harness.end(producer_id, epoch, False)
    harness.run_markers()
    out0 = harness.cluster.topics.partition("out", 0)
    assert out0 is not None
    read = out0.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in read.aborted_transactions] == [(producer_id, 0, 2)]
    assert harness.end(producer_id, epoch, False)[0] == ErrorCode.NONE
    assert harness.end(producer_id, epoch, True)[0] == ErrorCode.INVALID_TXN_STATE


def test_ending_an_empty_transaction_is_an_invalid_state() -> None:
    harness = Harness()
    _, producer_id, epoch = harness.init()
    assert harness.end(producer_id, epoch, True)[0] == ErrorCode.INVALID_TXN_STATE
    assert harness.end(producer_id, epoch, True, transactional_id="nope")[0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_transaction_past_its_timeout_is_aborted_with_an_epoch_bump() -> None:
    harness = Harness(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    _, producer_id, epoch = harness.init(timeout_ms=1000)
    harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)])
    harness.produce(producer_id, epoch, 0)
    harness.clock.now += 1000
    harness.coordinator.periodic(harness.clock.now)
    assert harness.coordinator.get("tx").state == S.ONGOING  # type: ignore[union-attr]  # not yet past
    harness.clock.now += 101
    harness.coordinator.periodic(harness.clock.now)
    harness.run_markers()
    metadata = harness.coordinator.get("tx")
    assert metadata is not None and metadata.state == S.COMPLETE_ABORT and metadata.producer_epoch == epoch + 1
    assert harness.markers() == [("ABORT", producer_id, epoch + 1)]
    assert harness.end(producer_id, epoch, True)[0] == ErrorCode.PRODUCER_FENCED
    assert harness.produce(producer_id, epoch, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    out0 = harness.cluster.topics.partition("out", 0)
    assert out0 is not None and out0.last_stable_offset == out0.high_watermark


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    harness = Harness(**{"transactional.id.expiration.ms": "5000",
                         "transaction.remove.expired.transaction.cleanup.interval.ms": "10"})
    _, producer_id, epoch = harness.init()
    harness.init("busy")
    harness.coordinator.add_partitions("busy", producer_id + 1, 0, [("out", 1)])
    harness.clock.now += 6000
    harness.coordinator.periodic(harness.clock.now)
    assert harness.coordinator.get("tx") is None
    assert harness.coordinator.get("busy") is not None  # an ongoing transaction never expires
    harness.reopen_coordinator()
    assert harness.coordinator.get("tx") is None and harness.coordinator.get("busy") is not None


# --- recovery -----------------------------------------------------------------------------------


def test_state_is_recovered_and_a_prepared_transaction_completed_after_a_restart(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    _, producer_id, epoch = harness.init()
    harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0), ("out", 1)])
    harness.produce(producer_id, epoch, 0, partition=1)
    harness.end(producer_id, epoch, True)
    harness.pending.clear()  # the broker dies before the markers are written
    harness.cluster.close(clean=False)
    harness = Harness(tmp_path)
    assert harness.coordinator.get("tx").state == S.PREPARE_COMMIT  # type: ignore[union-attr]
    out1 = harness.cluster.topics.partition("out", 1)
    assert out1 is not None and out1.last_stable_offset == 0  # the transaction is still open in the partition
    assert harness.run_markers() == 1
    assert harness.coordinator.get("tx").state == S.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert harness.markers(1) == [("COMMIT", producer_id, epoch)]
    assert out1.last_stable_offset == out1.high_watermark == 2
    assert harness.init() == (ErrorCode.NONE, producer_id, epoch + 1)


def test_an_open_transaction_survives_a_restart_and_can_still_commit(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    _, producer_id, epoch = harness.init()
    harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)])
    harness.produce(producer_id, epoch, 0)
    harness.cluster.close(clean=True)
    harness = Harness(tmp_path)
    assert harness.produce(producer_id, epoch, 1) == ErrorCode.NONE
    error, answers = harness.end(producer_id, epoch, True)
    harness.run_markers()
    assert error is None and answers == [ErrorCode.NONE]


# --- offsets in transactions --------------------------------------------------------------------


def test_offsets_staged_in_a_transaction_become_visible_only_on_commit() -> None:
    harness = Harness()
    groups = harness.cluster.group_coordinator
    _, producer_id, epoch = harness.init()
    offset_commit = [OffsetToCommit("out", 0, 42)]
    assert harness.coordinator.verify_offsets("tx", producer_id, epoch, "g") == ErrorCode.TRANSACTION_ABORTABLE
    assert harness.coordinator.add_partitions("tx", producer_id, epoch,
                                              [harness.coordinator.offsets_partition("g")]) == ErrorCode.NONE
    assert harness.coordinator.verify_offsets("tx", producer_id, epoch, "g") == ErrorCode.NONE
    assert groups.stage_transactional_offsets("g", producer_id, epoch, offset_commit) == {("out", 0): ErrorCode.NONE}
    assert groups.offsets.get("g", "out", 0) is None
    harness.end(producer_id, epoch, True)
    harness.run_markers()
    stored = groups.offsets.get("g", "out", 0)
    assert stored is not None and stored.offset == 42
    assert harness.coordinator.verify_offsets("tx", producer_id, epoch - 1, "g") == ErrorCode.PRODUCER_FENCED


# --- records and handlers -----------------------------------------------------------------------


def test_transaction_log_records_round_trip() -> None:
    metadata = TransactionMetadata("tx-é", 5, 3, 2, 4, 60_000, S.ONGOING, frozenset({("a", 1), ("a", 0), ("b", 7)}),
                                   100, 200)
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert decode_value("tx-é", encode_value(metadata)) == metadata
    with pytest.raises(IllegalTransition):
        prepare_complete(metadata, 300)  # Ongoing cannot complete without preparing


def call(harness: Harness, api_key: int, version: int, request: object) -> object:
    handler = HANDLERS[api_key]
    context = RequestContext(harness.cluster, api_key, version, 1, "test", "test:1")

    async def run() -> object:
        result = handler.handle(context, request)
        return await result if asyncio.iscoroutine(result) else result

    return asyncio.run(run())


def test_handlers_describe_list_and_map_errors_for_old_versions() -> None:
    harness = Harness()
    _, producer_id, epoch = harness.init()
    harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 1)])
    harness.produce(producer_id, epoch, 0, partition=1)
    described = call(harness, 65, 0, DescribeTransactionsRequest(transactional_ids=["tx", "none"]))
    first, second = described.transaction_states  # type: ignore[attr-defined]
    assert (first.transaction_state, first.producer_id, first.transaction_start_time_ms) == ("Ongoing", producer_id,
                                                                                          START)
    assert [(t.topic, t.partitions) for t in first.topics] == [("out", [1])]
    assert second.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = call(harness, 66, 1, ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], duration_filter=-1))
    assert [s.transactional_id for s in listed.transaction_states] == ["tx"]  # type: ignore[attr-defined]
    assert listed.unknown_state_filters == ["Bogus"]  # type: ignore[attr-defined]
    producers = call(harness, 61, 0, DescribeProducersRequest(topics=[TopicRequest(name="out",
                                                                                  partition_indexes=[1, 9])]))
    found, missing = producers.topics[0].partitions  # type: ignore[attr-defined]
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
            for p in found.active_producers] == [(producer_id, epoch, 0, 0)]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    harness.end(producer_id, epoch, False)
    harness.run_markers()
    harness.init()
    fenced = call(harness, 22, 3, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000,
                                                        producer_id=producer_id, producer_epoch=0))
    assert fenced.error_code == ErrorCode.INVALID_PRODUCER_EPOCH  # type: ignore[attr-defined]
    fenced4 = call(harness, 22, 4, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000,
                                                         producer_id=producer_id, producer_epoch=0))
    assert fenced4.error_code == ErrorCode.PRODUCER_FENCED  # type: ignore[attr-defined]
    half = call(harness, 22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                      producer_id=producer_id, producer_epoch=-1))
    assert half.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]


def test_write_txn_markers_aborts_a_hanging_transaction() -> None:
    harness = Harness()
    out0 = harness.cluster.topics.partition("out", 0)
    assert out0 is not None
    builder = RecordBatchBuilder(producer_id=77, producer_epoch=3, base_sequence=0, is_transactional=True)
    builder.append(timestamp=START, key=None, value=b"orphan")
    out0.append_from_client(builder.build(), START)  # no coordinator knows this transaction: it hangs
    assert out0.last_stable_offset == 0
    marker = WritableTxnMarker(producer_id=77, producer_epoch=2, transaction_result=False, coordinator_epoch=0,
                               topics=[WritableTxnMarkerTopic(name="out", partition_indexes=[0, 7])])
    stale = call(harness, 27, 1, WriteTxnMarkersRequest(markers=[marker]))
    codes = [p.error_code for p in stale.markers[0].topics[0].partitions]  # type: ignore[attr-defined]
    assert codes == [ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    marker.producer_epoch = 3
    done = call(harness, 27, 1, WriteTxnMarkersRequest(markers=[marker]))
    assert done.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert out0.last_stable_offset == out0.high_watermark == 2
    read = out0.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(77, 0)]


def test_a_failed_transaction_log_write_changes_nothing_and_is_retriable(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = Harness()
    _, producer_id, epoch = harness.init()

    def broken(*args: object, **kwargs: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(harness.coordinator.log, "append", broken)
    assert harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)]) == \
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert harness.init()[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    metadata = harness.coordinator.get("tx")
    assert metadata is not None and (metadata.state, metadata.producer_epoch) == (S.EMPTY, epoch)
    monkeypatch.undo()
    assert harness.coordinator.add_partitions("tx", producer_id, epoch, [("out", 0)]) == ErrorCode.NONE


# --- built on first use -------------------------------------------------------------------------


def open_cluster(data_dir: Path, **configs: str) -> Cluster:
    cluster = Cluster(BrokerConfig({"log.dirs": str(data_dir), "transaction.state.log.num.partitions": "3",
                                    **configs}))
    cluster.open()
    return cluster


def idempotent_batch(producer_id: int, sequence: int, *, transactional: bool = False,
                     timestamp_ms: int = START) -> bytearray:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                                 is_transactional=transactional)
    builder.append(timestamp=timestamp_ms, key=None, value=b"v")
    return builder.build()


def test_the_coordinator_is_built_by_its_first_use_or_at_open_when_its_topic_exists(tmp_path: Path) -> None:
    cluster = open_cluster(tmp_path)
    assert "transactions" not in vars(cluster)  # an empty data directory: nothing to replay
    partition = cluster.topics.create("out", 1).partitions[0]
    partition.append_from_client(idempotent_batch(5, 0), START, cluster.verify_transaction)
    assert "transactions" not in vars(cluster)  # an idempotent batch asks nothing of it
    with pytest.raises(KafkaError) as refused:
        partition.append_from_client(idempotent_batch(6, 0, transactional=True), START, cluster.verify_transaction)
    assert refused.value.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert "transactions" in vars(cluster)
    result = cluster.transactions.init_producer_id("tx", 10_000)
    assert result.error == ErrorCode.NONE and result.producer_id > 5  # above every id the partitions know
    cluster.close()
    cluster = open_cluster(tmp_path)
    assert "transactions" in vars(cluster)  # __transaction_state exists: replayed at open
    assert cluster.transactions.get("tx") is not None
    cluster.close()


def test_idle_producers_expire_and_are_snapshotted_without_a_coordinator(tmp_path: Path) -> None:
    expiry = {"producer.id.expiration.ms": "10000", "producer.id.expiration.check.interval.ms": "100"}
    cluster = open_cluster(tmp_path, **expiry)
    now = int(time.time() * 1000)
    partition = cluster.topics.create("out", 1).partitions[0]
    partition.append_from_client(idempotent_batch(5, 0, timestamp_ms=now), now)
    partition.append_from_client(idempotent_batch(6, 0, timestamp_ms=now), now)
    cluster.periodic(now + 5000)  # checked, neither idle for long enough
    assert sorted(partition.producer_state.producers) == [5, 6]
    cluster.close()  # a clean stop snapshots the producer state
    assert [path.name for path in (tmp_path / "out-0").glob("*.snapshot")] == ["00000000000000000002.snapshot"]
    cluster = open_cluster(tmp_path, **expiry)
    reopened = cluster.topics.partition("out", 0)
    assert reopened is not None and sorted(reopened.producer_state.producers) == [5, 6]
    cluster.periodic(now + 60_000)
    assert not reopened.producer_state.producers
    assert "transactions" not in vars(cluster)
    cluster.close()


def test_a_producer_id_block_alone_builds_the_coordinator_at_open_and_is_read_then(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cluster = open_cluster(tmp_path)
    idempotent = cluster.transactions.init_producer_id(None, 10_000)  # writes producer-id-block, no transaction log
    cluster.close()
    assert cluster.topics.get("__transaction_state") is None and (tmp_path / PRODUCER_ID_FILE).exists()
    cluster = open_cluster(tmp_path)
    assert "transactions" in vars(cluster)
    assert cluster.transactions.init_producer_id(None, 10_000).producer_id >= idempotent.producer_id + 1
    cluster.close()
    (tmp_path / PRODUCER_ID_FILE).write_text("version=0\nnext.block.start=many\n", encoding="ascii")
    with caplog.at_level("WARNING", logger="kafkalite.producer_ids"):
        cluster = open_cluster(tmp_path)
    assert "unreadable" in caplog.text  # said at start, as when the coordinator always opened there
    cluster.close()


def test_opening_and_closing_an_empty_data_directory_imports_no_transaction_room(tmp_path: Path) -> None:
    """In a fresh interpreter: a cluster opened on an empty data directory, given a topic and closed,
    loads no module of the transaction room (the producer id file's name is the coordinator log's)
    and not shutil (which imports bz2 and lzma)."""
    script = (
        "import sys\n"
        "from kafkalite.broker.config import BrokerConfig\n"
        "from kafkalite.broker.core.cluster import Cluster\n"
        f"cluster = Cluster(BrokerConfig({{'log.dirs': {str(tmp_path / 'data')!r}}}))\n"
        "cluster.open()\n"
        "cluster.topics.create('out', 2)\n"
        "import time\n"
        "cluster.periodic(int(time.time() * 1000) + 700_000)  # past producer.id.expiration.check.interval.ms\n"
        "cluster.close()\n"
        "print(sorted(name for name in sys.modules if name.startswith('kafkalite.broker.core.txn.')\n"
        "             or name in ('shutil', 'bz2', 'lzma')))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.split() == ["[]"]
