"""Message browsing: a partition's records from an offset or a timestamp, as JSON.

Reads stored batches with ``Partition.read`` (up to the high watermark, or the last stable offset
for ``read_committed``), decodes them (decompressing where needed), skips control batches and the
records before the asked offset, and stops after ``limit`` records or ``max_bytes`` of stored
batches. Keys, values and header values are bytes chosen by whoever produced them: each is given
with its size, as text when it is UTF-8 without control characters other than tab and line ends
(``json`` says whether that text parses as JSON), and otherwise as base64; the first
``MAX_VALUE_BYTES`` of it only (``truncated`` says so).
"""

from __future__ import annotations

import base64
import json
import re
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.records import RecordBatch, iter_batches

if TYPE_CHECKING:
    from kafkalite.broker.core.partition import Partition

__all__ = ["MAX_VALUE_BYTES", "browse", "describe_bytes"]

MAX_VALUE_BYTES = 64 * 1024
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # in text, only tab and line ends belong
READ_BYTES = 1024 * 1024  # stored batches read per step


def describe_bytes(data: bytes | None) -> dict[str, Any] | None:
    """Bytes as the admin API shows them: size, and UTF-8 text or base64 (None stays None)."""
    if data is None:
        return None
    shown = bytes(data[:MAX_VALUE_BYTES])
    described: dict[str, Any] = {"size": len(data), "truncated": len(data) > MAX_VALUE_BYTES}
    try:
        text = shown.decode("utf-8")
        if _CONTROL.search(text):
            raise UnicodeDecodeError("utf-8", shown, 0, 1, "control characters: binary")
    except UnicodeDecodeError:
        described.update(text=None, base64=base64.b64encode(shown).decode("ascii"), json=False)
        return described
    try:
        json.loads(text)
        is_json = not described["truncated"]
    except ValueError:
        is_json = False
    described.update(text=text, base64=None, json=is_json)
    return described


def browse(partition: Partition, *, offset: int | None = None, timestamp: int | None = None, limit: int = 50,
           read_committed: bool = False, max_bytes: int = 4 * READ_BYTES) -> dict[str, Any]:
    """Up to ``limit`` records from ``offset`` (default, or when it is below: the log start offset) or
    from the first record with a timestamp at or after ``timestamp``. An offset past the high
    watermark is OFFSET_OUT_OF_RANGE."""
    upper = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp is not None:
        found = partition.log.offset_for_timestamp(timestamp)
        start = found[0] if found is not None else upper
    else:
        start = partition.log_start_offset if offset is None else max(offset, partition.log_start_offset)
        if start > partition.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {offset} is past the high watermark "
                             f"{partition.high_watermark} of {partition.topic_name}-{partition.index}")
    records: list[dict[str, Any]] = []
    position, read = start, 0
    while len(records) < limit and position < upper and read < max_bytes:
        info = partition.read(position, READ_BYTES, min_one_batch=True, read_committed=read_committed)
        if not info.size:
            break
        read += info.size
        moved = position
        for chunk in info.buffers():
            for batch in iter_batches(chunk):
                moved = max(moved, batch.last_offset + 1)
                if isinstance(batch, RecordBatch) and batch.is_control:
                    continue
                try:
                    decoded = list(batch.records())
                except CorruptRecordError:
                    continue
                for record in decoded:
                    if record.offset < position or record.offset >= upper or len(records) >= limit:
                        continue
                    records.append({
                        "offset": record.offset,
                        "timestamp": record.timestamp,
                        "key": describe_bytes(record.key),
                        "value": describe_bytes(record.value),
                        "headers": [{"key": key, "value": describe_bytes(value)} for key, value in record.headers],
                    })
        if moved <= position:
            break
        position = moved
    next_offset = records[-1]["offset"] + 1 if records else max(start, partition.log_start_offset)
    return {"topic": partition.topic_name, "partition": partition.index, "start_offset": start,
            "next_offset": next_offset, "log_start_offset": partition.log_start_offset,
            "high_watermark": partition.high_watermark, "records": records}
