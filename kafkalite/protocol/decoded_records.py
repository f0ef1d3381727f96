"""Decoded records and transaction markers: the values :meth:`RecordBatch.records` and
:meth:`RecordBatch.end_transaction_marker` give (:mod:`protocol.records`, which re-exports them).

A broker's appends and reads move batches as bytes and never decode a record, so this module is
imported on first use: the first batch decoded (compaction, a topic that recompresses, a coordinator
replaying its internal topic, a legacy batch), the first transaction marker written or read, or the
first ``from kafkalite.protocol.records import Record`` (the ``__getattr__`` of ``protocol.records``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kafkalite.protocol._record_common import CONTROL_KEY, NO_SEQUENCE, ControlRecordType, Header
from kafkalite.protocol.exceptions import CorruptRecordError

__all__ = ["EndTransactionMarker", "Record"]

_END_TXN_MARKER_VALUE: Final = struct.Struct(">hi")  # version, coordinator epoch


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


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The COMMIT or ABORT marker a transaction coordinator writes into each partition of a transaction."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"an end transaction marker is ABORT or COMMIT, not {self.control_type!r}")

    @property
    def key(self) -> bytes:
        """The control record key: version 0, then the control type."""
        return CONTROL_KEY.pack(0, self.control_type)

    @property
    def value(self) -> bytes:
        """The marker value: version 0, then the coordinator epoch."""
        return _END_TXN_MARKER_VALUE.pack(0, self.coordinator_epoch)

    @classmethod
    def from_record(cls, record: Record) -> EndTransactionMarker:
        """Decode a marker from a control record; versions above 0 are read as version 0."""
        control_type = ControlRecordType.from_key(record.key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise CorruptRecordError(f"control record of type {control_type.name} is not an end transaction marker")
        value = record.value
        if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
            raise CorruptRecordError("end transaction marker value is shorter than 6 bytes")
        version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"end transaction marker has a negative version {version}")
        return cls(control_type, coordinator_epoch)
