"""Share group membership (KIP-932) without sockets, on a manual clock: joining, the ``simple`` assignor,
epochs, leaving and fencing, what the share-partition side is told, one namespace with the other group
kinds, replay after a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from kafkalite.broker.core.group.coordinator import GroupCoordinator, OffsetToCommit
from kafkalite.broker.core.group.share_group import ShareGroup
from kafkalite.broker.core.group.share_rebalance import ShareHeartbeat, ShareHeartbeatResult, assign_simple
from kafkalite.broker.core.group.store import GroupSettings
from kafkalite.protocol.errors import ErrorCode, KafkaError
from tests.unit.test_groups_classic import Harness

GROUP = "shared"
SESSION_MS, HEARTBEAT_MS = 45_000, 5000


class Recorder:
    """The share-partition side as the coordinator sees it: records what it is told."""

    def __init__(self) -> None:
        self.initialized: list[tuple[str, tuple[uuid.UUID, int]]] = []
        self.fenced: list[tuple[str, str]] = []
        self.deleted: list[str] = []

    def initialize(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> None:
        self.initialized.extend((group_id, partition) for partition in partitions)

    def member_fenced(self, group_id: str, member_id: str) -> None:
        self.fenced.append((group_id, member_id))

    def group_deleted(self, group_id: str) -> None:
        self.deleted.append(group_id)

    def group_timeouts(self, group_id: str) -> tuple[int, int]:
        return SESSION_MS, HEARTBEAT_MS


class ShareHarness(Harness):
    def __init__(self, **settings: Any) -> None:
        self.recorder = Recorder()
        super().__init__(**settings)
        self.coordinator.close()
        self.coordinator = self._build()
        self.coordinator.open()

    def _build(self) -> GroupCoordinator:
        return self.cluster.build_group_coordinator(self.timers, self.settings, self.recorder)

    def reload(self) -> GroupCoordinator:
        self.coordinator.close()
        self.coordinator = self._build()
        self.coordinator.open()
        return self.coordinator


class Member:
    def __init__(self, harness: ShareHarness, topics: list[str], member_id: str | None = None) -> None:
        self.harness, self.topics = harness, topics
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0
        self.assigned: dict[str, set[int]] = {}

    def heartbeat(self, *, epoch: int | None = None, topics: list[str] | None = None) -> ShareHeartbeatResult:
        joining = self.epoch == 0
        result = self.harness.coordinator.share_heartbeat(ShareHeartbeat(
            GROUP, self.member_id, self.epoch if epoch is None else epoch,
            subscribed_topic_names=topics if topics is not None else (self.topics if joining else None)))
        if result.error is ErrorCode.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                names = {topic.topic_id: topic.name for topic in self.harness.cluster.topics}
                self.assigned = {names[topic_id]: set(partitions) for topic_id, partitions in result.assignment}
        return result

    def leave(self) -> ShareHeartbeatResult:
        return self.harness.coordinator.share_heartbeat(ShareHeartbeat(GROUP, self.member_id, -1))


@pytest.fixture
def harness() -> Iterator[ShareHarness]:
    made = ShareHarness()
    yield made
    made.close()


def group(harness: ShareHarness) -> ShareGroup:
    found = harness.coordinator.groups[GROUP]
    assert isinstance(found, ShareGroup)
    return found


def test_members_share_one_partition_and_split_many(harness: ShareHarness) -> None:
    harness.cluster.topics.create("one", 1)
    members = [Member(harness, ["one"]) for _ in range(3)]
    for member in members:
        result = member.heartbeat()
        assert result.error is ErrorCode.NONE and result.heartbeat_interval_ms == HEARTBEAT_MS
    for member in members:
        member.heartbeat()
    assert [member.assigned for member in members] == [{"one": {0}}] * 3  # all three fetch partition 0
    assert {member.epoch for member in members} == {group(harness).group_epoch}
    topic_id = harness.cluster.topics.get("one").topic_id  # type: ignore[union-attr]
    assert set(harness.recorder.initialized) == {(GROUP, (topic_id, 0))}
    split = [Member(harness, ["t"]) for _ in range(2)]  # t has 6 partitions
    for member in split + split:
        member.heartbeat()
    assert sorted(len(member.assigned["t"]) for member in split) == [3, 3]
    assert split[0].assigned["t"] | split[1].assigned["t"] == set(range(6))


def test_the_simple_assignor_spreads_topics_and_shares_partitions() -> None:
    topic_a, topic_b = uuid.UUID(int=1), uuid.UUID(int=2)
    assignment = assign_simple({"m1": {topic_a, topic_b}, "m2": {topic_a}}, {topic_a: 3, topic_b: 1})
    assert assignment["m1"][topic_a] | assignment["m2"][topic_a] == {0, 1, 2}
    assert not assignment["m1"][topic_a] & assignment["m2"][topic_a]
    assert assignment["m1"][topic_b] == {0}
    crowded = assign_simple({f"m{i}": {topic_a} for i in range(5)}, {topic_a: 2})
    assert all(len(partitions[topic_a]) == 1 for partitions in crowded.values())
    assert sorted(next(iter(p[topic_a])) for p in crowded.values()) == [0, 0, 0, 1, 1]


def test_assignment_is_sent_on_join_and_change_only(harness: ShareHarness) -> None:
    first = Member(harness, ["t"])
    assert first.heartbeat().assignment is not None
    assert first.heartbeat().assignment is None
    second = Member(harness, ["t"])
    second.heartbeat()
    changed = first.heartbeat()
    assert changed.assignment is not None and len(first.assigned["t"]) == 3
    harness.cluster.topics.create_partitions("t", 8)  # the topic grows: a new target on the next heartbeat
    assert first.heartbeat().assignment is not None and len(first.assigned["t"]) == 4


def test_epochs_are_checked(harness: ShareHarness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    assert member.heartbeat(epoch=member.epoch + 1).error is ErrorCode.FENCED_MEMBER_EPOCH
    other = Member(harness, ["t"])
    other.heartbeat()
    before = member.epoch
    member.heartbeat()
    assert member.epoch > before
    assert member.heartbeat(epoch=before).error is ErrorCode.NONE  # the previous epoch: an answer was lost
    assert Member(harness, ["t"]).heartbeat(epoch=3).error is ErrorCode.UNKNOWN_MEMBER_ID
    for bad in (ShareHeartbeat("", "m", 0, subscribed_topic_names=["t"]), ShareHeartbeat(GROUP, "", 0, None, ["t"]),
                ShareHeartbeat(GROUP, "m", 0), ShareHeartbeat(GROUP, "m", -2),
                ShareHeartbeat(GROUP, "m", 0, rack_id="", subscribed_topic_names=["t"])):
        assert harness.coordinator.share_heartbeat(bad).error is ErrorCode.INVALID_REQUEST


def test_leaving_keeps_sessions_and_a_session_timeout_fences(harness: ShareHarness) -> None:
    stays, leaves, dies = (Member(harness, ["t"]) for _ in range(3))
    for member in (stays, leaves, dies):
        member.heartbeat()
    assert leaves.leave().member_epoch == -1
    assert harness.recorder.fenced == []  # its final acknowledgements still come through its share session
    harness.timers.advance(SESSION_MS - 1)
    stays.heartbeat()
    harness.timers.advance(1)
    assert harness.recorder.fenced == [(GROUP, dies.member_id)]
    assert set(group(harness).members) == {stays.member_id}
    assert dies.heartbeat().error is ErrorCode.UNKNOWN_MEMBER_ID
    assert leaves.leave().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_the_group_size_is_bounded() -> None:
    harness = ShareHarness(share_max_size=2)
    try:
        assert [Member(harness, ["t"]).heartbeat().error for _ in range(3)] == [
            ErrorCode.NONE, ErrorCode.NONE, ErrorCode.GROUP_MAX_SIZE_REACHED]
    finally:
        harness.close()


def test_one_namespace_for_every_kind_of_group(harness: ShareHarness) -> None:
    Member(harness, ["t"]).heartbeat()
    assert harness.join("", group_id=GROUP).result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    commit = harness.coordinator.commit_offsets(GROUP, -1, "", None, [OffsetToCommit("t", 0, 5)])
    assert commit == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    assert harness.coordinator.fetch_offsets(GROUP, None)[0] is ErrorCode.GROUP_ID_NOT_FOUND
    assert harness.coordinator.delete_offsets(GROUP, [("t", [0])])[0] is ErrorCode.GROUP_ID_NOT_FOUND
    harness.coordinator.commit_offsets("simple", -1, "", None, [OffsetToCommit("t", 0, 5)])
    other = harness.coordinator.share_heartbeat(ShareHeartbeat("simple", "m", 0, subscribed_topic_names=["t"]))
    assert other.error is ErrorCode.GROUP_ID_NOT_FOUND
    listed = {item.group_id: item for item in harness.coordinator.list_groups()}
    assert (listed[GROUP].group_type, listed[GROUP].protocol_type, listed[GROUP].state) == ("share", "share", "Stable")
    assert [item.group_id for item in harness.coordinator.list_groups(types=["share"])] == [GROUP]
    assert harness.coordinator.describe_group(GROUP).state == "Dead"  # not a classic group


def test_an_empty_share_group_is_deleted_with_its_state(harness: ShareHarness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    assert harness.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NON_EMPTY_GROUP}
    member.leave()
    assert harness.coordinator.delete_groups([GROUP]) == {GROUP: ErrorCode.NONE}
    assert harness.recorder.deleted == [GROUP] and GROUP not in harness.coordinator.groups
    harness.reload()
    assert GROUP not in harness.coordinator.groups


def test_a_share_group_is_replayed_after_a_restart(harness: ShareHarness) -> None:
    members = [Member(harness, ["t"]) for _ in range(2)]
    for member in members + members:
        member.heartbeat()
    before = group(harness)
    harness.reload()
    after = group(harness)
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {m: after.members[m].assigned for m in after.members} == {m: before.members[m].assigned
                                                                      for m in before.members}
    harness.timers.advance(1000)
    assert members[0].heartbeat().error is ErrorCode.NONE
    harness.timers.advance(SESSION_MS - 1000)  # the loaded members' session timers run again
    assert sorted(member_id for _, member_id in harness.recorder.fenced) == sorted([members[1].member_id])


def test_the_offsets_admin_wants_an_empty_share_group(harness: ShareHarness) -> None:
    with pytest.raises(KafkaError) as missing:
        harness.coordinator.share_group_for_offsets("ghost", create=False)
    assert missing.value.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    created = harness.coordinator.share_group_for_offsets("fresh", create=True)
    assert created.is_empty() and isinstance(harness.coordinator.groups["fresh"], ShareGroup)
    Member(harness, ["t"]).heartbeat()
    with pytest.raises(KafkaError) as busy:
        harness.coordinator.share_group_for_offsets(GROUP, create=True)
    assert busy.value.error_code is ErrorCode.NON_EMPTY_GROUP


def test_the_share_group_size_defaults_to_the_broker_key() -> None:
    assert GroupSettings().share_max_size == 200
