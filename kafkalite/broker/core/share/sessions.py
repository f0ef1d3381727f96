"""Share sessions: which partitions a share consumer fetches from this broker, and its epoch.

A share session is keyed by (group id, member id). ShareFetch with epoch 0 opens one (replacing the
member's old session, whose acquired records the caller releases) with the request's partitions;
every later request carries the next epoch (1, 2, ... wrapping to 1 after int32 max), adds the
partitions it names and drops its forgotten ones. Epoch -1 closes the session after its
acknowledgements. An unknown session is SHARE_SESSION_NOT_FOUND, a wrong epoch
INVALID_SHARE_SESSION_EPOCH (the session stays: the client opens a new one with epoch 0), and a new
session beyond the cache's size SHARE_SESSION_LIMIT_REACHED. A session ends when its member leaves
the group or is fenced, or when it has been idle longer than its group's session timeout (the
member is gone: a share consumer fetches far more often than that).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache", "TopicIdPartition"]

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
_INT32_MAX: Final = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set
    last_used_ms: int = 0

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1


class ShareSessionCache:
    """Every share session of this broker. Touch only from the event loop."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, partitions: list[TopicIdPartition]) -> ShareSession:
        """A new session for the member (the old one, if any, is dropped: the caller released it)."""
        key = (group_id, member_id)
        if key not in self._sessions and len(self._sessions) >= self.max_sessions:
            raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                             f"The broker already has {self.max_sessions} share sessions.")
        session = ShareSession(group_id, member_id, partitions=dict.fromkeys(partitions))
        self._sessions[key] = session
        return session

    def continue_session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session, if ``epoch`` is the one it expects (or -1, which closes it)."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                             f"Share session for member {member_id} of group {group_id} not found.")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"Share session epoch {epoch} is not the expected {session.epoch}.")
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [session for (group, _), session in self._sessions.items() if group == group_id]

    def __iter__(self) -> Iterator[ShareSession]:
        return iter(list(self._sessions.values()))
