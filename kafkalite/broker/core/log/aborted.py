"""One aborted transaction of a partition, as the aborted-transaction index keeps it (``txn_index``).

A module of its own, imported where an abort is first written (``producer_state``) or read back
(``txn_index``), so that a start whose partitions hold no aborted transaction does not build the class.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AbortedTxn"]


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction in one partition: its first offset and the offset of its ABORT marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
