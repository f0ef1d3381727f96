"""What magic-2 record batches and legacy (magic 0/1) message sets have in common.

:mod:`protocol.records` (magic 2, and :func:`~protocol.records.iter_batches`, which walks both
formats) and :mod:`protocol.legacy_records` (magic 0/1) both import this module; ``legacy_records``
imports nothing else of the two, and ``records`` imports ``legacy_records``, so the imports between
them point one way only. Import these names from ``protocol.records``, which re-exports them; this
module is an implementation detail. The layouts are described in ``docs/record-batch.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

__all__ = ["LOG_OVERHEAD", "NO_SEQUENCE", "NO_TIMESTAMP", "Buffer", "Header", "Record", "TimestampType"]

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

LOG_OVERHEAD: Final = 12
"""Bytes before a batch's (or legacy entry's) length-counted part: base offset int64 + length int32."""
NO_SEQUENCE: Final = -1
NO_TIMESTAMP: Final = -1


class TimestampType(IntEnum):
    """What a batch's timestamps mean (attributes bit 3). Magic 0 messages have no timestamp at all."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record.

    ``offset`` and ``timestamp`` are absolute (with LogAppendTime, the batch's max timestamp).
    ``sequence`` is the producer sequence number, or -1 when the batch has no base sequence. Magic 0/1
    records have no headers, and magic 0 records carry timestamp -1.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    sequence: int = NO_SEQUENCE
