"""Share partitions (KIP-932) without sockets, on a manual clock: acquisition, acknowledgement, acquisition
locks timing out, delivery counts and their limit, the in-flight limit, read_committed, gaps, renewals,
the durable state and its replay after a restart, share sessions and the share offsets."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkalite.broker.config import BrokerConfig, ConfigError
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.group.timers import ManualTimers
from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.share.config import ShareGroupConfig, ShareSettings, check_group_configs, parse_duration_ms
from kafkalite.broker.core.share.manager import (
    PartitionAcknowledgements,
    ShareAcknowledge,
    ShareFetch,
    ShareFetchResult,
    SharePartitionManager,
)
from kafkalite.broker.core.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    RecordState,
    SharePartition,
    StateBatch,
)
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import RecordBatchBuilder, iter_batches

GROUP = "queue"
MEMBER_A, MEMBER_B = "member-a", "member-b"
LOCK_MS = 30_000
ACCEPT, RELEASE, REJECT, GAP, RENEW = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                       AcknowledgeType.GAP, AcknowledgeType.RENEW)


class Broker:
    """A cluster in memory with one topic, and a share-partition manager on a manual clock."""

    def __init__(self, **group_configs: str) -> None:
        self.cluster = Cluster(BrokerConfig({"log.storage": "memory", "share.coordinator.state.topic.num.partitions":
                                             "3", "offsets.topic.num.partitions": "3"}))
        self.cluster.open()
        self.topic = self.cluster.topics.create("t", 2)
        self.timers = ManualTimers()
        self.configs: dict[str, str] = {"share.auto.offset.reset": "earliest", **group_configs}
        self.manager = self.reload()

    @property
    def partition(self) -> Partition:
        return self.topic.partitions[0]

    def reload(self) -> SharePartitionManager:
        """A new manager on the same data: what a broker restart does to share partitions."""
        self.manager = SharePartitionManager(self.cluster.topics, self.cluster.share_state_log,
                                             self.cluster.config.settings(ShareSettings), lambda _: self.configs,
                                             self.timers)
        self.manager.open()
        return self.manager

    def produce(self, count: int, per_batch: int = 1, index: int = 0) -> None:
        for start in range(0, count, per_batch):
            builder = RecordBatchBuilder()
            for number in range(start, min(count, start + per_batch)):
                builder.append(timestamp=self.timers.now_ms(), key=None, value=f"v{number}".encode())
            self.topic.partitions[index].append_internal(builder.build(), self.timers.now_ms())

    def produce_transaction(self, producer_id: int, count: int, *, commit: bool | None, sequence: int = 0) -> None:
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=sequence,
                                     is_transactional=True)
        for number in range(count):
            builder.append(timestamp=self.timers.now_ms(), key=None, value=f"txn{number}".encode())
        self.partition.append_internal(builder.build(), self.timers.now_ms())
        if commit is not None:
            self.partition.append_marker(producer_id, 0, commit, 0, self.timers.now_ms())

    def key(self, index: int = 0) -> tuple[uuid.UUID, int]:
        return self.topic.topic_id, index

    def open_session(self, member: str, *indexes: int) -> ShareFetchResult:
        return self.fetch(member, 0, *indexes or (0,), max_records=0)

    def fetch(self, member: str, epoch: int, *indexes: int, max_records: int = 500, acks: Any = None,
              record_limit: bool = False, forgotten: tuple[int, ...] = ()) -> ShareFetchResult:
        partitions = tuple(PartitionAcknowledgements(self.topic.topic_id, index, tuple(acks or ()) if index == 0
                                                     else ()) for index in indexes)
        result = self.manager.fetch(ShareFetch(GROUP, member, epoch, max_records=max_records, partitions=partitions,
                                               record_limit=record_limit,
                                               forgotten=tuple(self.key(index) for index in forgotten)))
        assert isinstance(result, ShareFetchResult)
        return result

    def acknowledge(self, member: str, epoch: int, *batches: AcknowledgementBatch) -> ShareFetchResult:
        return self.manager.acknowledge(ShareAcknowledge(GROUP, member, epoch, partitions=(
            PartitionAcknowledgements(self.topic.topic_id, 0, batches),)))

    def share_partition(self, index: int = 0) -> SharePartition:
        found = self.manager.share_partition(GROUP, self.topic.topic_id, index)
        assert found is not None
        return found

    def close(self) -> None:
        self.manager.close()
        self.cluster.close()
        self.timers.close()


@pytest.fixture
def broker() -> Iterator[Broker]:
    made = Broker()
    yield made
    made.close()


def acked(first: int, last: int, kind: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, (int(kind),))


def offsets_of(result: ShareFetchResult, index: int = 0) -> list[int]:
    """The offsets a client keeps: acquired ranges, of the records the returned batches hold."""
    for item in result.partitions:
        if item.partition == index:
            wanted = {offset for first, last, _ in item.acquired for offset in range(first, last + 1)}
            held = [record.offset for chunk in item.records for batch in iter_batches(chunk)
                    for record in batch.records()]
            return sorted(offset for offset in held if offset in wanted)
    return []


def counts_of(result: ShareFetchResult, index: int = 0) -> dict[int, int]:
    return {offset: count for item in result.partitions if item.partition == index
            for first, last, count in item.acquired for offset in range(first, last + 1)}


def acquire(share_partition: SharePartition, member: str, max_records: int = 500, **options: Any) -> list[int]:
    values: dict[str, Any] = {"max_bytes": 1 << 20, "max_in_flight": 200, "read_committed": False,
                              "lock_deadline_ms": 0, **options}
    acquired = share_partition.acquire(member, max_records=max_records, **values)
    return [offset for first, last, _ in acquired.ranges for offset in range(first, last + 1)]


# the state machine ---------------------------------------------------------------------------
def test_members_acquire_distinct_records_and_accepted_ones_move_the_start_offset(broker: Broker) -> None:
    broker.produce(10)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(share_partition, MEMBER_A, max_records=4) == [0, 1, 2, 3]
    assert acquire(share_partition, MEMBER_B, max_records=4) == [4, 5, 6, 7]
    assert share_partition.state_of(5) == (RecordState.ACQUIRED, 1, MEMBER_B)
    changed, _ = share_partition.acknowledge(MEMBER_A, [acked(0, 3, ACCEPT)], delivery_count_limit=5)
    assert changed and share_partition.start_offset == 4 and share_partition.in_flight() == 4
    share_partition.acknowledge(MEMBER_B, [acked(4, 7, ACCEPT)], delivery_count_limit=5)
    assert share_partition.start_offset == 8
    assert acquire(share_partition, MEMBER_A) == [8, 9]
    assert acquire(share_partition, MEMBER_B) == []


def test_a_whole_batch_is_acquired_unless_the_mode_is_record_limit(broker: Broker) -> None:
    broker.produce(10, per_batch=5)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(share_partition, MEMBER_A, max_records=2) == [0, 1, 2, 3, 4]
    assert acquire(share_partition, MEMBER_B, max_records=2, record_limit=True) == [5, 6]
    assert acquire(share_partition, MEMBER_B, max_records=2, record_limit=True) == [7, 8]


def test_released_records_come_back_with_a_higher_delivery_count_until_the_limit_archives_them(broker: Broker) -> None:
    broker.produce(3)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(share_partition, MEMBER_A) == [0, 1, 2]
    share_partition.acknowledge(MEMBER_A, [acked(0, 0, RELEASE), acked(1, 1, ACCEPT), acked(2, 2, RELEASE)],
                                delivery_count_limit=3)
    assert share_partition.state_of(1)[0] is RecordState.ACKNOWLEDGED
    assert share_partition.state_of(0) == (RecordState.AVAILABLE, 1, None)
    assert acquire(share_partition, MEMBER_B) == [0, 2]  # another member gets them, delivery 2
    share_partition.acknowledge(MEMBER_B, [acked(0, 0, RELEASE), acked(2, 2, RELEASE)], delivery_count_limit=3)
    assert acquire(share_partition, MEMBER_A) == [0, 2]
    assert share_partition.state_of(2)[1] == 3
    share_partition.acknowledge(MEMBER_A, [acked(0, 0, RELEASE), acked(2, 2, RELEASE)], delivery_count_limit=3)
    # the third delivery reached the limit: released, they are archived and never delivered again
    assert share_partition.start_offset == 3 and share_partition.in_flight() == 0
    assert acquire(share_partition, MEMBER_A) == []


def test_rejected_records_and_gaps_are_archived(broker: Broker) -> None:
    broker.produce(4, per_batch=4)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(share_partition, MEMBER_A) == [0, 1, 2, 3]
    share_partition.acknowledge(MEMBER_A, [AcknowledgementBatch(0, 3, (REJECT, GAP, ACCEPT, RELEASE))],
                                delivery_count_limit=5)
    assert [share_partition.state_of(offset)[0] for offset in range(4)] == [
        RecordState.ARCHIVED, RecordState.ARCHIVED, RecordState.ARCHIVED, RecordState.AVAILABLE]
    assert share_partition.start_offset == 3
    assert acquire(share_partition, MEMBER_B) == [3]


def test_acknowledgements_are_all_or_nothing_and_only_from_the_holder(broker: Broker) -> None:
    broker.produce(6)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    acquire(share_partition, MEMBER_A, max_records=3)
    acquire(share_partition, MEMBER_B, max_records=3)

    def refused(member: str, *batches: AcknowledgementBatch) -> ErrorCode:
        with pytest.raises(KafkaError) as raised:
            share_partition.acknowledge(member, list(batches), delivery_count_limit=5)
        return raised.value.error_code

    assert refused(MEMBER_A, acked(0, 0, ACCEPT), acked(3, 3, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE
    assert share_partition.state_of(0)[0] is RecordState.ACQUIRED  # nothing was applied
    assert refused(MEMBER_A, acked(0, 9, ACCEPT)) is ErrorCode.INVALID_RECORD_STATE  # beyond what was read
    assert refused(MEMBER_A, acked(1, 2, ACCEPT), acked(0, 0, ACCEPT)) is ErrorCode.INVALID_REQUEST  # not ascending
    assert refused(MEMBER_A, AcknowledgementBatch(0, 2, (1, 1))) is ErrorCode.INVALID_REQUEST  # 2 types, 3 offsets
    assert refused(MEMBER_A, acked(0, 0, 9)) is ErrorCode.INVALID_REQUEST
    assert refused(MEMBER_A, acked(0, 0, RENEW)) is ErrorCode.INVALID_REQUEST  # without IsRenewAck
    share_partition.acknowledge(MEMBER_A, [acked(0, 2, ACCEPT)], delivery_count_limit=5)
    assert share_partition.start_offset == 3
    # below the start offset everything is done already: nothing to refuse, nothing changes
    assert share_partition.acknowledge(MEMBER_A, [acked(2, 2, ACCEPT)], delivery_count_limit=5) == (False, 0)


def test_the_in_flight_limit_stops_acquisition_behind_a_stuck_record(broker: Broker) -> None:
    broker.produce(30)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(share_partition, MEMBER_A, max_records=1, max_in_flight=10) == [0]
    assert acquire(share_partition, MEMBER_B, max_in_flight=10) == list(range(1, 10))
    share_partition.acknowledge(MEMBER_B, [acked(1, 9, ACCEPT)], delivery_count_limit=5)
    assert acquire(share_partition, MEMBER_B, max_in_flight=10) == []  # offset 0 holds the window
    share_partition.acknowledge(MEMBER_A, [acked(0, 0, ACCEPT)], delivery_count_limit=5)
    assert acquire(share_partition, MEMBER_B, max_in_flight=10) == list(range(10, 20))


def test_read_committed_stops_at_the_last_stable_offset_and_never_delivers_aborted_records(broker: Broker) -> None:
    broker.produce(2)                                     # 0-1
    broker.produce_transaction(7, 3, commit=False)        # 2-4 aborted, marker at 5
    broker.produce_transaction(8, 2, commit=True)         # 6-7 committed, marker at 8
    broker.produce_transaction(9, 2, commit=None)         # 9-10 still open
    broker.produce(1)                                     # 11, behind the open transaction
    committed = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    assert acquire(committed, MEMBER_A, read_committed=True) == [0, 1, 6, 7]
    assert [committed.state_of(offset)[0] for offset in (2, 5, 8)] == [RecordState.ARCHIVED] * 3
    assert committed.end_offset == 9  # the last stable offset
    uncommitted = SharePartition("other", broker.topic.topic_id, broker.partition, 0)
    assert acquire(uncommitted, MEMBER_A) == [0, 1, 2, 3, 4, 6, 7, 9, 10, 11]  # control batches never


def test_offsets_no_batch_holds_are_archived_and_retention_moves_the_start(broker: Broker) -> None:
    broker.produce(6)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    acquire(share_partition, MEMBER_A, max_records=2)
    broker.partition.log.delete_records_before(4)
    assert share_partition.trim_to_log_start() and share_partition.start_offset == 4
    assert acquire(share_partition, MEMBER_B) == [4, 5]


def test_a_renewal_gives_the_records_a_new_lock(broker: Broker) -> None:
    broker.produce(2)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    acquired = share_partition.acquire(MEMBER_A, max_records=5, max_bytes=1 << 20, max_in_flight=200,
                                       read_committed=False, lock_deadline_ms=100)
    changed, renewed = share_partition.acknowledge(MEMBER_A, [acked(0, 0, RENEW)], delivery_count_limit=5,
                                                   renew_allowed=True, renew_deadline_ms=500)
    assert not changed and renewed and renewed != acquired.lock_id
    assert share_partition.lock_deadline(renewed) == 500
    assert share_partition.release_lock(acquired.lock_id, 5) == 1  # only offset 1 still had the old lock
    assert share_partition.state_of(0)[0] is RecordState.ACQUIRED


def test_the_snapshot_writes_acquired_records_as_available_with_their_earlier_count(broker: Broker) -> None:
    broker.produce(8)
    share_partition = SharePartition(GROUP, broker.topic.topic_id, broker.partition, 0)
    acquire(share_partition, MEMBER_A, max_records=6)
    share_partition.acknowledge(MEMBER_A, [acked(1, 1, ACCEPT), acked(2, 2, RELEASE), acked(3, 3, REJECT)],
                                delivery_count_limit=5)
    acquire(share_partition, MEMBER_B, max_records=1)  # offset 2 again, delivery 2
    snapshot = share_partition.snapshot()
    assert snapshot == [StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
                        StateBatch(2, 2, RecordState.AVAILABLE, 1),
                        StateBatch(3, 3, RecordState.ARCHIVED, 1)]
    restored = SharePartition(GROUP, broker.topic.topic_id, broker.partition, share_partition.start_offset,
                              batches=snapshot)
    assert acquire(restored, MEMBER_A) == [0, 2, 4, 5, 6, 7]
    assert restored.state_of(2)[1] == 2 and restored.state_of(0)[1] == 1


# the manager: sessions, locks, durability ----------------------------------------------------
def test_share_sessions_open_continue_and_close(broker: Broker) -> None:
    broker.produce(4)
    assert broker.open_session(MEMBER_A).error is ErrorCode.NONE
    assert broker.fetch(MEMBER_A, 2, 0).error is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert broker.fetch(MEMBER_B, 1, 0).error is ErrorCode.SHARE_SESSION_NOT_FOUND
    assert broker.fetch(MEMBER_A, 0, 0, acks=[acked(0, 0, ACCEPT)]).error is ErrorCode.INVALID_REQUEST
    result = broker.fetch(MEMBER_A, 1, 0)
    assert offsets_of(result) == [0, 1, 2, 3] and result.lock_timeout_ms == LOCK_MS
    assert broker.acknowledge(MEMBER_A, 0, acked(0, 0, ACCEPT)).error is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert broker.acknowledge(MEMBER_A, 2, acked(0, 0, ACCEPT)).partitions[0].acknowledge_error is ErrorCode.NONE
    closing = broker.fetch(MEMBER_A, -1, 0, acks=[acked(1, 1, ACCEPT)])  # final: acks, no fetch
    assert closing.error is ErrorCode.NONE and offsets_of(closing) == []
    assert broker.manager.sessions.get(GROUP, MEMBER_A) is None
    assert broker.share_partition().state_of(2)[0] is RecordState.AVAILABLE  # released on close
    broker.open_session(MEMBER_B)
    assert offsets_of(broker.fetch(MEMBER_B, 1, 0)) == [2, 3]


def test_a_forgotten_partition_and_a_new_session_release_what_the_member_held(broker: Broker) -> None:
    broker.produce(2)
    broker.produce(2, index=1)
    broker.open_session(MEMBER_A, 0, 1)
    fetched = broker.fetch(MEMBER_A, 1, 0, 1)
    assert offsets_of(fetched, 0) == [0, 1] and offsets_of(fetched, 1) == [0, 1]
    broker.fetch(MEMBER_A, 2, max_records=0, forgotten=(1,))
    assert broker.share_partition(1).state_of(0)[0] is RecordState.AVAILABLE
    assert broker.share_partition(0).state_of(0)[0] is RecordState.ACQUIRED
    broker.open_session(MEMBER_A, 0)  # a new session: what the old one held is released
    assert broker.share_partition(0).state_of(0)[0] is RecordState.AVAILABLE


def test_a_lock_that_times_out_releases_its_records_for_another_member(broker: Broker) -> None:
    broker.produce(3)
    broker.open_session(MEMBER_A)
    broker.open_session(MEMBER_B)
    assert offsets_of(broker.fetch(MEMBER_A, 1, 0)) == [0, 1, 2]
    assert offsets_of(broker.fetch(MEMBER_B, 1, 0)) == []
    broker.timers.advance(LOCK_MS - 1)
    assert broker.share_partition().state_of(0)[0] is RecordState.ACQUIRED
    broker.timers.advance(1)
    redelivered = broker.fetch(MEMBER_B, 2, 0)
    assert offsets_of(redelivered) == [0, 1, 2] and set(counts_of(redelivered).values()) == {2}
    late = broker.acknowledge(MEMBER_A, 2, acked(0, 2, ACCEPT))
    assert late.partitions[0].acknowledge_error is ErrorCode.INVALID_RECORD_STATE  # the lock is gone


def test_the_delivery_count_limit_archives_a_record_whose_locks_keep_timing_out() -> None:
    broker = Broker(**{"share.delivery.count.limit": "2", "share.record.lock.duration.ms": "15000"})
    try:
        broker.produce(1)
        broker.open_session(MEMBER_A)
        assert offsets_of(broker.fetch(MEMBER_A, 1, 0)) == [0]
        broker.timers.advance(15_000)
        assert counts_of(broker.fetch(MEMBER_A, 2, 0)) == {0: 2}
        broker.timers.advance(15_000)
        assert broker.share_partition().state_of(0)[0] is RecordState.ARCHIVED
        assert offsets_of(broker.fetch(MEMBER_A, 3, 0)) == []
    finally:
        broker.close()


def test_state_survives_a_restart_acquired_records_come_back_acknowledged_ones_never(broker: Broker) -> None:
    broker.produce(10)
    broker.open_session(MEMBER_A)
    assert offsets_of(broker.fetch(MEMBER_A, 1, 0, max_records=6)) == [0, 1, 2, 3, 4, 5]
    broker.acknowledge(MEMBER_A, 2, acked(0, 1, ACCEPT), acked(2, 2, RELEASE), acked(4, 4, REJECT))
    broker.reload()  # a restart: sessions are gone, the durable state is replayed
    assert broker.fetch(MEMBER_A, 3, 0).error is ErrorCode.SHARE_SESSION_NOT_FOUND
    broker.open_session(MEMBER_A)
    after = broker.fetch(MEMBER_A, 1, 0)
    assert offsets_of(after) == [2, 3, 5, 6, 7, 8, 9]
    assert counts_of(after)[2] == 2 and counts_of(after)[3] == 1  # the lost delivery is not counted


def test_a_fenced_member_releases_what_it_held(broker: Broker) -> None:
    broker.produce(2)
    broker.open_session(MEMBER_A)
    broker.fetch(MEMBER_A, 1, 0)
    broker.manager.member_fenced(GROUP, MEMBER_A)
    assert broker.manager.sessions.get(GROUP, MEMBER_A) is None
    assert broker.share_partition().state_of(0)[0] is RecordState.AVAILABLE


def test_an_idle_share_session_is_evicted(broker: Broker) -> None:
    broker.produce(1)
    broker.open_session(MEMBER_A)
    broker.fetch(MEMBER_A, 1, 0)
    broker.timers.advance(45_001)
    broker.manager.periodic(broker.timers.now_ms())
    assert broker.manager.sessions.get(GROUP, MEMBER_A) is None


def test_the_share_offsets_are_described_altered_and_deleted(broker: Broker) -> None:
    broker.produce(10)
    broker.open_session(MEMBER_A)
    broker.fetch(MEMBER_A, 1, 0, max_records=4)
    broker.acknowledge(MEMBER_A, 2, acked(0, 1, ACCEPT), acked(3, 3, ACCEPT))
    ((name, topic_id, offsets),) = broker.manager.describe_offsets(GROUP, None)
    assert (name, topic_id) == ("t", broker.topic.topic_id)
    assert [(o.partition, o.start_offset, o.lag) for o in offsets] == [(0, 2, 7)]  # 2 and 4-9 are not done
    ((_, _, asked),) = broker.manager.describe_offsets(GROUP, [("t", [0, 1, 7])])
    assert [(o.partition, o.start_offset, o.error) for o in asked] == [
        (0, 2, ErrorCode.NONE), (1, -1, ErrorCode.NONE), (7, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    ((_, _, altered),) = broker.manager.alter_offsets(GROUP, [("t", [(0, 8)])])
    assert altered == [(0, ErrorCode.NONE)]
    assert broker.share_partition().start_offset == 8 and broker.share_partition().in_flight() == 0
    assert broker.manager.delete_offsets(GROUP, ["t", "nope"])[1][2] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.manager.share_partition(GROUP, broker.topic.topic_id, 0) is None
    broker.reload()
    assert broker.manager.share_partition(GROUP, broker.topic.topic_id, 0) is None  # the tombstone holds


def test_a_group_starts_where_share_auto_offset_reset_says() -> None:
    for reset, expected in (("earliest", 0), ("latest", 5), ("by_duration:PT1H", 0)):
        broker = Broker(**{"share.auto.offset.reset": reset})
        try:
            broker.produce(5)
            broker.manager.initialize(GROUP, [broker.key()])
            assert broker.share_partition().start_offset == expected, reset
        finally:
            broker.close()


# group configs ---------------------------------------------------------------------------------
def test_group_configs_are_checked_against_the_broker_bounds() -> None:
    settings = ShareSettings()
    check_group_configs(settings, {"share.auto.offset.reset": "by_duration:P1DT2H", "share.isolation.level":
                                   "read_committed", "share.record.lock.duration.ms": "15000"})
    for values, message in (({"share.auto.offset.reset": "nope"}, "String must be one of"),
                            ({"share.auto.offset.reset": "by_duration:-PT1H"}, "String must be one of"),
                            ({"share.record.lock.duration.ms": "5000"}, "greater than or equal to "
                                                                       "group.share.min.record.lock.duration.ms"),
                            ({"share.delivery.count.limit": "11"}, "between 2 and 10"),
                            ({"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "15000"}, None),
                            ({"share.isolation.level": "dirty"}, "String must be one of"),
                            ({"consumer.session.timeout.ms": "1"}, "Unknown group config name")):
        if message is None:
            check_group_configs(settings, values)
            continue
        with pytest.raises(ConfigError, match=message):
            check_group_configs(settings, values)
    config = ShareGroupConfig.resolve(settings, {"share.isolation.level": "read_committed"})
    assert config.read_committed and config.record_lock_duration_ms == 30_000 and config.delivery_count_limit == 5


def test_iso_8601_durations_read_as_java_reads_them() -> None:
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 60 + 3) * 60_000 + 4500
    assert parse_duration_ms("pt0.25s") == 250
    for bad in ("P", "PT", "1H", "P1DT", "PTxS"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
