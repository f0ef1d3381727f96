"""The client side of an incremental fetch session (KIP-227), one per broker. Sans-io.

A consumer fetching many partitions from one broker would resend all of them in every Fetch. With a
session the broker remembers them, and each request carries only what changed:

* The first request is *full* (session id 0, epoch 0): every partition. The broker answers with a
  session id (0: it keeps no session, so the next request is full again).
* Later requests are *incremental* (that session id, epoch 1, 2, ...): partitions that are new or
  whose fetch offset, byte limit or leader epoch changed, and ``forgotten_topics_data`` for those
  leaving the session (no longer wanted this round: paused, unassigned, or still holding unread
  data). The answer lists only partitions with news; the others had nothing.
* After a session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) or a failed
  request, the next request is full again, at epoch 0 of the same session id, which tells the broker
  to drop the old session and open a new one.

:meth:`FetchSessionHandler.build` turns the partitions wanted now into a :class:`FetchRequestData`;
:meth:`FetchSessionHandler.handle_response` learns the broker's answer. Brokers that predate sessions
(Fetch below v7) get full sessionless requests (epoch -1).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.client.metadata import TopicPartition
from kafkalite.protocol.errors import ErrorCode

__all__ = ["FetchPosition", "FetchRequestData", "FetchSessionHandler", "INITIAL_EPOCH", "FINAL_EPOCH"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What a Fetch says about one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    topic_id: uuid.UUID = uuid.UUID(int=0)  # a topic deleted and created again is another partition


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """One request's partitions: those to send, those to forget, and the session fields."""

    to_send: dict[TopicPartition, FetchPosition]
    to_forget: list[TopicPartition]
    session_id: int
    epoch: int
    wanted: dict[TopicPartition, FetchPosition]  # everything fetched by this request (sent or remembered)

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The fetch session with one broker."""

    def __init__(self, node_id: int, *, use_sessions: bool = True) -> None:
        self.node_id = node_id
        self.use_sessions = use_sessions
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicPartition, FetchPosition] = {}

    def __repr__(self) -> str:
        return f"FetchSessionHandler(node {self.node_id}, session {self.session_id}, epoch {self.epoch})"

    def build(self, wanted: Mapping[TopicPartition, FetchPosition]) -> FetchRequestData:
        """The request that fetches exactly ``wanted`` now."""
        wanted = dict(wanted)
        if not self.use_sessions:
            return FetchRequestData(wanted, [], 0, FINAL_EPOCH, wanted)
        if self.epoch == INITIAL_EPOCH:
            return FetchRequestData(wanted, [], self.session_id, INITIAL_EPOCH, wanted)
        to_send = {partition: position for partition, position in wanted.items()
                   if self.session_partitions.get(partition) != position}
        to_forget = [partition for partition in self.session_partitions if partition not in wanted]
        return FetchRequestData(to_send, to_forget, self.session_id, self.epoch, wanted)

    def handle_response(self, request: FetchRequestData, error_code: int, session_id: int) -> bool:
        """Learn the answer to ``request``; False when its partitions' results must be ignored."""
        if error_code != ErrorCode.NONE:
            self.handle_error()
            return False
        if not self.use_sessions or request.epoch == FINAL_EPOCH:
            return True
        if request.epoch == INITIAL_EPOCH:
            if session_id == 0:  # the broker keeps no session: the next request is full again
                self.session_id = 0
                self.epoch = INITIAL_EPOCH
                self.session_partitions = {}
                return True
            self.session_id = session_id
        elif session_id != self.session_id:
            self.handle_error()
            return True
        self.session_partitions = dict(request.wanted)
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """A failed request or a session error: the next request is full (and replaces the session)."""
        self.epoch = INITIAL_EPOCH
        self.session_partitions = {}

    def close_request(self) -> FetchRequestData | None:
        """A request that closes the session (epoch -1), or None without one."""
        if self.session_id == 0:
            return None
        return FetchRequestData({}, [], self.session_id, FINAL_EPOCH, {})
