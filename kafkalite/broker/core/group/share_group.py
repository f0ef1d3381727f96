"""A share group's membership (KIP-932): members, epochs, subscriptions, assignment, and its log record.

The rules that change it (ShareGroupHeartbeat, the assignor, session timeouts) are in
:mod:`kafkalite.broker.core.group.share_rebalance`; what the group delivers (share partitions,
acquisition locks, acknowledgements) is in the ``kafkalite.broker.core.share`` room.

Record (the group's whole state, one ``__consumer_offsets`` value under ``ShareGroupKey``, written
after every change): version int16 (0), group epoch, assignment epoch, then the members, each with
id, rack, client id and host, subscribed topic names, member epoch, previous epoch and assignment
(topic id and partitions).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.broker.core.group.assignors import Assignment
from kafkalite.protocol.primitives import Reader, Writer

__all__ = ["LEAVE_GROUP_EPOCH", "ShareGroup", "ShareMember"]

LEAVE_GROUP_EPOCH = -1


@dataclass(slots=True, eq=False)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)


class ShareGroup:
    """One share group's membership; the rules live in ``ShareRebalancer``."""

    kind = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.resolved_topics: set[str] = set()

    @property
    def state_name(self) -> str:
        return "Stable" if self.members else "Empty"

    @property
    def protocol_type(self) -> str:
        return "share"

    def is_empty(self) -> bool:
        return not self.members

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.resolved_topics

    def subscribed_topics(self) -> set[str]:
        return {name for member in self.members.values() for name in member.subscribed_topic_names}

    # persistence (this broker's own layout) ----------------------------------------------------
    def encode(self) -> bytes:
        writer = Writer()
        writer.int16(0)
        writer.int32(self.group_epoch)
        writer.int32(self.assignment_epoch)
        writer.int32(len(self.members))
        for member in self.members.values():
            writer.string(member.member_id, False)
            writer.nullable_string(member.rack_id, False)
            writer.string(member.client_id, False)
            writer.string(member.client_host, False)
            writer.string_array(member.subscribed_topic_names, False)
            writer.int32(member.member_epoch)
            writer.int32(member.previous_member_epoch)
            writer.int32(len(member.assigned))
            for topic_id, partitions in member.assigned.items():
                writer.uuid(topic_id)
                writer.int32_array(sorted(partitions), False)
        return writer.getvalue()

    @classmethod
    def decode(cls, group_id: str, data: bytes | bytearray | memoryview) -> ShareGroup:
        reader = Reader(data)
        if reader.int16() != 0:
            raise ValueError("unknown share group record version")
        group = cls(group_id)
        group.group_epoch = reader.int32()
        group.assignment_epoch = reader.int32()
        for _ in range(reader.int32()):
            member = ShareMember(reader.string(False), reader.nullable_string(False), reader.string(False),
                                 reader.string(False), list(reader.string_array(False)), reader.int32(),
                                 reader.int32())
            for _ in range(reader.int32()):
                topic_id = reader.uuid()
                member.assigned[topic_id] = set(reader.int32_array(False) or [])
            group.members[member.member_id] = member
            group.target[member.member_id] = {topic_id: set(partitions)
                                              for topic_id, partitions in member.assigned.items()}
        group.resolved_topics = group.subscribed_topics()
        return group
