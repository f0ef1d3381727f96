"""Committed offsets without sockets: commit validation, fetch, delete, DeleteGroups, expiry on a manual
clock, replay from ``__consumer_offsets`` (a restart), and transactional offsets staged until EndTxn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkalite.broker.core.group.classic_group import ClassicGroup, ClassicState
from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.core.group.records import (
    ClassicGroupRecord,
    ClassicMemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_key,
    decode_offset_value,
    encode_offset_value,
)
from kafkalite.protocol.errors import ErrorCode
from tests.unit.test_groups_classic import GROUP, Harness

MINUTE = 60_000


@pytest.fixture
def harness() -> Iterator[Harness]:
    harness = Harness(offsets_retention_ms=10 * MINUTE, retention_check_interval_ms=MINUTE)
    yield harness
    harness.close()


def offsets(*items: tuple[str, int, int]) -> list[OffsetToCommit]:
    return [OffsetToCommit(topic, partition, offset, 3, f"meta-{offset}") for topic, partition, offset in items]


def fetched(harness: Harness, group_id: str = GROUP, topics: list[tuple[str, list[int]]] | None = None,
            require_stable: bool = False) -> dict[tuple[str, int], int]:
    error, partitions = harness.coordinator.fetch_offsets(group_id, topics, require_stable)
    assert error is ErrorCode.NONE
    return {(item.topic, item.partition): item.offset if item.error is ErrorCode.NONE else item.error
            for item in partitions}


def test_record_layouts_round_trip() -> None:
    key = OffsetCommitKey("g", "t", 3)
    assert decode_key(key.encode()) == key
    assert key.encode()[:2] == b"\x00\x01"  # Kafka's OffsetCommitKey v1
    value = OffsetAndMetadata(42, 7, "meta", 1234)
    assert decode_offset_value(encode_offset_value(value)) == value
    expiring = OffsetAndMetadata(42, -1, "", 1234, 9999)
    assert decode_offset_value(encode_offset_value(expiring)) == expiring
    record = ClassicGroupRecord("consumer", 5, "range", "m1", 1000,
                                (ClassicMemberRecord("m1", "i1", "c", "/h", 30000, 10000, b"sub", b"asg"),))
    assert ClassicGroupRecord.decode(record.encode()) == record
    assert decode_key(b"\x00\x63rest") is None  # an unknown key version is skipped


def test_member_commits_and_fetches(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    errors = harness.coordinator.commit_offsets(GROUP, generation, follower, None, offsets(("t", 0, 10), ("t", 1, 20)))
    assert set(errors.values()) == {ErrorCode.NONE}
    assert fetched(harness, topics=[("t", [0, 1, 2])]) == {("t", 0): 10, ("t", 1): 20, ("t", 2): -1}
    error, partitions = harness.coordinator.fetch_offsets(GROUP, [("t", [0])])
    assert (partitions[0].leader_epoch, partitions[0].metadata) == (3, "meta-10")
    assert fetched(harness, "unknown-group", [("t", [0])]) == {("t", 0): -1}
    assert fetched(harness, "unknown-group") == {}


def test_commit_validation(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    commit = harness.coordinator.commit_offsets
    one = offsets(("t", 0, 1))
    assert commit(GROUP, generation + 1, leader, None, one) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(GROUP, generation, "stranger", None, one) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(GROUP, -1, "", None, one) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # the group has members
    assert commit("nope", 3, "m", None, one, api_version=8) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit("nope", 3, "m", None, one, api_version=9) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    errors = commit(GROUP, generation, leader, None, [OffsetToCommit("t", 9, 1), OffsetToCommit("missing", 0, 1),
                                                     OffsetToCommit("t", 1, 1, -1, "x" * 5000),
                                                     OffsetToCommit("t", 2, 1, -1, None)])
    assert errors == {("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 2): ErrorCode.NONE}


def test_commit_while_completing_rebalance_is_refused(harness: Harness) -> None:
    member_id, joined = harness.join_new()
    harness.timers.advance(0)
    generation = joined.result().generation_id
    errors = harness.coordinator.commit_offsets(GROUP, generation, member_id, None, offsets(("t", 0, 1)))
    assert errors == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_simple_commit_creates_an_empty_group_and_admin_commits_to_empty_groups(harness: Harness) -> None:
    assert set(harness.coordinator.commit_offsets("simple", -1, "", None, offsets(("t", 0, 5))).values()) == {
        ErrorCode.NONE}
    group = harness.coordinator.groups["simple"]
    assert isinstance(group, ClassicGroup) and group.state is ClassicState.EMPTY and group.protocol_type is None
    assert fetched(harness, "simple") == {("t", 0): 5}
    # A consumer group that became empty: admin tools alter its offsets with generation -1.
    (member,), generation = harness.stable_group(1)
    harness.coordinator.leave_group(GROUP, [(member, None)])
    assert set(harness.coordinator.commit_offsets(GROUP, -1, "", None, offsets(("t", 3, 33))).values()) == {
        ErrorCode.NONE}
    assert fetched(harness) == {("t", 3): 33}


def test_offsets_and_groups_survive_a_restart(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    harness.coordinator.commit_offsets(GROUP, generation, leader, None, offsets(("t", 0, 100), ("t", 5, 500)))
    harness.coordinator.commit_offsets("simple", -1, "", None, offsets(("t", 1, 7)))
    harness.coordinator.commit_offsets(GROUP, generation, leader, None, offsets(("t", 0, 101)))  # last one wins
    harness.reload()
    assert fetched(harness) == {("t", 0): 101, ("t", 5): 500}
    assert fetched(harness, "simple") == {("t", 1): 7}
    assert harness.group().generation_id == generation and harness.group().state is ClassicState.STABLE


def test_delete_groups(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    harness.coordinator.commit_offsets(GROUP, generation, member, None, offsets(("t", 0, 1)))
    assert harness.coordinator.delete_groups([GROUP, "ghost"]) == {GROUP: ErrorCode.NON_EMPTY_GROUP,
                                                                    "ghost": ErrorCode.GROUP_ID_NOT_FOUND}
    harness.coordinator.leave_group(GROUP, [(member, None)])
    assert harness.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    assert GROUP not in harness.coordinator.groups and fetched(harness) == {}
    harness.reload()
    assert GROUP not in harness.coordinator.groups and fetched(harness) == {}


def test_offset_delete(harness: Harness) -> None:
    harness.cluster.topics.create("other", 2)
    member_id, joined = harness.join_new(protocols=[("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")])
    harness.timers.advance(0)
    generation = joined.result().generation_id
    harness.sync(member_id, generation, {member_id: b""})
    harness.coordinator.commit_offsets(GROUP, generation, member_id, None, offsets(("t", 0, 1), ("other", 0, 2)))
    error, errors = harness.coordinator.delete_offsets(GROUP, [("t", [0]), ("other", [0, 1]), ("gone", [0])])
    assert error is ErrorCode.NONE
    assert errors == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): ErrorCode.NONE,
                      ("other", 1): ErrorCode.NONE, ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetched(harness) == {("t", 0): 1}
    assert harness.coordinator.delete_offsets("ghost", [("t", [0])])[0] is ErrorCode.GROUP_ID_NOT_FOUND
    harness.reload()
    assert fetched(harness) == {("t", 0): 1}


def test_offsets_of_an_empty_group_expire_after_retention_and_the_group_goes(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1, session_ms=5 * MINUTE)
    harness.coordinator.commit_offsets(GROUP, generation, member, None, offsets(("t", 0, 1)))
    for _ in range(15):  # a live group keeps its offsets (it subscribes to nothing it could lose)
        harness.timers.advance(MINUTE)
        harness.heartbeat(member, generation)
        harness.coordinator.periodic(harness.timers.now_ms())
    assert fetched(harness) == {("t", 0): 1}
    harness.coordinator.leave_group(GROUP, [(member, None)])
    harness.timers.advance(9 * MINUTE)
    harness.coordinator.periodic(harness.timers.now_ms())
    assert fetched(harness) == {("t", 0): 1}  # retention counts from when the group became empty
    harness.timers.advance(MINUTE)
    harness.coordinator.periodic(harness.timers.now_ms())
    assert fetched(harness) == {} and GROUP not in harness.coordinator.groups
    harness.reload()
    assert GROUP not in harness.coordinator.groups


def test_simple_group_offsets_expire_from_their_commit_and_retention_time_overrides(harness: Harness) -> None:
    harness.coordinator.commit_offsets("simple", -1, "", None, offsets(("t", 0, 1)))
    harness.timers.advance(5 * MINUTE)
    harness.coordinator.commit_offsets("simple", -1, "", None, offsets(("t", 1, 2)))
    harness.coordinator.commit_offsets("simple", -1, "", None, offsets(("t", 2, 3)), api_version=2,
                                       retention_ms=MINUTE)
    harness.timers.advance(MINUTE)
    harness.coordinator.expire_offsets()
    assert fetched(harness, "simple") == {("t", 0): 1, ("t", 1): 2}
    harness.timers.advance(4 * MINUTE)
    harness.coordinator.expire_offsets()
    assert fetched(harness, "simple") == {("t", 1): 2}


def test_transactional_offsets_are_invisible_until_the_transaction_commits(harness: Harness) -> None:
    coordinator = harness.coordinator
    errors = coordinator.stage_transactional_offsets(GROUP, 77, 0, offsets(("t", 0, 10), ("t", 9, 1)))
    assert errors == {("t", 0): ErrorCode.NONE, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetched(harness) == {}
    assert fetched(harness, topics=[("t", [0, 1])], require_stable=True) == {
        ("t", 0): ErrorCode.UNSTABLE_OFFSET_COMMIT, ("t", 1): -1}
    assert coordinator.has_pending_transactional_offsets(GROUP, "t", 0)
    harness.reload()  # staged offsets survive a restart, still pending
    assert fetched(harness, topics=[("t", [0])], require_stable=True) == {("t", 0): ErrorCode.UNSTABLE_OFFSET_COMMIT}
    harness.coordinator.complete_transaction(77, commit=True)
    assert fetched(harness, topics=[("t", [0])], require_stable=True) == {("t", 0): 10}
    harness.reload()
    assert fetched(harness) == {("t", 0): 10}


def test_aborted_transactional_offsets_are_dropped_and_newer_plain_commits_win(harness: Harness) -> None:
    coordinator = harness.coordinator
    coordinator.commit_offsets(GROUP, -1, "", None, offsets(("t", 0, 5), ("t", 1, 5)))
    coordinator.stage_transactional_offsets(GROUP, 1, 0, offsets(("t", 0, 50)))
    coordinator.complete_transaction(1, commit=False)
    assert fetched(harness) == {("t", 0): 5, ("t", 1): 5}
    coordinator.stage_transactional_offsets(GROUP, 2, 0, offsets(("t", 0, 60), ("t", 1, 60)))
    coordinator.commit_offsets(GROUP, -1, "", None, offsets(("t", 1, 61)))  # committed after the staging
    coordinator.complete_transaction(2, commit=True)
    assert fetched(harness) == {("t", 0): 60, ("t", 1): 61}
    harness.reload()
    assert fetched(harness) == {("t", 0): 60, ("t", 1): 61}
    assert not harness.coordinator.offsets.pending_producers()


def test_transactional_commit_checks_the_group_like_kafka(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    stage = harness.coordinator.stage_transactional_offsets
    assert set(stage(GROUP, 5, 0, offsets(("t", 0, 1)), member_id=member, generation_id=generation + 1).values()) \
        == {ErrorCode.ILLEGAL_GENERATION}
    assert set(stage(GROUP, 5, 0, offsets(("t", 0, 1)), member_id=member, generation_id=generation).values()) \
        == {ErrorCode.NONE}
    assert set(stage(GROUP, 6, 0, offsets(("t", 0, 1))).values()) == {ErrorCode.NONE}  # no member info: accepted
    assert set(stage("fresh", 7, 0, offsets(("t", 0, 1)), generation_id=4, member_id="m").values()) == {
        ErrorCode.ILLEGAL_GENERATION}
