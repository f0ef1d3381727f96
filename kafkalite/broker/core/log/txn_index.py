"""The aborted-transaction index of one partition: what read_committed fetches must filter out.

Theory of operation
-------------------
A transaction that ends with an ABORT marker leaves its records in the log; a read_committed
consumer drops them with the help of the Fetch response's ``aborted_transactions`` list (producer
id and first offset of every aborted transaction overlapping the fetched range). This index keeps
one :class:`~kafkalite.broker.core.log.aborted.AbortedTxn` per aborted transaction: the producer
id, the first offset of the transaction in this partition, the offset of its ABORT marker
(``last_offset``) and the last stable offset just after the marker was written. Entries arrive in
marker order, so they are sorted by ``last_offset``; :meth:`AbortedTransactionIndex.collect` finds
the first one ending at or after the fetch offset by bisection and walks forward until an entry's
last stable offset reaches the upper bound of the fetch (no later abort can start below that
bound), as Kafka's ``TransactionIndex.collectAbortedTxns`` does.

On disk (with a data directory) the entries are kept like Kafka's ``.txnindex`` files: one file per
log segment, named after the segment's base offset (``<20 digits>.txnindex``), holding the entries
whose ABORT marker lies in that segment, each 34 bytes big-endian: ``version int16 (0), producer id
int64, first offset int64, last offset int64, last stable offset int64``. Entries are appended with
one ``write`` and fsynced by :meth:`sync` (the producer state manager calls it before writing a
snapshot, so a snapshot never covers an abort the index could lose). In memory every entry of the
partition is kept, trimmed when retention moves the log start offset past it; a file whose segment
is gone is deleted by :meth:`truncate_head`.

Loading keeps only the entries whose marker lies below the offset from which the producer state is
rebuilt by replaying the log (the snapshot offset); the replay adds the later ones again, so a torn
or missing tail of a file costs nothing.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from kafkalite.broker.core.log.aborted import AbortedTxn

log = logging.getLogger("kafkalite.txn_index")

__all__ = ["AbortedTransactionIndex", "TXN_INDEX_SUFFIX", "names_ending_with", "sync_files"]

TXN_INDEX_SUFFIX: Final = ".txnindex"
_ENTRY: Final = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
_VERSION: Final = 0


class AbortedTransactionIndex:
    """Every aborted transaction of one partition, in marker order; optionally backed by ``.txnindex`` files."""

    __slots__ = ("directory", "_entries", "_last_offsets", "_unsynced")

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # parallel to _entries, for bisect
        self._unsynced: set[Path] = set()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    # --- loading -----------------------------------------------------------------------------------

    def load(self, segment_bases: Sequence[int], log_start_offset: int, rebuild_from: int) -> None:
        """Read the ``.txnindex`` files of the live segments; keep entries in [log start, ``rebuild_from``).

        Files of segments that no longer exist are deleted; files holding entries at or above
        ``rebuild_from`` are rewritten without them (the replay of the log from there adds them back).
        """
        self._entries.clear()
        self._last_offsets.clear()
        if self.directory is None or not self.directory.is_dir():
            return
        live = set(segment_bases)
        loaded: list[AbortedTxn] = []
        for name in sorted(names_ending_with(self.directory, TXN_INDEX_SUFFIX)):
            stem = name[: -len(TXN_INDEX_SUFFIX)]
            if len(stem) != 20 or not stem.isdigit():
                continue
            path = self.directory / name
            if int(stem) not in live:
                path.unlink(missing_ok=True)
                continue
            from kafkalite.broker.core.log.aborted import AbortedTxn  # the first file of aborts read

            data = path.read_bytes()
            kept: list[AbortedTxn] = []
            dropped = len(data) % _ENTRY.size != 0
            for position in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                version, producer_id, first_offset, last_offset, last_stable = _ENTRY.unpack_from(data, position)
                if version != _VERSION or last_offset >= rebuild_from:
                    dropped = True
                    continue
                kept.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable))
            if dropped:
                _rewrite(path, kept)
            loaded.extend(entry for entry in kept if entry.last_offset >= log_start_offset)
        loaded.sort(key=lambda entry: entry.last_offset)
        self._entries.extend(loaded)
        self._last_offsets.extend(entry.last_offset for entry in loaded)

    # --- changes -----------------------------------------------------------------------------------

    def append(self, entry: AbortedTxn, segment_base_offset: int) -> None:
        """Record an abort whose marker went into the segment at ``segment_base_offset``."""
        if self._last_offsets and entry.last_offset <= self._last_offsets[-1]:
            raise ValueError(f"aborted transaction at {entry.last_offset} does not follow {self._last_offsets[-1]}")
        self._entries.append(entry)
        self._last_offsets.append(entry.last_offset)
        if self.directory is None:
            return
        path = self.directory / f"{segment_base_offset:020d}{TXN_INDEX_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(_VERSION, entry.producer_id, entry.first_offset, entry.last_offset,
                                     entry.last_stable_offset))
        finally:
            os.close(fd)
        self._unsynced.add(path)

    def forget(self, entries: Sequence[AbortedTxn]) -> None:
        """Drop entries whose transactions have no record left (log compaction removed them all, and
        may now remove the ABORT marker too): a read_committed fetch must not be told of an abort
        whose marker it will never see. Their files are rewritten without them."""
        doomed = set(entries)
        if not doomed or not doomed & set(self._entries):
            return
        kept = [entry for entry in self._entries if entry not in doomed]
        self._entries[:] = kept
        self._last_offsets[:] = [entry.last_offset for entry in kept]
        if self.directory is None:
            return
        from kafkalite.broker.core.log.aborted import AbortedTxn

        for name in sorted(names_ending_with(self.directory, TXN_INDEX_SUFFIX)):
            path = self.directory / name
            data = path.read_bytes()
            stored = [AbortedTxn(*_ENTRY.unpack_from(data, position)[1:])
                      for position in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size)]
            if doomed & set(stored):
                _rewrite(path, [entry for entry in stored if entry not in doomed])
                self._unsynced.add(path)

    def truncate_head(self, log_start_offset: int, segment_bases: Sequence[int]) -> None:
        """Forget entries wholly below the log start offset and delete files of deleted segments."""
        cut = bisect_left(self._last_offsets, log_start_offset)
        if cut:
            del self._entries[:cut]
            del self._last_offsets[:cut]
        if self.directory is None or not segment_bases:
            return
        first_live = segment_bases[0]
        for name in names_ending_with(self.directory, TXN_INDEX_SUFFIX):
            stem = name[: -len(TXN_INDEX_SUFFIX)]
            if len(stem) == 20 and stem.isdigit() and int(stem) < first_live:
                path = self.directory / name
                path.unlink(missing_ok=True)
                self._unsynced.discard(path)

    def sync(self) -> None:
        """Fsync the files appended to since the last sync."""
        sync_files(self.take_unsynced())

    def take_unsynced(self) -> list[Path]:
        """The files appended to since the last call, for the caller to fsync (``sync_files``)."""
        unsynced = sorted(self._unsynced)
        self._unsynced.clear()
        return unsynced

    def restore_unsynced(self, paths: Sequence[Path]) -> None:
        """Files handed out by ``take_unsynced`` whose fsync failed: they still need one."""
        self._unsynced.update(paths)

    # --- reading -----------------------------------------------------------------------------------

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [``fetch_offset``, ``upper_bound``), oldest marker first."""
        found: list[AbortedTxn] = []
        entries = self._entries
        for index in range(bisect_left(self._last_offsets, fetch_offset), len(entries)):
            entry = entries[index]
            if entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                break
        return found


def names_ending_with(directory: Path, suffix: str) -> list[str]:
    """The names in ``directory`` ending with ``suffix``: what ``directory.glob("*" + suffix)`` finds (nothing
    when the directory is missing or cannot be read), without the pattern glob compiles for each suffix."""
    try:
        return [name for name in os.listdir(directory) if name.endswith(suffix)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def sync_files(paths: Sequence[Path]) -> None:
    """Fsync each file that still exists (blocks; run it off the event loop where it matters)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _rewrite(path: Path, entries: list[AbortedTxn]) -> None:
    if not entries:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    data = b"".join(_ENTRY.pack(_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                    for e in entries)
    tmp.write_bytes(data)
    os.replace(tmp, path)
