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

from kafkalite.protocol.errors import ErrorCode

__all__ = ["CachedPartition", "FetchSession", "FetchSessionCache", "SessionError", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

PartitionKey = tuple[object, int]  # (topic name or topic id, partition index)


class SessionError(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


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
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
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
