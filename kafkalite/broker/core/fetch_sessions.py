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

What an incremental fetch visits
--------------------------------
An idle consumer's poll must cost the same with 10 partitions in its session as with 10,000, so an
incremental fetch does not look at every partition of its session. A partition is left out of an
incremental answer exactly when it has no records to return at the remembered position, no error,
and the high watermark, last stable offset and log start offset it last sent still hold. Each
session keeps ``to_visit``: the partitions for which that may no longer be true, and a fetch reads
only those plus the ones its request names, in the session's order (so the answer, the byte limits
and KIP-74's "first batch whole" come out as they would if every partition were read).

* Every partition of a session that resolves to a ``Partition`` carries a watcher on it (the
  ``CachedPartition`` itself). An append, the partition's deletion, or a log start offset or last
  stable offset moving without an append (retention, DeleteRecords, producer expiry) puts it in
  ``to_visit``.
* After an answer, a visited partition leaves ``to_visit`` when it was *settled*: no error and its
  position at or past what a fetch of that isolation level may read (the high watermark, or the
  last stable offset for read_committed). One with an error, or with records it could not return
  (the response's byte limit), stays, as every new or repositioned partition does.
* A request whose isolation level differs from the last one visits every partition once
  (what "settled" means changed).

A fetch with a session that must wait for ``min_bytes`` parks one waiter on the session instead of a
listener on each partition; the watchers wake it on an append to any partition of the session, and
the read that follows visits what changed meanwhile. Dropping a session (closed, evicted, expired)
or a partition (forgotten) takes its watchers off the partitions.
"""

from __future__ import annotations

import itertools
import operator
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import TopicManager
from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:  # (a start, which builds the session cache, need not load the Fetch request's module)
    from kafkalite.protocol.messages import FetchRequest

__all__ = ["CachedPartition", "FetchPlan", "FetchSession", "FetchSessionCache", "WantedPartition", "INITIAL_EPOCH",
           "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

PartitionKey = tuple[object, int]  # (topic name or topic id, partition index)
_NONE, _UNKNOWN_TOPIC_ID = ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_ID
_UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
_NO_PARTITIONS: list[Partition] = []  # (never added to) the partitions of a topic not found
_ORDER = operator.attrgetter("order")
# A fetch parked on a session: (the session's partition, the Partition, appended bytes or 0 or OFFSETS_MOVED).
SessionWaiter = Callable[["CachedPartition", Partition, int], None]


class CachedPartition:
    """What the session remembers about one partition: the position and what was last sent.

    It is also the session's watcher on the partition (``watched``), called by the partition as
    ``cached(partition, size)``."""

    __slots__ = ("topic", "partition", "fetch_offset", "partition_max_bytes", "current_leader_epoch",
                 "high_watermark", "last_stable_offset", "log_start_offset", "order", "session", "watched")

    def __init__(self, topic: object, partition: int, fetch_offset: int, partition_max_bytes: int,
                 current_leader_epoch: int = -1, high_watermark: int = -2, last_stable_offset: int = -2,
                 log_start_offset: int = -2, order: int = 0, session: FetchSession | None = None,
                 watched: Partition | None = None) -> None:
        self.topic = topic  # name (str) or topic id (UUID), matching the session's key kind
        self.partition = partition
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        # Values last sent in a response; -2 means "never sent", so the first response includes it.
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.order = order  # its place in the session (partitions added later come later)
        self.session = session
        self.watched = watched  # the partition this entry watches

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

    def __call__(self, partition: Partition, size: int) -> None:
        """The watched partition changed (an append of ``size`` bytes, 0: deleted, or OFFSETS_MOVED)."""
        session = self.session
        if session is not None:
            session.to_visit.add(self)
            if session.waiters:
                for waiter in list(session.waiters):
                    waiter(self, partition, size)

    def watch(self, partition: Partition | None) -> None:
        """Watch ``partition`` (what this entry resolves to now) instead of what it watched before."""
        if partition is self.watched:
            return
        if self.watched is not None:
            self.watched.remove_watcher(self)
        self.watched = partition
        if partition is not None:
            partition.add_watcher(self)


class FetchSession:
    """One incremental fetch session: its id, the epoch its next request must carry, and its partitions."""

    __slots__ = ("session_id", "epoch", "partitions", "last_used_ms", "to_visit", "read_committed", "waiters",
                 "_orders")

    def __init__(self, session_id: int, epoch: int, last_used_ms: int = 0) -> None:
        self.session_id = session_id
        self.epoch = epoch  # the epoch the next incremental request must carry
        self.partitions: dict[PartitionKey, CachedPartition] = {}
        self.last_used_ms = last_used_ms
        # Partitions an incremental fetch must read: changed since the last answer, or with something to say.
        self.to_visit: set[CachedPartition] = set()
        self.read_committed: bool | None = None  # the isolation level of the last request
        self.waiters: list[SessionWaiter] = []
        self._orders = itertools.count()

    def put(self, key: PartitionKey, fetch_offset: int, partition_max_bytes: int,
            current_leader_epoch: int) -> CachedPartition:
        """Add a partition (at the end of the session's order) or update its position."""
        cached = self.partitions.get(key)
        if cached is None:
            cached = CachedPartition(key[0], key[1], fetch_offset, partition_max_bytes, current_leader_epoch,
                                     order=next(self._orders), session=self)
            self.partitions[key] = cached
        else:
            cached.fetch_offset = fetch_offset
            cached.partition_max_bytes = partition_max_bytes
            cached.current_leader_epoch = current_leader_epoch
        self.to_visit.add(cached)
        return cached

    def remove(self, key: PartitionKey) -> None:
        cached = self.partitions.pop(key, None)
        if cached is not None:
            cached.watch(None)
            cached.session = None
            self.to_visit.discard(cached)

    def close(self) -> None:
        """The session is dropped: take its watchers off the partitions."""
        for cached in self.partitions.values():
            cached.watch(None)
            cached.session = None
        self.to_visit.clear()

    def settle(self, cached: CachedPartition, settled: bool) -> None:
        """After an answer: ``settled`` partitions need no visit until they change again."""
        if cached.session is not self:
            return
        if settled:
            self.to_visit.discard(cached)
        else:
            self.to_visit.add(cached)


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
            _, oldest = self._sessions.popitem(last=False)
            oldest.close()
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, epoch=1, last_used_ms=now_ms)
        self._sessions[session_id] = session
        return session

    def close(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()

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
                session.close()


class WantedPartition:
    """One partition a fetch asks for, resolved against the topics."""

    __slots__ = ("topic", "name", "topic_id", "partition_index", "fetch_offset", "partition_max_bytes",
                 "current_leader_epoch", "partition", "error", "cached")

    def __init__(self, topic: object, name: str | None, topic_id: uuid.UUID, partition_index: int,
                 fetch_offset: int, partition_max_bytes: int, current_leader_epoch: int,
                 partition: Partition | None, error: ErrorCode, cached: CachedPartition | None = None) -> None:
        self.topic = topic  # the name (v4-12) or id (v13+) the client used
        self.name = name
        self.topic_id = topic_id
        self.partition_index = partition_index
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.partition = partition
        self.error = error
        self.cached = cached


class FetchPlan:
    """What one Fetch reads: its partitions in response order, and the session to answer with.

    ``error`` is a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) that
    answers the whole request; ``session_id`` is 0 when the fetch has no session. ``requested`` are an
    incremental fetch's listed partitions.
    """

    __slots__ = ("partitions", "session_id", "incremental", "error", "session", "topics", "by_id", "requested")

    def __init__(self, partitions: list[WantedPartition], session_id: int = 0, incremental: bool = False,
                 error: ErrorCode = ErrorCode.NONE, session: FetchSession | None = None,
                 topics: TopicManager | None = None, by_id: bool = False,
                 requested: list[CachedPartition] | None = None) -> None:
        self.partitions = partitions
        self.session_id = session_id
        self.incremental = incremental
        self.error = error
        self.session = session
        self.topics = topics
        self.by_id = by_id
        self.requested: list[CachedPartition] = [] if requested is None else requested

    def revisit(self) -> list[WantedPartition]:
        """The partitions to read again after a wait: an incremental fetch adds those of its session
        that changed meanwhile."""
        if self.incremental and self.session is not None and self.topics is not None:
            self.partitions = _visits(self.topics, self.session, self.requested, self.by_id)
        return self.partitions

    def settle(self, answered: Iterable[tuple[WantedPartition, bool]]) -> None:
        """After the answer: each read partition with whether it is settled (nothing more to read at
        its position, no error), which spares it the next incremental fetches until it changes."""
        session = self.session
        if session is None:
            return
        before = len(session.to_visit)
        for wanted, settled in answered:
            if wanted.cached is not None:
                session.settle(wanted.cached, settled)
        if before >= 64 and len(session.to_visit) < before // 4:
            # A set keeps its table when emptied, and walking it costs its old size: start a small one.
            session.to_visit = set(session.to_visit)


def plan_fetch(sessions: FetchSessionCache, topics: TopicManager, request: FetchRequest, version: int,
               now_ms: int) -> FetchPlan:
    """Resolve a Fetch against the topics and its session: open, resume or close the session as its
    id and epoch ask, then list the partitions to read (an incremental fetch reads the partitions of
    its session that changed or still have something to say, at the positions it remembers)."""
    by_id = version >= 13
    if version < 7 or (request.session_epoch == FINAL_EPOCH and not request.session_id):
        # sessionless, and no session to close: what a consumer without a session sends every poll
        return FetchPlan(_requested(topics, request, by_id), 0, False, _NONE, None, topics, by_id)
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
    requested = _requested(topics, request, by_id)
    plan = FetchPlan(requested, response_session_id, incremental, session=session, topics=topics, by_id=by_id)
    if session is None:
        return plan
    read_committed = request.isolation_level == 1
    if incremental:
        for forgotten in request.forgotten_topics_data:
            forgotten_key = forgotten.topic_id if by_id else forgotten.topic
            for index in forgotten.partitions:
                session.remove((forgotten_key, index))
    for item in requested:
        item.cached = session.put((item.topic, item.partition_index), item.fetch_offset, item.partition_max_bytes,
                                  item.current_leader_epoch)
    if session.read_committed != read_committed:  # what "settled" means changed: look at everything once
        session.to_visit.update(session.partitions.values())
        session.read_committed = read_committed
    if not incremental:
        for item in requested:
            if item.cached is not None:
                item.cached.watch(item.partition)
        return plan
    plan.requested = [item.cached for item in requested if item.cached is not None]
    plan.partitions = _visits(topics, session, plan.requested, by_id)
    return plan


def _requested(topics: TopicManager, request: FetchRequest, by_id: bool) -> list[WantedPartition]:
    """The partitions the request lists, in its order, resolved against the topics."""
    requested: list[WantedPartition] = []
    for fetch_topic in request.topics:
        if by_id:
            key: object = fetch_topic.topic_id
            topic = topics.by_id(fetch_topic.topic_id)
        else:
            key = fetch_topic.topic
            topic = topics.get(fetch_topic.topic)
        if topic is not None:
            name: str | None = topic.name
            topic_id, partitions, missing = topic.topic_id, topic.partitions, _UNKNOWN_TOPIC_OR_PARTITION
        else:
            name = None if by_id else fetch_topic.topic
            topic_id, partitions = fetch_topic.topic_id, _NO_PARTITIONS
            missing = _UNKNOWN_TOPIC_ID if by_id else _UNKNOWN_TOPIC_OR_PARTITION
        for fetch_partition in fetch_topic.partitions:
            index = fetch_partition.partition
            if 0 <= index < len(partitions):
                partition: Partition | None = partitions[index]
                error = _NONE
            else:
                partition, error = None, missing
            requested.append(WantedPartition(key, name, topic_id, index, fetch_partition.fetch_offset,
                                             fetch_partition.partition_max_bytes,
                                             fetch_partition.current_leader_epoch, partition, error))
    return requested


def _visits(topics: TopicManager, session: FetchSession, requested: list[CachedPartition],
            by_id: bool) -> list[WantedPartition]:
    """What an incremental fetch reads: the session's partitions to visit and the request's, in the
    session's order, at the positions the session remembers."""
    visiting = session.to_visit.union(requested) if requested else session.to_visit
    wanted: list[WantedPartition] = []
    for cached in sorted(visiting, key=_ORDER):
        if cached.session is not session:  # forgotten meanwhile
            continue
        key, index = cached.topic, cached.partition
        topic = topics.by_id(key) if isinstance(key, uuid.UUID) else topics.get(str(key))
        partition = topic.partitions[index] if topic is not None and 0 <= index < len(topic.partitions) else None
        cached.watch(partition)
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

