"""The sparse index files of a segment: ``.index`` (offset -> position) and ``.timeindex`` (timestamp -> offset).

Their formats are described in :mod:`kafkalite.broker.core.log.disk`. Entries are kept in ``array``
objects, loaded from the file the first time a lookup needs them, and appended with ``os.write``.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import ClassVar

from kafkalite.broker.core.log.files import FileHandle, OpenFiles
from kafkalite.broker.core.log.segment import Buffer

__all__ = ["IndexCorrupt", "OffsetIndex", "TimeIndex", "write_all"]


class IndexCorrupt(Exception):
    """An index file that fails its sanity check; the segment rebuilds it from the ``.log``."""


class _SparseIndex:
    """A file of fixed-size ``(key, value)`` entries with increasing keys, and its in-memory copy."""

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPE: ClassVar[str]

    def __init__(self, path: Path, files: OpenFiles | None = None) -> None:
        self.path = path
        self._keys: array[int] | None = None
        self._values: array[int] | None = None
        self._appender = FileHandle(files if files is not None else OpenFiles(None), path,
                                    os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._dirty = False
        self._broken = False  # a failed write could not be cut back: no more entries
        try:
            file_size = path.stat().st_size
        except FileNotFoundError:
            file_size = 0
        self._count = file_size // self.ENTRY.size

    @property
    def entry_count(self) -> int:
        return self._count

    def max_entries(self, segment_index_bytes: int) -> int:
        return segment_index_bytes // self.ENTRY.size

    def is_full(self, segment_index_bytes: int) -> bool:
        """Whether the index holds ``max_entries`` entries (asked before every append)."""
        return self._count >= segment_index_bytes // self.ENTRY.size

    def sanity_check(self) -> tuple[int, int] | None:
        """Raise :class:`IndexCorrupt` unless the file is whole entries; return the last entry."""
        try:
            file_size = self.path.stat().st_size
        except FileNotFoundError:
            raise IndexCorrupt(f"{self.path.name} is missing") from None
        if file_size % self.ENTRY.size:
            raise IndexCorrupt(f"{self.path.name} has {file_size} bytes, not a multiple of {self.ENTRY.size}")
        self._count = file_size // self.ENTRY.size
        if self._count == 0:
            return None
        with open(self.path, "rb") as file:
            file.seek(file_size - self.ENTRY.size)
            key, value = self.ENTRY.unpack(file.read(self.ENTRY.size))
        return key, value

    def last_entry(self) -> tuple[int, int] | None:
        if self._count == 0:
            return None
        keys, values = self._load()
        return keys[-1], values[-1]

    def _load(self) -> tuple[array[int], array[int]]:
        if self._keys is None or self._values is None:
            data = self.path.read_bytes() if self._count else b""
            data = data[: self._count * self.ENTRY.size]
            self._keys, self._values = self._decode(data)
        return self._keys, self._values

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        keys: array[int] = array(self.KEY_TYPE)
        values: array[int] = array("i")
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        return keys, values

    def entries(self) -> list[tuple[int, int]]:
        """Every entry, in file order (read from the file if not loaded yet)."""
        keys, values = self._load()
        return list(zip(keys, values, strict=True))

    def floor(self, key: int) -> tuple[int, int] | None:
        """The entry with the largest key <= ``key``, if any."""
        if self._count == 0:
            return None
        keys, values = self._load()
        slot = bisect_right(keys, key) - 1
        return None if slot < 0 else (keys[slot], values[slot])

    def append(self, key: int, value: int) -> None:
        """Add an entry. If the write fails (a full disk), the file is cut back to its whole entries
        and the OSError raised; if even that fails, the index takes no more entries (lookups use what
        it has; a restart after a crash rebuilds it)."""
        if self._broken:
            return
        fd = self._appender.descriptor()
        try:
            write_all(fd, self.ENTRY.pack(key, value))
        except OSError:
            try:
                os.ftruncate(fd, self._count * self.ENTRY.size)
            except OSError:
                self._broken = True
            raise
        if self._keys is not None and self._values is not None:
            self._keys.append(key)
            self._values.append(value)
        self._count += 1
        self._dirty = True

    def replace(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole file with ``entries`` (after recovery or a rebuild)."""
        self.close()
        data = b"".join(self.ENTRY.pack(key, value) for key, value in entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        self._keys = array(self.KEY_TYPE, (key for key, _ in entries))
        self._values = array("i", (value for _, value in entries))
        self._count = len(entries)
        self._dirty = True

    def keep_and_append(self, keep: int, entries: list[tuple[int, int]]) -> None:
        """Keep the file's first ``keep`` entries and write ``entries`` after them (the recovery of a
        segment's tail: the entries below the recovery point stay as they are, and rewriting a file
        from nothing costs the file system far more than cutting it)."""
        self.close()
        data = b"".join(self.ENTRY.pack(key, value) for key, value in entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, keep * self.ENTRY.size)
            os.lseek(fd, 0, os.SEEK_END)
            write_all(fd, data)
        finally:
            os.close(fd)
        self._keys = self._values = None  # read again when a lookup needs them
        self._count = keep + len(entries)
        self._dirty = True

    def sync_handle(self) -> int | None:
        """A new descriptor of the file if it was written since the last call (see LogSegment.sync_handles)."""
        if not self._dirty:
            return None
        self._dirty = False
        return self._appender.duplicate() if self._appender.is_open else os.open(self.path, os.O_RDONLY)

    def close(self) -> None:
        self._appender.close()

    def rename(self, path: Path) -> None:
        """The file was renamed to ``path`` (an open descriptor stays valid)."""
        self.path = self._appender.path = path

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """``.index``: (last offset of a batch - base offset: int32, position of that batch: int32)."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        # Both halves are int32: decode the file in one go (a full 10 MiB index has 1.3 M entries).
        words: array[int] = array("i")
        words.frombytes(data)
        if sys.byteorder == "little":
            words.byteswap()
        return words[0::2], words[1::2]


    def floor_position(self, position: int) -> int | None:
        """The largest indexed batch position <= ``position`` (positions grow with offsets)."""
        if self._count == 0:
            return None
        _, positions = self._load()
        slot = bisect_right(positions, position) - 1
        return None if slot < 0 else positions[slot]


class TimeIndex(_SparseIndex):
    """``.timeindex``: (largest timestamp so far: int64, its batch's last offset - base offset: int32)."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"

    def maybe_append(self, timestamp: int, relative_offset: int) -> None:
        """Add an entry only if ``timestamp`` is larger than the last one (Kafka's ``maybeAppend``)."""
        last = self.last_entry()
        if timestamp < 0 or (last is not None and timestamp <= last[0]):
            return
        self.append(timestamp, relative_offset)


def write_all(fd: int, data: Buffer) -> None:
    """Write all of ``data`` (bytes, or a byte-format view): one ``os.write`` unless the kernel takes part."""
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]
