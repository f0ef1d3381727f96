"""Share groups (KIP-932): ShareGroupHeartbeat and the ``simple`` server-side assignor.

Theory of operation
-------------------
A share group's members heartbeat like KIP-848 consumers, with a client-chosen member id and an
epoch: 0 joins (with the subscribed topics), -1 leaves, anything else must be the member's epoch
(or, when an answer was lost, its previous one; otherwise FENCED_MEMBER_EPOCH). There is no
revocation step: records, not partitions, are what share consumers own, so several members may be
assigned one partition and a member simply gets its new target on its next heartbeat.

Epochs. The group epoch goes up when a member joins, leaves or is fenced, when a subscription
changes, and when a subscribed topic appears or grows. Then the next heartbeat computes a new target
assignment (its epoch is the group epoch) and each member, on its next heartbeat, takes its target
and the assignment epoch as its member epoch. The answer carries the assignment when the member
joined or its assignment changed, and null otherwise.

The ``simple`` assignor, topic by topic over the members subscribed to it (sorted by id): with no more
members than partitions each partition goes to one member, round robin (a running offset across
topics spreads the first partitions); with more members than partitions each member gets one
partition, so every partition is shared by several members.

Before a new target is handed out, the share-partition state of every assigned partition is
initialized (``ShareStateListener.initialize``: the partition starts at ``share.auto.offset.reset``
when the group has no state for it). A member fenced by its session timeout
(``share.session.timeout.ms``, re-armed by every heartbeat) has its share sessions closed and its
acquired records released at once (``member_fenced``). A member that leaves keeps its share sessions:
a share consumer leaves the group first and then sends its last acknowledgements, closing its
sessions (epoch -1), which releases what it still holds. Errors: INVALID_REQUEST, UNKNOWN_MEMBER_ID,
FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED (``group.share.max.size``), GROUP_ID_NOT_FOUND (the id
names a group of another kind). The whole group is written as one record after every change.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kafkalite.broker.core.group.assignors import Assignment
from kafkalite.broker.core.group.share_group import LEAVE_GROUP_EPOCH, ShareGroup, ShareMember
from kafkalite.broker.core.group.store import GroupStore
from kafkalite.broker.core.topics import INTERNAL_TOPICS, TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["ShareHeartbeat", "ShareHeartbeatResult", "ShareRebalancer", "ShareStateListener", "assign_simple"]

log = logging.getLogger("kafkalite.groups")

TopicPartitions = list[tuple[uuid.UUID, list[int]]]


class ShareStateListener(Protocol):
    """What membership changes mean to delivery (``kafkalite.broker.core.share`` implements it)."""

    def initialize(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> None: ...

    def member_fenced(self, group_id: str, member_id: str) -> None: ...

    def group_deleted(self, group_id: str) -> None: ...

    def group_timeouts(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of the group's members, in ms."""


class NoShareState:
    """The listener of a coordinator built without share partitions (tests of the group room alone)."""

    def initialize(self, group_id: str, partitions: Iterable[tuple[uuid.UUID, int]]) -> None:
        return None

    def member_fenced(self, group_id: str, member_id: str) -> None:
        return None

    def group_deleted(self, group_id: str) -> None:
        return None

    def group_timeouts(self, group_id: str) -> tuple[int, int]:
        return 45_000, 5000


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: list[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


def assign_simple(subscriptions: dict[str, set[uuid.UUID]], partitions: dict[uuid.UUID, int]
                  ) -> dict[str, Assignment]:
    """The ``simple`` assignor: see the module docstring."""
    result: dict[str, Assignment] = {member_id: {} for member_id in subscriptions}
    shift = 0
    for topic_id in sorted(partitions, key=str):
        count = partitions[topic_id]
        members = sorted(member_id for member_id, topics in subscriptions.items() if topic_id in topics)
        if not members or count <= 0:
            continue
        if len(members) <= count:
            for index in range(count):
                owner = members[(index + shift) % len(members)]
                result[owner].setdefault(topic_id, set()).add(index)
        else:
            for position, member_id in enumerate(members):
                result[member_id][topic_id] = {(position + shift) % count}
        shift += count
    return result


class ShareRebalancer:
    """The ShareGroupHeartbeat rules, applied to the coordinator's share groups."""

    def __init__(self, store: GroupStore, topics: TopicManager, share_state: ShareStateListener) -> None:
        self.store = store
        self.timers = store.timers
        self.topics = topics
        self.share_state = share_state

    # ShareGroupHeartbeat ---------------------------------------------------------------------
    def heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        try:
            self._validate(request)
            if request.member_epoch == LEAVE_GROUP_EPOCH:
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as refused:
            return ShareHeartbeatResult(refused.error_code, refused.message)

    @staticmethod
    def _validate(request: ShareHeartbeat) -> None:
        def refuse(message: str) -> None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, message)

        if not request.group_id:
            refuse("GroupId can't be empty.")
        if not request.member_id:
            refuse("MemberId can't be empty.")
        if request.rack_id == "":
            refuse("RackId can't be empty.")
        if request.member_epoch == 0 and not request.subscribed_topic_names:
            refuse("SubscribedTopicNames must be set in first request.")
        if request.member_epoch < LEAVE_GROUP_EPOCH:
            refuse(f"MemberEpoch is invalid: {request.member_epoch}.")

    def group(self, group_id: str) -> ShareGroup | None:
        group = self.store.groups.get(group_id)
        return group if isinstance(group, ShareGroup) else None

    def ensure_group(self, group_id: str) -> ShareGroup:
        """The share group of this id, created empty if there is no group of that id
        (AlterShareGroupOffsets does that); GROUP_ID_NOT_FOUND when the id names another kind."""
        existing = self.store.groups.get(group_id)
        if existing is not None and not isinstance(existing, ShareGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if existing is None:
            existing = ShareGroup(group_id)
            self.store.groups[group_id] = existing
            self.store.store_share(existing)
        return existing

    def _heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        existing = self.store.groups.get(group_id)
        if existing is not None and not isinstance(existing, ShareGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if existing is None and epoch != 0:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Share group {group_id} has no member {member_id}.")
        group = self.ensure_group(group_id)
        member = group.members.get(member_id)
        changed = bump = False
        if member is None:
            if epoch != 0:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of share group "
                                                              f"{group_id}.")
            max_size = self.store.settings.share_max_size
            if len(group.members) >= max_size:
                raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The share group has reached its maximum capacity of {max_size} members.")
            member = ShareMember(member_id)
            group.members[member_id] = member
            bump = True
            log.info("share group %s: member %s joined", group_id, member_id)
        elif epoch != 0 and epoch != member.member_epoch and epoch != member.previous_member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The member epoch {epoch} is not {member.member_epoch}; "
                                                            "the member must rejoin.")
        old_assigned = {topic_id: set(partitions) for topic_id, partitions in member.assigned.items()}
        if request.rack_id is not None and request.rack_id != member.rack_id:
            member.rack_id, changed = request.rack_id, True
        if (request.client_id, request.client_host) != (member.client_id, member.client_host):
            member.client_id, member.client_host, changed = request.client_id, request.client_host, True
        if request.subscribed_topic_names is not None and \
                sorted(request.subscribed_topic_names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(request.subscribed_topic_names))
            bump = True
        group.resolved_topics = group.subscribed_topics()
        metadata = {name: (topic.topic_id, len(topic.partitions)) for name in sorted(group.resolved_topics)
                    if (topic := self.topics.get(name)) is not None and name not in INTERNAL_TOPICS}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            changed = True
            log.info("share group %s: epoch %d", group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)
            changed = True
        target = group.target.get(member_id, {})
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
            member.assigned = {topic_id: set(partitions) for topic_id, partitions in target.items()}
            changed = True
        self._schedule_session_timeout(group_id, member_id)
        if changed:
            self.store.store_share(group)
        _, heartbeat_interval_ms = self.share_state.group_timeouts(group_id)
        assignment = _as_list(member.assigned) if epoch == 0 or member.assigned != old_assigned else None
        return ShareHeartbeatResult(ErrorCode.NONE, None, member_id, member.member_epoch, heartbeat_interval_ms,
                                    assignment)

    def _update_target(self, group: ShareGroup) -> None:
        topic_ids = {name: topic_id for name, (topic_id, _) in group.subscription_metadata.items()}
        subscriptions = {member_id: {topic_ids[name] for name in member.subscribed_topic_names if name in topic_ids}
                         for member_id, member in group.members.items()}
        partitions = dict(group.subscription_metadata.values())
        group.target = assign_simple(subscriptions, partitions)
        group.assignment_epoch = group.group_epoch
        assigned = {(topic_id, index) for assignment in group.target.values()
                    for topic_id, indexes in assignment.items() for index in indexes}
        self.share_state.initialize(group.group_id, sorted(assigned, key=lambda item: (str(item[0]), item[1])))
        log.info("share group %s: target assignment for epoch %d computed", group.group_id, group.assignment_epoch)

    # leaving and fencing ---------------------------------------------------------------------
    def _leave(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.store.groups.get(request.group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
        if group is None or request.member_id not in group.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Share group {request.group_id} has no member "
                                                          f"{request.member_id}.")
        self.fence(group, request.member_id, "left the group", voluntary=True)
        return ShareHeartbeatResult(ErrorCode.NONE, None, request.member_id, LEAVE_GROUP_EPOCH, 0, None)

    def fence(self, group: ShareGroup, member_id: str, reason: str, *, voluntary: bool = False) -> None:
        if group.members.pop(member_id, None) is None:
            return
        group.target.pop(member_id, None)
        self.timers.cancel(("share-session", group.group_id, member_id))
        group.group_epoch += 1
        group.resolved_topics = group.subscribed_topics()
        log.info("share group %s: member %s %s; epoch %d", group.group_id, member_id, reason, group.group_epoch)
        self.store.store_share(group)
        if not voluntary:
            self.share_state.member_fenced(group.group_id, member_id)

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            group = self.group(group_id)
            if group is not None:
                self.fence(group, member_id, "failed its session timeout")

        session_timeout_ms, _ = self.share_state.group_timeouts(group_id)
        self.timers.schedule(("share-session", group_id, member_id), session_timeout_ms, expire)

    def on_loaded(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self._schedule_session_timeout(group.group_id, member_id)

    def forget(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self.timers.cancel(("share-session", group.group_id, member_id))
        self.share_state.group_deleted(group.group_id)


def _as_list(assignment: Assignment) -> TopicPartitions:
    return [(topic_id, sorted(partitions)) for topic_id, partitions in sorted(assignment.items(), key=lambda item:
                                                                             str(item[0])) if partitions]
