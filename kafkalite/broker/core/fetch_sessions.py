"""Incremental fetch sessions (KIP-227).

Theory of operation
-------------------
A consumer that fetches many partitions would resend all of them on every Fetch. With a
session, the broker remembers the partitions and their fetch positions, and both sides send
only what changed.

* ``session_epoch == 0`` (with any session id): a *full* fetch that opens a new session; every
  requested partition is cached and every one appears in the response, which carries the new
  session id (0 when the cache is full, meaning "no session").
* ``session_epoch == -1``: the client closes its session (if any) and fetches sessionless.
* ``session_epoch > 0``: an *incremental* fetch. The session must exist
  (FETCH_SESSION_ID_NOT_FOUND) and expect exactly this epoch (INVALID_FETCH_SESSION_EPOCH).
  Partitions in the request are added or updated, ``forgotten_topics_data`` are removed, and the
  epoch advances by one. The response lists only partitions with something new: records, an
  error, or a changed high watermark, last stable offset or log start offset.
* Requests below v7 never use sessions.

Sessions are evicted least-recently-used when the cache holds ``max_sessions`` and dropped
after ``idle_ms`` without use. Partitions are keyed by (topic name, partition) below v13 and by
(topic id, partition) from v13 on; a session remembers both when it knows them.
"""

from __future__ import annotations

import itertools
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import FetchRequest

__all__ = ["CachedPartition", "FetchPlan", "FetchSession", "FetchSessionCache", "WantedPartition", "INITIAL_EPOCH",
           "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

PartitionKey = tuple[object, int]  # (topic name or topic id, partition index)


@dataclass(slots=True)
class CachedPartition:
    """What the session remembers about one partition: the position and what was last sent."""

    topic: object  # name (str) or topic id (UUID), matching the session's key kind
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    # Values last sent in a response; -2 means "never sent", so the first response includes it.
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2

    def must_send(self, high_watermark: int, last_stable_offset: int, log_start_offset: int,
                  has_records: bool, error: bool) -> bool:
        """Whether an incremental response includes this partition; remembers what it sends."""
        changed = (
            has_records
            or error
            or high_watermark != self.high_watermark
            or last_stable_offset != self.last_stable_offset
            or log_start_offset != self.log_start_offset
        )
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        return changed


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0


class FetchSessionCache:
    """Every open fetch session of the broker."""

    def __init__(self, max_sessions: int = 1000, idle_ms: int = 120_000) -> None:
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def open(self, now_ms: int) -> FetchSession | None:
        """A new session, or None when the cache is full of sessions still in use."""
        self.expire(now_ms)
        if len(self._sessions) >= self.max_sessions:
            oldest_id, _ = next(iter(self._sessions.items()))
            del self._sessions[oldest_id]
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, epoch=1, last_used_ms=now_ms)
        self._sessions[session_id] = session
        return session

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def resume(self, session_id: int, epoch: int, now_ms: int) -> FetchSession:
        """The session for an incremental fetch, checked and advanced to the next epoch."""
        session = self._sessions.get(session_id)
        if session is None:
            raise KafkaError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise KafkaError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return session

    def expire(self, now_ms: int) -> None:
        for session_id, session in list(self._sessions.items()):
            if now_ms - session.last_used_ms > self.idle_ms:
                del self._sessions[session_id]

    def forget_topic(self, name: str, topic_id: uuid.UUID) -> None:
        """Drop a deleted topic's partitions from every session."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] in (name, topic_id)]:
                del session.partitions[key]


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch reads: its partitions in response order, and the session to answer with.

    ``error`` is a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) that
    answers the whole request; ``session_id`` is 0 when the fetch has no session.
    """

    partitions: list[WantedPartition]
    session_id: int = 0
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class WantedPartition:
    """One partition a fetch asks for, resolved against the topics."""

    topic: object  # the name (v4-12) or id (v13+) the client used
    name: str | None
    topic_id: uuid.UUID
    partition_index: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    partition: Partition | None
    error: ErrorCode
    cached: CachedPartition | None = None


def plan_fetch(sessions: FetchSessionCache, topics: TopicManager, request: FetchRequest, version: int,
               now_ms: int) -> FetchPlan:
    """Resolve a Fetch against the topics and its session: open, resume or close the session as its
    id and epoch ask, then list the partitions to read (an incremental fetch reads every partition of
    the session, at the positions it remembers)."""
    by_id = version >= 13
    session: FetchSession | None = None
    incremental = False
    response_session_id = 0
    if version >= 7:
        session_id, epoch = request.session_id, request.session_epoch
        try:
            if epoch == INITIAL_EPOCH:
                if session_id:
                    sessions.close(session_id)
                session = sessions.open(now_ms)
            elif epoch == FINAL_EPOCH:
                if session_id:
                    sessions.close(session_id)
            else:
                session = sessions.resume(session_id, epoch, now_ms)
                incremental = True
        except KafkaError as exc:
            return FetchPlan([], error=exc.error_code)
        if session is not None:
            response_session_id = session.session_id
    return FetchPlan(_resolve(topics, request, by_id, session, incremental), response_session_id, incremental)


def _resolve(topics: TopicManager, request: FetchRequest, by_id: bool, session: FetchSession | None,
             incremental: bool) -> list[WantedPartition]:
    """The partitions this fetch reads, in order: the request's, or the session's."""
    requested: list[WantedPartition] = []
    for fetch_topic in request.topics:
        if by_id:
            topic = topics.by_id(fetch_topic.topic_id)
            key: object = fetch_topic.topic_id
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = topics.get(fetch_topic.topic)
            key = fetch_topic.topic
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for fetch_partition in fetch_topic.partitions:
            partition = None
            error = ErrorCode.NONE
            if topic is None:
                error = missing
            elif 0 <= fetch_partition.partition < len(topic.partitions):
                partition = topic.partitions[fetch_partition.partition]
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            requested.append(WantedPartition(
                topic=key,
                name=topic.name if topic is not None else (None if by_id else fetch_topic.topic),
                topic_id=topic.topic_id if topic is not None else fetch_topic.topic_id,
                partition_index=fetch_partition.partition,
                fetch_offset=fetch_partition.fetch_offset,
                partition_max_bytes=fetch_partition.partition_max_bytes,
                current_leader_epoch=fetch_partition.current_leader_epoch,
                partition=partition,
                error=error,
            ))
    if session is None:
        return requested
    if incremental:
        for forgotten in request.forgotten_topics_data:
            forgotten_key = forgotten.topic_id if by_id else forgotten.topic
            for index in forgotten.partitions:
                session.partitions.pop((forgotten_key, index), None)
    for item in requested:
        cached = session.partitions.get((item.topic, item.partition_index))
        if cached is None:
            cached = CachedPartition(item.topic, item.partition_index, item.fetch_offset, item.partition_max_bytes,
                                     item.current_leader_epoch)
            session.partitions[(item.topic, item.partition_index)] = cached
        else:
            cached.fetch_offset = item.fetch_offset
            cached.partition_max_bytes = item.partition_max_bytes
            cached.current_leader_epoch = item.current_leader_epoch
    if not incremental:
        for item in requested:
            item.cached = session.partitions[(item.topic, item.partition_index)]
        return requested
    # An incremental fetch reads every partition of the session, at the positions it remembers.
    wanted: list[WantedPartition] = []
    for (key, index), cached in session.partitions.items():
        topic = topics.by_id(key) if isinstance(key, uuid.UUID) else topics.get(str(key))
        partition = topic.partitions[index] if topic is not None and index < len(topic.partitions) else None
        error = ErrorCode.NONE
        if partition is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if by_id and topic is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        wanted.append(WantedPartition(
            topic=key,
            name=topic.name if topic is not None else (None if by_id else str(key)),
            topic_id=topic.topic_id if topic is not None else (key if isinstance(key, uuid.UUID) else uuid.UUID(int=0)),
            partition_index=index,
            fetch_offset=cached.fetch_offset,
            partition_max_bytes=cached.partition_max_bytes,
            current_leader_epoch=cached.current_leader_epoch,
            partition=partition,
            error=error,
            cached=cached,
        ))
    return wanted
