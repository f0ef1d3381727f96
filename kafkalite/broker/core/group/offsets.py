"""Committed offsets of every group, and the offsets open transactions have staged.

The store is plain state: every change returns the ``__consumer_offsets`` records that describe it,
and the coordinator writes them to the group's partition (replay calls the ``replay_*`` methods
with what was written). Validation (generation, member, metadata size) is the coordinator's job.

Transactional offsets (TxnOffsetCommit) are staged per producer id, possibly for several groups, and
are invisible to OffsetFetch until the transaction commits; ``require_stable`` fetches see
UNSTABLE_OFFSET_COMMIT for them meanwhile. When a transaction ends, a commit materializes each staged
offset unless a plain commit of the same partition was made after it was staged (the most recent
commit wins, as in Kafka); an abort drops them. Staged offsets are written as pending records and
removed with tombstones in the same batch that writes the committed offsets, so a restart at any
point leaves either the pending state or the outcome, never half of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kafkalite.broker.core.group.records import (
    OffsetAndMetadata,
    OffsetCommitKey,
    PendingTxnOffsetKey,
    encode_offset_value,
    encode_pending_txn_offset_value,
)

__all__ = ["OffsetAndMetadata", "OffsetStore", "Record", "TopicPartition"]

TopicPartition = tuple[str, int]
Record = tuple[bytes, bytes | None]


@dataclass(slots=True)
class _Staged:
    value: OffsetAndMetadata
    order: int  # position among all commits, to decide which of a plain and a staged commit is newer


@dataclass(slots=True)
class _Transaction:
    producer_epoch: int
    offsets: dict[str, dict[TopicPartition, _Staged]] = field(default_factory=dict)  # group -> staged


class OffsetStore:
    """Committed offsets by group, plus staged transactional offsets by producer id."""

    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._order: dict[str, dict[TopicPartition, int]] = {}
        self._transactions: dict[int, _Transaction] = {}
        self._open_by_group: dict[str, set[int]] = {}
        self._counter = itertools.count()

    # reads ---------------------------------------------------------------------------------
    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        offsets = self._committed.get(group_id)
        return None if offsets is None else offsets.get((topic, partition))

    def committed(self, group_id: str) -> Mapping[TopicPartition, OffsetAndMetadata]:
        return self._committed.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._committed.get(group_id))

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        for producer_id in self._open_by_group.get(group_id, ()):
            staged = self._transactions[producer_id].offsets.get(group_id, {})
            if (topic, partition) in staged:
                return True
        return False

    def has_open_transactions(self, group_id: str) -> bool:
        return bool(self._open_by_group.get(group_id))

    def pending_producers(self) -> list[int]:
        return list(self._transactions)

    def group_ids(self) -> list[str]:
        """Groups with committed offsets or offsets staged by an open transaction."""
        return list(dict.fromkeys([*self._committed, *self._open_by_group]))

    # plain commits -------------------------------------------------------------------------
    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[Record]:
        records: list[Record] = []
        for (topic, partition), value in offsets.items():
            self._put(group_id, (topic, partition), value, next(self._counter))
            records.append((OffsetCommitKey(group_id, topic, partition).encode(), encode_offset_value(value)))
        return records

    def delete(self, group_id: str, partitions: Iterable[TopicPartition]) -> list[Record]:
        """Remove committed (and staged) offsets of these partitions; tombstones for those that existed."""
        records: list[Record] = []
        for topic, partition in partitions:
            existed = self._remove(group_id, (topic, partition)) is not None
            if existed or self.has_pending(group_id, topic, partition):
                records.append((OffsetCommitKey(group_id, topic, partition).encode(), None))
        return records

    def delete_group(self, group_id: str) -> list[Record]:
        """Every offset of the group, committed or staged, removed with tombstones."""
        records: list[Record] = [(OffsetCommitKey(group_id, topic, partition).encode(), None)
                                 for topic, partition in self._committed.pop(group_id, {})]
        self._order.pop(group_id, None)
        for producer_id in self._open_by_group.pop(group_id, set()):
            transaction = self._transactions[producer_id]
            for topic, partition in transaction.offsets.pop(group_id, {}):
                records.append((PendingTxnOffsetKey(producer_id, group_id, topic, partition).encode(), None))
            if not transaction.offsets:
                del self._transactions[producer_id]
        return records

    def expire(self, group_id: str, is_expired: Callable[[TopicPartition, OffsetAndMetadata], bool]) -> tuple[
            list[Record], bool]:
        """Tombstones for the offsets ``is_expired`` selects (never one with a staged offset), and
        whether the group has no offsets left."""
        records: list[Record] = []
        for topic_partition, value in list(self._committed.get(group_id, {}).items()):
            if is_expired(topic_partition, value) and not self.has_pending(group_id, *topic_partition):
                self._remove(group_id, topic_partition)
                records.append((OffsetCommitKey(group_id, *topic_partition).encode(), None))
        return records, not self._committed.get(group_id) and not self.has_open_transactions(group_id)

    # transactional commits -----------------------------------------------------------------
    def stage(self, group_id: str, producer_id: int, producer_epoch: int,
              offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[Record]:
        transaction = self._transactions.get(producer_id)
        if transaction is None:
            transaction = self._transactions[producer_id] = _Transaction(producer_epoch)
        transaction.producer_epoch = producer_epoch
        staged = transaction.offsets.setdefault(group_id, {})
        self._open_by_group.setdefault(group_id, set()).add(producer_id)
        records: list[Record] = []
        for (topic, partition), value in offsets.items():
            staged[(topic, partition)] = _Staged(value, next(self._counter))
            records.append((PendingTxnOffsetKey(producer_id, group_id, topic, partition).encode(),
                            encode_pending_txn_offset_value(producer_epoch, value)))
        return records

    def complete(self, producer_id: int, commit: bool) -> dict[str, list[Record]]:
        """End a transaction: records per group (committed offsets and pending-record tombstones)."""
        transaction = self._transactions.pop(producer_id, None)
        if transaction is None:
            return {}
        by_group: dict[str, list[Record]] = {}
        for group_id, staged in transaction.offsets.items():
            open_transactions = self._open_by_group.get(group_id)
            if open_transactions is not None:
                open_transactions.discard(producer_id)
                if not open_transactions:
                    del self._open_by_group[group_id]
            records = by_group.setdefault(group_id, [])
            for (topic, partition), item in staged.items():
                records.append((PendingTxnOffsetKey(producer_id, group_id, topic, partition).encode(), None))
                if commit and item.order > self._order.get(group_id, {}).get((topic, partition), -1):
                    self._put(group_id, (topic, partition), item.value, item.order)
                    records.append((OffsetCommitKey(group_id, topic, partition).encode(),
                                    encode_offset_value(item.value)))
        return by_group

    # replay --------------------------------------------------------------------------------
    def replay_offset(self, group_id: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> None:
        if value is None:
            self._remove(group_id, (topic, partition))
        else:
            self._put(group_id, (topic, partition), value, next(self._counter))

    def replay_pending(self, producer_id: int, group_id: str, topic: str, partition: int,
                       staged: tuple[int, OffsetAndMetadata] | None) -> None:
        if staged is not None:
            self.stage(group_id, producer_id, staged[0], {(topic, partition): staged[1]})
            return
        transaction = self._transactions.get(producer_id)
        if transaction is None:
            return
        group_offsets = transaction.offsets.get(group_id, {})
        group_offsets.pop((topic, partition), None)
        if not group_offsets:
            transaction.offsets.pop(group_id, None)
            open_transactions = self._open_by_group.get(group_id)
            if open_transactions is not None:
                open_transactions.discard(producer_id)
                if not open_transactions:
                    del self._open_by_group[group_id]
        if not transaction.offsets:
            del self._transactions[producer_id]

    # internals -----------------------------------------------------------------------------
    def _put(self, group_id: str, topic_partition: TopicPartition, value: OffsetAndMetadata, order: int) -> None:
        self._committed.setdefault(group_id, {})[topic_partition] = value
        self._order.setdefault(group_id, {})[topic_partition] = order

    def _remove(self, group_id: str, topic_partition: TopicPartition) -> OffsetAndMetadata | None:
        offsets = self._committed.get(group_id)
        if offsets is None:
            return None
        removed = offsets.pop(topic_partition, None)
        self._order.get(group_id, {}).pop(topic_partition, None)
        if not offsets:
            del self._committed[group_id]
            self._order.pop(group_id, None)
        return removed
