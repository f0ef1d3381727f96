"""Server-side partition assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

An assignor maps the group's members (their subscribed topic ids and their current target
assignment) and the subscribed topics' partition counts to a new target assignment. Partitions are
(topic id, partition index) pairs, as in the ConsumerGroupHeartbeat API.

``uniform`` balances the number of partitions per member and is sticky: a member keeps the partitions
it had that are still valid, new or orphaned partitions go to the least loaded eligible member, then
partitions move from the most to the least loaded members until no two eligible members differ by
more than one. With identical subscriptions every member ends with floor or ceil of the average.

``range`` works topic by topic, like the client-side range assignor: the members subscribed to a
topic, ordered by member id, each get a contiguous range, the first ``partitions % members`` one more.
Topics with the same partition count are therefore co-partitioned.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["ASSIGNORS", "Assignment", "MemberSpec", "assign_range", "assign_uniform"]

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Mapping[uuid.UUID, set[int]] = field(default_factory=dict)  # the member's previous target


def assign_uniform(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    member_ids = sorted(members)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {member_id: set() for member_id in member_ids}

    def eligible(member_id: str, topic_id: uuid.UUID) -> bool:
        return topic_id in members[member_id].subscribed_topic_ids

    # 1. Stickiness: keep what is still valid (first claim wins if two members claim a partition).
    for member_id in member_ids:
        for topic_id, indexes in members[member_id].current.items():
            count = partitions.get(topic_id)
            if count is None or not eligible(member_id, topic_id):
                continue
            for index in indexes:
                if 0 <= index < count and (topic_id, index) not in owner:
                    owner[(topic_id, index)] = member_id
                    owned[member_id].add((topic_id, index))
    # 2. Unassigned partitions to the least loaded eligible member (scarce topics first).
    subscribers = {topic_id: [m for m in member_ids if eligible(m, topic_id)] for topic_id in partitions}
    unassigned = [(topic_id, index) for topic_id in sorted(partitions, key=lambda t: (len(subscribers[t]), str(t)))
                  for index in range(partitions[topic_id]) if (topic_id, index) not in owner and subscribers[topic_id]]
    for topic_partition in unassigned:
        target = min(subscribers[topic_partition[0]], key=lambda m: (len(owned[m]), m))
        owner[topic_partition] = target
        owned[target].add(topic_partition)
    # 3. Balance: move from the most loaded member to a less loaded eligible one while it helps.
    moved = True
    while moved:
        moved = False
        for source in sorted(member_ids, key=lambda m: (-len(owned[m]), m)):
            best: tuple[int, str, tuple[uuid.UUID, int]] | None = None
            for topic_partition in sorted(owned[source], key=lambda tp: (str(tp[0]), -tp[1])):
                for candidate in subscribers[topic_partition[0]]:
                    gap = len(owned[source]) - len(owned[candidate])
                    if gap >= 2 and (best is None or len(owned[candidate]) < best[0]):
                        best = (len(owned[candidate]), candidate, topic_partition)
            if best is not None:
                _, target, topic_partition = best
                owned[source].discard(topic_partition)
                owned[target].add(topic_partition)
                owner[topic_partition] = target
                moved = True
                break
    return {member_id: _as_assignment(owned[member_id]) for member_id in member_ids}


def assign_range(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    for topic_id, count in partitions.items():
        subscribed = sorted(m for m, spec in members.items() if topic_id in spec.subscribed_topic_ids)
        if not subscribed:
            continue
        quota, extra = divmod(count, len(subscribed))
        start = 0
        for position, member_id in enumerate(subscribed):
            size = quota + (1 if position < extra else 0)
            if size:
                result[member_id][topic_id] = set(range(start, start + size))
            start += size
    return result


def _as_assignment(topic_partitions: set[tuple[uuid.UUID, int]]) -> Assignment:
    assignment: Assignment = {}
    for topic_id, index in topic_partitions:
        assignment.setdefault(topic_id, set()).add(index)
    return assignment


ASSIGNORS: dict[str, Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, Assignment]]] = {
    "uniform": assign_uniform,
    "range": assign_range,
}
