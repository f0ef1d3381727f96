"""The share-partition manager: the handlers' entry point for ShareFetch, ShareAcknowledge and the share
offsets, and the group coordinator's for what membership changes mean to delivery.

See the ``kafkalite.broker.core.share`` package docstring for the theory of operation.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kafkalite.broker.core.coordinator_log import CoordinatorLog
from kafkalite.broker.core.group.timers import LoopTimers, Timers
from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.share.config import ShareGroupConfig, ShareSettings
from kafkalite.broker.core.share.partition import AcknowledgementBatch, SharePartition
from kafkalite.broker.core.share.records import ShareStateKey, ShareStateValue
from kafkalite.broker.core.share.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    ShareSessionCache,
    TopicIdPartition,
)
from kafkalite.broker.core.topics import TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "PartitionAcknowledgements",
    "PartitionResult",
    "ShareAcknowledge",
    "ShareFetch",
    "ShareFetchResult",
    "SharePartitionManager",
    "ShareOffset",
]

log = logging.getLogger("kafkalite.share")

_CLEANUP_INTERVAL_MS: Final = 60_000
_NO_RECORDS: Final[list[memoryview]] = []


@dataclass(frozen=True, slots=True)
class PartitionAcknowledgements:
    """One partition named by a ShareFetch or ShareAcknowledge, with its acknowledgements (maybe none)."""

    topic_id: uuid.UUID
    partition: int
    batches: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareFetch:
    """What a ShareFetch asks, as the rules need it."""

    group_id: str
    member_id: str
    session_epoch: int
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    record_limit: bool = False  # ShareAcquireMode 1 (v2+)
    renew: bool = False  # IsRenewAck (v2+): only renewals, nothing fetched
    partitions: tuple[PartitionAcknowledgements, ...] = ()
    forgotten: tuple[TopicIdPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareAcknowledge:
    group_id: str
    member_id: str
    session_epoch: int
    renew: bool = False
    partitions: tuple[PartitionAcknowledgements, ...] = ()


@dataclass(slots=True)
class PartitionResult:
    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    acknowledge_error: ErrorCode = ErrorCode.NONE
    acknowledge_message: str | None = None
    records: list[memoryview] = field(default_factory=list)
    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count)


@dataclass(slots=True)
class ShareFetchResult:
    error: ErrorCode
    error_message: str | None
    lock_timeout_ms: int
    partitions: list[PartitionResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareOffset:
    """One partition of a DescribeShareGroupOffsets answer."""

    partition: int
    start_offset: int = -1
    lag: int = -1
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class _Waiters:
    """Futures of long-polling share fetches of one group, woken when records become available."""

    futures: set[asyncio.Future[None]] = field(default_factory=set)

    def wake(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(None)


class SharePartitionManager:
    """Every share partition of the broker, the share sessions, and ``__share_group_state``.

    ``group_configs`` gives a group's own configs (IncrementalAlterConfigs on GROUP resources);
    ``timers`` is the clock and the lock timers (a manual clock in tests).
    """

    def __init__(self, topics: TopicManager, log: CoordinatorLog, settings: ShareSettings,
                 group_configs: Callable[[str], Mapping[str, str]], timers: Timers | None = None) -> None:
        self.topics = topics
        self.log = log
        self.settings = settings
        self._group_configs = group_configs
        self.timers: Timers = timers if timers is not None else LoopTimers()
        self.sessions = ShareSessionCache(settings.max_share_sessions)
        self._partitions: dict[str, dict[TopicIdPartition, SharePartition]] = {}  # by group
        self._waiters: dict[str, _Waiters] = {}
        self._last_cleanup_ms = 0

    # lifecycle -------------------------------------------------------------------------------
    def open(self) -> None:
        """Rebuild every share partition from ``__share_group_state``; forget those of deleted topics."""
        states: dict[ShareStateKey, ShareStateValue] = {}
        count = 0
        for _, record in self.log.replay_all():
            count += 1
            try:
                key = None if record.key is None else ShareStateKey.decode(record.key)
                if key is None:
                    continue
                if record.value is None:
                    states.pop(key, None)
                else:
                    states[key] = ShareStateValue.decode(record.value)
            except Exception as exc:  # a damaged record must not stop the broker from starting
                log.warning("skipping an unreadable %s record at offset %d: %s", self.log.topic_name, record.offset,
                            exc)
        for key, value in states.items():
            partition = self._log_partition(key.topic_id, key.partition)
            if partition is None:
                self._write(key, None)
                continue
            self._partitions.setdefault(key.group_id, {})[(key.topic_id, key.partition)] = SharePartition(
                key.group_id, key.topic_id, partition, value.start_offset, value.state_epoch, value.batches)
        if count:
            log.info("loaded %d share partitions from %d %s records", len(states), count, self.log.topic_name)
        self._last_cleanup_ms = self.timers.now_ms()

    def close(self) -> None:
        self.timers.cancel_all()
        for waiters in self._waiters.values():
            waiters.wake()

    def periodic(self, now_ms: int) -> None:
        """Deferred timers; share sessions idle longer than their group's session timeout are evicted;
        now and then, the state of partitions whose topic was deleted is forgotten."""
        self.timers.poll()
        now = self.timers.now_ms()
        for session in self.sessions:
            if now - session.last_used_ms > self.group_config(session.group_id).session_timeout_ms:
                log.info("share session of member %s of group %s evicted: idle", session.member_id,
                         session.group_id)
                self._close_session(session)
        if now_ms - self._last_cleanup_ms < _CLEANUP_INTERVAL_MS:
            return
        self._last_cleanup_ms = now_ms
        for group_id, partitions in list(self._partitions.items()):
            for key in list(partitions):
                if self._log_partition(*key) is None:
                    self._drop(group_id, key)

    # configuration ---------------------------------------------------------------------------
    def group_config(self, group_id: str) -> ShareGroupConfig:
        """The group's effective share settings."""
        return ShareGroupConfig.resolve(self.settings, self._group_configs(group_id))

    # the group coordinator's hooks -----------------------------------------------------------
    def initialize(self, group_id: str, partitions: Iterable[TopicIdPartition]) -> None:
        """Give the group state for these assigned partitions where it has none (``share.auto.offset.reset``)."""
        config: ShareGroupConfig | None = None
        for topic_id, index in partitions:
            if (topic_id, index) in self._partitions.get(group_id, {}):
                continue
            if self._log_partition(topic_id, index) is not None:
                config = config or self.group_config(group_id)
                self._share_partition(group_id, topic_id, index, config)

    def member_fenced(self, group_id: str, member_id: str) -> None:
        """A member was fenced (it missed its session timeout): end its share session, release its records."""
        self.sessions.close(group_id, member_id)
        self._release_member(group_id, member_id, self._partitions.get(group_id, {}).keys())

    def group_deleted(self, group_id: str) -> None:
        """The group is gone: forget its share partitions (tombstones) and sessions."""
        for session in self.sessions.of_group(group_id):
            self.sessions.close(group_id, session.member_id)
        for key in list(self._partitions.get(group_id, {})):
            self._drop(group_id, key)
        self._partitions.pop(group_id, None)

    def group_timeouts(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of the group's members, in ms."""
        config = self.group_config(group_id)
        return config.session_timeout_ms, config.heartbeat_interval_ms

    # ShareFetch ------------------------------------------------------------------------------
    def fetch(self, request: ShareFetch) -> ShareFetchResult | Coroutine[None, None, ShareFetchResult]:
        """Acknowledge, update the share session, acquire records (waiting up to ``max_wait_ms`` for some)."""
        config = self.group_config(request.group_id)
        try:
            session = self._fetch_session(request)
            session.last_used_ms = self.timers.now_ms()
        except KafkaError as refused:
            log.debug("share fetch of %s/%s at epoch %d refused: %s", request.group_id, request.member_id,
                      request.session_epoch, refused)
            return ShareFetchResult(refused.error_code, refused.message, config.record_lock_duration_ms)
        results: dict[TopicIdPartition, PartitionResult] = {}
        for item in request.partitions:
            if item.batches:
                results[(item.topic_id, item.partition)] = self._acknowledge_partition(
                    request.group_id, request.member_id, item, config, request.renew)
        for key in request.forgotten:
            session.partitions.pop(key, None)
            self._release_member(request.group_id, request.member_id, [key])
        if request.session_epoch == INITIAL_EPOCH:
            for key in session.partitions:
                results.setdefault(key, PartitionResult(*key))
        if request.session_epoch == FINAL_EPOCH:
            self._close_session(session)
            return self._result(config, results)
        if request.renew or request.max_records <= 0:
            return self._result(config, results)
        acquired = self._acquire(session, config, request, results)
        errors = any(result.error for result in results.values())
        if acquired or errors or request.max_wait_ms <= 0 or not session.partitions:
            return self._result(config, results)
        return self._wait_then_acquire(session, config, request, results)

    def _fetch_session(self, request: ShareFetch) -> ShareSession:
        if not request.group_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group id must not be empty.")
        if not request.member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Member id must not be empty.")
        named = list(dict.fromkeys((item.topic_id, item.partition) for item in request.partitions))
        if request.session_epoch == INITIAL_EPOCH:
            if any(item.batches for item in request.partitions):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Acknowledgements are not allowed when a share "
                                                            "session is opened (epoch 0).")
            old = self.sessions.get(request.group_id, request.member_id)
            if old is not None:
                self._close_session(old)
            return self.sessions.open(request.group_id, request.member_id, named)
        if request.session_epoch < FINAL_EPOCH:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"Share session epoch {request.session_epoch} is not valid.")
        session = self.sessions.continue_session(request.group_id, request.member_id, request.session_epoch)
        if request.session_epoch == FINAL_EPOCH:
            if request.forgotten:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "A final share fetch (epoch -1) must not forget "
                                                            "partitions.")
            return session
        session.next_epoch()
        for key in named:
            session.partitions.setdefault(key, None)
        return session

    def _close_session(self, session: ShareSession) -> None:
        self.sessions.close(session.group_id, session.member_id)
        self._release_member(session.group_id, session.member_id, list(session.partitions))

    def _acquire(self, session: ShareSession, config: ShareGroupConfig, request: ShareFetch,
                 results: dict[TopicIdPartition, PartitionResult]) -> int:
        """Acquire for every partition of the session, in turn from a rotating start; records acquired."""
        keys = list(session.partitions)
        if not keys:
            return 0
        start = session.epoch % len(keys)
        records_left, bytes_left = request.max_records, max(request.max_bytes, 0)
        total_records = total_size = 0
        deadline = self.timers.now_ms() + config.record_lock_duration_ms
        for key in keys[start:] + keys[:start]:
            share_partition = self._share_partition_or_error(request.group_id, key, config, results)
            if share_partition is None or records_left <= 0:
                continue
            acquired = share_partition.acquire(
                request.member_id, max_records=records_left, max_bytes=bytes_left,
                max_in_flight=config.max_in_flight_records, read_committed=config.read_committed,
                lock_deadline_ms=deadline, min_one_batch=total_size == 0, record_limit=request.record_limit)
            if not acquired.records:
                continue
            self._arm_lock(share_partition, acquired.lock_id, config.record_lock_duration_ms)
            result = results.setdefault(key, PartitionResult(*key))
            result.records, result.acquired = acquired.batches, acquired.ranges
            records_left -= acquired.records
            bytes_left = max(0, bytes_left - acquired.size)
            total_records += acquired.records
            total_size += acquired.size
        return total_records

    async def _wait_then_acquire(self, session: ShareSession, config: ShareGroupConfig, request: ShareFetch,
                                 results: dict[TopicIdPartition, PartitionResult]) -> ShareFetchResult:
        """Park until records arrive or are released, or ``max_wait_ms`` passes; then acquire again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        waiters = self._waiters.setdefault(request.group_id, _Waiters())
        while True:
            wake: asyncio.Future[None] = loop.create_future()

            def on_append(_partition: Partition | None, _size: int, wake: asyncio.Future[None] = wake) -> None:
                if not wake.done():
                    wake.set_result(None)

            partitions = {id(p): p for key in session.partitions if (p := self._log_partition(*key)) is not None}
            for partition in partitions.values():
                partition.add_listener(on_append)
            waiters.futures.add(wake)
            timer = loop.call_later(max(0.0, deadline - loop.time()), on_append, None, 0)
            try:
                # Records may have come between the last look and the listeners: look once more first.
                if self._acquire(session, config, request, results) or loop.time() >= deadline:
                    break
                await wake
            finally:
                timer.cancel()
                waiters.futures.discard(wake)
                for partition in partitions.values():
                    partition.remove_listener(on_append)
            if self.sessions.get(session.group_id, session.member_id) is not session:
                break  # the session ended meanwhile
        return self._result(config, results)

    def _result(self, config: ShareGroupConfig, results: dict[TopicIdPartition, PartitionResult]
                ) -> ShareFetchResult:
        ordered = sorted(results.values(), key=lambda result: (str(result.topic_id), result.partition))
        return ShareFetchResult(ErrorCode.NONE, None, config.record_lock_duration_ms, ordered)

    # ShareAcknowledge ------------------------------------------------------------------------
    def acknowledge(self, request: ShareAcknowledge) -> ShareFetchResult:
        """Apply acknowledgements in the member's share session; epoch -1 then closes it."""
        config = self.group_config(request.group_id)
        try:
            if not request.group_id or not request.member_id:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Group id and member id must not be empty.")
            if request.session_epoch == INITIAL_EPOCH or request.session_epoch < FINAL_EPOCH:
                raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 f"Share session epoch {request.session_epoch} is not valid for ShareAcknowledge.")
            session = self.sessions.continue_session(request.group_id, request.member_id, request.session_epoch)
            session.last_used_ms = self.timers.now_ms()
        except KafkaError as refused:
            log.debug("share acknowledge of %s/%s at epoch %d refused: %s", request.group_id, request.member_id,
                      request.session_epoch, refused)
            return ShareFetchResult(refused.error_code, refused.message, config.record_lock_duration_ms)
        results = {(item.topic_id, item.partition): self._acknowledge_partition(
            request.group_id, request.member_id, item, config, request.renew) for item in request.partitions}
        if request.session_epoch == FINAL_EPOCH:
            self._close_session(session)
        else:
            session.next_epoch()
        return self._result(config, results)

    def _acknowledge_partition(self, group_id: str, member_id: str, item: PartitionAcknowledgements,
                               config: ShareGroupConfig, renew: bool) -> PartitionResult:
        key = (item.topic_id, item.partition)
        result = PartitionResult(*key)
        share_partition = self._share_partition_or_error(group_id, key, config, {key: result})
        if share_partition is None:
            result.acknowledge_error, result.acknowledge_message = result.error, result.error_message
            return result
        try:
            changed, renewed = share_partition.acknowledge(
                member_id, item.batches, delivery_count_limit=config.delivery_count_limit, renew_allowed=renew,
                renew_deadline_ms=self.timers.now_ms() + config.record_lock_duration_ms)
        except KafkaError as refused:
            log.debug("%s: acknowledgements of %s refused: %s", share_partition, member_id, refused)
            result.acknowledge_error, result.acknowledge_message = refused.error_code, refused.message
            return result
        if renewed:
            self._arm_lock(share_partition, renewed, config.record_lock_duration_ms)
        if changed:
            self._persist(share_partition)
            if share_partition.has_available():
                self._wake(group_id)
        return result

    # locks and releases ----------------------------------------------------------------------
    def _arm_lock(self, share_partition: SharePartition, lock_id: int, duration_ms: int) -> None:
        group_id, topic_id, index = share_partition.group_id, share_partition.topic_id, share_partition.partition.index

        def expire() -> None:
            current = self._partitions.get(group_id, {}).get((topic_id, index))
            if current is not share_partition:
                return
            limit = self.group_config(group_id).delivery_count_limit
            if share_partition.release_lock(lock_id, limit):
                log.debug("%s: acquisition lock %d timed out", share_partition, lock_id)
                self._persist(share_partition)
                self._wake(group_id)

        self.timers.schedule(("share-lock", group_id, topic_id, index, lock_id), duration_ms, expire)

    def _release_member(self, group_id: str, member_id: str, keys: Iterable[TopicIdPartition]) -> None:
        partitions = self._partitions.get(group_id, {})
        limit: int | None = None
        released = False
        for key in list(keys):
            share_partition = partitions.get(key)
            if share_partition is None:
                continue
            if limit is None:
                limit = self.group_config(group_id).delivery_count_limit
            locks = share_partition.locks_of(member_id)
            if share_partition.release_member(member_id, limit):
                self._persist(share_partition)
                released = True
            for lock in locks:
                self.timers.cancel(("share-lock", group_id, share_partition.topic_id, key[1], lock))
        if released:
            self._wake(group_id)

    def _wake(self, group_id: str) -> None:
        waiters = self._waiters.get(group_id)
        if waiters is not None:
            waiters.wake()

    # share partitions ------------------------------------------------------------------------
    def _log_partition(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        topic = self.topics.by_id(topic_id)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def _share_partition_or_error(self, group_id: str, key: TopicIdPartition, config: ShareGroupConfig,
                                  results: dict[TopicIdPartition, PartitionResult]) -> SharePartition | None:
        topic_id, index = key
        topic = self.topics.by_id(topic_id)
        error = None
        if topic is None:
            error = (ErrorCode.UNKNOWN_TOPIC_ID, f"Topic id {topic_id} is unknown.")
        elif not 0 <= index < len(topic.partitions):
            error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {index} of topic {topic.name} is unknown.")
        if error is not None:
            result = results.setdefault(key, PartitionResult(*key))
            result.error, result.error_message = error
            return None
        return self._share_partition(group_id, topic_id, index, config)

    def _share_partition(self, group_id: str, topic_id: uuid.UUID, index: int,
                         config: ShareGroupConfig) -> SharePartition:
        """The group's share partition, created at ``share.auto.offset.reset`` when it has none."""
        partitions = self._partitions.setdefault(group_id, {})
        existing = partitions.get((topic_id, index))
        if existing is not None:
            return existing
        partition = self._log_partition(topic_id, index)
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {index} of topic {topic_id} is unknown.")
        share_partition = SharePartition(group_id, topic_id, partition, self._initial_offset(partition, config))
        partitions[(topic_id, index)] = share_partition
        self._persist(share_partition)
        log.info("%s starts at offset %d (share.auto.offset.reset=%s)", share_partition,
                 share_partition.start_offset, config.auto_offset_reset)
        return share_partition

    def _initial_offset(self, partition: Partition, config: ShareGroupConfig) -> int:
        if config.auto_offset_reset == "earliest":
            return partition.log_start_offset
        duration = config.reset_duration_ms()
        if duration is not None:
            found = partition.log.offset_for_timestamp(self.timers.now_ms() - duration)  # wall-clock time
            return partition.high_watermark if found is None else found[0]
        return partition.high_watermark

    def _drop(self, group_id: str, key: TopicIdPartition) -> None:
        share_partition = self._partitions.get(group_id, {}).pop(key, None)
        if share_partition is None:
            return
        for lock, _ in share_partition.live_locks():
            self.timers.cancel(("share-lock", group_id, key[0], key[1], lock))
        self._write(ShareStateKey(group_id, key[0], key[1]), None)

    # persistence -----------------------------------------------------------------------------
    def _persist(self, share_partition: SharePartition) -> None:
        key = ShareStateKey(share_partition.group_id, share_partition.topic_id, share_partition.partition.index)
        self._write(key, ShareStateValue(share_partition.state_epoch, share_partition.start_offset,
                                         self.timers.now_ms(), tuple(share_partition.snapshot())))

    def _write(self, key: ShareStateKey, value: ShareStateValue | None) -> None:
        self.log.append(self.log.partition_for(key.coordinator_key()),
                        [(key.encode(), None if value is None else value.encode())], self.timers.now_ms())

    # the share offsets (admin) ---------------------------------------------------------------
    def has_state(self, group_id: str) -> bool:
        return bool(self._partitions.get(group_id))

    def describe_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
                         ) -> list[tuple[str, uuid.UUID, list[ShareOffset]]]:
        """Each asked topic (every topic with state when None) with its partitions' start offsets and lags."""
        partitions = self._partitions.get(group_id, {})
        if topics is None:
            wanted: dict[str, list[int]] = {}
            for (_, index), held in sorted(partitions.items(), key=lambda item: (item[1].partition.topic_name,
                                                                                 item[0][1])):
                wanted.setdefault(held.partition.topic_name, []).append(index)
            topics = list(wanted.items())
        answer = []
        for name, indexes in topics:
            topic = self.topics.get(name)
            if topic is None:
                answer.append((name, uuid.UUID(int=0), [ShareOffset(index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                                                        for index in indexes]))
                continue
            offsets = []
            for index in indexes:
                if not 0 <= index < len(topic.partitions):
                    offsets.append(ShareOffset(index, error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                state = partitions.get((topic.topic_id, index))
                if state is None:
                    offsets.append(ShareOffset(index))
                    continue
                state.trim_to_log_start()
                offsets.append(ShareOffset(index, state.start_offset, state.lag()))
            answer.append((name, topic.topic_id, offsets))
        return answer

    def alter_offsets(self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                      ) -> list[tuple[str, uuid.UUID, list[tuple[int, ErrorCode]]]]:
        """Set start offsets (the group is empty): each partition starts over there, nothing in flight."""
        config = self.group_config(group_id)
        answer = []
        for name, partitions in topics:
            topic = self.topics.get(name)
            if topic is None:
                answer.append((name, uuid.UUID(int=0), [(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                                                        for index, _ in partitions]))
                continue
            errors = []
            for index, start_offset in partitions:
                if not 0 <= index < len(topic.partitions):
                    errors.append((index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if start_offset < 0:
                    errors.append((index, ErrorCode.INVALID_REQUEST))
                    continue
                share_partition = self._share_partition(group_id, topic.topic_id, index, config)
                share_partition.reset(start_offset)
                self._persist(share_partition)
                errors.append((index, ErrorCode.NONE))
            answer.append((name, topic.topic_id, errors))
        return answer

    def delete_offsets(self, group_id: str, topic_names: Sequence[str]) -> list[tuple[str, uuid.UUID, ErrorCode]]:
        """Forget the group's state for whole topics (the group is empty)."""
        answer = []
        for name in topic_names:
            topic = self.topics.get(name)
            if topic is None:
                answer.append((name, uuid.UUID(int=0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            for key in [key for key in self._partitions.get(group_id, {}) if key[0] == topic.topic_id]:
                self._drop(group_id, key)
            answer.append((name, topic.topic_id, ErrorCode.NONE))
        return answer

    def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int) -> SharePartition | None:
        """The group's state of a partition, if it has one (for tests and tools)."""
        return self._partitions.get(group_id, {}).get((topic_id, index))
