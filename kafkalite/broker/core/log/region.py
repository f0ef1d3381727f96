"""File regions: stored batches that a Fetch answer carries as (file, position, length) instead of bytes.

A plaintext connection can hand such a region to the kernel (``os.sendfile``), so the batches go from
the page cache to the socket without being copied into Python; a connection that cannot (TLS, or a
socket whose buffer is not empty) reads the region with ``os.pread`` just before writing it.

A region owns a descriptor of its own (``os.dup`` of the segment's), shared with the parts cut from it
(``after``) and closed when the last of them is gone. So a segment deleted while the answer waits (retention,
DeleteRecords, a compacted segment swapped out) is unlinked by name only: the region still reads the
file it was cut from. Bytes a region covers are never rewritten in place: a segment only grows by
appends, a failed append is cut back to where the file ended before it (past every region), and
recovery truncates before anything is served; compaction writes a new file. If a file ever yields
fewer bytes than the region promised (the answer's length is already in its header), ``read`` raises
``RegionTruncated`` (``send_to`` too when the file has nothing left at the region's position), and the
connection must be closed rather than sent short.
"""

from __future__ import annotations

import errno
import os
from typing import Any, Final

__all__ = ["FileRegion", "OwnedDescriptor", "RegionTruncated", "read_pieces", "send_now"]


class RegionTruncated(OSError):
    """The file ends before the region does."""


class OwnedDescriptor:
    """A duplicate descriptor of an open file, closed when the last reference to it goes."""

    __slots__ = ("descriptor",)

    def __init__(self, descriptor: int) -> None:
        self.descriptor = -1  # (for __del__ if the dup fails)
        self.descriptor = os.dup(descriptor)

    def __del__(self) -> None:
        descriptor, self.descriptor = self.descriptor, -1
        if descriptor >= 0:
            os.close(descriptor)


class FileRegion:
    """``length`` bytes at ``position`` of ``file``: whole stored batches, as validated when appended."""

    __slots__ = ("file", "position", "length")

    file: Final[OwnedDescriptor]
    position: Final[int]
    length: Final[int]

    def __init__(self, file: OwnedDescriptor, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The region's bytes (``os.pread``); RegionTruncated if the file ends first."""
        data = os.pread(self.file.descriptor, self.length, self.position)
        if len(data) == self.length:
            return data
        parts = [data]
        done = len(data)
        while done < self.length:
            more = os.pread(self.file.descriptor, self.length - done, self.position + done)
            if not more:
                raise RegionTruncated(errno.EIO, f"a segment file ends {self.length - done} bytes before the region")
            parts.append(more)
            done += len(more)
        return b"".join(parts)

    def send_to(self, socket_descriptor: int) -> int:
        """Send the region to a non-blocking socket with ``os.sendfile``; return how many bytes went. Stops
        at the first short send: the socket's buffer is full, and another call would take a few KiB at
        most. RegionTruncated if the file ends first."""
        sent = 0
        while sent < self.length:
            wanted = self.length - sent
            try:
                count = os.sendfile(socket_descriptor, self.file.descriptor, self.position + sent, wanted)
            except BlockingIOError:
                break
            if count == 0:
                raise RegionTruncated(errno.EIO, f"a segment file ends {wanted} bytes before the region")
            sent += count
            if count < wanted:
                break
        return sent

    def after(self, count: int) -> FileRegion:
        """The part of the region past its first ``count`` bytes."""
        return FileRegion(self.file, self.position + count, self.length - count)


_IOV_MAX = 512  # buffers per os.writev (Linux allows 1024)


def send_now(socket_descriptor: int, pieces: list[Any]) -> list[Any]:
    """Send ``pieces`` (buffers and ``FileRegion`` objects, in order) to a non-blocking socket until it
    would block: buffers with ``os.writev``, regions with ``os.sendfile``. Returns what was not sent,
    in order (a partly sent piece as its rest). Raises the socket's OSError (EPIPE, ECONNRESET) and
    RegionTruncated."""
    index, count = 0, len(pieces)
    while index < count:
        piece = pieces[index]
        if type(piece) is FileRegion:
            sent = piece.send_to(socket_descriptor)
            if sent < piece.length:
                return [piece.after(sent), *pieces[index + 1:]]
            index += 1
            continue
        end = index + 1
        while end < count and end - index < _IOV_MAX and type(pieces[end]) is not FileRegion:
            end += 1
        run = pieces[index:end]
        try:
            sent = os.writev(socket_descriptor, run)
        except BlockingIOError:
            sent = 0
        for position, buffer in enumerate(run):
            if sent < len(buffer):
                rest = [memoryview(buffer)[sent:] if sent else buffer]
                return [*rest, *run[position + 1:], *pieces[end:]]
            sent -= len(buffer)
        index = end
    return []


def read_pieces(pieces: list[Any]) -> list[Any]:
    """``pieces`` with every ``FileRegion`` read (``os.pread``): buffers for a transport to write."""
    return [piece.read() if type(piece) is FileRegion else piece for piece in pieces]
