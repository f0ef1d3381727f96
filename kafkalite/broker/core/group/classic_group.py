"""Classic consumer groups: the state of the JoinGroup/SyncGroup protocol (the rules are in ``classic_rebalance``).

Theory of operation
-------------------
A classic group is in one of five states, and moves between them so:

* Empty -> PreparingRebalance: a member joins.
* PreparingRebalance -> CompletingRebalance: the join phase completes with members
  (-> Empty when none is left).
* CompletingRebalance -> Stable: the leader's SyncGroup brings the assignment.
* CompletingRebalance or Stable -> PreparingRebalance: a member joins or changes its metadata, the
  leader rejoins, a member leaves or fails its session timeout, members send no SyncGroup in time.
* any -> Dead: DeleteGroups or offset expiry removes the group; the next request creates a new one.

*Join phase* (PreparingRebalance). Each JoinGroup parks a future on its member. The phase completes
when every member has rejoined and no member is pending (``has_all_members_joined``), or when the
rebalance timer fires (the largest ``rebalance_timeout_ms`` of the members); dynamic members that did
not rejoin are removed then (static ones stay until their session times out). A new group's first
rebalance waits ``group.initial.rebalance.delay.ms`` for more members, extended while members keep
arriving, at most up to the rebalance timeout. Completing the phase bumps the generation, chooses the
protocol every member supports by vote, keeps the leader if it rejoined (else the first joined member)
and answers every parked JoinGroup; the leader's answer carries every member's metadata.

*Sync phase* (CompletingRebalance). SyncGroups park until the leader's SyncGroup brings the
assignment: it is written to ``__consumer_offsets`` and every parked SyncGroup is answered, and the
group is Stable. A SyncGroup arriving after that (a slow follower) gets its assignment at once. A new
rebalance fails parked SyncGroups with REBALANCE_IN_PROGRESS. Members that send no SyncGroup within
the rebalance timeout are removed and the group rebalances.

*Member ids.* JoinGroup v4+ from an unknown dynamic member gets MEMBER_ID_REQUIRED and a new id; the
id is pending (it holds up the join phase) until that member joins with it or its session times out
(KIP-394). A static member (``group.instance.id``, KIP-345) joins directly; when its instance id is
known the old member id is replaced (parked requests of the old id get FENCED_INSTANCE_ID) and, in a
Stable group whose protocol does not change, it gets the same assignment without a rebalance.

*Timers* (all keyed, re-arming replaces): a heartbeat timer per member (session timeout; 5 minutes for
a member's first join, ``GroupSettings.new_member_join_timeout_ms``), a join timer and a sync timer per group.
A member parked in JoinGroup or SyncGroup satisfies its heartbeat; its timer is re-armed once the
phase completes. Expiry removes the member and rebalances (or completes the join phase).

Persistence: the group's record (generation, protocol, leader, members with their subscription and
assignment) is written when a new group is created, when the leader's assignment arrives, when the
group becomes Empty and when a static member is replaced in a Stable group. A group is loaded from its
last record as Stable (members) or Empty (none), and each loaded member's session timer is armed.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from kafkalite.broker.core.group.records import ClassicGroupRecord, ClassicMemberRecord
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import ConsumerProtocolSubscription
from kafkalite.protocol.primitives import Reader

if TYPE_CHECKING:
    import asyncio

__all__ = ["ClassicGroup", "ClassicMember", "ClassicState", "JoinRequest", "JoinResult", "SyncResult",
           "VALID_PREVIOUS", "decode_subscription", "resolve"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS = {
    ClassicState.PREPARING_REBALANCE: {ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE, ClassicState.EMPTY},
    ClassicState.COMPLETING_REBALANCE: {ClassicState.PREPARING_REBALANCE},
    ClassicState.STABLE: {ClassicState.COMPLETING_REBALANCE},
    ClassicState.EMPTY: {ClassicState.PREPARING_REBALANCE},
    ClassicState.DEAD: set(ClassicState),
}


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): leader only


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        return False if self.is_new else self.awaiting_join or self.awaiting_sync


def resolve(future: asyncio.Future[Any] | None, result: Any) -> bool:
    if future is None:
        return False
    if not future.done():  # a cancelled future: the client went away; the answer is dropped
        future.set_result(result)
    return True


class ClassicGroup:
    """One classic group's state; the protocol rules live in ``ClassicRebalancer``."""

    kind = "classic"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = ClassicState.EMPTY
        self.previous_state = ClassicState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.awaiting_join_count = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # facts ---------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return self.state is ClassicState.EMPTY

    @property
    def state_name(self) -> str:
        return self.state.value

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state is ClassicState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and bool(protocols & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # membership ----------------------------------------------------------------------------
    def transition(self, state: ClassicState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: invalid transition {self.state.value} -> {state.value}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = now_ms

    def add(self, member: ClassicMember, future: asyncio.Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_future = future
        if future is not None:
            self.awaiting_join_count += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if member.awaiting_join:
                self.awaiting_join_count -= 1
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(self, member: ClassicMember, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, future: asyncio.Future[JoinResult] | None) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if future is not None and not member.awaiting_join:
            self.awaiting_join_count += 1
        elif future is None and member.awaiting_join:
            self.awaiting_join_count -= 1
        elif future is not None:  # a second JoinGroup while one is parked: answer the first one now
            resolve(member.join_future, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.join_future = future

    def complete_join(self, member: ClassicMember, result: JoinResult) -> bool:
        future, member.join_future = member.join_future, None
        if future is None:
            return False
        self.awaiting_join_count -= 1
        return resolve(future, result)

    def complete_sync(self, member: ClassicMember, result: SyncResult) -> bool:
        future, member.sync_future = member.sync_future, None
        return resolve(future, result)

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicMember:
        old = self.members.pop(old_member_id)
        self.complete_join(old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        self.complete_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        new = ClassicMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                            old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type, old.protocols,
                            old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync.discard(old_member_id)
        return new

    def members_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple((member.member_id, member.group_instance_id, member.metadata(self.protocol_name))
                     for member in self.members.values())

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, when they speak the consumer protocol (else None)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscription = decode_subscription(member.metadata(self.protocol_name))
            if subscription is None:
                return None
            topics.update(subscription)
        return topics

    # persistence ---------------------------------------------------------------------------
    def to_record(self, with_members: bool) -> ClassicGroupRecord:
        members = tuple(
            ClassicMemberRecord(member.member_id, member.group_instance_id, member.client_id, member.client_host,
                                member.rebalance_timeout_ms, member.session_timeout_ms,
                                member.metadata(self.protocol_name), member.assignment)
            for member in self.members.values()) if with_members else ()
        return ClassicGroupRecord(self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id,
                                  self.state_timestamp_ms if self.state_timestamp_ms is not None else -1, members)

    @classmethod
    def from_record(cls, group_id: str, record: ClassicGroupRecord) -> ClassicGroup:
        group = cls(group_id, record.current_state_timestamp_ms)
        group.state_timestamp_ms = None if record.current_state_timestamp_ms < 0 else record.current_state_timestamp_ms
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.state = ClassicState.STABLE if record.members else ClassicState.EMPTY
        for item in record.members:
            member = ClassicMember(item.member_id, item.group_instance_id, item.client_id, item.client_host,
                                   item.rebalance_timeout_ms, item.session_timeout_ms, record.protocol_type,
                                   [(record.protocol or "", item.subscription)], item.assignment)
            group.add(member)
        group.leader_id = record.leader if record.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def decode_subscription(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (read as v0, the prefix of every version)."""
    try:
        reader = Reader(metadata)
        reader.int16()
        return list(ConsumerProtocolSubscription.read(reader, 0).topics)
    except (ProtocolError, ValueError, IndexError, UnicodeDecodeError, struct.error):
        return None
