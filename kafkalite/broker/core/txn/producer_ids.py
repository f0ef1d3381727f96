"""Producer id allocation: every InitProducerId gets an id no producer ever had on this broker.

Kafka's controller hands out producer ids in blocks of 1000 and records each block in its metadata
log, so ids are never reused, even across restarts. Here the block is recorded in
``<data dir>/producer-id-block`` (``version=0`` and ``next.block.start=N``, written atomically and
fsynced) *before* any id of the block is handed out; a crash loses at most the rest of a block.
On open the allocator also starts above every producer id the partitions' producer state and the
transaction log still mention, should the file ever be lost. Without a data directory ids start
at 0 for each run (nothing else survives the run either).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from kafkalite.broker.core.coordinator_log import PRODUCER_ID_FILE

log = logging.getLogger("kafkalite.producer_ids")

__all__ = ["BLOCK_SIZE", "PRODUCER_ID_FILE", "ProducerIdAllocator"]

BLOCK_SIZE: Final = 1000
_LONG_MAX: Final = 2**63 - 1


class ProducerIdAllocator:
    """Hands out increasing producer ids, reserving them on disk a block at a time."""

    def __init__(self, data_dir: Path | None, block_size: int = BLOCK_SIZE) -> None:
        self.data_dir = data_dir
        self.block_size = block_size
        self._next = 0
        self._block_end = 0  # ids below this are reserved on disk

    @property
    def path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / PRODUCER_ID_FILE

    def open(self, at_least: int = 0) -> None:
        """Read the reserved block boundary; the next id is above it and above ``at_least``."""
        start = 0
        path = self.path
        if path is not None and path.exists():
            try:
                lines = path.read_text(encoding="ascii").splitlines()
                fields = dict(line.split("=", 1) for line in lines if "=" in line)
                start = int(fields["next.block.start"])
            except (KeyError, ValueError) as exc:
                log.warning("%s is unreadable (%s); producer ids continue from the highest one in use", path, exc)
        self._next = self._block_end = max(start, at_least, 0)

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + self.block_size)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _reserve(self, block_end: int) -> None:
        if block_end >= _LONG_MAX:
            raise OverflowError("producer ids are exhausted")
        path = self.path
        if path is not None:
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, f"version=0\nnext.block.start={block_end}\n".encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        self._block_end = block_end
