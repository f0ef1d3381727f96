"""Transaction metadata: the states of a transactional id, its legal transitions and its log records.

Theory of operation
-------------------
The transaction coordinator keeps one :class:`TransactionMetadata` per transactional id, an
immutable value replaced on every change. A change is *prepared* as a new value by one of the
``prepare_*`` functions below (which check that the transition is legal, as Kafka's
``TransactionMetadata.prepareTransitionTo`` does), written to ``__transaction_state``, and only
then installed; if the write fails, nothing changed. The states are Kafka's, with its ids::

    Empty(0) --AddPartitions/AddOffsets--> Ongoing(1) --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit(2) --markers written--> CompleteCommit(4)
    Ongoing --EndTxn(abort), timeout, fence--> PrepareAbort(3) --markers written--> CompleteAbort(5)
    Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty (epoch + 1, or a new producer id
                                           once the epoch is exhausted)
    Empty, CompleteCommit, CompleteAbort --AddPartitions--> Ongoing (a new transaction)
    Empty, CompleteCommit, CompleteAbort --expiration--> Dead(6): a tombstone, the id is forgotten

PrepareEpochFence(7) is Kafka's transient step of "bump the epoch, then abort" (InitProducerId
while a transaction is open, or a timeout); here it never outlives the call that takes it, and the
value written is the PrepareAbort with the bumped epoch. ``last_producer_epoch`` remembers the
epoch before a KIP-360 bump so that a retried InitProducerId carrying the old epoch gets the same
answer instead of PRODUCER_FENCED. An epoch of 32766 or more is *exhausted*: the next
InitProducerId rotates to a new producer id at epoch 0 (``previous_producer_id`` keeps the old one).

Records (modelled on Kafka's TransactionLogKey/Value, not byte-compatible with them): the key is
``version int16 (0), transactional id (int16 length + UTF-8)``; the value is ``version int16 (0),
producer id int64, previous producer id int64, producer epoch int16, last producer epoch int16,
timeout ms int32, state int8, start timestamp int64, last update timestamp int64, topic count
int32`` and per topic ``name (int16 length + UTF-8), partition count int32, partitions int32...``.
A null value is a tombstone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Final

__all__ = [
    "EPOCH_EXHAUSTED",
    "IllegalTransition",
    "TransactionMetadata",
    "TransactionState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "prepare_abort_or_commit",
    "prepare_add_partitions",
    "prepare_complete",
    "prepare_fence",
    "prepare_init",
]

NO_PRODUCER_ID: Final = -1
NO_EPOCH: Final = -1
EPOCH_EXHAUSTED: Final = 32767 - 1  # Short.MaxValue - 1: keep one epoch for fencing
TopicPartition = tuple[str, int]


class TransactionState(IntEnum):
    """Kafka's transaction states, with the ids of its log format and the names its APIs report."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """``Empty``, ``Ongoing``, ``PrepareCommit`` ... as DescribeTransactions and ListTransactions say it."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        for state, state_name in _NAMES.items():
            if state_name == name:
                return state
        return None

    @property
    def preparing(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def complete_or_empty(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_NAMES: Final = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_S = TransactionState
_VALID_PREVIOUS: Final = {
    _S.EMPTY: {_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT},
    _S.ONGOING: {_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT},
    _S.PREPARE_COMMIT: {_S.ONGOING},
    _S.PREPARE_ABORT: {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: {_S.PREPARE_COMMIT},
    _S.COMPLETE_ABORT: {_S.PREPARE_ABORT},
    _S.DEAD: {_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT},
    _S.PREPARE_EPOCH_FENCE: {_S.ONGOING},
}


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a bug, never a client error)."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """Everything the coordinator knows about one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_EPOCH
    last_producer_epoch: int = NO_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1  # when the current transaction began (first partition added), -1 if none
    last_update_ms: int = -1

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED

    def _to(self, state: TransactionState, **changes: object) -> TransactionMetadata:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        return replace(self, state=state, **changes)  # type: ignore[arg-type]  # changes name fields of this class


def new_metadata(transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int) -> TransactionMetadata:
    """A transactional id seen for the first time: Empty, with no epoch yet (the first init makes it 0)."""
    return TransactionMetadata(transactional_id, producer_id, timeout_ms=timeout_ms, last_update_ms=now_ms)


def prepare_init(metadata: TransactionMetadata, timeout_ms: int, expected_epoch: int | None, now_ms: int,
                 new_producer_id: int | None = None) -> TransactionMetadata | None:
    """InitProducerId from Empty/CompleteCommit/CompleteAbort: bump the epoch, or rotate the producer id.

    ``expected_epoch`` is the epoch the producer sent (KIP-360), None for a plain init. Returns
    None when that epoch is neither the current nor the last one: the producer is fenced.
    """
    if new_producer_id is not None:  # the epoch is exhausted: a new producer id at epoch 0
        return metadata._to(TransactionState.EMPTY, producer_id=new_producer_id,
                            previous_producer_id=metadata.producer_id, producer_epoch=0,
                            last_producer_epoch=metadata.producer_epoch if expected_epoch is not None else NO_EPOCH,
                            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)
    bumped = metadata.producer_epoch + 1
    if expected_epoch is None:
        epoch, last_epoch = bumped, NO_EPOCH
    elif metadata.producer_epoch == NO_EPOCH or expected_epoch == metadata.producer_epoch:
        epoch, last_epoch = bumped, metadata.producer_epoch
    elif expected_epoch == metadata.last_producer_epoch:
        epoch, last_epoch = metadata.producer_epoch, metadata.last_producer_epoch  # a retry: same answer
    else:
        return None
    return metadata._to(TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                        timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)


def prepare_add_partitions(metadata: TransactionMetadata, partitions: frozenset[TopicPartition] | set[TopicPartition],
                           now_ms: int) -> TransactionMetadata:
    """Add partitions; from Empty/Complete* this starts a new transaction."""
    start = now_ms if metadata.state.complete_or_empty else metadata.start_ms
    return metadata._to(TransactionState.ONGOING, partitions=metadata.partitions | frozenset(partitions),
                        start_ms=start, last_update_ms=now_ms)


def prepare_fence(metadata: TransactionMetadata) -> TransactionMetadata:
    """Bump the epoch of an Ongoing transaction to fence its producer (then abort it)."""
    if metadata.producer_epoch >= 32767:
        raise IllegalTransition(f"{metadata.transactional_id}: cannot fence epoch {metadata.producer_epoch}")
    return metadata._to(TransactionState.PREPARE_EPOCH_FENCE, producer_epoch=metadata.producer_epoch + 1,
                        last_producer_epoch=NO_EPOCH)


def prepare_abort_or_commit(metadata: TransactionMetadata, commit: bool, now_ms: int) -> TransactionMetadata:
    state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
    return metadata._to(state, last_update_ms=now_ms)


def prepare_complete(metadata: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Every marker is written: CompleteCommit/CompleteAbort, and the partitions are forgotten."""
    state = (TransactionState.COMPLETE_COMMIT if metadata.state == TransactionState.PREPARE_COMMIT
             else TransactionState.COMPLETE_ABORT)
    return metadata._to(state, partitions=frozenset(), last_update_ms=now_ms)


def prepare_dead(metadata: TransactionMetadata) -> TransactionMetadata:
    return metadata._to(TransactionState.DEAD, partitions=frozenset())


# --------------------------------------------------------------------------------------------------
# Records of __transaction_state

_KEY_VERSION: Final = 0
_VALUE_VERSION: Final = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqqhhibqqi")


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _INT16.pack(len(data)) + data


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, position)
    position += 2
    if length < 0 or position + length > len(data):
        raise ValueError("string runs past the end of the record")
    return data[position:position + length].decode("utf-8"), position + length


def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(_KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    (version,) = _INT16.unpack_from(data)
    if version != _KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    transactional_id, _ = _read_string(data, 2)
    return transactional_id


def encode_value(metadata: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_VALUE_HEAD.pack(_VALUE_VERSION, metadata.producer_id, metadata.previous_producer_id,
                                     metadata.producer_epoch, metadata.last_producer_epoch, metadata.timeout_ms,
                                     metadata.state, metadata.start_ms, metadata.last_update_ms, len(by_topic)))
    for topic, partitions in by_topic.items():
        out += _string(topic)
        out += _INT32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """Parse a value record; ValueError (or struct.error) when it is malformed."""
    (version, producer_id, previous_producer_id, epoch, last_epoch, timeout_ms, state, start_ms, last_update_ms,
     topic_count) = _VALUE_HEAD.unpack_from(data)
    if version != _VALUE_VERSION:
        raise ValueError(f"unknown transaction log value version {version}")
    position = _VALUE_HEAD.size
    partitions: set[TopicPartition] = set()
    for _ in range(topic_count):
        topic, position = _read_string(data, position)
        (count,) = _INT32.unpack_from(data, position)
        position += 4
        for index in struct.unpack_from(f">{count}i", data, position):
            partitions.add((topic, index))
        position += 4 * count
    return TransactionMetadata(transactional_id, producer_id, epoch, last_epoch, previous_producer_id, timeout_ms,
                               TransactionState(state), frozenset(partitions), start_ms, last_update_ms)
