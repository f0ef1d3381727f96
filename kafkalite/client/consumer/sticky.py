"""The ``sticky`` and ``cooperative-sticky`` assignors: balanced, and moving as few partitions as possible.

Both follow the Java client's ``AbstractStickyAssignor`` (without rack awareness), so a group led by
this client assigns as a Java-led group would, and a Java or librdkafka leader reads our user data.

**What each member owned.** ``cooperative-sticky`` members list their owned partitions in the
subscription (v1+) and their generation (v2+, or as 4 bytes of user data before); ``sticky`` members,
which revoke everything before rejoining (EAGER), carry their last assignment and generation in
their user data. A partition claimed by two members of different generations stays with the newer
one; claimed twice in the same generation, it is taken from both.

**All members subscribed to the same topics** (the usual case). With ``P`` partitions and ``N``
members, everyone gets ``floor(P/N)`` or ``ceil(P/N)``, and only ``P % N`` members the larger number.
Members keep what they owned up to their quota (owned partitions sorted by partition, then topic),
then the unowned partitions, sorted by topic and partition, are dealt round-robin to the members
below quota (sorted by member id), then to those that may still take one more.

**Different subscriptions.** The general algorithm: keep every valid ownership, give each unassigned
partition (topics with fewest potential members first) to the least-loaded member that subscribes to
it, then move partitions from members with two or more than another eligible member, preferring a
partition's previous owner and refusing moves that would send partitions of a topic back and forth
between two members; the result is kept only if it is better balanced than before.

**Cooperative (KIP-429).** A partition moving from one member to another is left out of the new
owner's assignment this round: the old owner revokes it (and only it), rejoins, and the next round
gives it to the new owner. So no partition is ever owned by two members at once.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.client.consumer.assignors import (
    Assignment,
    ConsumerPartitionAssignor,
    GroupMember,
    RebalanceProtocol,
)
from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.exceptions import ProtocolError

__all__ = ["CooperativeStickyAssignor", "MemberData", "StickyAssignor", "java_hash_order", "sticky_assign",
           "transferring_ownership"]

DEFAULT_GENERATION = -1
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member owned before this rebalance, and in which generation (None: not said)."""

    topics: frozenset[str]
    partitions: tuple[TopicPartition, ...]
    generation: int | None


# --- the user data of the eager sticky assignor ------------------------------------------------------


def encode_sticky_user_data(partitions: tuple[TopicPartition, ...], generation: int) -> bytes:
    """Java's ``StickyAssignor`` user data v1: [topic, [partition]] then the generation."""
    by_topic: dict[str, list[int]] = {}
    for partition in partitions:
        by_topic.setdefault(partition.topic, []).append(partition.partition)
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic, indexes in by_topic.items():
        encoded = topic.encode("utf-8")
        out += _INT16.pack(len(encoded)) + encoded + _INT32.pack(len(indexes))
        out += b"".join(_INT32.pack(index) for index in indexes)
    out += _INT32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> tuple[tuple[TopicPartition, ...], int | None]:
    """The partitions and generation in ``sticky`` user data (v0 has no generation)."""
    try:
        position = 0
        (topics,) = _INT32.unpack_from(data, position)
        position += 4
        partitions: list[TopicPartition] = []
        for _ in range(topics):
            (length,) = _INT16.unpack_from(data, position)
            position += 2
            topic = bytes(data[position:position + length]).decode("utf-8")
            position += length
            (count,) = _INT32.unpack_from(data, position)
            position += 4
            for _ in range(count):
                partitions.append(TopicPartition(topic, _INT32.unpack_from(data, position)[0]))
                position += 4
        generation = _INT32.unpack_from(data, position)[0] if len(data) - position >= 4 else None
        return tuple(partitions), generation
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed sticky assignor user data: {exc}") from None


# --- the algorithm -------------------------------------------------------------------------------------


def _java_string_hash(text: str) -> int:
    hash_code = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        hash_code = (31 * hash_code + (encoded[index] << 8 | encoded[index + 1])) & 0xFFFFFFFF
    return hash_code


def java_hash_order(member_ids: list[str]) -> list[str]:
    """Member ids in the order a Java ``HashMap`` holding them iterates (bucket by bucket).

    The Java assignor walks its members in this order where the order decides something (which of
    several members owning more than their quota keep the extra partition), so following it gives
    the Java client's assignments. Members sharing a bucket keep their sorted order.
    """
    capacity = 16
    while len(member_ids) > capacity * 3 // 4:
        capacity *= 2

    def bucket(member_id: str) -> int:
        hash_code = _java_string_hash(member_id)
        return (hash_code ^ (hash_code >> 16)) & (capacity - 1)

    return sorted(sorted(member_ids), key=bucket)


def _resolve_owners(partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberData]
                    ) -> tuple[bool, dict[str, list[TopicPartition]], set[TopicPartition], int]:
    """Whether all subscriptions are equal; each member's still valid owned partitions; the partitions
    claimed twice in one generation; the highest generation seen."""
    all_equal = True
    first_topics: frozenset[str] | None = None
    owned: dict[str, list[TopicPartition]] = {}
    claimed_twice: set[TopicPartition] = set()
    previous_owner: dict[TopicPartition, str] = {}
    max_generation = DEFAULT_GENERATION
    for member_id in java_hash_order(list(members)):
        data = members[member_id]
        if first_topics is None or not first_topics:
            first_topics = data.topics
        elif data.topics != first_topics:
            all_equal = False
        generation = data.generation if data.generation is not None else DEFAULT_GENERATION
        max_generation = max(max_generation, generation)
        mine: list[TopicPartition] = []
        owned[member_id] = mine
        for partition in data.partitions:
            if partition.topic not in partitions_per_topic:
                continue
            other = previous_owner.get(partition)
            if other is None:
                mine.append(partition)
                previous_owner[partition] = member_id
                continue
            other_data = members[other].generation
            other_generation = other_data if other_data is not None else DEFAULT_GENERATION
            if generation == other_generation:
                claimed_twice.add(partition)
                if partition in owned[other]:
                    owned[other].remove(partition)
                previous_owner[partition] = member_id
            elif generation > other_generation:
                mine.append(partition)
                if partition in owned[other]:
                    owned[other].remove(partition)
                previous_owner[partition] = member_id
    return all_equal, owned, claimed_twice, max_generation


def _all_partitions(partitions_per_topic: Mapping[str, int], topics: list[str]) -> list[TopicPartition]:
    return [TopicPartition(topic, index) for topic in topics for index in range(partitions_per_topic[topic])]


def _constrained(partitions_per_topic: Mapping[str, int], owned: dict[str, list[TopicPartition]],
                 claimed_twice: set[TopicPartition]) -> tuple[dict[str, list[TopicPartition]],
                                                              dict[TopicPartition, str]]:
    total = sum(partitions_per_topic.values())
    count = len(owned)
    min_quota, extra = divmod(total, count)
    max_quota = min_quota + (1 if extra else 0)
    expected_over_min = extra
    over_min = 0
    assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in owned}
    assigned: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    transferring: dict[TopicPartition, str] = {}
    under_min: list[str] = []
    exactly_min: list[str] = []
    for member_id in java_hash_order(list(owned)):
        partitions = owned[member_id]
        mine = sorted((partition for partition in partitions if partition not in claimed_twice),
                      key=lambda partition: (partition.partition, partition.topic))
        if len(mine) < min_quota:
            assignment[member_id].extend(mine)
            assigned.update(mine)
            under_min.append(member_id)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
            assignment[member_id].extend(mine[:max_quota])
            assigned.update(mine[:max_quota])
            revoked.update(mine[max_quota:])
        else:
            assignment[member_id].extend(mine[:min_quota])
            assigned.update(mine[:min_quota])
            revoked.update(mine[min_quota:])
            if over_min < expected_over_min:
                exactly_min.append(member_id)
    unassigned = [partition for partition in _all_partitions(partitions_per_topic, sorted(partitions_per_topic))
                  if partition not in assigned]
    under_min.sort()
    exactly_min.sort()
    cursor = 0  # an iterator over under_min that survives removals, as Java's
    for partition in unassigned:
        if cursor < len(under_min):
            member_id = under_min[cursor]
            cursor += 1
        elif not under_min and not exactly_min:
            raise RuntimeError("sticky assignment: no member left for the remaining partitions")
        elif not under_min:
            member_id = exactly_min.pop(0)
        else:
            member_id = under_min[0]
            cursor = 1
        mine = assignment[member_id]
        mine.append(partition)
        if partition in revoked or partition in claimed_twice:
            transferring[partition] = member_id
        if len(mine) == min_quota:
            cursor -= 1
            del under_min[cursor]
            exactly_min.append(member_id)
        elif len(mine) == max_quota:
            over_min += 1
    return assignment, transferring


class _PartitionMovements:
    """Which partitions moved between which members during one general assignment (for stickiness)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], set[TopicPartition]]] = {}
        self.movements: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, partition: TopicPartition) -> tuple[str, str]:
        pair = self.movements.pop(partition)
        pairs = self.by_topic[partition.topic]
        pairs[pair].discard(partition)
        if not pairs[pair]:
            del pairs[pair]
        if not pairs:
            del self.by_topic[partition.topic]
        return pair

    def _add(self, partition: TopicPartition, pair: tuple[str, str]) -> None:
        self.movements[partition] = pair
        self.by_topic.setdefault(partition.topic, {}).setdefault(pair, set()).add(partition)

    def move(self, partition: TopicPartition, old: str, new: str) -> None:
        if partition in self.movements:
            source, _ = self._remove(partition)
            if source != new:
                self._add(partition, (source, new))
        else:
            self._add(partition, (old, new))

    def partition_to_move(self, partition: TopicPartition, old: str, new: str) -> TopicPartition:
        """Moving a partition of this topic back the way another came: move that one instead."""
        pairs = self.by_topic.get(partition.topic)
        if pairs is None:
            return partition
        if partition in self.movements:
            old = self.movements[partition][0]
        reverse = pairs.get((new, old))
        if not reverse:
            return partition
        return min(reverse)


class _General:
    """The general case: members with different subscriptions (see the module docstring)."""

    def __init__(self, partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberData],
                 owned: dict[str, list[TopicPartition]], max_generation: int) -> None:
        self.partitions_per_topic = partitions_per_topic
        self.members = members
        self.total = sum(partitions_per_topic.values())
        self.topic_members: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        self.member_topics: dict[str, list[str]] = {}
        for member_id in sorted(members):
            topics = [topic for topic in sorted(members[member_id].topics) if topic in partitions_per_topic]
            self.member_topics[member_id] = topics
            for topic in topics:
                self.topic_members[topic].append(member_id)
        self.current = {member_id: list(owned.get(member_id, [])) for member_id in sorted(members)}
        self.owner = {partition: member_id for member_id, partitions in self.current.items()
                      for partition in partitions}
        topics = sorted(self.topic_members, key=lambda topic: (len(self.topic_members[topic]), topic))
        self.sorted_partitions = _all_partitions(partitions_per_topic, topics)
        self.movements = _PartitionMovements()
        self.revocation_required = False
        self.previous: dict[TopicPartition, tuple[str, int]] = {}
        for member_id in sorted(members):
            data = members[member_id]
            if data.generation is not None and data.generation < max_generation:
                self._remember_previous(data.partitions, member_id, data.generation)
            elif data.generation is None and max_generation > DEFAULT_GENERATION:
                self._remember_previous(data.partitions, member_id, DEFAULT_GENERATION)

    def _remember_previous(self, partitions: tuple[TopicPartition, ...], member_id: str, generation: int) -> None:
        for partition in partitions:
            known = self.previous.get(partition)
            if known is None or generation > known[1]:
                self.previous[partition] = (member_id, generation)

    def _sorted_members(self) -> list[str]:
        return sorted(self.current, key=lambda member_id: (len(self.current[member_id]), member_id))

    def _max_size(self, member_id: str) -> int:
        topics = self.member_topics[member_id]
        if len(topics) == len(self.partitions_per_topic):
            return self.total
        return sum(self.partitions_per_topic[topic] for topic in topics)

    def build(self) -> dict[str, list[TopicPartition]]:
        assigned: set[TopicPartition] = set()
        for member_id, partitions in self.current.items():
            subscribed = self.members[member_id].topics
            for partition in list(partitions):
                if partition.topic not in self.topic_members:
                    partitions.remove(partition)
                    self.owner.pop(partition, None)
                elif partition.topic not in subscribed:
                    partitions.remove(partition)
                    self.revocation_required = True
                else:
                    assigned.add(partition)
        unassigned = [partition for partition in self.sorted_partitions if partition not in assigned]
        self._balance(unassigned)
        return self.current

    def _balance(self, unassigned: list[TopicPartition]) -> None:
        ordered = self._sorted_members()
        initializing = not ordered or not self.current[ordered[-1]]
        for partition in unassigned:
            if not self.topic_members[partition.topic]:
                continue
            for member_id in self._sorted_members():
                if partition.topic in self.member_topics[member_id]:
                    self.current[member_id].append(partition)
                    self.owner[partition] = member_id
                    break
        fixed_topics = {topic for topic, members in self.topic_members.items() if len(members) < 2}
        reassignable = [partition for partition in self.sorted_partitions if partition.topic not in fixed_topics]
        unassigned = [partition for partition in unassigned if partition.topic not in fixed_topics]
        fixed: dict[str, list[TopicPartition]] = {}
        for member_id in list(self.current):
            if not self._can_participate(member_id):
                fixed[member_id] = self.current.pop(member_id)
        before = {member_id: list(partitions) for member_id, partitions in self.current.items()}
        owners_before = dict(self.owner)
        if not self.revocation_required:
            self._reassign(unassigned)
        moved = self._reassign(reassignable)
        if not initializing and moved and _balance_score(self.current) >= _balance_score(before):
            self.current = before
            self.owner = owners_before
        self.current.update(fixed)

    def _can_participate(self, member_id: str) -> bool:
        partitions = self.current[member_id]
        if len(partitions) < self._max_size(member_id):
            return True
        return any(len(self.topic_members[partition.topic]) >= 2 for partition in partitions)

    def _is_balanced(self) -> bool:
        ordered = self._sorted_members()
        if not ordered:
            return True
        smallest, largest = len(self.current[ordered[0]]), len(self.current[ordered[-1]])
        if smallest >= largest - 1:
            return True
        owners = {partition: member_id for member_id, partitions in self.current.items() for partition in partitions}
        for member_id in ordered:
            mine = self.current[member_id]
            count = len(mine)
            if count == self._max_size(member_id):
                continue
            mine_set = set(mine)
            for topic in self.member_topics[member_id]:
                for index in range(self.partitions_per_topic[topic]):
                    partition = TopicPartition(topic, index)
                    if partition in mine_set:
                        continue
                    other = owners.get(partition)
                    if other is not None and count + 1 < len(self.current[other]):
                        return False
        return True

    def _reassign(self, partitions: list[TopicPartition]) -> bool:
        performed = False
        while True:
            modified = False
            for partition in partitions:
                if self._is_balanced():
                    break
                member_id = self.owner.get(partition)
                if member_id is None or member_id not in self.current:
                    continue
                previous = self.previous.get(partition)
                if (previous is not None and previous[0] in self.current
                        and len(self.current[member_id]) > len(self.current[previous[0]]) + 1):
                    self._move(partition, previous[0])
                    performed = modified = True
                    continue
                for other in self.topic_members[partition.topic]:
                    if other in self.current and len(self.current[member_id]) > len(self.current[other]) + 1:
                        self._move_to_least_loaded(partition)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _move_to_least_loaded(self, partition: TopicPartition) -> None:
        for member_id in self._sorted_members():
            if partition.topic in self.member_topics[member_id]:
                self._move(partition, member_id)
                return

    def _move(self, partition: TopicPartition, new: str) -> None:
        old = self.owner[partition]
        partition = self.movements.partition_to_move(partition, old, new)
        old = self.owner[partition]
        self.movements.move(partition, old, new)
        self.current[old].remove(partition)
        self.current[new].append(partition)
        self.owner[partition] = new


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    sizes = [len(partitions) for partitions in assignment.values()]
    return sum(abs(sizes[i] - sizes[j]) for i in range(len(sizes)) for j in range(i + 1, len(sizes)))


def sticky_assign(partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberData]
                  ) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str] | None]:
    """The sticky assignment, and the partitions changing owner (None: the general case, not tracked)."""
    partitions_per_topic = {topic: count for topic, count in partitions_per_topic.items() if count > 0}
    if not members:
        return {}, {}
    all_equal, owned, claimed_twice, max_generation = _resolve_owners(partitions_per_topic, members)
    if all_equal:
        return _constrained(partitions_per_topic, owned, claimed_twice)
    return _General(partitions_per_topic, members, owned, max_generation).build(), None


# --- the assignors -------------------------------------------------------------------------------------


class StickyAssignor(ConsumerPartitionAssignor):
    """Java's ``sticky`` (EAGER): the last assignment travels in the user data."""

    name = "sticky"

    def __init__(self) -> None:
        self.partitions: tuple[TopicPartition, ...] | None = None
        self.generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        if self.partitions is None:
            return None
        return encode_sticky_user_data(self.partitions, self.generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self.partitions = assignment.partitions
        self.generation = generation_id

    @staticmethod
    def member_data(member: GroupMember) -> MemberData:
        subscription = member.subscription
        topics = frozenset(subscription.topics)
        if not subscription.user_data:
            return MemberData(topics, (), None)
        partitions, generation = decode_sticky_user_data(subscription.user_data)
        return MemberData(topics, partitions, generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, GroupMember]) -> dict[str, Assignment]:
        data = {member_id: self.member_data(member) for member_id, member in members.items()}
        result, _ = sticky_assign(partitions_per_topic, data)
        return {member_id: Assignment(tuple(partitions)) for member_id, partitions in result.items()}


class CooperativeStickyAssignor(ConsumerPartitionAssignor):
    """Java's ``cooperative-sticky`` (COOPERATIVE, KIP-429): owned partitions travel in the subscription."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self.generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return _INT32.pack(self.generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self.generation = generation_id

    @staticmethod
    def member_data(member: GroupMember) -> MemberData:
        subscription = member.subscription
        topics = frozenset(subscription.topics)
        if subscription.generation_id >= 0:
            return MemberData(topics, subscription.owned_partitions, subscription.generation_id)
        generation: int | None = None
        if subscription.user_data is not None:
            generation = (_INT32.unpack_from(subscription.user_data)[0] if len(subscription.user_data) >= 4
                          else DEFAULT_GENERATION)
        return MemberData(topics, subscription.owned_partitions, generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Mapping[str, GroupMember]) -> dict[str, Assignment]:
        data = {member_id: self.member_data(member) for member_id, member in members.items()}
        result, transferring = sticky_assign(partitions_per_topic, data)
        if transferring is None:
            transferring = transferring_ownership(
                {member_id: member.subscription.owned_partitions for member_id, member in members.items()}, result)
        for partition, new_owner in transferring.items():
            if partition in result.get(new_owner, []):
                result[new_owner].remove(partition)
        return {member_id: Assignment(tuple(partitions)) for member_id, partitions in result.items()}


def transferring_ownership(owned: Mapping[str, tuple[TopicPartition, ...]],
                           assignment: Mapping[str, list[TopicPartition]]) -> dict[TopicPartition, str]:
    """Partitions given to a member that did not own them and taken from one that did: new owner by partition."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member_id, partitions in assignment.items():
        mine = set(owned.get(member_id, ()))
        for partition in partitions:
            if partition not in mine:
                added[partition] = member_id
        now = set(partitions)
        revoked.update(partition for partition in mine if partition not in now)
    return {partition: member_id for partition, member_id in added.items() if partition in revoked}
