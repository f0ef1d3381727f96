"""Each log directory's offset checkpoints: the files, and which of them must be written again.

Three files per log directory, in Kafka's format (text: a version line ``0``, a count line, then one
``<topic> <partition> <offset>`` line per log), each written atomically (a ``.tmp`` file written and
fsynced, renamed over the old one, the directory fsynced):

* ``recovery-point-offset-checkpoint``: below each log's offset everything, indexes included, is on
  disk; a crash revalidates only what lies above it;
* ``log-start-offset-checkpoint``: each log's first offset (DeleteRecords, retention);
* ``cleaner-offset-checkpoint``: each compacted log's first dirty offset.

:class:`CheckpointBook` remembers what each file says and which directories need theirs written
again, so a periodic checkpoint rewrites only the files whose offsets moved: the recovery points move
with every flush, the log start offsets seldom. The :class:`~kafkalite.broker.core.log.manager.LogManager`
decides a :class:`CheckpointPlan` on the loop, writes it anywhere (its I/O thread), and tells the book
once it is written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final, Protocol

from kafkalite.broker.core.durable import write_durably

log = logging.getLogger("kafkalite.log_manager")

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "CheckpointBook",
    "CheckpointPlan",
    "TopicPartition",
    "checkpoint_holds",
    "offset_checkpoint_bytes",
    "read_offset_checkpoint",
    "write_offset_checkpoint",
]

TopicPartition = tuple[str, int]  # (topic, partition)

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_CHECKPOINT_VERSION: Final = 0


class _Offsets(Protocol):
    """What a checkpoint reads of a log."""

    @property
    def recovery_point(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...


# --------------------------------------------------------------------------------------------------
# The files


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a Kafka offset checkpoint file; missing or malformed gives an empty mapping (and a warning)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, expected {count}")
        return entries
    except (IndexError, ValueError) as exc:
        log.warning("Ignoring malformed checkpoint %s: %s", path, exc)
        return {}


def write_offset_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    """Write a Kafka offset checkpoint file atomically (tmp, fsync, rename, fsync the directory)."""
    write_durably(path, offset_checkpoint_bytes(entries))


def offset_checkpoint_bytes(entries: Mapping[TopicPartition, int]) -> bytes:
    """A Kafka offset checkpoint file's content: a version line, a count line, ``topic partition offset`` lines."""
    lines = [str(_CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


_EMPTY_CHECKPOINT: Final = offset_checkpoint_bytes({})


def checkpoint_holds(path: Path, data: bytes) -> bool:
    """Whether the checkpoint file at ``path`` says ``data`` already (a missing file says what an empty
    checkpoint does: ``read_offset_checkpoint`` reads both as no entries)."""
    try:
        return path.read_bytes() == data
    except FileNotFoundError:
        return data == _EMPTY_CHECKPOINT
    except OSError:
        return False


class CheckpointPlan:
    """The checkpoints of one log directory, decided on the loop, to be written anywhere.

    ``write_cleaner_offsets``: there are some, or the file lists some that are gone; ``write_recovery_points``
    and ``write_log_start_offsets`` are False when the file already says what it would."""

    __slots__ = ("root", "recovery_points", "log_start_offsets", "cleaner_offsets", "write_cleaner_offsets",
                 "write_recovery_points", "write_log_start_offsets")

    root: Final[Path]
    recovery_points: Final[dict[TopicPartition, int]]
    log_start_offsets: Final[dict[TopicPartition, int]]
    cleaner_offsets: Final[dict[TopicPartition, int]]
    write_cleaner_offsets: Final[bool]
    write_recovery_points: Final[bool]
    write_log_start_offsets: Final[bool]

    def __init__(self, root: Path, recovery_points: dict[TopicPartition, int],
                 log_start_offsets: dict[TopicPartition, int], cleaner_offsets: dict[TopicPartition, int],
                 write_cleaner_offsets: bool, write_recovery_points: bool = True,
                 write_log_start_offsets: bool = True) -> None:
        self.root = root
        self.recovery_points = recovery_points
        self.log_start_offsets = log_start_offsets
        self.cleaner_offsets = cleaner_offsets
        self.write_cleaner_offsets = write_cleaner_offsets
        self.write_recovery_points = write_recovery_points
        self.write_log_start_offsets = write_log_start_offsets

    def files(self) -> list[tuple[str, bytes]]:
        files = []
        if self.write_recovery_points:
            files.append((RECOVERY_POINT_CHECKPOINT, offset_checkpoint_bytes(self.recovery_points)))
        if self.write_log_start_offsets:
            files.append((LOG_START_OFFSET_CHECKPOINT, offset_checkpoint_bytes(self.log_start_offsets)))
        if self.write_cleaner_offsets:
            files.append((CLEANER_OFFSET_CHECKPOINT, offset_checkpoint_bytes(self.cleaner_offsets)))
        return files


# --------------------------------------------------------------------------------------------------
# What the files say, and what must be written again


class CheckpointBook:
    """What each log directory's checkpoint files say, and which directories must write theirs again.
    Like the log manager, touch it only from the event loop."""

    def __init__(self) -> None:
        # Log compaction: each compacted log's first dirty offset, and the directories whose
        # cleaner-offset-checkpoint must be written again.
        self.cleaner_offsets: dict[TopicPartition, int] = {}
        self._cleaner_stale: set[Path] = set()
        self._written: dict[Path, tuple[dict[TopicPartition, int], dict[TopicPartition, int]]] = {}
        self._written_offsets: dict[TopicPartition, tuple[int, int]] = {}
        self._stale_dirs: set[Path] = set()  # directories whose checkpoints are not written yet

    def load(self, root: Path) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Read the checkpoints of the log directory ``root`` at open: its recovery points and log
        start offsets (the cleaner offsets are kept in :attr:`cleaner_offsets`)."""
        recovery_points = read_offset_checkpoint(root / RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = read_offset_checkpoint(root / LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets.update(read_offset_checkpoint(root / CLEANER_OFFSET_CHECKPOINT))
        return recovery_points, log_start_offsets

    def forget(self, key: TopicPartition, root: Path | None) -> None:
        """The log ``key`` was deleted from ``root``: that directory's files must drop it."""
        if root is not None:
            self._stale_dirs.add(root)
        self._written_offsets.pop(key, None)
        if self.cleaner_offsets.pop(key, None) is not None and root is not None:
            self._cleaner_stale.add(root)

    def set_cleaner_offset(self, key: TopicPartition, offset: int, root: Path | None) -> None:
        """Log compaction cleaned ``key`` up to ``offset`` (written by the next checkpoint of ``root``)."""
        if self.cleaner_offsets.get(key) == offset:
            return
        self.cleaner_offsets[key] = offset
        if root is not None:
            self._cleaner_stale.add(root)

    def not_written(self, roots: Iterable[Path]) -> None:
        """Writing these directories' checkpoints failed: the next checkpoint tries again."""
        self._stale_dirs.update(roots)

    def plan(self, logs: Mapping[TopicPartition, _Offsets], dir_of: Mapping[TopicPartition, Path],
             log_dirs: Iterable[Path], changed: set[TopicPartition] | None, *, force: bool = False,
             targets: Mapping[TopicPartition, int] | None = None) -> list[CheckpointPlan]:
        """The checkpoints to write: every directory's when ``force``d, else those of the directories
        where a log in ``changed`` (None: any) moved. ``targets`` are recovery points that fsyncs about
        to run will reach (the checkpoint is written after them)."""
        targets = targets or {}
        if changed is not None and not force:
            roots = set(self._stale_dirs) | self._cleaner_stale
            for key in changed:
                partition_log = logs.get(key)
                current = None if partition_log is None else (max(partition_log.recovery_point,
                                                                  targets.get(key, -1)),
                                                             partition_log.log_start_offset)
                if self._written_offsets.get(key) != current:
                    root = dir_of.get(key)
                    if root is not None:
                        roots.add(root)
            if not roots:
                return []
        else:
            roots = set(log_dirs)
        self._stale_dirs |= roots  # until written: a failed write is retried on the next tick
        plan = []
        for root in log_dirs:
            if root not in roots:
                continue
            here = [key for key, where in dir_of.items() if where == root]
            recovery_points = {key: max(logs[key].recovery_point, targets.get(key, -1)) for key in here}
            log_start_offsets = {key: logs[key].log_start_offset for key in here}
            cleaner_offsets = {key: self.cleaner_offsets[key] for key in here if key in self.cleaner_offsets}
            if (not force and root not in self._cleaner_stale
                    and self._written.get(root) == (recovery_points, log_start_offsets)):
                self._stale_dirs.discard(root)
                continue
            # A file that would say what the last one written there says is left alone (the recovery
            # points move every flush; the log start offsets seldom).
            written = None if force else self._written.get(root)
            plan.append(CheckpointPlan(root, recovery_points, log_start_offsets, cleaner_offsets,
                                       bool(cleaner_offsets) or root in self._cleaner_stale,
                                       write_recovery_points=written is None or written[0] != recovery_points,
                                       write_log_start_offsets=written is None or written[1] != log_start_offsets))
        return plan

    def written(self, entry: CheckpointPlan) -> None:
        """``entry``'s files are on disk."""
        self._written[entry.root] = (entry.recovery_points, entry.log_start_offsets)
        self._stale_dirs.discard(entry.root)
        if all(self.cleaner_offsets.get(key) == offset for key, offset in entry.cleaner_offsets.items()):
            self._cleaner_stale.discard(entry.root)
        for key in entry.recovery_points:
            self._written_offsets[key] = (entry.recovery_points[key], entry.log_start_offsets[key])
