"""KIP-848 consumer groups: ConsumerGroupHeartbeat, server-side assignment and incremental reconciliation.

Theory of operation
-------------------
There is no join or sync phase: each member sends ConsumerGroupHeartbeat, and the coordinator moves
it, one heartbeat at a time, towards the group's *target assignment*.

Epochs. The *group epoch* is bumped whenever membership or subscriptions change (a member joins,
leaves, is fenced, changes its subscription, or a subscribed topic appears or grows). When the group
epoch is ahead of the *assignment epoch*, the next heartbeat recomputes the target assignment with
the group's server-side assignor (``uniform`` or ``range``, see ``assignors``) and sets the
assignment epoch to the group epoch. Every member has a *member epoch*: the assignment epoch it has
reconciled to.

Reconciliation (Kafka's ``CurrentAssignmentBuilder``). A member whose epoch is behind the assignment
epoch keeps the partitions it owns that are still in its target. If it owns others it must first
revoke them: it stays at its epoch in state ``UNREVOKED_PARTITIONS`` until a heartbeat reports its
owned partitions without them (or its rebalance timeout fences it). Then it moves to the assignment
epoch and receives its target minus the partitions another member still owns (state
``UNRELEASED_PARTITIONS``); those are handed over on a later heartbeat once released. A partition
is never owned by two members: the group tracks the epoch of each owned partition.

Group states: Empty (no members), Assigning (group epoch ahead of the assignment epoch),
Reconciling (some member not yet at the assignment epoch in state Stable), Stable.

Membership. Member epoch 0 joins (a known member id rejoins from scratch), -1 leaves, -2 is a static
member leaving temporarily: it keeps its assignment until its session times out or a member with the
same ``instance_id`` takes its place. Errors: UNKNOWN_MEMBER_ID (unknown member), FENCED_MEMBER_EPOCH
(an epoch that is neither the member's nor, with a subset of its partitions, the previous one),
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED,
INVALID_REQUEST. Timers: a session timer per member (``group.consumer.session.timeout.ms``, re-armed
by every heartbeat) and a rebalance timer while the member has partitions to revoke; both fence the
member. The whole group is written as one record after every heartbeat that changed it.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kafkalite.broker.core.group.assignors import ASSIGNORS, Assignment, MemberSpec
from kafkalite.broker.core.group.consumer_group import (
    LEAVE_GROUP_EPOCH,
    LEAVE_GROUP_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicPartitions,
    assignment_as_list,
    copy_assignment,
)
from kafkalite.broker.core.group.offsets import Record
from kafkalite.broker.core.group.store import GroupStore
from kafkalite.broker.core.topics import INTERNAL_TOPICS, TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["ConsumerHeartbeat", "ConsumerHeartbeatResult", "ConsumerRebalancer"]

log = logging.getLogger("kafkalite.groups")


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """What a ConsumerGroupHeartbeat asks, as the rules need it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    """What the ConsumerGroupHeartbeat answer carries."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


class ConsumerRebalancer:
    """The ConsumerGroupHeartbeat rules, applied to the coordinator's consumer groups."""

    def __init__(self, store: GroupStore, topics: TopicManager, remove_group: Callable[[str], list[Record]]) -> None:
        self.store = store
        self.settings = store.settings
        self.timers = store.timers
        self.topics = topics
        self._remove_group = remove_group  # forgets a group of either kind, cancelling its timers

    # topics --------------------------------------------------------------------------------
    def _topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        topic = self.topics.get(name)
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    def _resolve_subscription(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            try:
                pattern = re.compile(member.subscribed_topic_regex)
            except re.error:
                return names
            names.update(topic.name for topic in self.topics
                         if topic.name not in INTERNAL_TOPICS and pattern.fullmatch(topic.name))
        return names

    # ConsumerGroupHeartbeat ----------------------------------------------------------------
    def heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as refused:
            return ConsumerHeartbeatResult(refused.error_code, refused.message)

    def _validate(self, request: ConsumerHeartbeat) -> None:
        def refuse(message: str) -> None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, message)

        if not request.group_id:
            refuse("GroupId can't be empty.")
        if request.instance_id == "":
            refuse("InstanceId can't be empty.")
        if request.rack_id == "":
            refuse("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_EPOCH:
            if not request.member_id:
                refuse("MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                refuse("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                refuse("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and not request.subscribed_topic_regex:
                refuse("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_EPOCH:
            if not request.member_id:
                refuse("MemberId can't be empty.")
            if request.instance_id is None:
                refuse("InstanceId can't be null.")
        else:
            refuse("MemberEpoch is invalid.")
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error:
                raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is not valid.") from None
        assignors = self.settings.consumer_assignors
        if request.server_assignor is not None and request.server_assignor not in assignors:
            raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {request.server_assignor} is not supported. "
                           f"Supported assignors: {', '.join(assignors)}.")

    def _group_for(self, request: ConsumerHeartbeat) -> ConsumerGroup:
        group_id = request.group_id
        existing = self.store.groups.get(group_id)
        if existing is not None and not isinstance(existing, ConsumerGroup):
            if request.member_epoch != 0 or not existing.is_empty() or existing.kind == "share":
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            records = self._remove_group(group_id)  # an empty classic group becomes a consumer group
            self.store.write(group_id, records)
            existing = None
        if existing is None:
            if request.member_epoch != 0:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {group_id} has no member "
                               f"{request.member_id}.")
            existing = ConsumerGroup(group_id)
            self.store.groups[group_id] = existing
        return existing

    def _heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        settings = self.settings
        group = self._group_for(request)
        member_id = request.member_id or str(uuid.uuid4())
        if (len(group.members) >= settings.consumer_max_size and member_id not in group.members
                and (request.instance_id is None or request.instance_id not in group.static_members)):
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of {settings.consumer_max_size} "
                           "members.")
        changed = False
        member = self._member_for(group, request, member_id)
        if member.member_id not in group.members:
            changed = True
        old_assigned = copy_assignment(member.assigned)
        old_subscription = (tuple(member.subscribed_topic_names), member.subscribed_topic_regex)
        # 1. Update the member's subscription and settings.
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            changed |= member.server_assignor != request.server_assignor
            member.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            member.subscribed_topic_names = list(request.subscribed_topic_names)
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        member.client_id, member.client_host = request.client_id, request.client_host
        new_member = member.member_id not in group.members
        group.put_member(member)
        bump = new_member or old_subscription != (tuple(member.subscribed_topic_names), member.subscribed_topic_regex)
        # 2. Subscription metadata: the subscribed topics as they exist now.
        resolved: set[str] = set()
        for each in group.members.values():
            resolved |= self._resolve_subscription(each)
        metadata = {name: found for name in sorted(resolved) if (found := self._topic(name)) is not None}
        group.resolved_topics = resolved
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            changed = True
            log.info("group %s: epoch %d", group.group_id, group.group_epoch)
        # 3. A new target assignment when the group epoch moved.
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group)
            changed = True
        # 4. Reconcile this member towards its target.
        changed |= self._reconcile(group, member, request.owned)
        self._schedule_session_timeout(group.group_id, member.member_id)
        if changed:
            self.store.store_consumer(group)
        full = request.member_epoch == 0 or (request.rebalance_timeout_ms != -1
                                             and request.subscribed_topic_names is not None
                                             and request.owned is not None)
        assignment = assignment_as_list(member.assigned) if full or member.assigned != old_assigned else None
        return ConsumerHeartbeatResult(ErrorCode.NONE, None, member.member_id, member.member_epoch,
                               settings.consumer_heartbeat_interval_ms, assignment)

    def _member_for(self, group: ConsumerGroup, request: ConsumerHeartbeat, member_id: str) -> ConsumerMember:
        epoch = request.member_epoch
        if request.instance_id is not None:
            existing_id = group.static_members.get(request.instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if epoch == 0:
                if existing is None or existing.member_id == member_id:
                    return self._fresh_member(group, member_id)
                if existing.member_epoch != LEAVE_GROUP_STATIC_EPOCH:
                    raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {existing.member_id} with instance id {request.instance_id} "
                                   "is not released yet.")
                # Take over the departed static member's place and assignment.
                target = group.target.get(existing.member_id, {})
                self._drop(group, existing.member_id)
                member = ConsumerMember(member_id, existing.instance_id, existing.rack_id, existing.client_id,
                                        existing.client_host, existing.rebalance_timeout_ms,
                                        list(existing.subscribed_topic_names), existing.subscribed_topic_regex,
                                        existing.server_assignor, 0, 0, MemberState.STABLE,
                                        copy_assignment(existing.assigned), {})
                group.target[member_id] = target
                group.put_member(member)
                return member
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if existing.member_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                               f"{request.instance_id} was fenced by member {existing.member_id}.")
            self._check_epoch(existing, epoch, request.owned)
            return existing
        if epoch == 0:
            return self._fresh_member(group, member_id)
        existing = group.members.get(member_id)
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                           f"{group.group_id}.")
        self._check_epoch(existing, epoch, request.owned)
        return existing

    def _fresh_member(self, group: ConsumerGroup, member_id: str) -> ConsumerMember:
        if member_id in group.members:  # a known member rejoining from scratch: release what it held
            self._drop(group, member_id)
            group.group_epoch += 1
        return ConsumerMember(member_id)

    @staticmethod
    def _check_epoch(member: ConsumerMember, received: int, owned: TopicPartitions | None) -> None:
        if received > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The member epoch {received} is greater than "
                           f"{member.member_epoch}; the member must abandon its partitions and rejoin.")
        if received < member.member_epoch:
            subset = owned is not None and all(set(partitions) <= member.assigned.get(topic_id, set())
                                               for topic_id, partitions in owned)
            if received != member.previous_member_epoch or not subset:
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH, f"The member epoch {received} is smaller than "
                               f"{member.member_epoch}; the member must abandon its partitions and rejoin.")

    def _update_target(self, group: ConsumerGroup) -> None:
        topic_ids = {name: topic_id for name, (topic_id, _) in group.subscription_metadata.items()}
        partitions = {topic_id: count for topic_id, count in group.subscription_metadata.values()}
        specs = {}
        for member_id, member in group.members.items():
            names = self._resolve_subscription(member)
            specs[member_id] = MemberSpec(frozenset(topic_ids[name] for name in names if name in topic_ids),
                                          group.target.get(member_id, {}))
        assignor = ASSIGNORS[group.preferred_assignor(self.settings.consumer_assignors[0])]
        group.target = {member_id: copy_assignment(assignment)
                        for member_id, assignment in assignor(specs, partitions).items()}
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment for epoch %d computed", group.group_id, group.assignment_epoch)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: TopicPartitions | None) -> bool:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target. Changed?"""
        epoch = group.assignment_epoch
        if member.is_reconciled_to(epoch):
            return False
        before = (member.member_epoch, member.previous_member_epoch, member.state, copy_assignment(member.assigned),
                  copy_assignment(member.pending_revocation))

        def owns_any(assignment: Assignment) -> bool:
            if owned is None:
                return True
            return any(partition in assignment.get(topic_id, ()) for topic_id, partitions in owned
                       for partition in partitions)

        if member.state is MemberState.UNREVOKED_PARTITIONS and owns_any(member.pending_revocation):
            return False
        group.remove_partition_epochs(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self._next_assignment(group, member, member.member_epoch + 1, owns_any)
        else:
            self._next_assignment(group, member, member.member_epoch, owns_any)
        group.add_partition_epochs(member)
        changed = before != (member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
                             member.pending_revocation)
        if changed:
            key = ("consumer-rebalance", group.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, member)
            else:
                self.timers.cancel(key)
        return changed

    @staticmethod
    def _next_assignment(group: ConsumerGroup, member: ConsumerMember, member_epoch: int,
                         owns_any: Callable[[Assignment], bool]) -> None:
        target = group.target.get(member.member_id, {})
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending: Assignment = {}
        unreleased = False
        for topic_id in set(target) | set(member.assigned):
            wanted = target.get(topic_id, set())
            current = member.assigned.get(topic_id, set())
            keep = current & wanted
            if keep:
                assigned[topic_id] = keep
            if current - keep:
                revoking[topic_id] = current - keep
            incoming = {p for p in wanted - keep if group.current_partition_epoch(topic_id, p) == -1}
            unreleased |= len(incoming) != len(wanted - keep)
            if incoming:
                pending[topic_id] = incoming
        if revoking and owns_any(revoking):
            member.previous_member_epoch, member.member_epoch = member.member_epoch, member_epoch
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned, member.pending_revocation = assigned, revoking
            return
        for topic_id, partitions in pending.items():
            assigned.setdefault(topic_id, set()).update(partitions)
        member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        member.assigned, member.pending_revocation = assigned, {}

    # leaving and fencing -------------------------------------------------------------------
    def _leave(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        group = self.store.groups.get(request.group_id)
        if not isinstance(group, ConsumerGroup):
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID if group is None else ErrorCode.GROUP_ID_NOT_FOUND,
                           f"Group {request.group_id} has no member {request.member_id}.")
        member_id = request.member_id
        if request.instance_id is not None:
            existing_id = group.static_members.get(request.instance_id)
            if existing_id is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if existing_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} was fenced by "
                               f"{existing_id}.")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                           f"{group.group_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_EPOCH:
            group.remove_partition_epochs(member)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, LEAVE_GROUP_STATIC_EPOCH
            group.put_member(member)
            self.store.store_consumer(group)
            log.info("group %s: static member %s left temporarily", group.group_id, member_id)
        else:
            self.fence(group, member_id, "left the group")
        return ConsumerHeartbeatResult(ErrorCode.NONE, None, member_id, request.member_epoch, 0, None)

    def _drop(self, group: ConsumerGroup, member_id: str) -> None:
        group.drop_member(member_id)
        self.timers.cancel(("consumer-session", group.group_id, member_id))
        self.timers.cancel(("consumer-rebalance", group.group_id, member_id))

    def fence(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        if member_id not in group.members:
            return
        self._drop(group, member_id)
        group.group_epoch += 1
        group.resolved_topics = set().union(*(self._resolve_subscription(m) for m in group.members.values()))
        log.info("group %s: member %s %s; epoch %d", group.group_id, member_id, reason, group.group_epoch)
        self.store.store_consumer(group)

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        def expire() -> None:
            group = self.store.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                self.fence(group, member_id, "failed its session timeout")

        self.timers.schedule(("consumer-session", group_id, member_id),
                             self.settings.consumer_session_timeout_ms, expire)

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        self.timers.schedule(("consumer-rebalance", group_id, member_id), member.rebalance_timeout_ms,
                             lambda: self._rebalance_timed_out(group_id, member_id, epoch))

    def _rebalance_timed_out(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.store.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return
        member = group.members.get(member_id)
        if member is not None and member.member_epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS:
            self.fence(group, member_id, "did not revoke its partitions within its rebalance timeout")

    def on_loaded(self, group: ConsumerGroup) -> None:
        group.resolved_topics = set().union(*(self._resolve_subscription(m) for m in group.members.values()))
        for member in group.members.values():
            self._schedule_session_timeout(group.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, member)

    def forget(self, group: ConsumerGroup) -> None:
        for member_id in list(group.members):
            self.timers.cancel(("consumer-session", group.group_id, member_id))
            self.timers.cancel(("consumer-rebalance", group.group_id, member_id))

    # offsets -------------------------------------------------------------------------------
    @staticmethod
    def validate_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int,
                        transactional: bool) -> ErrorCode:
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    @staticmethod
    def validate_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # ConsumerGroupDescribe -----------------------------------------------------------------
    def describe(self, group_id: str) -> ConsumerGroup | None:
        group = self.store.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

