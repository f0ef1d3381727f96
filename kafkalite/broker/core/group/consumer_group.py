"""A KIP-848 consumer group's state: members, epochs, target assignment, and its log record.

The rules that change it (ConsumerGroupHeartbeat, reconciliation, timers) are in
:mod:`kafkalite.broker.core.group.consumer_rebalance`, whose docstring explains the epochs and the
member states named here.

Record (the group's whole state, one ``__consumer_offsets`` value, written after every change): see
:meth:`ConsumerGroup.encode`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from kafkalite.broker.core.group.assignors import Assignment
from kafkalite.protocol.primitives import Reader, Writer

__all__ = ["ConsumerGroup", "ConsumerMember", "MemberState", "TopicPartitions", "copy_assignment",
           "assignment_as_list", "LEAVE_GROUP_EPOCH", "LEAVE_GROUP_STATIC_EPOCH"]

LEAVE_GROUP_EPOCH = -1
LEAVE_GROUP_STATIC_EPOCH = -2
TopicPartitions = list[tuple[uuid.UUID, list[int]]]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.member_epoch == epoch and self.state is MemberState.STABLE


def copy_assignment(assignment: Assignment) -> Assignment:
    return {topic_id: set(partitions) for topic_id, partitions in assignment.items() if partitions}


def assignment_as_list(assignment: Assignment) -> TopicPartitions:
    ordered = sorted(assignment.items(), key=lambda item: str(item[0]))
    return [(topic_id, sorted(partitions)) for topic_id, partitions in ordered if partitions]


class ConsumerGroup:
    """One KIP-848 group's state; the rules live in ``ConsumerRebalancer``."""

    kind = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.resolved_topics: set[str] = set()  # subscribed names, regexes resolved

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not member.is_reconciled_to(self.assignment_epoch) for member in self.members.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.resolved_topics

    def preferred_assignor(self, default: str) -> str:
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        return max(votes, key=lambda name: votes[name]) if votes else default

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def remove_partition_epochs(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs.pop((topic_id, partition), None)

    def add_partition_epochs(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs[(topic_id, partition)] = member.member_epoch

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member. A member object changed in place must have had its partition
        epochs removed (``remove_partition_epochs``) before the change."""
        old = self.members.get(member.member_id)
        if old is not None and old is not member:
            self.remove_partition_epochs(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.add_partition_epochs(member)

    def drop_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.remove_partition_epochs(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    # persistence (this broker's own layout, key version 1000) ------------------------------
    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(0)
        writer.int32(self.group_epoch)
        writer.int32(self.assignment_epoch)
        writer.int32(len(self.members))
        for member in self.members.values():
            writer.string(member.member_id, False)
            writer.nullable_string(member.instance_id, False)
            writer.nullable_string(member.rack_id, False)
            writer.string(member.client_id, False)
            writer.string(member.client_host, False)
            writer.int32(member.rebalance_timeout_ms)
            writer.string_array(member.subscribed_topic_names, False)
            writer.nullable_string(member.subscribed_topic_regex, False)
            writer.nullable_string(member.server_assignor, False)
            writer.int32(member.member_epoch)
            writer.int32(member.previous_member_epoch)
            writer.int8(int(member.state))
            for assignment in (member.assigned, member.pending_revocation, self.target.get(member.member_id, {})):
                _write_assignment(writer, assignment)
        return writer.getvalue()

    @classmethod
    def decode(cls, group_id: str, data: bytes | bytearray | memoryview) -> ConsumerGroup:
        reader = Reader(data)
        if reader.int16() != 0:
            raise ValueError("unknown consumer group record version")
        group = cls(group_id)
        group.group_epoch = reader.int32()
        group.assignment_epoch = reader.int32()
        for _ in range(reader.int32()):
            member = ConsumerMember(reader.string(False), reader.nullable_string(False), reader.nullable_string(False),
                                    reader.string(False), reader.string(False), reader.int32(),
                                    list(reader.string_array(False)), reader.nullable_string(False),
                                    reader.nullable_string(False), reader.int32(), reader.int32(),
                                    MemberState(reader.int8()))
            member.assigned = _read_assignment(reader)
            member.pending_revocation = _read_assignment(reader)
            group.target[member.member_id] = _read_assignment(reader)
            group.put_member(member)
        return group


def _write_assignment(writer: Writer, assignment: Assignment) -> None:
    writer.int32(len(assignment))
    for topic_id, partitions in assignment.items():
        writer.uuid(topic_id)
        writer.int32_array(sorted(partitions), False)


def _read_assignment(reader: Reader) -> Assignment:
    assignment: Assignment = {}
    for _ in range(reader.int32()):
        topic_id = reader.uuid()
        assignment[topic_id] = set(reader.int32_array(False) or [])
    return assignment
