"""KIP-848 consumer groups without sockets, on a manual clock: joining, revocation before reassignment,
fencing by session and rebalance timeouts, static members, offsets rules, replay; and the
server-side assignors' invariants (each partition owned once, balanced, sticky) as properties."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.core.group.assignors import MemberSpec, assign_range, assign_uniform
from kafkalite.broker.core.group.consumer_group import ConsumerGroup, MemberState
from kafkalite.broker.core.group.consumer_rebalance import ConsumerHeartbeat, ConsumerHeartbeatResult
from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.protocol.errors import ErrorCode
from tests.unit.test_groups_classic import Harness

GROUP = "kip848"
SESSION_MS = 45_000
REBALANCE_MS = 30_000

Owned = list[tuple[uuid.UUID, list[int]]]


class Member:
    """A KIP-848 consumer as a test drives it: remembers its id, epoch and owned partitions."""

    def __init__(self, harness: Harness, topics: list[str], instance_id: str | None = None,
                 assignor: str | None = None) -> None:
        self.harness, self.topics, self.instance_id, self.assignor = harness, topics, instance_id, assignor
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: Owned = []

    def heartbeat(self, *, epoch: int | None = None, full: bool = False) -> ConsumerHeartbeatResult:
        joining = self.epoch == 0
        result = self.harness.coordinator.consumer.heartbeat(ConsumerHeartbeat(
            group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id, rebalance_timeout_ms=REBALANCE_MS if joining or full else -1,
            subscribed_topic_names=self.topics if joining or full else None, server_assignor=self.assignor,
            owned=self.owned))
        if result.error is ErrorCode.NONE and result.member_epoch >= 0:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = result.assignment  # the client revokes and assigns at once here
        return result

    def partitions(self) -> set[int]:
        return {p for _, partitions in self.owned for p in partitions}

    def leave(self, static: bool = False) -> ConsumerHeartbeatResult:
        return self.harness.coordinator.consumer.heartbeat(ConsumerHeartbeat(
            group_id=GROUP, member_id=self.member_id, member_epoch=-2 if static else -1,
            instance_id=self.instance_id))


@pytest.fixture
def harness() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def group(harness: Harness) -> ConsumerGroup:
    found = harness.coordinator.groups[GROUP]
    assert isinstance(found, ConsumerGroup)
    return found


def settle(members: list[Member], rounds: int = 6) -> None:
    for _ in range(rounds):
        for member in members:
            assert member.heartbeat().error is ErrorCode.NONE


def assert_exclusive(members: list[Member]) -> None:
    seen: set[int] = set()
    for member in members:
        assert not seen & member.partitions(), "a partition is owned by two members"
        seen |= member.partitions()


def test_first_member_gets_every_partition(harness: Harness) -> None:
    member = Member(harness, ["t"])
    result = member.heartbeat()
    assert result.error is ErrorCode.NONE and result.member_epoch == 1 and result.heartbeat_interval_ms == 5000
    assert member.partitions() == set(range(6))
    assert group(harness).state_name == "Stable"
    assert member.heartbeat().assignment is None  # unchanged: not resent


def test_partitions_are_revoked_before_they_move(harness: Harness) -> None:
    first, second = Member(harness, ["t"]), Member(harness, ["t"])
    first.heartbeat()
    result = second.heartbeat()
    assert result.member_epoch == 2 and second.partitions() == set()  # nothing free yet
    assert group(harness).state_name == "Reconciling"
    member = group(harness).members[second.member_id]
    assert member.state is MemberState.UNRELEASED_PARTITIONS
    before = set(first.partitions())
    result = first.heartbeat()  # told to give up three partitions; stays at epoch 1 until it does
    assert result.member_epoch == 1 and len(first.partitions()) == 3
    assert group(harness).members[first.member_id].state is MemberState.UNREVOKED_PARTITIONS
    assert second.heartbeat().assignment is None  # still owned by the first member
    result = first.heartbeat()  # its owned partitions no longer include the revoked ones
    assert result.member_epoch == 2
    second.heartbeat()
    assert second.partitions() == before - first.partitions() and len(second.partitions()) == 3
    assert_exclusive([first, second])
    assert group(harness).state_name == "Stable"


def test_many_members_converge_to_a_balanced_exclusive_assignment(harness: Harness) -> None:
    members = [Member(harness, ["t"]) for _ in range(4)]
    for member in members:
        member.heartbeat()
        assert_exclusive(members)
    settle(members)
    assert_exclusive(members)
    assert sorted(len(member.partitions()) for member in members) == [1, 1, 2, 2]
    assert set().union(*(member.partitions() for member in members)) == set(range(6))


def test_session_timeout_fences_a_silent_member_and_its_partitions_move(harness: Harness) -> None:
    first, second = Member(harness, ["t"]), Member(harness, ["t"])
    settle([first, second])
    for _ in range(4):
        harness.timers.advance(SESSION_MS // 3)
        first.heartbeat()
    assert second.member_id not in group(harness).members
    settle([first])
    assert first.partitions() == set(range(6))
    assert second.heartbeat().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(harness: Harness) -> None:
    first, second = Member(harness, ["t"]), Member(harness, ["t"])
    first.heartbeat()
    second.heartbeat()
    first.heartbeat()  # asked to revoke three partitions
    first.owned = [(topic_id, list(range(6))) for topic_id, _ in first.owned]  # but keeps reporting all six
    for _ in range(3):
        harness.timers.advance(REBALANCE_MS // 2)
        second.heartbeat()
        if first.member_id in group(harness).members:
            first.heartbeat()
    assert first.member_id not in group(harness).members
    settle([second])
    assert second.partitions() == set(range(6))


def test_epoch_errors_and_leaving(harness: Harness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    assert member.heartbeat(epoch=member.epoch + 5).error is ErrorCode.FENCED_MEMBER_EPOCH
    other = Member(harness, ["t"])
    other.epoch = 3
    assert other.heartbeat().error is ErrorCode.UNKNOWN_MEMBER_ID
    left = member.leave()
    assert left.error is ErrorCode.NONE and left.member_epoch == -1
    assert group(harness).state_name == "Empty"
    assert member.leave().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_lost_response_with_previous_epoch_is_tolerated(harness: Harness) -> None:
    first, second = Member(harness, ["t"]), Member(harness, ["t"])
    first.heartbeat()
    previous_epoch = first.epoch
    second.heartbeat()
    first.heartbeat()
    first.heartbeat()  # now at epoch 2 with three partitions
    assert first.epoch == 2
    assert first.heartbeat(epoch=previous_epoch).error is ErrorCode.NONE  # the epoch-2 answer was lost


def test_rejoin_with_a_known_member_id_starts_over(harness: Harness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    member.epoch, member.owned = 0, []
    result = member.heartbeat()
    assert result.error is ErrorCode.NONE and result.member_epoch > 1 and member.partitions() == set(range(6))


def test_static_member_leaves_temporarily_and_its_successor_keeps_the_assignment(harness: Harness) -> None:
    static, other = Member(harness, ["t"], instance_id="i-1"), Member(harness, ["t"])
    settle([static, other])
    kept = static.partitions()
    epoch_before = group(harness).group_epoch
    successor = Member(harness, ["t"], instance_id="i-1")
    assert successor.heartbeat().error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert static.leave(static=True).member_epoch == -2
    result = successor.heartbeat()
    assert result.error is ErrorCode.NONE and successor.partitions() == kept
    assert group(harness).group_epoch == epoch_before  # no rebalance
    assert static.heartbeat().error is ErrorCode.FENCED_INSTANCE_ID


def test_invalid_requests(harness: Harness) -> None:
    heartbeat = harness.coordinator.consumer.heartbeat
    assert heartbeat(ConsumerHeartbeat("", "m", 0)).error is ErrorCode.INVALID_REQUEST
    assert heartbeat(ConsumerHeartbeat(GROUP, "m", 0, rebalance_timeout_ms=1, owned=[],
                                      subscribed_topic_names=[])).error is ErrorCode.INVALID_REQUEST
    assert heartbeat(ConsumerHeartbeat(GROUP, "m", 0, subscribed_topic_names=["t"],
                                      owned=[])).error is ErrorCode.INVALID_REQUEST  # no rebalance timeout
    assert heartbeat(ConsumerHeartbeat(GROUP, "m", -7)).error is ErrorCode.INVALID_REQUEST
    result = heartbeat(ConsumerHeartbeat(GROUP, "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t"], owned=[],
                                        server_assignor="fancy"))
    assert result.error is ErrorCode.UNSUPPORTED_ASSIGNOR and "uniform" in (result.error_message or "")


def test_range_assignor_and_regex_subscription(harness: Harness) -> None:
    harness.cluster.topics.create("u-1", 2)
    harness.cluster.topics.create("u-2", 2)
    first = Member(harness, ["u-1", "u-2"], assignor="range")
    second = Member(harness, ["u-1", "u-2"], assignor="range")
    settle([first, second])
    names = {topic.topic_id: topic.name for topic in harness.cluster.topics}
    assert {(names[t], tuple(p)) for t, p in first.owned} | {(names[t], tuple(p)) for t, p in second.owned} == {
        ("u-1", (0,)), ("u-1", (1,)), ("u-2", (0,)), ("u-2", (1,))}
    assert len({tuple(p) for _, p in first.owned}) == 1  # co-partitioned: the same index of both topics
    regex = harness.coordinator.consumer.heartbeat(ConsumerHeartbeat(
        "regex-group", "r1", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="u-.*", owned=[]))
    assert regex.error is ErrorCode.NONE
    assert sorted(names[t] for t, _ in regex.assignment or []) == ["u-1", "u-2"]


def test_new_partitions_bump_the_epoch(harness: Harness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    harness.cluster.topics.create_partitions("t", 8)
    result = member.heartbeat()
    assert result.member_epoch == 2 and member.partitions() == set(range(8))


def test_offset_commit_and_fetch_rules_for_consumer_groups(harness: Harness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    commit = harness.coordinator.commit_offsets
    one = [OffsetToCommit("t", 0, 5)]
    assert commit(GROUP, member.epoch, member.member_id, None, one, api_version=9) == {("t", 0): ErrorCode.NONE}
    assert commit(GROUP, member.epoch, member.member_id, None, one, api_version=8) == {
        ("t", 0): ErrorCode.UNSUPPORTED_VERSION}
    assert commit(GROUP, member.epoch - 1, member.member_id, None, one, api_version=9) == {
        ("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert commit(GROUP, -1, "", None, one) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    fetch = harness.coordinator.fetch_offsets
    assert fetch(GROUP, [("t", [0])], member_id=member.member_id, member_epoch=member.epoch)[1][0].offset == 5
    assert fetch(GROUP, [("t", [0])], member_id=member.member_id, member_epoch=0)[0] is ErrorCode.STALE_MEMBER_EPOCH
    assert fetch(GROUP, [("t", [0])], member_id="x", member_epoch=1)[0] is ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(GROUP, None)[1][0].offset == 5  # the admin view
    assert harness.coordinator.delete_offsets(GROUP, [("t", [0])])[1] == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}
    member.leave()
    assert commit(GROUP, -1, "", None, one) == {("t", 0): ErrorCode.NONE}  # empty: admin commits allowed


def test_consumer_group_survives_a_restart(harness: Harness) -> None:
    first, second = Member(harness, ["t"]), Member(harness, ["t"])
    settle([first, second])
    state = group(harness)
    epochs = (state.group_epoch, state.assignment_epoch)
    harness.reload()
    restored = group(harness)
    assert (restored.group_epoch, restored.assignment_epoch) == epochs
    assert {m: restored.members[m].assigned for m in restored.members} == {
        m: state.members[m].assigned for m in state.members}
    assert first.heartbeat().error is ErrorCode.NONE and first.heartbeat().assignment is None


def test_classic_and_consumer_groups_replace_each_other_only_when_empty(harness: Harness) -> None:
    member = Member(harness, ["t"])
    member.heartbeat()
    refused = harness.join(group_id=GROUP)
    assert refused.result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    member.leave()
    member_id, joined = harness.join_new(group_id=GROUP)
    harness.timers.advance(0)
    assert joined.result().error is ErrorCode.NONE
    blocked = Member(harness, ["t"]).heartbeat()
    assert blocked.error is ErrorCode.GROUP_ID_NOT_FOUND


# assignor properties ------------------------------------------------------------------------
TOPICS = [uuid.UUID(int=n + 1) for n in range(4)]


@st.composite
def group_specs(draw: st.DrawFn) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    partitions = {topic: draw(st.integers(0, 12)) for topic in TOPICS[:draw(st.integers(1, 4))]}
    members = {}
    for index in range(draw(st.integers(1, 7))):
        subscribed = frozenset(draw(st.sets(st.sampled_from(list(partitions)), min_size=1)))
        current = {topic: set(draw(st.sets(st.integers(0, 12), max_size=4))) for topic in subscribed}
        members[f"m{index}"] = MemberSpec(subscribed, current)
    return members, partitions


@settings(max_examples=200, deadline=None)
@given(group_specs())
def test_uniform_assigns_each_subscribed_partition_exactly_once(spec: tuple[dict[str, MemberSpec],
                                                                            dict[uuid.UUID, int]]) -> None:
    members, partitions = spec
    result = assign_uniform(members, partitions)
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for topic, indexes in assignment.items():
            assert topic in members[member_id].subscribed_topic_ids
            for index in indexes:
                assert (topic, index) not in owners
                owners[(topic, index)] = member_id
    subscribed = set().union(*(spec.subscribed_topic_ids for spec in members.values()))
    assert set(owners) == {(topic, index) for topic in subscribed for index in range(partitions[topic])}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(0, 40), st.data())
def test_uniform_balances_identical_subscriptions_and_is_sticky(member_count: int, partition_count: int,
                                                                data: st.DataObject) -> None:
    topic = TOPICS[0]
    members = {f"m{i}": MemberSpec(frozenset({topic})) for i in range(member_count)}
    first = assign_uniform(members, {topic: partition_count})
    counts = [len(assignment.get(topic, ())) for assignment in first.values()]
    assert max(counts) - min(counts) <= 1
    # One more member: every original member keeps all it had, or gives some up; nothing else moves.
    grown = {m: MemberSpec(frozenset({topic}), first[m]) for m in members} | {"new": MemberSpec(frozenset({topic}))}
    second = assign_uniform(grown, {topic: partition_count})
    for member_id in members:
        assert second[member_id].get(topic, set()) <= first[member_id].get(topic, set())
    counts = [len(assignment.get(topic, ())) for assignment in second.values()]
    assert max(counts) - min(counts) <= 1


def test_range_assignor_gives_contiguous_ranges() -> None:
    topic = TOPICS[0]
    members = {f"m{i}": MemberSpec(frozenset({topic})) for i in range(3)}
    assert assign_range(members, {topic: 7}) == {"m0": {topic: {0, 1, 2}}, "m1": {topic: {3, 4}},
                                                 "m2": {topic: {5, 6}}}


@settings(max_examples=int(os.environ.get("GROUPS_EXAMPLES", "100")), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "heartbeat", "leave", "advance", "rejoin"]), st.integers(0, 3)),
                max_size=40))
def test_random_heartbeats_never_give_a_partition_to_two_members(steps: list[tuple[str, int]]) -> None:
    harness = Harness()
    members: list[Member] = []
    try:
        for operation, who in steps:
            member = members[who % len(members)] if members else None
            if operation == "join" or member is None:
                members.append(Member(harness, ["t"], assignor="range" if who == 3 else None))
                members[-1].heartbeat()
            elif operation == "heartbeat":
                if member.heartbeat().error is not ErrorCode.NONE:
                    member.epoch, member.owned = 0, []  # fenced: the client gives everything up and rejoins
            elif operation == "leave":
                member.leave()
                members.remove(member)
            elif operation == "rejoin":
                member.epoch, member.owned = 0, []
                member.heartbeat()
            else:
                harness.timers.advance(REBALANCE_MS // 2)
            # A fenced member only learns it on its next heartbeat (a real client also stops at its own
            # poll timeout); until then only the members the coordinator still knows count.
            live = group(harness).members if GROUP in harness.coordinator.groups else {}
            assert_exclusive([member for member in members if member.member_id in live])
        for _ in range(8):  # everyone heartbeats for a while: the group converges
            for member in members:
                if member.heartbeat().error is not ErrorCode.NONE:
                    member.epoch, member.owned = 0, []
            assert_exclusive(members)
        if members:
            current = group(harness)
            assert current.state_name == "Stable"
            counts = sorted(len(member.partitions()) for member in members)
            assert sum(counts) == 6 and counts[-1] - counts[0] <= 1
    finally:
        harness.close()
