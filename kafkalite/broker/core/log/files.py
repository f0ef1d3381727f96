"""Open files as a budget: segment and index files are opened when used and closed when least recently used.

A broker with thousands of partitions would otherwise hold one descriptor per segment for as long as
it runs, and a laptop's default open-file limit (1024, on macOS 256) would stop it long before its
disk does. Every ``FileHandle`` of a log manager goes through one ``OpenFiles``: ``descriptor()``
opens the file if it is closed (closing the least recently used handle when ``capacity`` are open)
and marks it as just used. A file closed this way loses nothing: its data is in the page cache, and
an fsync through a new descriptor makes it durable like any other.

``OpenFiles(None)`` is no budget at all: every handle stays open once opened.
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from pathlib import Path

__all__ = ["FileHandle", "OpenFiles"]

_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


class OpenFiles:
    """At most ``capacity`` open descriptors among the handles that use it, least recently used closed first."""

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._open: OrderedDict[int, FileHandle] = OrderedDict()  # id(handle) -> handle, oldest use first
        self.opened = 0  # descriptors opened so far (for tests and measurements)

    def __len__(self) -> int:
        return len(self._open)

    def _used(self, handle: FileHandle) -> None:
        key = id(handle)
        if key in self._open:
            self._open.move_to_end(key)

    def _opening(self, handle: FileHandle) -> None:
        if self.capacity is not None:
            while len(self._open) >= self.capacity:
                _, oldest = self._open.popitem(last=False)
                oldest._close_descriptor()
        self._open[id(handle)] = handle
        self.opened += 1

    def _closed(self, handle: FileHandle) -> None:
        self._open.pop(id(handle), None)


class FileHandle:
    """One file of a segment, open only while it is among the most recently used ones."""

    __slots__ = ("path", "_files", "_flags", "_fd")

    def __init__(self, files: OpenFiles, path: Path, flags: int, *, create_flags: int = 0) -> None:
        """``flags`` reopen the file; ``create_flags`` are added for the first open (O_CREAT, O_TRUNC)."""
        self.path = path
        self._files = files
        self._flags = flags
        self._fd = -1
        if create_flags:
            self._open(flags | create_flags)

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    def descriptor(self) -> int:
        """The file's descriptor, opened if needed; valid until the next ``descriptor()`` of any handle."""
        if self._fd < 0:
            self._open(self._flags)
        else:
            self._files._used(self)
        return self._fd

    def duplicate(self) -> int:
        """A new descriptor of the file, which the caller owns (and closes)."""
        return os.dup(self.descriptor())

    def _open(self, flags: int) -> None:
        self._files._opening(self)
        try:
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except OSError as exc:
                # A file system made read-only (or a file no longer writable): reads go on, writes
                # fail with EBADF, which an append reports like any other storage failure.
                if exc.errno not in _READ_ONLY or not flags & os.O_RDWR or flags & os.O_TRUNC:
                    raise
                self._fd = os.open(self.path, os.O_RDONLY)
        except BaseException:
            self._files._closed(self)
            raise

    def _close_descriptor(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def close(self) -> None:
        self._files._closed(self)
        self._close_descriptor()
