"""The group coordinator: the one entry point handlers use for consumer groups and committed offsets.

See the ``kafkalite.broker.core.group`` package docstring for the theory of operation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.broker.core.coordinator_log import OFFSETS_TOPIC, CoordinatorLog
from kafkalite.broker.core.group.classic_group import ClassicGroup, ClassicState, JoinRequest, JoinResult, SyncResult
from kafkalite.broker.core.group.classic_rebalance import ClassicRebalancer
from kafkalite.broker.core.group.consumer_group import ConsumerGroup
from kafkalite.broker.core.group.consumer_rebalance import (
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ConsumerRebalancer,
)
from kafkalite.broker.core.group.offsets import OffsetAndMetadata, OffsetStore, Record
from kafkalite.broker.core.group.records import (
    ClassicGroupRecord,
    ConsumerGroupKey,
    GroupMetadataKey,
    OffsetCommitKey,
    PendingTxnOffsetKey,
    ShareGroupKey,
    decode_key,
    decode_offset_value,
    decode_pending_txn_offset_value,
    encode_offset_value,
    encode_pending_txn_offset_value,
)
from kafkalite.broker.core.group.share_group import ShareGroup
from kafkalite.broker.core.group.share_rebalance import (
    NoShareState,
    ShareHeartbeat,
    ShareHeartbeatResult,
    ShareRebalancer,
    ShareStateListener,
)
from kafkalite.broker.core.group.store import Group, GroupSettings, GroupStore
from kafkalite.broker.core.group.timers import LoopTimers, Timers
from kafkalite.broker.core.topics import TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    import asyncio

__all__ = ["client_host", "GroupCoordinator", "GroupDescription", "ListedGroup", "MemberDescription",
           "PartitionOffset", "OffsetToCommit"]

_LONG_MAX = 2**63 - 1

log = logging.getLogger("kafkalite.groups")



def client_host(peer: str) -> str:
    """A client's host as Kafka reports it in DescribeGroups ("/127.0.0.1") from "host:port"."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[MemberDescription, ...] = ()
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One partition of an OffsetFetch answer."""

    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


class GroupCoordinator:
    """Every group of the broker and their committed offsets. Touch only from the event loop.

    ``topics`` answers whether a committed partition exists (and, for KIP-848 and share groups, which
    topics a subscription names); ``log`` is ``__consumer_offsets``; ``share_state`` is told what share
    group membership changes mean to delivery.
    """

    def __init__(self, topics: TopicManager, log: CoordinatorLog, settings: GroupSettings,
                 timers: Timers | None = None, share_state: ShareStateListener | None = None) -> None:
        self.topics = topics
        self.timers: Timers = timers if timers is not None else LoopTimers()
        self.settings = settings
        self.store = GroupStore(log, settings, self.timers)
        self.groups = self.store.groups
        self.log = log
        self.offsets = OffsetStore()
        self.classic = ClassicRebalancer(self.store, self.remove_group)
        self.consumer = ConsumerRebalancer(self.store, topics, self.remove_group)
        self.share = ShareRebalancer(self.store, topics, share_state if share_state is not None else NoShareState())
        self._last_expiry_ms = 0

    # lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets``; arm the loaded members' timers."""
        count = 0
        for _, record in self.log.replay_all():
            count += 1
            try:
                self._replay(record.key, record.value)
            except Exception as exc:  # a damaged record must not stop the broker from starting
                log.warning("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC, record.offset, exc)
        for group_id in self.offsets.group_ids():
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, self.timers.now_ms())
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.on_loaded(group)
            elif isinstance(group, ShareGroup):
                self.share.on_loaded(group)
            else:
                self.consumer.on_loaded(group)
        if count:
            log.info("loaded %d groups from %d %s records", len(self.groups), count, OFFSETS_TOPIC)
        self._last_expiry_ms = self.timers.now_ms()

    def close(self) -> None:
        self.timers.cancel_all()

    def periodic(self, now_ms: int) -> None:
        """Deferred timers, and offset expiry every ``offsets.retention.check.interval.ms``."""
        self.timers.poll()
        if now_ms - self._last_expiry_ms >= self.settings.retention_check_interval_ms:
            self._last_expiry_ms = now_ms
            self.expire_offsets()

    def _replay(self, key_bytes: bytes | None, value: bytes | None) -> None:
        if key_bytes is None:
            return
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            self.offsets.replay_offset(key.group_id, key.topic, key.partition,
                                       None if value is None else decode_offset_value(value))
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = ClassicGroup.from_record(key.group_id, ClassicGroupRecord.decode(value))
        elif isinstance(key, ConsumerGroupKey):
            if value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = ConsumerGroup.decode(key.group_id, value)
        elif isinstance(key, ShareGroupKey):
            if value is None:
                self.groups.pop(key.group_id, None)
            else:
                self.groups[key.group_id] = ShareGroup.decode(key.group_id, value)
        elif isinstance(key, PendingTxnOffsetKey):
            self.offsets.replay_pending(key.producer_id, key.group_id, key.topic, key.partition,
                                        None if value is None else decode_pending_txn_offset_value(value))

    # persistence ---------------------------------------------------------------------------
    def write(self, group_id: str, records: Sequence[Record]) -> bool:
        return self.store.write(group_id, records)

    def remove_group(self, group_id: str) -> list[Record]:
        """Forget a group (not its offsets); the tombstone that records it."""
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup):
            group.state = ClassicState.DEAD
            self.classic.forget(group)
            return [(GroupMetadataKey(group_id).encode(), None)]
        if isinstance(group, ConsumerGroup):
            self.consumer.forget(group)
            return [(ConsumerGroupKey(group_id).encode(), None)]
        if isinstance(group, ShareGroup):
            self.share.forget(group)
            return [(ShareGroupKey(group_id).encode(), None)]
        return []

    # classic protocol ----------------------------------------------------------------------
    def join_group(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        return self.classic.join(request)

    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> asyncio.Future[SyncResult]:
        return self.classic.sync(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                 protocol_name, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self.classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        return self.classic.leave(group_id, members)

    # KIP-848 protocol ----------------------------------------------------------------------
    def consumer_heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        return self.consumer.heartbeat(request)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A KIP-848 group (None for an unknown group or a classic one)."""
        return self.consumer.describe(group_id)

    # share groups (KIP-932) -----------------------------------------------------------------
    def share_heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        return self.share.heartbeat(request)

    def describe_share_group(self, group_id: str) -> ShareGroup | None:
        """A share group (None for an unknown group or one of another kind)."""
        return self.share.group(group_id)

    def share_group_for_offsets(self, group_id: str, *, create: bool) -> ShareGroup:
        """The share group whose offsets AlterShareGroupOffsets or DeleteShareGroupOffsets change: it must
        be empty (NON_EMPTY_GROUP); an unknown id is GROUP_ID_NOT_FOUND, or a new empty group when
        ``create``; an id of another kind of group is GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if group is None and not create:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        share_group = self.share.ensure_group(group_id)
        if not share_group.is_empty():
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")
        return share_group

    def default_assignor(self) -> str:
        """The server-side assignor of KIP-848 groups whose members name none."""
        return self.settings.consumer_assignors[0]

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet (FindCoordinator does, like Kafka)."""
        self.log.topic()

    # admin ---------------------------------------------------------------------------------
    def describe_group(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):  # unknown, or not a classic group (as Kafka answers)
            return GroupDescription(group_id, ClassicState.DEAD.value)
        stable = group.state is ClassicState.STABLE
        members = tuple(MemberDescription(member.member_id, member.group_instance_id, member.client_id,
                                          member.client_host,
                                          member.metadata(group.protocol_name) if stable else b"",
                                          member.assignment if stable else b"")
                        for member in group.members.values())
        return GroupDescription(group_id, group.state_name, group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        wanted_states = {state.strip().lower() for state in states}
        wanted_types = {kind.strip().lower() for kind in types}
        listed = []
        for group_id, group in self.groups.items():
            if wanted_states and group.state_name.lower() not in wanted_states:
                continue
            if wanted_types and group.kind not in wanted_types:
                continue
            protocol_type = (group.protocol_type or "") if isinstance(group, ClassicGroup) else group.kind
            listed.append(ListedGroup(group_id, protocol_type, group.state_name, group.kind))
        return listed

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty():
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                records = self.offsets.delete_group(group_id) + self.remove_group(group_id)
                self.write(group_id, records)
                log.info("deleted group %s", group_id)
                results[group_id] = ErrorCode.NONE
        return results

    # offsets -------------------------------------------------------------------------------
    def _validate_commit(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                         api_version: int, transactional: bool) -> tuple[ErrorCode, Group | None]:
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if group is None:
            if generation_id < 0:
                group = self.groups[group_id] = ClassicGroup(group_id, self.timers.now_ms())  # a simple group
                return ErrorCode.NONE, group
            if api_version >= 9 and not transactional:
                return ErrorCode.GROUP_ID_NOT_FOUND, None
            return ErrorCode.ILLEGAL_GENERATION, None
        if isinstance(group, ConsumerGroup):
            error = self.consumer.validate_commit(group, member_id, generation_id, api_version, transactional)
            return error, group
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, group
        if generation_id < 0 and group.state is ClassicState.EMPTY:
            return ErrorCode.NONE, group
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is not ErrorCode.NONE:
                return error, group
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, group
        elif not transactional and group.state is not ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, group
        if not transactional and group.state is ClassicState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, group
        return ErrorCode.NONE, group

    def _check_partitions(self, offsets: Iterable[OffsetToCommit], now_ms: int,
                          retention_ms: int = -1) -> tuple[dict[tuple[str, int], OffsetAndMetadata],
                                                           dict[tuple[str, int], ErrorCode]]:
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        for item in offsets:
            key = (item.topic, item.partition)
            metadata = item.metadata or ""
            if self.topics.partition(item.topic, item.partition) is None:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode("utf-8")) > self.settings.offset_metadata_max_bytes:
                errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                errors[key] = ErrorCode.NONE
                # A retention time so long that the expiry would not fit a signed 64-bit timestamp
                # never expires (Kafka's long arithmetic would wrap it to the past instead).
                expire = min(now_ms + retention_ms, _LONG_MAX) if retention_ms >= 0 else None
                accepted[key] = OffsetAndMetadata(item.offset, item.leader_epoch, metadata, now_ms, expire)
        return accepted, errors

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: Sequence[OffsetToCommit], api_version: int = 9,
                       retention_ms: int = -1) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: the error of every partition (a group-level error is every partition's)."""
        error, group = self._validate_commit(group_id, generation_id, member_id, group_instance_id,
                                             api_version, transactional=False)
        if error is not ErrorCode.NONE:
            return {(item.topic, item.partition): error for item in offsets}
        if isinstance(group, ClassicGroup):
            self.classic.touch(group, member_id)
        now = self.timers.now_ms()
        accepted, errors = self._check_partitions(offsets, now, retention_ms)
        # Written first, then applied: a commit the disk refused is neither answered nor visible.
        records = [(OffsetCommitKey(group_id, topic, partition).encode(), encode_offset_value(value))
                   for (topic, partition), value in accepted.items()]
        if not self.write(group_id, records):
            return _not_written(errors, accepted)
        self.offsets.commit(group_id, accepted)
        return errors

    def fetch_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> tuple[ErrorCode, list[PartitionOffset]]:
        """OffsetFetch for one group: a group-level error and the partitions (all committed ones when
        ``topics`` is None)."""
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        known = group is not None and not (isinstance(group, ClassicGroup) and group.state is ClassicState.DEAD)
        if isinstance(group, ConsumerGroup):
            error = self.consumer.validate_fetch(group, member_id, member_epoch)
            if error is not ErrorCode.NONE:
                return error, []
        committed = self.offsets.committed(group_id) if known else {}

        def entry(topic: str, partition: int, value: OffsetAndMetadata | None) -> PartitionOffset:
            if require_stable and known and self.offsets.has_pending(group_id, topic, partition):
                return PartitionOffset(topic, partition, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            if value is None:
                return PartitionOffset(topic, partition)
            return PartitionOffset(topic, partition, value.offset, value.leader_epoch, value.metadata)

        if topics is None:
            return ErrorCode.NONE, [entry(topic, partition, value) for (topic, partition), value in committed.items()]
        return ErrorCode.NONE, [entry(topic, partition, committed.get((topic, partition)))
                                for topic, partitions in topics for partition in partitions]

    def delete_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]) -> tuple[
            ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: a group-level error and per-partition errors."""
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ShareGroup) or (
                isinstance(group, ClassicGroup) and group.state is ClassicState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if isinstance(group, ClassicGroup) and not group.is_empty() and not group.uses_consumer_protocol():
            return ErrorCode.NON_EMPTY_GROUP, {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        to_delete: list[tuple[str, int]] = []
        for topic, partitions in topics:
            for partition in partitions:
                if self.topics.partition(topic, partition) is None:
                    errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif group.is_subscribed_to(topic):
                    errors[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    errors[(topic, partition)] = ErrorCode.NONE
                    to_delete.append((topic, partition))
        self.write(group_id, self.offsets.delete(group_id, to_delete))
        return ErrorCode.NONE, errors

    def expire_offsets(self) -> int:
        """Remove expired offsets and the empty groups left without any; the number removed."""
        now = self.timers.now_ms()
        retention = self.settings.offsets_retention_ms
        removed = 0
        for group_id, group in list(self.groups.items()):
            base = self._expiry_base(group)
            if base is None:
                continue

            def expired(topic_partition: tuple[str, int], value: OffsetAndMetadata,
                        base: Callable[[OffsetAndMetadata], int] = base, group: Group = group) -> bool:
                if group.is_subscribed_to(topic_partition[0]):
                    return False
                if value.expire_timestamp_ms is not None:
                    return now >= value.expire_timestamp_ms
                return now - base(value) >= retention

            records, none_left = self.offsets.expire(group_id, expired)
            removed += len(records)
            if none_left and group.is_empty():
                records += self.remove_group(group_id)
                log.info("group %s expired: empty and without offsets", group_id)
            self.write(group_id, records)
        return removed

    @staticmethod
    def _expiry_base(group: Group) -> Callable[[OffsetAndMetadata], int] | None:
        """When each offset's retention starts counting, or None if the group's offsets never expire now."""
        if isinstance(group, ShareGroup):
            return None  # a share group has no committed offsets
        if isinstance(group, ConsumerGroup):
            return lambda value: value.commit_timestamp_ms
        if group.protocol_type is None:  # a simple group
            return lambda value: value.commit_timestamp_ms
        if group.state is ClassicState.EMPTY:
            since = group.state_timestamp_ms
            return lambda value: since if since is not None else value.commit_timestamp_ms
        if (group.uses_consumer_protocol() and group.subscribed_topics is not None
                and group.state is ClassicState.STABLE):
            return lambda value: value.commit_timestamp_ms
        return None

    # transactional offsets (for the transaction coordinator) -------------------------------
    def stage_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                    offsets: Sequence[OffsetToCommit], *, member_id: str = "",
                                    group_instance_id: str | None = None, generation_id: int = -1,
                                    api_version: int = 3) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: stage offsets for ``producer_id``'s transaction; each partition's error.

        Staged offsets become committed when ``complete_transaction(producer_id, True)`` runs, and are
        dropped by ``complete_transaction(producer_id, False)``. The group checks are Kafka's for
        transactional commits (generation -1 and no member: accepted in any state)."""
        if not group_id:
            return {(item.topic, item.partition): ErrorCode.INVALID_GROUP_ID for item in offsets}
        error, _ = self._validate_commit(group_id, generation_id, member_id, group_instance_id, api_version,
                                         transactional=True)
        if error is not ErrorCode.NONE:
            return {(item.topic, item.partition): error for item in offsets}
        accepted, errors = self._check_partitions(offsets, self.timers.now_ms())
        records = [(PendingTxnOffsetKey(producer_id, group_id, topic, partition).encode(),
                    encode_pending_txn_offset_value(producer_epoch, value))
                   for (topic, partition), value in accepted.items()]
        if not self.write(group_id, records):
            return _not_written(errors, accepted)
        self.offsets.stage(group_id, producer_id, producer_epoch, accepted)
        return errors

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The transaction of ``producer_id`` ended: make its staged offsets visible, or drop them."""
        for group_id, records in self.offsets.complete(producer_id, commit).items():
            if commit and group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, self.timers.now_ms())
            self.write(group_id, records)

    def has_pending_transactional_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        return self.offsets.has_pending(group_id, topic, partition)


def _not_written(errors: dict[tuple[str, int], ErrorCode],
                 accepted: Mapping[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], ErrorCode]:
    """The commit's answer when its records could not be written: NOT_COORDINATOR for the accepted
    partitions (Kafka's answer to a storage failure of the offsets log: the client finds the
    coordinator again and retries)."""
    return {key: ErrorCode.NOT_COORDINATOR if key in accepted else error for key, error in errors.items()}
