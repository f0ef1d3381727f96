"""Membership in a classic consumer group: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Theory of operation (the Java client's ``ConsumerCoordinator``, in asyncio).

States::

    UNJOINED -join-> PREPARING_REBALANCE (JoinGroup in flight, the barrier until every member rejoins)
             -joined-> COMPLETING_REBALANCE (SyncGroup in flight; the leader sends the assignment)
             -synced-> STABLE -(rebalance, error, poll timeout)-> rejoin

**Who does what.** ``poll()`` drives rebalances: when a rejoin is needed it first *prepares*
(auto-commit; EAGER revokes every partition through the listener, COOPERATIVE only those of topics
no longer subscribed; a member whose generation was lost reports its partitions *lost*), then starts
the JoinGroup/SyncGroup exchange as a task and waits for it within its timeout; a later ``poll()``
picks up an exchange that outlived its caller. Applying the assignment (and the listener calls that
go with it) happens in ``poll()`` too. A separate **heartbeat task** sends Heartbeat every
``heartbeat.interval.ms`` while the member is in a generation, independent of ``poll()``; it learns
REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION/UNKNOWN_MEMBER_ID (the membership is lost:
rejoin as a new member), FENCED_INSTANCE_ID (fatal) and coordinator moves. When the application
does not call ``poll()`` for ``max.poll.interval.ms`` the heartbeat task leaves the group (a static
member just stops), so its partitions go to others; the next ``poll()`` rejoins.

**The assignment.** The coordinator picks the assignor all members support; the leader decodes
every member's subscription, fetches metadata for all their topics, runs the assignor and sends the
assignments in its SyncGroup. The leader remembers the partition counts it assigned and rejoins when
they change (partitions added, a topic created or deleted). COOPERATIVE (every configured assignor
supports it, KIP-429): the member keeps what it still owns, revokes only what it lost, and rejoins
once more after revoking so the partitions can move. **Static membership** (``group.instance.id``,
KIP-345): a restart within ``session.timeout.ms`` gets its old assignment back without a rebalance;
a static member never sends LeaveGroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.client.config import ConfigError, ConsumerConfig
from kafkalite.client.consumer.assignors import (
    Assignment,
    ConsumerPartitionAssignor,
    GroupMember,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkalite.client.consumer.fetcher import Fetcher
from kafkalite.client.consumer.group import COORDINATOR_ERRORS, GroupCoordinatorBase, invoke_listener
from kafkalite.client.consumer.sticky import CooperativeStickyAssignor, StickyAssignor
from kafkalite.client.consumer.subscription import SubscriptionState
from kafkalite.client.errors import CommitFailedError, KafkaTimeoutError, error_for
from kafkalite.client.network import NetworkClient, monotonic_ms
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import ProtocolError
from kafkalite.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkalite.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkalite.protocol.messages.leave_group_request import MemberIdentity
from kafkalite.protocol.messages.sync_group_request import SyncGroupRequestAssignment

__all__ = ["ClassicCoordinator", "Generation", "MemberState", "assignors_from_config"]

log = logging.getLogger("kafkalite.client")

PROTOCOL_TYPE = "consumer"
_FATAL_JOIN_ERRORS = frozenset({
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.INVALID_SESSION_TIMEOUT, ErrorCode.INVALID_GROUP_ID,
    ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.FENCED_INSTANCE_ID,
    ErrorCode.UNSUPPORTED_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_ID_NOT_FOUND,
})  # fmt: skip


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True, slots=True)
class Generation:
    generation_id: int = -1
    member_id: str = ""
    protocol_name: str | None = None

    @property
    def valid(self) -> bool:
        return self.generation_id >= 0 and bool(self.member_id)


NO_GENERATION = Generation()


@dataclass(frozen=True, slots=True)
class _Joined:
    """The outcome of one JoinGroup + SyncGroup exchange."""

    generation: Generation
    assignment: Assignment


class ClassicCoordinator(GroupCoordinatorBase):
    """The consumer's membership in a classic group (see the module docstring)."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, fetcher: Fetcher,
                 config: ConsumerConfig, assignors: list[ConsumerPartitionAssignor]) -> None:
        super().__init__(client, subscriptions, fetcher, config)
        self.assignors = assignors
        common = set(assignors[0].supported_protocols)
        for assignor in assignors[1:]:
            common &= set(assignor.supported_protocols)
        self.protocol = max(common) if common else RebalanceProtocol.EAGER
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.is_leader = False
        self._join_task: asyncio.Task[_Joined] | None = None
        self._joined: _Joined | None = None
        self._prepared = False
        self._joined_topics: frozenset[str] | None = None
        self._assignment_snapshot: dict[str, int | None] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._heartbeat_wakeup = asyncio.Event()
        self._rebalance_timeout_ms = config.max_poll_interval_ms

    # --- identity -----------------------------------------------------------------------------------

    def commit_identity(self) -> tuple[int, str, str | None]:
        if not self.subscriptions.is_subscribed:
            return -1, "", None
        return self.generation.generation_id, self.generation.member_id, self.group_instance_id

    def can_commit(self) -> bool:
        return not self.subscriptions.is_subscribed or (self.state is MemberState.STABLE and self.generation.valid)

    async def commit(self, offsets, deadline_ms):  # type: ignore[no-untyped-def]  # same signature as the base
        if self.subscriptions.is_subscribed and not self.can_commit():
            code = (ErrorCode.REBALANCE_IN_PROGRESS if self.state is not MemberState.UNJOINED
                    else ErrorCode.ILLEGAL_GENERATION)
            raise CommitFailedError(code, (
                f"commit for group {self.group_id!r} refused: the consumer is not in a stable generation "
                f"({self.state.value}); it rejoins on its next poll()"))
        await super().commit(offsets, deadline_ms)

    def on_group_moved_on(self, code: ErrorCode) -> None:
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("a commit found the group rebalancing")
        else:
            self.reset_generation(f"a commit got {code.name}")

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("group %r: rejoining (%s)", self.group_id, reason)
        self.rejoin_needed = True
        self.wakeup.set()

    def reset_generation(self, reason: str) -> None:
        """The membership is lost: the next join is as a new member, and owned partitions are lost."""
        if self.generation is not NO_GENERATION and not self.closed:
            log.info("group %r: member %s of generation %s lost its membership (%s)", self.group_id,
                     self.generation.member_id, self.generation.generation_id, reason)
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        if not self.closed:
            self.request_rejoin(reason)

    # --- poll ---------------------------------------------------------------------------------------

    async def poll(self, deadline_ms: float) -> None:
        self.last_poll_ms = monotonic_ms()
        self.raise_pending()
        if self.subscriptions.is_subscribed:
            self._check_subscription()
            if self._needs_rejoin():
                await self._ensure_active_group(deadline_ms)
            self._ensure_heartbeats()
        self.maybe_auto_commit()
        self.raise_pending()

    def _check_subscription(self) -> None:
        if self._joined_topics is not None and self._joined_topics != self.subscriptions.topics:
            self.request_rejoin("the subscription changed")
        snapshot = self._assignment_snapshot
        if self.is_leader and snapshot is not None and self.state is MemberState.STABLE:
            metadata = self.client.metadata
            for topic, count in snapshot.items():
                if metadata.topic_error(topic) is ErrorCode.LEADER_NOT_AVAILABLE:
                    continue  # being created or moving: wait for a settled answer
                now = metadata.partition_count(topic)
                if now != count:
                    self._assignment_snapshot = None
                    self.request_rejoin(f"the partitions of topic {topic!r} changed ({count} -> {now})")
                    break

    def _needs_rejoin(self) -> bool:
        return (self.rejoin_needed or self._join_task is not None or self._joined is not None
                or not self.generation.valid)

    async def _ensure_active_group(self, deadline_ms: float) -> None:
        if self._joined is None and self._join_task is None:
            try:
                await self.ensure_coordinator(deadline_ms)
            except KafkaTimeoutError:
                return
            if not self._prepared:
                await self._on_join_prepare(deadline_ms)
                self._prepared = True
            self.state = MemberState.PREPARING_REBALANCE
            self.rejoin_needed = False  # a rejoin asked for from now on needs another round
            self.client.add_topics(self.subscriptions.topics)
            self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync())
        task = self._join_task
        if task is not None:
            if not task.done():
                await asyncio.wait({task}, timeout=max(0.0, (deadline_ms - monotonic_ms()) / 1000))
            if not task.done():
                return
            self._join_task = None
            error = task.exception()
            if error is not None:
                if isinstance(error, KafkaError) and error.error_code in _FATAL_JOIN_ERRORS:
                    self.fatal_error = error
                raise error
            self._joined = task.result()
        joined, self._joined = self._joined, None
        if joined is not None:
            self._prepared = False
            await self._on_join_complete(joined)

    async def _on_join_prepare(self, deadline_ms: float) -> None:
        listener = self.subscriptions.listener
        owned = self.subscriptions.assigned_partitions()
        if self.generation.valid:
            await self.commit_consumed_sync(deadline_ms, "before the rebalance")
        if not self.generation.valid:
            if owned:
                self._keep(await invoke_listener(listener, "on_partitions_lost", owned))
                self.subscriptions.set_assignment(())
            return
        if self.protocol is RebalanceProtocol.EAGER:
            if owned:
                self._keep(await invoke_listener(listener, "on_partitions_revoked", owned))
            self.subscriptions.set_assignment(())
            return
        gone = {partition for partition in owned if partition.topic not in self.subscriptions.topics}
        if gone:
            self._keep(await invoke_listener(listener, "on_partitions_revoked", gone))
            self.subscriptions.remove_partitions(gone)

    def _keep(self, error: BaseException | None) -> None:
        if error is not None:
            self.listener_errors.append(error)

    async def _on_join_complete(self, joined: _Joined) -> None:
        assignor = self._assignor(joined.generation.protocol_name)
        if assignor is None:
            self.fatal_error = KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, (
                f"group {self.group_id!r} chose assignor {joined.generation.protocol_name!r}, "
                "which this consumer did not offer"))
            raise self.fatal_error
        assigned = set(joined.assignment.partitions)
        unsubscribed = {partition for partition in assigned if partition.topic not in self.subscriptions.topics}
        if unsubscribed:
            self.request_rejoin(f"the assignment names topics no longer subscribed: {sorted(map(str, unsubscribed))}")
            assigned -= unsubscribed
        listener = self.subscriptions.listener
        owned = self.subscriptions.assigned_partitions()
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = owned - assigned
            added = assigned - owned
            if revoked:
                self._keep(await invoke_listener(listener, "on_partitions_revoked", revoked))
            self.subscriptions.set_assignment(sorted(assigned))
            self._keep(await invoke_listener(listener, "on_partitions_assigned", added))
            if revoked:
                self.request_rejoin(f"{len(revoked)} partition(s) revoked: rejoin so they can move")
        else:
            self.subscriptions.set_assignment(sorted(assigned))
            self._keep(await invoke_listener(listener, "on_partitions_assigned", assigned))
        assignor.on_assignment(joined.assignment, joined.generation.generation_id)
        self.client.add_topics({partition.topic for partition in assigned})
        self.fetcher.wakeup()
        log.info("group %r: generation %s, member %s, assignor %s, assigned %s", self.group_id,
                 joined.generation.generation_id, joined.generation.member_id, assignor.name,
                 sorted(map(str, assigned)))

    def _assignor(self, name: str | None) -> ConsumerPartitionAssignor | None:
        return next((assignor for assignor in self.assignors if assignor.name == name), None)

    # --- the exchange -------------------------------------------------------------------------------

    def _join_request(self) -> JoinGroupRequest:
        self._joined_topics = self.subscriptions.topics  # what the group is told we subscribe to
        topics = tuple(sorted(self.subscriptions.topics))
        owned = tuple(sorted(self.subscriptions.assigned_partitions()))
        protocols = []
        for assignor in self.assignors:
            subscription = Subscription(topics, assignor.subscription_user_data(self.subscriptions.topics), owned,
                                        self.generation.generation_id, self.config.client_rack or None)
            protocols.append(JoinGroupRequestProtocol(assignor.name, encode_subscription(subscription)))
        return JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms, member_id=self.generation.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE, protocols=protocols,
            reason="rebalance requested by the consumer")

    async def _join_and_sync(self) -> _Joined:
        attempt = 0
        exchange_timeout = self._rebalance_timeout_ms + 5000
        while True:
            if self.closed:
                raise asyncio.CancelledError()
            try:
                node_id = await self.ensure_coordinator(monotonic_ms() + self.config.request_timeout_ms)
                request = self._join_request()
                response: JoinGroupResponse = await self.client.send(node_id, request, timeout_ms=exchange_timeout)
                code = ErrorCode.from_code(response.error_code)
                if code is ErrorCode.NONE:
                    self.generation = Generation(response.generation_id, response.member_id, response.protocol_name)
                    self.state = MemberState.COMPLETING_REBALANCE
                    self._heartbeat_wakeup.set()
                    self.is_leader = response.leader == response.member_id
                    assignments: list[SyncGroupRequestAssignment] = []
                    if self.is_leader and not response.skip_assignment:
                        assignments = await self._assign(response)
                    sync = SyncGroupRequest(
                        group_id=self.group_id, generation_id=response.generation_id, member_id=response.member_id,
                        group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
                        protocol_name=response.protocol_name, assignments=assignments)
                    synced: SyncGroupResponse = await self.client.send(node_id, sync, timeout_ms=exchange_timeout)
                    code = ErrorCode.from_code(synced.error_code)
                    if code is ErrorCode.NONE:
                        self.state = MemberState.STABLE
                        self._heartbeat_wakeup.set()
                        return _Joined(self.generation, decode_assignment(synced.assignment))
                    self._exchange_error(code, "SyncGroup")
                elif code is ErrorCode.MEMBER_ID_REQUIRED:
                    self.generation = Generation(-1, response.member_id)
                    continue
                else:
                    self._exchange_error(code, "JoinGroup")
            except KafkaError as exc:
                if exc.error_code in _FATAL_JOIN_ERRORS or not (exc.retriable or exc.error_code in COORDINATOR_ERRORS
                                                                 or exc.error_code in _REJOIN_ERRORS):
                    raise
                if isinstance(exc, KafkaTimeoutError) or exc.error_code is ErrorCode.NETWORK_EXCEPTION:
                    self.coordinator_dead(exc)
                log.debug("group %r: join attempt failed: %s", self.group_id, exc)
            except (OSError, ProtocolError) as exc:
                self.coordinator_dead(exc)
            self.state = MemberState.PREPARING_REBALANCE
            attempt += 1
            await asyncio.sleep(min(self.config.retry_backoff_ms * 2 ** min(attempt - 1, 5),
                                    self.config.retry_backoff_max_ms) / 1000)

    def _exchange_error(self, code: ErrorCode, api: str) -> None:
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(code.name)
        elif code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.generation = NO_GENERATION
        elif code is ErrorCode.ILLEGAL_GENERATION:
            self.generation = Generation(-1, self.generation.member_id)
        elif code is ErrorCode.FENCED_INSTANCE_ID:
            raise error_for(code, context=(
                f"group {self.group_id!r}: another consumer joined with group.instance.id "
                f"{self.group_instance_id!r}"))
        elif code in _FATAL_JOIN_ERRORS:
            raise error_for(code, context=f"{api} of group {self.group_id!r}")
        raise KafkaError(code, f"{api} of group {self.group_id!r}: {code.name}")

    async def _assign(self, response: JoinGroupResponse) -> list[SyncGroupRequestAssignment]:
        """The leader's work: every member's assignment from their subscriptions and the metadata."""
        assignor = self._assignor(response.protocol_name)
        if assignor is None:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"the group chose assignor {response.protocol_name!r}, which this consumer did not offer")
        members: dict[str, GroupMember] = {}
        for item in response.members:
            try:
                subscription = decode_subscription(item.metadata)
            except ProtocolError as exc:
                log.warning("group %r: member %s sent a subscription that does not decode (%s); it gets nothing",
                            self.group_id, item.member_id, exc)
                subscription = Subscription(())
            members[item.member_id] = GroupMember(item.member_id, subscription, item.group_instance_id)
        topics = {topic for member in members.values() for topic in member.subscription.topics}
        await self.client.refresh_metadata(topics)
        metadata = self.client.metadata
        snapshot = {topic: metadata.partition_count(topic) for topic in topics}
        counts = {topic: count for topic, count in snapshot.items() if count is not None}
        result = assignor.assign(counts, members)
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            self._check_cooperative(members, result)
        self._assignment_snapshot = snapshot
        log.info("group %r: leader of generation %s assigned with %s: %s", self.group_id, response.generation_id,
                 assignor.name, {member_id: sorted(map(str, value.partitions)) for member_id, value in result.items()})
        return [SyncGroupRequestAssignment(member_id, encode_assignment(result.get(member_id, Assignment(()))))
                for member_id in members]

    def _check_cooperative(self, members: dict[str, GroupMember], result: dict[str, Assignment]) -> None:
        owners = {partition: member_id for member_id, member in members.items()
                  for partition in member.subscription.owned_partitions}
        for member_id, assignment in result.items():
            for partition in assignment.partitions:
                owner = owners.get(partition)
                if owner is not None and owner != member_id:
                    log.error("group %r: cooperative assignment gives %s to %s while %s still owns it",
                              self.group_id, partition, member_id, owner)

    # --- heartbeats ---------------------------------------------------------------------------------

    def _ensure_heartbeats(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        config = self.config
        last_ok = monotonic_ms()
        while not self.closed:
            self._heartbeat_wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_wakeup.wait(), config.heartbeat_interval_ms / 1000)
            if self.closed:
                return
            if self.state not in (MemberState.COMPLETING_REBALANCE, MemberState.STABLE) or not self.generation.valid:
                last_ok = monotonic_ms()
                continue
            now = monotonic_ms()
            if now - self.last_poll_ms > config.max_poll_interval_ms:
                log.warning("group %r: poll() was not called for max.poll.interval.ms (%s ms); leaving the group so "
                            "its partitions go to other members", self.group_id, config.max_poll_interval_ms)
                await self._leave_group("consumer poll timeout has expired")
                continue
            if now - last_ok > config.session_timeout_ms:
                self.coordinator_dead("no heartbeat answered within session.timeout.ms")
                last_ok = now
            try:
                node_id = await self.ensure_coordinator(now + config.heartbeat_interval_ms)
                generation = self.generation
                request = HeartbeatRequest(group_id=self.group_id, generation_id=generation.generation_id,
                                           member_id=generation.member_id, group_instance_id=self.group_instance_id)
                response: HeartbeatResponse = await self.client.send(
                    node_id, request, timeout_ms=min(config.request_timeout_ms, config.session_timeout_ms))
            except (KafkaError, OSError) as exc:
                if not isinstance(exc, KafkaError) or exc.error_code in (ErrorCode.NETWORK_EXCEPTION,
                                                                         ErrorCode.REQUEST_TIMED_OUT):
                    self.coordinator_dead(exc)
                continue
            if generation is not self.generation:
                continue  # the membership changed while the heartbeat was out
            self._on_heartbeat(ErrorCode.from_code(response.error_code))
            if response.error_code == ErrorCode.NONE or response.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                last_ok = monotonic_ms()

    def _on_heartbeat(self, code: ErrorCode) -> None:
        if code is ErrorCode.NONE:
            return
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self.request_rejoin("the group is rebalancing")
        elif code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            self.reset_generation(f"heartbeat got {code.name}")
        elif code is ErrorCode.FENCED_INSTANCE_ID:
            self.fatal_error = error_for(code, context=(
                f"group {self.group_id!r}: another consumer joined with group.instance.id {self.group_instance_id!r}"))
            self.wakeup.set()
        elif code in COORDINATOR_ERRORS:
            self.coordinator_dead(code.name)
        else:
            log.warning("group %r: heartbeat got %s", self.group_id, code.name)

    async def _leave_group(self, reason: str) -> None:
        generation = self.generation
        if self.group_instance_id is None and generation.member_id and self.coordinator_id is not None:
            request = LeaveGroupRequest(group_id=self.group_id, member_id=generation.member_id,
                                        members=[MemberIdentity(generation.member_id, None, reason)])
            try:
                await asyncio.wait_for(self.client.send(self.coordinator_id, request),
                                       self.config.request_timeout_ms / 1000)
            except (KafkaError, OSError, TimeoutError) as exc:
                log.debug("group %r: LeaveGroup failed: %s", self.group_id, exc)
        self.reset_generation(reason)

    # --- leaving ------------------------------------------------------------------------------------

    async def _stop_tasks(self) -> None:
        for task in (self._join_task, self._heartbeat_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._join_task = None

    async def _give_up_assignment(self, deadline_ms: float, reason: str) -> None:
        owned = self.subscriptions.assigned_partitions()
        if self.subscriptions.is_subscribed and owned and self.group_instance_id is None:
            method = "on_partitions_revoked" if self.generation.valid else "on_partitions_lost"
            self._keep(await invoke_listener(self.subscriptions.listener, method, owned))
        if self.generation.valid and self.state is not MemberState.UNJOINED:
            await self._leave_group(reason)

    async def close(self, deadline_ms: float) -> None:
        if self.subscriptions.is_subscribed:
            await self.commit_consumed_sync(deadline_ms, "on close")
        else:
            await super().commit_consumed_sync(deadline_ms, "on close")
        self.closed = True
        if self._join_task is not None:
            self._join_task.cancel()
        await self._give_up_assignment(deadline_ms, "the consumer is being closed")
        await self._stop_tasks()
        await self.wait_for_pending_commits(deadline_ms)

    async def on_unsubscribe(self, deadline_ms: float) -> None:
        await self.commit_consumed_sync(deadline_ms, "on unsubscribe")
        if self._join_task is not None:
            self._join_task.cancel()
            with contextlib.suppress(BaseException):
                await self._join_task
            self._join_task = None
        self._joined = None
        self._prepared = False
        owned = self.subscriptions.assigned_partitions()
        if owned:
            method = "on_partitions_revoked" if self.generation.valid else "on_partitions_lost"
            self._keep(await invoke_listener(self.subscriptions.listener, method, owned))
        if self.generation.valid:
            await self._leave_group("the consumer unsubscribed")
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        self._joined_topics = None
        self._assignment_snapshot = None
        self.rejoin_needed = True


_REJOIN_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS,
                            ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


_ALIASES = {
    "range": "range", "rangeassignor": "range", "roundrobin": "roundrobin", "roundrobinassignor": "roundrobin",
    "round_robin": "roundrobin", "sticky": "sticky", "stickyassignor": "sticky",
    "cooperative-sticky": "cooperative-sticky", "cooperativestickyassignor": "cooperative-sticky",
    "cooperative_sticky": "cooperative-sticky",
}


def assignors_from_config(strategy: str | Sequence[object]) -> list[ConsumerPartitionAssignor]:
    """``partition.assignment.strategy``: names (or Java class names) and/or assignor objects, in order."""
    entries: Sequence[object] = strategy.split(",") if isinstance(strategy, str) else strategy
    known: dict[str, type[ConsumerPartitionAssignor]] = {
        "range": RangeAssignor, "roundrobin": RoundRobinAssignor, "sticky": StickyAssignor,
        "cooperative-sticky": CooperativeStickyAssignor}
    assignors: list[ConsumerPartitionAssignor] = []
    for entry in entries:
        if isinstance(entry, ConsumerPartitionAssignor):
            assignors.append(entry)
            continue
        if isinstance(entry, type) and issubclass(entry, ConsumerPartitionAssignor):
            assignors.append(entry())
            continue
        if not isinstance(entry, str):
            raise ConfigError(f"partition.assignment.strategy entry {entry!r} is neither a name nor an assignor")
        name = entry.strip()
        if not name:
            continue
        canonical = _ALIASES.get(name.rsplit(".", 1)[-1].lower())
        if canonical is None:
            raise ConfigError(f"unknown assignor {name!r} in partition.assignment.strategy "
                              f"(one of {', '.join(known)})")
        assignors.append(known[canonical]())
    if not assignors:
        raise ConfigError("partition.assignment.strategy names no assignor")
    names = [assignor.name for assignor in assignors]
    if len(set(names)) != len(names):
        raise ConfigError(f"partition.assignment.strategy names an assignor twice: {names}")
    return assignors
