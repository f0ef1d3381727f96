"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup on classic groups.

``ClassicRebalancer`` applies Kafka's rules (``GroupMetadataManager`` of the group-coordinator module) to
the state in ``classic_group``, whose docstring describes the state machine, the phases and the
timers. Every operation runs to completion on the event loop: an answer that must wait (JoinGroup,
SyncGroup) is a future parked on the member, resolved by the event that completes the phase.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from kafkalite.broker.core.group.classic_group import (
    VALID_PREVIOUS,
    ClassicGroup,
    ClassicMember,
    ClassicState,
    JoinRequest,
    JoinResult,
    SyncResult,
    resolve,
)
from kafkalite.broker.core.group.offsets import Record
from kafkalite.broker.core.group.store import GroupStore
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    import asyncio

__all__ = ["ClassicRebalancer"]

log = logging.getLogger("kafkalite.groups")


def _heartbeat_key(group_id: str, member_id: str) -> Hashable:
    return ("classic-heartbeat", group_id, member_id)


class ClassicRebalancer:
    """The classic protocol's rules, applied to the coordinator's classic groups."""

    def __init__(self, store: GroupStore, remove_group: Callable[[str], list[Record]]) -> None:
        self.store = store
        self.settings = store.settings
        self.timers = store.timers
        self._remove_group = remove_group  # forgets a group of either kind, cancelling its timers

    # lookups -------------------------------------------------------------------------------
    def _group(self, group_id: str) -> ClassicGroup | None:
        group = self.store.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _now(self) -> int:
        return self.timers.now_ms()

    # JoinGroup -----------------------------------------------------------------------------
    def join(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = self.timers.create_future()
        config = self.settings
        if not request.group_id:
            resolve(future, JoinResult(ErrorCode.INVALID_GROUP_ID, member_id=request.member_id))
            return future
        if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
            resolve(future, JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=request.member_id))
            return future
        existing = self.store.groups.get(request.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            if not existing.is_empty() or existing.kind == "share":  # share groups never change protocol
                resolve(future, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id))
                return future
            self._remove_group(existing.group_id)  # an empty consumer group becomes classic
            existing = None
        is_unknown = request.member_id == ""
        if existing is None:
            if not is_unknown:
                resolve(future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=request.member_id))
                return future
            group = ClassicGroup(request.group_id, self._now())
            self.store.groups[request.group_id] = group
            self.store.store_classic(group, with_members=False)
        else:
            group = existing
        if not self._accept_joining_member(group, request.member_id):
            resolve(future, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif is_unknown:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)
        return future

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.settings.max_group_size
        if group.state in (ClassicState.EMPTY, ClassicState.DEAD):
            return True
        if group.state is ClassicState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.awaiting_join_count < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, request: JoinRequest, future: asyncio.Future[JoinResult]) -> None:
        if group.state is ClassicState.DEAD:
            resolve(future, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            resolve(future, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = request.group_instance_id if request.group_instance_id is not None else request.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            existing = group.static_member_id(request.group_instance_id)
            if existing is not None:
                log.info("group %s: static member %s rejoins with unknown member id; replacing member %s",
                         group.group_id, request.group_instance_id, existing)
                self._replace_static_member(group, request, existing, new_member_id, future)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, future)
        elif request.api_version >= 4:
            group.pending_members.add(new_member_id)
            self.timers.schedule(_heartbeat_key(group.group_id, new_member_id), request.session_timeout_ms,
                                 lambda: self._expire_heartbeat(group.group_id, new_member_id))
            resolve(future, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, future)

    def _join_existing_member(self, group: ClassicGroup, request: JoinRequest,
                              future: asyncio.Future[JoinResult]) -> None:
        member_id = request.member_id
        if group.state is ClassicState.DEAD:
            resolve(future, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            resolve(future, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, request, member_id, future)
            return
        error = group.validate_member(member_id, request.group_instance_id)
        if error is not ErrorCode.NONE:
            resolve(future, JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        if group.state is ClassicState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, future, "member rejoins during rebalance")
        elif group.state is ClassicState.COMPLETING_REBALANCE:
            if member.protocols == request.protocols:
                # The member lost the JoinGroup answer: answer again for the current generation.
                resolve(future, self._join_result(group, member, with_members=member_id == group.leader_id))
            else:
                self._update_member_and_rebalance(group, member, request, future, "member metadata changed")
        elif group.state is ClassicState.STABLE:
            if member_id == group.leader_id or member.protocols != request.protocols:
                self._update_member_and_rebalance(group, member, request, future,
                                                  "leader rejoined" if member_id == group.leader_id
                                                  else "member metadata changed")
            else:
                resolve(future, self._join_result(group, member, with_members=False))
        else:
            resolve(future, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _join_result(self, group: ClassicGroup, member: ClassicMember, with_members: bool,
                     skip_assignment: bool = False) -> JoinResult:
        return JoinResult(ErrorCode.NONE, member_id=member.member_id, generation_id=group.generation_id,
                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                          leader=group.leader_id or "", skip_assignment=skip_assignment,
                          members=group.members_metadata() if with_members else ())

    def _add_member_and_rebalance(self, group: ClassicGroup, request: JoinRequest, member_id: str,
                                  future: asyncio.Future[JoinResult]) -> None:
        member = ClassicMember(member_id, request.group_instance_id, request.client_id, request.client_host,
                               request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                               list(request.protocols), is_new=True)
        if group.state is ClassicState.PREPARING_REBALANCE and group.previous_state is ClassicState.EMPTY:
            group.new_member_added = True
        group.add(member, future)
        # A new member cannot heartbeat while its JoinGroup is parked; it expires after a long timeout
        # instead, so that clients that gave up on a long rebalance do not pile up as defunct members.
        self._reschedule_heartbeat(group, member, self.settings.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember, request: JoinRequest,
                                     future: asyncio.Future[JoinResult], reason: str) -> None:
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _replace_static_member(self, group: ClassicGroup, request: JoinRequest, old_member_id: str,
                               new_member_id: str, future: asyncio.Future[JoinResult]) -> None:
        assert request.group_instance_id is not None
        previous_leader = group.leader_id or ""
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self.timers.cancel(_heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member)
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, future)
        if group.state is ClassicState.STABLE:
            if group.select_protocol() == group.protocol_name:
                # Same protocol: the member takes its predecessor's place and assignment, no rebalance.
                self.store.store_classic(group, with_members=True)
                is_leader = new_member_id == group.leader_id
                if request.api_version >= 9:
                    result = self._join_result(group, member, with_members=is_leader, skip_assignment=is_leader)
                else:
                    # Older clients cannot skip the assignment: name the previous leader, so that this
                    # member acts as a follower and fetches its assignment with SyncGroup.
                    result = JoinResult(ErrorCode.NONE, member_id=new_member_id, generation_id=group.generation_id,
                                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                                        leader=previous_leader)
                group.complete_join(member, result)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, "static member changed protocols")
        elif group.state is ClassicState.COMPLETING_REBALANCE:
            # The leader may already be assigning for the old member id: start over.
            self._prepare_rebalance(group, f"static member {request.group_instance_id} replaced during sync")
        else:
            self._maybe_complete_join(group)

    # rebalance -----------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.state in VALID_PREVIOUS[ClassicState.PREPARING_REBALANCE]:
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is ClassicState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        self.timers.cancel(("classic-sync", group.group_id))
        initial = group.state is ClassicState.EMPTY
        group.transition(ClassicState.PREPARING_REBALANCE, self._now())
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        if initial:
            delay = self.settings.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            self.timers.schedule(("classic-join", group.group_id), group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_by_id(group.group_id))

    def _schedule_initial_join(self, group: ClassicGroup, delay_ms: int, remaining_ms: int) -> None:
        group_id = group.group_id

        def fire() -> None:
            current = self._group(group_id)
            if current is None or current is not group:
                return
            if group.new_member_added and remaining_ms != 0:
                group.new_member_added = False
                self._schedule_initial_join(group, min(self.settings.initial_rebalance_delay_ms,
                                                       remaining_ms), max(remaining_ms - delay_ms, 0))
            else:
                self._complete_join(group)

        self.timers.schedule(("classic-join", group_id), delay_ms, fire)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (group.state is ClassicState.PREPARING_REBALANCE and group.previous_state is not ClassicState.EMPTY
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self._group(group_id)
        if group is not None:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timers.cancel(("classic-join", group.group_id))
        if group.state is not ClassicState.PREPARING_REBALANCE:
            return
        for member in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, member.member_id)
            group.remove(member.member_id)
            self.timers.cancel(_heartbeat_key(group.group_id, member.member_id))
        if group.members and not self._elect_joined_leader(group):
            # Only static members that have not rejoined are left: wait for them or their session timeout.
            self.timers.schedule(("classic-join", group.group_id), group.rebalance_timeout_ms(),
                                 lambda: self._complete_join_by_id(group.group_id))
            return
        group.generation_id += 1
        group.pending_sync.clear()
        now = self._now()
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(ClassicState.EMPTY, now)
            log.info("group %s is now empty (generation %d)", group.group_id, group.generation_id)
            self.store.store_classic(group, with_members=False)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(ClassicState.COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            result = self._join_result(group, member, with_members=member.member_id == group.leader_id)
            group.complete_join(member, result)
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self.timers.schedule(("classic-sync", group.group_id), group.rebalance_timeout_ms(),
                             lambda: self._expire_pending_sync(group.group_id, generation))

    def _elect_joined_leader(self, group: ClassicGroup) -> bool:
        leader = group.members.get(group.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for member in group.members.values():
            if member.awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self._group(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
            self._prepare_rebalance(group, f"members {missing} sent no SyncGroup in time")

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in list(group.members.values()):
            result = SyncResult(error, group.protocol_type, group.protocol_name, member.assignment) \
                if error is ErrorCode.NONE else SyncResult(error)
            if group.complete_sync(member, result):
                self._reschedule_heartbeat(group, member)

    # SyncGroup -----------------------------------------------------------------------------
    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = self.timers.create_future()
        if not group_id:
            resolve(future, SyncResult(ErrorCode.INVALID_GROUP_ID))
            return future
        group = self._group(group_id)
        if group is None or group.is_empty():
            resolve(future, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return future
        if group.state is ClassicState.DEAD:
            resolve(future, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return future
        error = group.validate_member(member_id, instance_id)
        if error is ErrorCode.NONE and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is ErrorCode.NONE and ((protocol_type is not None and protocol_type != group.protocol_type)
                                        or (protocol_name is not None and protocol_name != group.protocol_name)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not ErrorCode.NONE:
            resolve(future, SyncResult(error))
        elif group.state is ClassicState.PREPARING_REBALANCE:
            resolve(future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is ClassicState.COMPLETING_REBALANCE:
            member = group.members[member_id]
            resolve(member.sync_future, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a duplicate SyncGroup
            member.sync_future = future
            self._remove_pending_sync(group, member_id)
            if member_id == group.leader_id:
                log.info("group %s: assignment received from leader %s for generation %d",
                         group.group_id, member_id, group.generation_id)
                for each in group.members.values():
                    each.assignment = assignments.get(each.member_id, b"")
                self.store.store_classic(group, with_members=True)
                self._propagate_assignment(group, ErrorCode.NONE)
                group.transition(ClassicState.STABLE, self._now())
        else:  # Stable: the assignment is known (a follower whose SyncGroup comes after the leader's)
            self._remove_pending_sync(group, member_id)
            member = group.members[member_id]
            resolve(future, SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
        return future

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("classic-sync", group.group_id))

    # Heartbeat -----------------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.state is ClassicState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An offset commit keeps the member's session alive (Stable and PreparingRebalance groups)."""
        member = group.members.get(member_id)
        if member is not None and group.state in (ClassicState.STABLE, ClassicState.PREPARING_REBALANCE):
            self._reschedule_heartbeat(group, member)

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember, timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timers.schedule(_heartbeat_key(group_id, member_id),
                             member.session_timeout_ms if timeout_ms is None else timeout_ms,
                             lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self._group(group_id)
        if group is None or group.state is ClassicState.DEAD:
            return
        if member_id in group.pending_members:
            log.info("group %s: pending member %s did not join within its session timeout", group_id, member_id)
            group.remove(member_id)
            if group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s failed its session timeout; removing it", group_id, member_id)
        self._remove_member_and_rebalance(group, member, f"member {member_id} session timed out")

    def _remove_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.complete_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.timers.cancel(_heartbeat_key(group.group_id, member.member_id))
        if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)

    # LeaveGroup ----------------------------------------------------------------------------
    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (member id, or "" with a group instance id); the top-level and per-member errors."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self._group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[ErrorCode] = []
        left: list[str] = []
        for member_id, instance_id in members:
            if member_id == "":
                target = group.static_member_id(instance_id) if instance_id is not None else None
                if target is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = target
            elif member_id in group.pending_members:
                group.remove(member_id)
                self.timers.cancel(_heartbeat_key(group_id, member_id))
                errors.append(ErrorCode.NONE)
                continue
            else:
                error = group.validate_member(member_id, instance_id)
                if error is not ErrorCode.NONE:
                    errors.append(error)
                    continue
            member = group.members[member_id]
            self.timers.cancel(_heartbeat_key(group_id, member_id))
            group.complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
            group.complete_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            group.remove(member_id)
            log.info("group %s: member %s left", group_id, member_id)
            errors.append(ErrorCode.NONE)
            left.append(member_id)
        if left:
            if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"members {left} left")
            elif group.state is ClassicState.PREPARING_REBALANCE:
                self._maybe_complete_join(group)
        return ErrorCode.NONE, errors

    # loading -------------------------------------------------------------------------------
    def on_loaded(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)

    def forget(self, group: ClassicGroup) -> None:
        """The group is going away (deleted or expired): cancel its timers."""
        self.timers.cancel(("classic-join", group.group_id))
        self.timers.cancel(("classic-sync", group.group_id))
        for member_id in [*group.members, *group.pending_members]:
            self.timers.cancel(_heartbeat_key(group.group_id, member_id))

