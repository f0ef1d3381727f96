"""What magic-2 record batches, legacy (magic 0/1) message sets and decoded records have in common.

:mod:`protocol.records` (magic 2, and :func:`~protocol.records.iter_batches`, which walks both
formats), :mod:`protocol.legacy_records` (magic 0/1) and :mod:`protocol.decoded_records` (the
:class:`~protocol.records.Record` and :class:`~protocol.records.EndTransactionMarker` values, made
on first decode) all import this module. ``decoded_records`` imports nothing else of them,
``legacy_records`` only ``decoded_records``, and ``records`` both (each on first use), so the
imports between them point one way only. Import these names from ``protocol.records``, which
re-exports them; this module is an implementation detail. The layouts are described in ``docs/record-batch.md``.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

from kafkalite.protocol.exceptions import CorruptRecordError

__all__ = ["CONTROL_KEY", "LOG_OVERHEAD", "NO_SEQUENCE", "NO_TIMESTAMP", "Buffer", "ControlRecordType", "Header",
           "TimestampType"]

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

LOG_OVERHEAD: Final = 12
"""Bytes before a batch's (or legacy entry's) length-counted part: base offset int64 + length int32."""
NO_SEQUENCE: Final = -1
NO_TIMESTAMP: Final = -1

CONTROL_KEY: Final = struct.Struct(">hh")
"""A control record's key: version, type."""


class TimestampType(IntEnum):
    """What a batch's timestamps mean (attributes bit 3). Magic 0 messages have no timestamp at all."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """The type in a control record's key. Types 2-6 are KRaft-internal; anything else is UNKNOWN."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def from_key(cls, key: bytes | None) -> ControlRecordType:
        """Read the type from a control record key (``version int16, type int16``).

        A key version above 0 is read as version 0, like Kafka does; an unknown type is ``UNKNOWN``.
        A missing or short key, or a negative version, is :class:`CorruptRecordError`.
        """
        if key is None or len(key) < CONTROL_KEY.size:
            raise CorruptRecordError("control record key is shorter than 4 bytes")
        version, type_id = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise CorruptRecordError(f"control record key has a negative version {version}")
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN
