"""The classic group state machine driven without sockets, on a manual clock: the join and sync phases,
MEMBER_ID_REQUIRED, protocol votes, session and rebalance timeouts, static members, LeaveGroup."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.config import BrokerConfig
from kafkalite.broker.core.cluster import Cluster
from kafkalite.broker.core.group.classic_group import ClassicGroup, ClassicState, JoinRequest, JoinResult, SyncResult
from kafkalite.broker.core.group.coordinator import GroupCoordinator
from kafkalite.broker.core.group.store import GroupSettings
from kafkalite.broker.core.group.timers import ManualTimers
from kafkalite.protocol.errors import ErrorCode

GROUP = "group-a"
SESSION_MS = 10_000
REBALANCE_MS = 30_000


class Harness:
    """A coordinator on a manual clock, with shorthands for the classic protocol's requests."""

    def __init__(self, **settings: Any) -> None:
        self.cluster = Cluster(BrokerConfig({"log.storage": "memory", "offsets.topic.num.partitions": "3"}))
        self.cluster.open()
        self.cluster.topics.create("t", 6)
        self.timers = ManualTimers()
        values = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1000, **settings}
        self.settings = GroupSettings(**values)
        self.coordinator = self.cluster.build_group_coordinator(self.timers, self.settings)
        self.coordinator.open()

    def reload(self) -> GroupCoordinator:
        """A new coordinator on the same data: what a broker restart does."""
        self.coordinator.close()
        self.coordinator = self.cluster.build_group_coordinator(self.timers, self.settings)
        self.coordinator.open()
        return self.coordinator

    def group(self, group_id: str = GROUP) -> ClassicGroup:
        group = self.coordinator.groups[group_id]
        assert isinstance(group, ClassicGroup)
        return group

    def join(self, member_id: str = "", *, protocols: list[tuple[str, bytes]] | None = None, version: int = 9,
             instance_id: str | None = None, session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
             group_id: str = GROUP, protocol_type: str = "consumer") -> asyncio.Future[JoinResult]:
        return self.coordinator.join_group(JoinRequest(
            group_id, member_id, instance_id, session_ms, rebalance_ms, protocol_type,
            protocols if protocols is not None else [("range", b"meta-" + member_id.encode())],
            client_id="client", client_host="/127.0.0.1", api_version=version))

    def join_new(self, **kwargs: Any) -> tuple[str, asyncio.Future[JoinResult]]:
        """The two-step join of v4+: MEMBER_ID_REQUIRED, then the join with the given id."""
        first = self.join(**kwargs)
        assert first.result().error is ErrorCode.MEMBER_ID_REQUIRED
        member_id = first.result().member_id
        return member_id, self.join(member_id, **kwargs)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None, group_id: str = GROUP) -> asyncio.Future[SyncResult]:
        return self.coordinator.sync_group(group_id, generation, member_id, instance_id, None, None, assignments or {})

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> ErrorCode:
        return self.coordinator.heartbeat(GROUP, generation, member_id, instance_id)

    def stable_group(self, count: int, rebalance_ms: int = REBALANCE_MS,
                     session_ms: int = SESSION_MS) -> tuple[list[str], int]:
        """``count`` members joined and synced; their ids (leader first) and the generation."""
        futures = [self.join_new(rebalance_ms=rebalance_ms, session_ms=session_ms) for _ in range(count)]
        self.timers.advance(0)
        results = [future.result() for _, future in futures]
        generation = results[0].generation_id
        leader = results[0].leader
        members = [leader] + [member_id for member_id, _ in futures if member_id != leader]
        assignments = {member_id: f"assignment-{member_id}".encode() for member_id in members}
        syncs = [self.sync(member_id, generation, assignments if member_id == leader else None)
                 for member_id in members]
        assert all(sync.result().error is ErrorCode.NONE for sync in syncs)
        assert self.group().state is ClassicState.STABLE
        return members, generation

    def close(self) -> None:
        self.coordinator.close()
        self.cluster.close()
        self.timers.close()


@pytest.fixture
def harness() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def test_member_id_required_then_join_completes_first_generation(harness: Harness) -> None:
    first = harness.join(version=4)
    assert first.result().error is ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.result().member_id
    assert member_id.startswith("client-")
    assert harness.group().pending_members == {member_id}
    joined = harness.join(member_id, version=4)
    assert not joined.done()  # the initial rebalance runs on a (zero-delay) timer
    harness.timers.advance(0)
    result = joined.result()
    assert result.error is ErrorCode.NONE
    assert (result.generation_id, result.leader, result.member_id, result.protocol_name) == (1, member_id, member_id,
                                                                                             "range")
    assert result.members == ((member_id, None, b"meta-" + member_id.encode()),)
    assert harness.group().state is ClassicState.COMPLETING_REBALANCE


def test_join_before_v4_gets_a_member_id_at_once(harness: Harness) -> None:
    joined = harness.join(version=3)
    harness.timers.advance(0)
    result = joined.result()
    assert result.error is ErrorCode.NONE and result.member_id and result.generation_id == 1


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    harness = Harness(initial_rebalance_delay_ms=3000)
    try:
        first_id, first = harness.join_new()
        harness.timers.advance(2000)
        second_id, second = harness.join_new()
        harness.timers.advance(1000)  # the delay would end here, but a member arrived: extended
        assert not first.done()
        harness.timers.advance(3000)
        assert first.result().generation_id == second.result().generation_id == 1
        assert first.result().leader == first_id
        assert len(first.result().members) == 2 and second.result().members == ()
    finally:
        harness.close()


def test_protocol_chosen_by_vote_among_common_protocols(harness: Harness) -> None:
    joins = [harness.join_new(protocols=[("range", b"a1"), ("roundrobin", b"b1"), ("sticky", b"c1")]),
             harness.join_new(protocols=[("roundrobin", b"b2"), ("range", b"a2")]),
             harness.join_new(protocols=[("roundrobin", b"b3"), ("range", b"a3")])]
    harness.timers.advance(0)
    results = [future.result() for _, future in joins]
    assert {result.protocol_name for result in results} == {"roundrobin"}  # two votes to one; sticky not common
    leader_view = next(result for result in results if result.members)
    assert sorted(metadata for _, _, metadata in leader_view.members) == [b"b1", b"b2", b"b3"]


def test_follower_rejoining_a_stable_group_unchanged_gets_the_current_generation(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    again = harness.join(follower)
    assert again.result().generation_id == generation and again.result().members == ()
    assert harness.group().state is ClassicState.STABLE


def test_inconsistent_protocols_are_refused(harness: Harness) -> None:
    harness.stable_group(1)
    refused = harness.join(protocols=[("roundrobin", b"x")])
    assert refused.result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = harness.join(protocol_type="connect", protocols=[("range", b"x")])
    assert wrong_type.result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    empty = harness.join(group_id="other", protocols=[])
    assert empty.result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_and_group_id(harness: Harness) -> None:
    assert harness.join(session_ms=500).result().error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert harness.join(session_ms=2_000_000).result().error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert harness.join(group_id="").result().error is ErrorCode.INVALID_GROUP_ID
    assert harness.join("someone").result().error is ErrorCode.UNKNOWN_MEMBER_ID  # unknown group, known id


def test_follower_sync_waits_for_the_leader_and_late_sync_gets_assignment(harness: Harness) -> None:
    (leader_id, leader_join), (follower_id, _follower_join) = harness.join_new(), harness.join_new()
    harness.timers.advance(0)
    generation = leader_join.result().generation_id
    follower_sync = harness.sync(follower_id, generation)
    assert not follower_sync.done()
    leader_sync = harness.sync(leader_id, generation, {leader_id: b"L", follower_id: b"F"})
    assert leader_sync.result().assignment == b"L"
    assert follower_sync.result().assignment == b"F" and follower_sync.result().protocol_name == "range"
    assert harness.group().state is ClassicState.STABLE
    late = harness.sync(follower_id, generation)  # e.g. a retried SyncGroup
    assert late.result().error is ErrorCode.NONE and late.result().assignment == b"F"


def test_sync_errors(harness: Harness) -> None:
    (members, generation) = harness.stable_group(2)
    assert harness.sync(members[0], generation + 1).result().error is ErrorCode.ILLEGAL_GENERATION
    assert harness.sync("stranger", generation).result().error is ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.sync(members[0], generation, group_id="nope").result().error is ErrorCode.UNKNOWN_MEMBER_ID
    inconsistent = harness.coordinator.sync_group(GROUP, generation, members[0], None, "consumer", "roundrobin", {})
    assert inconsistent.result().error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_new_member_triggers_rebalance_and_heartbeats_say_so(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    _, newcomer = harness.join_new()
    assert harness.group().state is ClassicState.PREPARING_REBALANCE
    assert harness.heartbeat(follower, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    assert harness.sync(follower, generation).result().error is ErrorCode.REBALANCE_IN_PROGRESS
    leader_rejoin = harness.join(leader)
    assert not newcomer.done()
    follower_rejoin = harness.join(follower)
    assert newcomer.done() and leader_rejoin.done() and follower_rejoin.done()  # everyone rejoined: no waiting
    assert {f.result().generation_id for f in (newcomer, leader_rejoin, follower_rejoin)} == {generation + 1}
    assert leader_rejoin.result().leader == leader and len(leader_rejoin.result().members) == 3


def test_members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2, rebalance_ms=SESSION_MS // 2)
    rejoin = harness.join(leader, rebalance_ms=SESSION_MS // 2)
    assert not rejoin.done()
    harness.timers.advance(SESSION_MS // 4)
    assert harness.heartbeat(follower, generation) is ErrorCode.REBALANCE_IN_PROGRESS  # alive, but not rejoining
    harness.timers.advance(SESSION_MS // 4)
    assert rejoin.result().generation_id == generation + 1
    assert list(harness.group().members) == [leader]


def test_leader_that_does_not_rejoin_is_replaced(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2, rebalance_ms=SESSION_MS // 2)
    rejoin = harness.join(follower, rebalance_ms=SESSION_MS // 2, protocols=[("range", b"changed")])
    harness.timers.advance(SESSION_MS // 2)
    assert rejoin.result().leader == follower and rejoin.result().members[0][0] == follower


def test_session_timeout_evicts_a_silent_member_and_rebalances(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    for _ in range(4):  # the leader heartbeats, the follower stays silent
        harness.timers.advance(SESSION_MS // 3)
        if harness.group().state is ClassicState.STABLE:
            assert harness.heartbeat(leader, generation) is ErrorCode.NONE
    assert follower not in harness.group().members
    assert harness.heartbeat(leader, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = harness.join(leader)
    assert rejoin.result().generation_id == generation + 1 and len(rejoin.result().members) == 1


def test_heartbeats_keep_members_alive_indefinitely(harness: Harness) -> None:
    members, generation = harness.stable_group(2)
    for _ in range(20):
        harness.timers.advance(SESSION_MS // 2)
        assert all(harness.heartbeat(member, generation) is ErrorCode.NONE for member in members)
    assert harness.group().state is ClassicState.STABLE and harness.group().generation_id == generation


def test_heartbeat_errors(harness: Harness) -> None:
    (member,), generation = harness.stable_group(1)
    assert harness.heartbeat(member, generation + 1) is ErrorCode.ILLEGAL_GENERATION
    assert harness.heartbeat("stranger", generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.coordinator.heartbeat("no-such-group", 1, member, None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert harness.coordinator.heartbeat("", 1, member, None) is ErrorCode.INVALID_GROUP_ID


def test_pending_sync_fails_when_a_new_rebalance_starts(harness: Harness) -> None:
    (_leader_id, leader_join), (follower_id, _) = harness.join_new(), harness.join_new()
    harness.timers.advance(0)
    generation = leader_join.result().generation_id
    parked = harness.sync(follower_id, generation)
    harness.join_new()  # a third member arrives while the leader is assigning
    assert parked.result().error is ErrorCode.REBALANCE_IN_PROGRESS
    assert harness.group().state is ClassicState.PREPARING_REBALANCE


def test_members_that_never_sync_are_removed(harness: Harness) -> None:
    (leader_id, leader_join), (follower_id, _) = (harness.join_new(rebalance_ms=SESSION_MS // 2),
                                                  harness.join_new(rebalance_ms=SESSION_MS // 2))
    harness.timers.advance(0)
    generation = leader_join.result().generation_id
    harness.sync(leader_id, generation, {leader_id: b"L"})
    harness.timers.advance(SESSION_MS // 2)  # the follower never sent SyncGroup
    group = harness.group()
    assert follower_id not in group.members and group.state is ClassicState.PREPARING_REBALANCE


def test_pending_member_that_never_joins_expires_and_unblocks_the_rebalance(harness: Harness) -> None:
    (leader,), generation = harness.stable_group(1)
    pending = harness.join()
    assert pending.result().error is ErrorCode.MEMBER_ID_REQUIRED  # and never comes back
    # A pending member holds up a join phase: the leader's rejoin waits for it, until it expires.
    rejoin = harness.join(leader, protocols=[("range", b"changed")])
    assert not rejoin.done()
    harness.timers.advance(SESSION_MS)
    assert rejoin.result().error is ErrorCode.NONE and rejoin.result().generation_id == generation + 1


def test_static_member_restart_keeps_its_assignment_without_rebalance(harness: Harness) -> None:
    first = harness.join(instance_id="instance-1")
    second = harness.join(instance_id="instance-2")
    harness.timers.advance(0)
    generation = first.result().generation_id
    first_id, second_id = first.result().member_id, second.result().member_id
    assert first_id.startswith("instance-1-")
    harness.sync(first_id, generation, {first_id: b"A1", second_id: b"A2"}, instance_id="instance-1")
    harness.sync(second_id, generation, instance_id="instance-2")
    # instance-2 restarts: it joins with no member id and the same instance id, within its session.
    restarted = harness.join(instance_id="instance-2")
    result = restarted.result()
    assert result.error is ErrorCode.NONE and result.generation_id == generation
    assert result.member_id != second_id and harness.group().state is ClassicState.STABLE
    assert harness.sync(result.member_id, generation, instance_id="instance-2").result().assignment == b"A2"
    assert harness.heartbeat(second_id, generation, "instance-2") is ErrorCode.FENCED_INSTANCE_ID
    assert harness.heartbeat(first_id, generation, "instance-1") is ErrorCode.NONE


def test_static_leader_restart_gets_skip_assignment_in_v9_and_follower_view_before(harness: Harness) -> None:
    joined = harness.join(instance_id="solo")
    harness.timers.advance(0)
    leader_id, generation = joined.result().member_id, joined.result().generation_id
    harness.sync(leader_id, generation, {leader_id: b"mine"}, instance_id="solo")
    new9 = harness.join(instance_id="solo", version=9).result()
    assert new9.skip_assignment and new9.leader == new9.member_id and len(new9.members) == 1
    new5 = harness.join(instance_id="solo", version=5).result()
    assert not new5.skip_assignment and new5.leader == new9.member_id != new5.member_id  # acts as a follower
    assert harness.sync(new5.member_id, generation, instance_id="solo").result().assignment == b"mine"


def test_leave_group_batched_by_member_and_instance_id(harness: Harness) -> None:
    first = harness.join(instance_id="i1")
    _, second = harness.join_new()
    harness.timers.advance(0)
    generation = first.result().generation_id
    first_id = first.result().member_id
    second_id = second.result().member_id
    harness.sync(first_id if first.result().leader == first_id else second_id, generation, {})
    error, errors = harness.coordinator.leave_group(GROUP, [("", "i1"), (second_id, None), ("ghost", None),
                                                           ("", "unknown-instance")])
    assert error is ErrorCode.NONE
    assert errors == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID]
    group = harness.group()
    assert group.state is ClassicState.EMPTY and group.generation_id == generation + 1 and not group.members
    assert harness.coordinator.leave_group("missing", [("x", None)])[0] is ErrorCode.UNKNOWN_MEMBER_ID


def test_leaving_member_parked_in_join_is_answered(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    parked = harness.join(leader)
    assert not parked.done()
    harness.coordinator.leave_group(GROUP, [(leader, None)])
    assert parked.result().error is ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size(harness: Harness) -> None:
    small = Harness(max_group_size=1)
    try:
        small.stable_group(1)
        assert small.join().result().error is ErrorCode.GROUP_MAX_SIZE_REACHED
    finally:
        small.close()


def test_stable_group_survives_a_restart_and_members_expire_if_gone(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    coordinator = harness.reload()
    group = harness.group()
    assert group.state is ClassicState.STABLE and group.generation_id == generation
    assert set(group.members) == {leader, follower} and group.leader_id == leader
    assert group.members[follower].assignment == f"assignment-{follower}".encode()
    for _ in range(3):  # the leader heartbeats; the follower never came back
        harness.timers.advance(SESSION_MS // 2)
        coordinator.heartbeat(GROUP, generation, leader, None)
    assert follower not in group.members and group.state is ClassicState.PREPARING_REBALANCE


def test_cancelled_join_future_is_tolerated(harness: Harness) -> None:
    (leader, follower), generation = harness.stable_group(2)
    parked = harness.join(leader)
    parked.cancel()  # the connection went away
    harness.join(follower)
    assert harness.group().state is ClassicState.COMPLETING_REBALANCE


# random operation sequences ------------------------------------------------------------------
OPERATIONS = ("join", "rejoin", "static", "sync", "heartbeat", "leave", "advance", "commit")


@settings(max_examples=int(os.environ.get("GROUPS_EXAMPLES", "150")), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 3), st.sampled_from([3, 4, 5, 9])),
                max_size=40))
def test_random_operation_sequences_keep_the_state_machine_consistent(steps: list[tuple[str, int, int]]) -> None:
    harness = Harness()
    known: list[str] = []  # member ids handed out
    generations: dict[str, int] = {}
    parked: list[asyncio.Future[Any]] = []
    try:
        for operation, who, version in steps:
            member_id = known[who % len(known)] if known else ""
            generation = generations.get(member_id, -1)
            if operation == "join" or (operation == "rejoin" and not member_id):
                future = harness.join(version=version, protocols=[("range", b"m"), ("roundrobin", b"r")])
                if future.done() and future.result().error is ErrorCode.MEMBER_ID_REQUIRED:
                    future = harness.join(future.result().member_id, version=version,
                                          protocols=[("range", b"m"), ("roundrobin", b"r")])
                parked.append(future)
            elif operation == "static":  # a static member (re)starting with no member id
                parked.append(harness.join(version=max(version, 5), instance_id=f"instance-{who % 2}",
                                           protocols=[("range", b"m"), ("roundrobin", b"r")]))
            elif operation == "rejoin":
                group = harness.coordinator.groups.get(GROUP)
                member = group.members.get(member_id) if isinstance(group, ClassicGroup) else None
                parked.append(harness.join(member_id, version=version,
                                           protocols=[("range", b"m"), ("roundrobin", b"r")],
                                           instance_id=member.group_instance_id if member is not None else None))
            elif operation == "sync":
                group = harness.coordinator.groups.get(GROUP)
                leader = isinstance(group, ClassicGroup) and group.leader_id == member_id
                parked.append(harness.sync(member_id, generation, {m: b"x" for m in known} if leader else None))
            elif operation == "heartbeat":
                harness.heartbeat(member_id, generation)
            elif operation == "leave":
                harness.coordinator.leave_group(GROUP, [(member_id, None)])
            elif operation == "commit":
                harness.coordinator.commit_offsets(GROUP, generation, member_id, None, [])
            else:
                harness.timers.advance(SESSION_MS // 2)
            for future in parked:
                if future.done() and isinstance(future.result(), JoinResult) and future.result().member_id:
                    result = future.result()
                    if result.member_id not in known:
                        known.append(result.member_id)
                    if result.error is ErrorCode.NONE:
                        generations[result.member_id] = result.generation_id
            group = harness.coordinator.groups.get(GROUP)
            if isinstance(group, ClassicGroup):
                assert group.awaiting_join_count == sum(m.awaiting_join for m in group.members.values())
                assert group.leader_id in group.members or not group.members
                assert set(group.static_members.values()) <= set(group.members)
        harness.timers.advance(REBALANCE_MS + 2 * SESSION_MS)  # everyone silent: all answered, group empty
        assert all(future.done() for future in parked), "a request stayed parked"
        group = harness.coordinator.groups.get(GROUP)
        assert group is None or group.state is ClassicState.EMPTY
    finally:
        harness.close()
