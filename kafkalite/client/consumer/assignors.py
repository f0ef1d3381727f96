"""Client-side partition assignors of the classic group protocol, and the consumer protocol's wire format.

In a classic group every member sends, per assignor it supports, its *subscription* (JoinGroup
metadata); the coordinator picks the assignor every member supports (by vote), and the leader runs
it over all members' subscriptions and hands each member its *assignment* in SyncGroup. Both are
the Java client's ``ConsumerProtocol`` layouts: an int16 version, then ``ConsumerProtocolSubscription``
(topics, user data, owned partitions v1+, generation v2+, rack v3+) or ``ConsumerProtocolAssignment``
(partitions, user data). A newer version than we know is read as the newest we know (the fields are
only ever appended), as the Java client does, so members of any client and version share a group.

The assignors have the Java client's names and give its assignments:

* ``range`` -- per topic, the members subscribed to it in order get consecutive ranges of partitions,
  the first ``partitions % members`` one more each;
* ``roundrobin`` -- all partitions of all subscribed topics, sorted by topic and partition, dealt to
  the members in order, skipping those not subscribed to a partition's topic;
* ``sticky`` and ``cooperative-sticky`` -- balanced, and keeping as many partitions as possible where
  they were (:mod:`.sticky`).

Members are ordered as Java's ``MemberInfo``: static members (``group.instance.id``) first, by instance
id, then the others by member id. An assignor names the rebalance protocols it supports: EAGER (every
member gives up everything before rejoining) or COOPERATIVE (KIP-429: only what moves is revoked).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkalite.protocol.messages import consumer_protocol_assignment as assignment_message
from kafkalite.protocol.messages import consumer_protocol_subscription as subscription_message

__all__ = [
    "Assignment", "ConsumerPartitionAssignor", "GroupMember", "RangeAssignor", "RebalanceProtocol",
    "RoundRobinAssignor", "Subscription", "decode_assignment", "decode_subscription",
    "encode_assignment", "encode_subscription", "member_order",
]  # fmt: skip

_VERSION = struct.Struct(">h")
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.VALID_VERSIONS[1]
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.VALID_VERSIONS[1]


class RebalanceProtocol(enum.IntEnum):
    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member sends in JoinGroup for one assignor."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1  # -1: not sent (versions before 2)
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What a member gets in SyncGroup."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member as the leader's assignor sees it."""

    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None
    order_key: tuple[int, str] = field(init=False)

    def __post_init__(self) -> None:
        key = (0, self.group_instance_id) if self.group_instance_id is not None else (1, self.member_id)
        object.__setattr__(self, "order_key", key)


def member_order(members: Mapping[str, GroupMember]) -> list[str]:
    """Member ids in the Java client's ``MemberInfo`` order: static members by instance id, then the rest."""
    return sorted(members, key=lambda member_id: members[member_id].order_key)


# --- the wire format -----------------------------------------------------------------------------------


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for partition in partitions:
        grouped.setdefault(partition.topic, []).append(partition.partition)
    return grouped


def encode_subscription(subscription: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    message = ConsumerProtocolSubscription(
        topics=list(subscription.topics), user_data=subscription.user_data,
        owned_partitions=[subscription_message.TopicPartition(topic, partitions)
                          for topic, partitions in _by_topic(subscription.owned_partitions).items()],
        generation_id=subscription.generation_id, rack_id=subscription.rack_id)
    return _VERSION.pack(version) + message.encode(version)


def _version_of(data: bytes, highest: int, what: str) -> int:
    if len(data) < 2:
        raise ProtocolError(f"consumer protocol {what} of {len(data)} bytes has no version")
    version = int(_VERSION.unpack_from(data)[0])
    if version < 0:
        raise ProtocolError(f"consumer protocol {what} has version {version}")
    return min(version, highest)


def decode_subscription(data: bytes) -> Subscription:
    """A member's JoinGroup metadata; a newer version than ours is read as ours."""
    version = _version_of(data, SUBSCRIPTION_VERSION, "subscription")
    message = ConsumerProtocolSubscription.decode(memoryview(data)[2:], version)
    owned = tuple(TopicPartition(entry.topic, partition) for entry in message.owned_partitions
                  for partition in entry.partitions)
    return Subscription(tuple(message.topics), message.user_data, owned,
                        message.generation_id if version >= 2 else -1, message.rack_id or None)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    message = ConsumerProtocolAssignment(
        assigned_partitions=[assignment_message.TopicPartition(topic, partitions)
                             for topic, partitions in _by_topic(assignment.partitions).items()],
        user_data=assignment.user_data)
    return _VERSION.pack(version) + message.encode(version)


def decode_assignment(data: bytes) -> Assignment:
    """A SyncGroup assignment; empty bytes (a member the leader left out) is an empty assignment."""
    if not data:
        return Assignment(())
    version = _version_of(data, ASSIGNMENT_VERSION, "assignment")
    message = ConsumerProtocolAssignment.decode(memoryview(data)[2:], version)
    return Assignment(tuple(TopicPartition(entry.topic, partition) for entry in message.assigned_partitions
                            for partition in entry.partitions), message.user_data)


# --- assignors -----------------------------------------------------------------------------------------


class ConsumerPartitionAssignor:
    """An assignor: its protocol name, the rebalance protocols it supports, and the assignment it computes.

    Subclass it for a custom assignor (and put the instance in ``partition.assignment.strategy``).
    ``assign`` gets each topic's partition count (topics the cluster does not know are left out) and
    every member; it returns every member's assignment.
    """

    name = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, GroupMember]) -> dict[str, Assignment]:
        raise NotImplementedError

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """This member's own assignment arrived (sticky assignors remember it)."""


def _assignments(result: Mapping[str, list[TopicPartition]]) -> dict[str, Assignment]:
    return {member_id: Assignment(tuple(partitions)) for member_id, partitions in result.items()}


class RangeAssignor(ConsumerPartitionAssignor):
    """Per topic, consecutive ranges of partitions to the members subscribed to it (Java's ``range``)."""

    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, GroupMember]) -> dict[str, Assignment]:
        ordered = member_order(members)
        result: dict[str, list[TopicPartition]] = {member_id: [] for member_id in ordered}
        for topic in sorted(partitions_per_topic):
            count = partitions_per_topic[topic]
            subscribers = [member_id for member_id in ordered if topic in members[member_id].subscription.topics]
            if not subscribers or count <= 0:
                continue
            per_member, extra = divmod(count, len(subscribers))
            for index, member_id in enumerate(subscribers):
                start = per_member * index + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                result[member_id].extend(TopicPartition(topic, partition) for partition in range(start, start + length))
        return _assignments(result)


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """All partitions, sorted, dealt to the members in turn (Java's ``roundrobin``)."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, GroupMember]) -> dict[str, Assignment]:
        ordered = member_order(members)
        result: dict[str, list[TopicPartition]] = {member_id: [] for member_id in ordered}
        subscribed = sorted({topic for member in members.values() for topic in member.subscription.topics
                             if topic in partitions_per_topic})
        if not ordered:
            return {}
        turn = 0
        for topic in subscribed:
            for partition in range(partitions_per_topic[topic]):
                while topic not in members[ordered[turn % len(ordered)]].subscription.topics:
                    turn += 1
                result[ordered[turn % len(ordered)]].append(TopicPartition(topic, partition))
                turn += 1
        return _assignments(result)
