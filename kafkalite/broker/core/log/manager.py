"""The log manager: every partition log of the log directories, their checkpoints and periodic work.

There may be several log directories (``log.dirs``); the first is also the data directory where
the rest of the broker keeps its files. A new partition goes to the directory that holds the
fewest, as Kafka places them, and ``move_log`` moves one to another directory (AlterReplicaLogDirs).
Layout of each log directory (Kafka's names and formats):

* ``<topic>-<partition>/``: one :class:`~kafkalite.broker.core.log.disk.DiskLog` per partition. The partition is parsed
  from after the last ``-``, so topic names may contain ``.``, ``_`` and ``-``. Each holds
  ``partition.metadata``: ``version: 0\\ntopic_id: <topic id, URL-safe base64, no padding>\\n``.
* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and ``cleaner-offset-checkpoint``
  (:mod:`~kafkalite.broker.core.log.checkpoints`: their format, and which must be written again).
* ``.kafka_cleanshutdown``: written (fsynced) by a clean :meth:`LogManager.close`, after every log is
  flushed and the checkpoints written; removed by :meth:`LogManager.open` once the logs are loaded.
  Its content is Kafka's: ``{"version":"0","broker_epoch":"-1"}``. Absent at open means the last run
  crashed, and each log is recovered from its checkpointed recovery point.
* Directories ending in ``-delete`` are partitions being deleted; ``open`` finishes the job.
* ``<topic>-<partition>.<id>-future`` is a partition being moved here from another log directory:
  the files are copied into it, the source is renamed ``...-delete``, the copy renamed to its
  final name, the source removed. ``open`` finishes a move the crash interrupted after the
  source was renamed, and discards a copy made before (the source is still in place).

Other files (``meta.properties`` ...) belong to someone else and are left alone. With ``data_dir=None``
every log is a :class:`~kafkalite.broker.core.log.memory.MemoryLog`, there are no log directories and
nothing touches the disk.

Periodic work (:meth:`LogManager.run_periodic`, called by the broker's timer every second or so):
time-based rolls, the fsync of segments that have rolled (Kafka schedules it on roll), ``flush.ms``, the
index fsyncs that move a recovery point up to what ``log.flush.on.ack`` synced (every
``RECOVERY_POINT_LAG_MS``), and a checkpoint when a recovery point or log start offset moved. The fsyncs
and checkpoint files are written by one job on :attr:`LogManager.background` (the server's I/O thread),
checkpoints after the fsyncs they count on; recovery points move back on the loop once it is done.
Retention keeps Kafka's own schedule: the first check ``log.initial.task.delay.ms`` after
:meth:`LogManager.open`, then one every ``log.retention.check.interval.ms`` at a fixed rate (a tick that
comes late runs it once, not once per missed period).
"""

from __future__ import annotations

import base64
import heapq
import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Final

from kafkalite.broker.core.durable import write_durably as _write_durably
from kafkalite.broker.core.log.background import Background
from kafkalite.broker.core.log.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointBook,
    CheckpointPlan,
    TopicPartition,
    checkpoint_holds,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafkalite.broker.core.log.disk import DiskLog
from kafkalite.broker.core.log.files import OpenFiles
from kafkalite.broker.core.log.group_commit import GroupCommit
from kafkalite.broker.core.log.partition_log import LogConfig, LogError, PartitionLog, PendingFlush, wall_clock_ms

log = logging.getLogger("kafkalite.log_manager")

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "PARTITION_METADATA",
    "RECOVERY_POINT_CHECKPOINT",
    "LogManager",
    "TopicPartition",
    "parse_partition_directory",
    "read_offset_checkpoint",
    "write_offset_checkpoint",
]

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
PARTITION_METADATA: Final = "partition.metadata"
_DELETE_SUFFIX: Final = "-delete"
_FUTURE_SUFFIX: Final = "-future"
# At most this long between a flush.on.ack round's sync of records and the fsync of their indexes that
# moves the recovery point past them: it bounds the tail a crash revalidates.
RECOVERY_POINT_LAG_MS: Final = 10_000
CLOSE_THREADS: Final = 16  # threads that fsync the logs at a clean close
CLOSE_DESCRIPTORS: Final = 512  # duplicated descriptors held at once while they do


class LogManager:
    """Owns every partition log. Like the logs, touch it only from the event loop."""

    def __init__(self, data_dir: Path | None, default_config: LogConfig, *, extra_dirs: Sequence[Path] = (),
                 retention_check_interval_ms: int = 300_000, initial_task_delay_ms: int = 30_000,
                 files: OpenFiles | None = None) -> None:
        self.data_dir = data_dir
        self.log_dirs: list[Path] = [] if data_dir is None else [data_dir, *extra_dirs]
        self.default_config = default_config
        self.files = files if files is not None else OpenFiles(None)  # every segment file's descriptor budget
        self.retention_check_interval_ms = retention_check_interval_ms
        self.initial_task_delay_ms = initial_task_delay_ms
        self.next_retention_check_ms: int | None = None  # set by open()
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.had_clean_shutdown = True
        self._dir_of: dict[TopicPartition, Path] = {}  # the log directory of each disk log
        self.checkpoints = CheckpointBook()  # what each directory's checkpoint files say
        self.cleaner_offsets = self.checkpoints.cleaner_offsets  # each compacted log's first dirty offset
        # Change-driven periodic work: logs that changed since the last tick, logs with unflushed data,
        # and the deadlines of rolls by age (a heap, and each log's current deadline).
        self._changed: set[TopicPartition] = set()
        self._unflushed: set[TopicPartition] = set()
        self._roll_queue: list[tuple[int, TopicPartition]] = []
        self._roll_due: dict[TopicPartition, int] = {}
        # Blocking file work (fsyncs, checkpoints, snapshots, removing deleted partitions) runs here;
        # the server gives it an I/O thread. One periodic job at a time; flush.messages flushes apart.
        self.background = Background()
        self.group_commit = GroupCommit(self.background)  # the fsyncs log.flush.on.ack answers wait for
        self._periodic_io_running = False
        self._flush_requested: set[TopicPartition] = set()

    # --- opening -----------------------------------------------------------------------------------

    def open(
        self, topic_configs: Mapping[str, LogConfig] | None = None, now_ms: int | None = None
    ) -> dict[TopicPartition, PartitionLog]:
        """Load every partition directory, recovering them if the last shutdown was not clean.

        ``topic_configs`` gives per-topic settings (others get the default). Returns :attr:`logs`; the
        topic ids read from ``partition.metadata`` are in :attr:`topic_ids`.
        """
        now = wall_clock_ms() if now_ms is None else now_ms
        self.next_retention_check_ms = now + self.initial_task_delay_ms
        configs = topic_configs or {}
        futures: list[tuple[Path, TopicPartition]] = []
        clean = []
        for root in self.log_dirs:
            clean.append(self._open_dir(root, configs, now, futures))
        self.had_clean_shutdown = all(clean)
        for future, topic_partition in futures:
            self._finish_move(future, topic_partition, configs, now)
        # What recovery validated is made durable, all logs at once, so their recovery points can move
        # to their ends in the checkpoint below.
        failure = self._flush_many(self.logs.values(), lambda partition_log: partition_log.prepare_flush())
        if failure is not None:
            raise failure
        self.checkpoint(force=True, unless_on_disk=True)
        for root in self.log_dirs:
            (root / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        if self.data_dir is None:
            return self.logs
        if not self.logs:
            log.info("No partition logs in %s yet", ", ".join(str(root) for root in self.log_dirs))
        else:
            log.info(
                "Loaded %d partition logs from %s after %s shutdown",
                len(self.logs),
                ", ".join(str(root) for root in self.log_dirs),
                "a clean" if self.had_clean_shutdown else "an unclean",
            )
        return self.logs

    def _open_dir(self, root: Path, configs: Mapping[str, LogConfig], now: int,
                  futures: list[tuple[Path, TopicPartition]]) -> bool:
        """Load the partitions of one log directory; whether it was shut down cleanly. Moves in
        progress are left in ``futures`` for ``open`` to settle once every directory is loaded."""
        root.mkdir(parents=True, exist_ok=True)
        clean_shutdown = (root / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points, log_start_offsets = self.checkpoints.load(root)
        for directory in sorted(root.iterdir()):
            if not directory.is_dir():
                continue
            if directory.name.endswith(_DELETE_SUFFIX):
                import shutil  # (here: it imports bz2 and lzma, which no start needs)

                shutil.rmtree(directory, ignore_errors=True)
                continue
            if directory.name.endswith(_FUTURE_SUFFIX):
                moved = parse_partition_directory(directory.name.rpartition(".")[0])
                if moved is not None:
                    futures.append((directory, moved))
                continue
            topic_partition = parse_partition_directory(directory.name)
            if topic_partition is None:
                continue
            if topic_partition in self.logs:
                log.warning("%s is also in %s; keeping that one", directory, self._dir_of[topic_partition])
                continue
            topic, _ = topic_partition
            self._register(topic_partition, DiskLog.load(
                directory,
                configs.get(topic, self.default_config),
                recovery_point=recovery_points.get(topic_partition, 0),
                log_start_offset=log_start_offsets.get(topic_partition, 0),
                clean_shutdown=clean_shutdown,
                now_ms=now,
                files=self.files,
                flush=False,
            ))
            self._dir_of[topic_partition] = root
            self._note_topic_id(topic, directory)
        return clean_shutdown

    def _note_topic_id(self, topic: str, directory: Path) -> None:
        topic_id = _read_partition_metadata(directory)
        if topic_id is None:
            log.warning("%s has no readable %s", directory, PARTITION_METADATA)
        elif self.topic_ids.setdefault(topic, topic_id) != topic_id:
            log.warning("%s has topic id %s, other partitions have %s", directory, topic_id, self.topic_ids[topic])

    def _finish_move(self, future: Path, topic_partition: TopicPartition, configs: Mapping[str, LogConfig],
                     now: int) -> None:
        """A move a crash interrupted: complete it if its source is gone, else drop the copy."""
        import shutil  # (here: it imports bz2 and lzma, which no start needs)

        if topic_partition in self.logs:
            shutil.rmtree(future, ignore_errors=True)
            return
        topic, partition = topic_partition
        final = future.parent / f"{topic}-{partition}"
        os.replace(future, final)
        self._register(topic_partition, DiskLog.load(final, configs.get(topic, self.default_config),
                                                  clean_shutdown=False, now_ms=now, files=self.files))
        self._dir_of[topic_partition] = future.parent
        self._note_topic_id(topic, final)
        log.info("completed the move of %s-%d to %s", topic, partition, future.parent)

    # --- the logs ----------------------------------------------------------------------------------

    def create_log(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        config: LogConfig | None = None,
        now_ms: int | None = None,
    ) -> PartitionLog:
        """A new empty log for ``topic``/``partition`` (the existing one if already created with this id)."""
        key = (topic, partition)
        known_id = self.topic_ids.get(topic)
        if known_id is not None and known_id != topic_id:
            raise LogError(f"topic {topic} exists with topic id {known_id}, not {topic_id}")
        existing = self.logs.get(key)
        if existing is not None:
            return existing
        if not topic or partition < 0:
            raise LogError(f"invalid topic partition {topic!r} {partition}")
        config = config or self.default_config
        partition_log: PartitionLog
        if self.data_dir is None:
            from kafkalite.broker.core.log.memory import MemoryLog  # (a broker on disk never loads it)

            partition_log = MemoryLog(f"{topic}-{partition}", config, now_ms)
        else:
            if len(self.log_dirs) == 1:
                root = self.log_dirs[0]
            else:
                counts = Counter(self._dir_of.values())
                root = min(self.log_dirs, key=lambda candidate: counts[candidate])
            directory = root / f"{topic}-{partition}"
            if directory.exists():
                raise LogError(f"{directory} exists but was not loaded")
            try:
                partition_log = DiskLog.create(directory, config, now_ms, self.files)
            except OSError:  # no room or no descriptor for its files: leave no directory behind
                _remove_new_directory(directory)
                raise
            try:
                _write_partition_metadata(directory, topic_id)
            except OSError:
                partition_log.close()
                _remove_new_directory(directory)
                raise
            self._dir_of[key] = root
        self._register(key, partition_log)
        self.topic_ids[topic] = topic_id
        return partition_log

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log directory holding the partition's log (None in memory or for no such log)."""
        return self._dir_of.get((topic, partition))

    def move_log(self, topic: str, partition: int, target: Path, now_ms: int | None = None) -> PartitionLog:
        """Move a partition's log to another log directory; the new log, which replaces the old one
        (closed, not to be used again). Blocks while the files are copied and fsynced. If the copy
        fails, the log is reopened where it was (``logs`` holds it) and the OSError raised."""
        import shutil  # (here: it imports bz2 and lzma, which no start needs)

        key = (topic, partition)
        source = self._dir_of.get(key)
        partition_log = self.logs.get(key)
        if source is None or partition_log is None:
            raise LogError(f"no disk log for {topic}-{partition}")
        if target == source:
            return partition_log
        if target not in self.log_dirs:
            raise LogError(f"{target} is not a log directory")
        name = f"{topic}-{partition}"
        token = uuid.uuid4().hex
        future = target / f"{name}.{token}{_FUTURE_SUFFIX}"
        log_start_offset, config = partition_log.log_start_offset, partition_log.config
        partition_log.close(flush=True)
        try:
            shutil.copytree(source / name, future)
            _sync_tree(future)
        except OSError:
            # The copy failed (a full disk...): drop it and keep serving the log where it was.
            shutil.rmtree(future, ignore_errors=True)
            self._register(key, DiskLog.load(source / name, config, log_start_offset=log_start_offset,
                                          clean_shutdown=True, now_ms=wall_clock_ms() if now_ms is None else now_ms,
                                          files=self.files))
            raise
        doomed = source / f"{name}.{token}{_DELETE_SUFFIX}"
        os.replace(source / name, doomed)
        os.replace(future, target / name)
        _sync_directory(source)
        _sync_directory(target)
        shutil.rmtree(doomed, ignore_errors=True)
        moved = DiskLog.load(target / name, config, log_start_offset=log_start_offset, clean_shutdown=True,
                             now_ms=wall_clock_ms() if now_ms is None else now_ms, files=self.files)
        self._register(key, moved)
        self._dir_of[key] = target
        self.checkpoint(force=True)
        log.info("moved %s from %s to %s", name, source, target)
        return moved

    def logs_for_topic(self, topic: str) -> dict[int, PartitionLog]:
        return {partition: partition_log for (name, partition), partition_log in self.logs.items() if name == topic}

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Apply new settings to every partition of ``topic`` (AlterConfigs)."""
        for partition_log in self.logs_for_topic(topic).values():
            partition_log.update_config(config)

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove the log and its files; the topic id is forgotten with the topic's last partition."""
        partition_log = self.logs.pop((topic, partition), None)
        self.checkpoints.forget((topic, partition), self._dir_of.pop((topic, partition), None))
        if partition_log is not None:
            partition_log.delete()
        if not self.logs_for_topic(topic):
            self.topic_ids.pop(topic, None)

    # --- periodic work and durability --------------------------------------------------------------

    def _register(self, key: TopicPartition, partition_log: PartitionLog) -> None:
        """Keep ``partition_log`` as the log of ``key``; it tells the manager when it changes."""
        self.logs[key] = partition_log
        partition_log.on_change = partial(self._changed.add, key)
        partition_log.on_flush_due = partial(self._flush_now, key)
        if isinstance(partition_log, DiskLog):
            partition_log.background = self.background
        self._changed.add(key)

    def run_periodic(self, now_ms: int) -> int:
        """Retention when its check is due, segment.ms rolls, fsync of rolled segments, flush.ms;
        checkpoint if anything moved. Returns the number of segments retention deleted.

        Only what changed or falls due is touched: logs report their changes (``on_change``), rolls
        by age wait in a deadline queue, and only logs with unflushed data are revisited, so an idle
        broker's tick costs nothing however many partitions it holds. The fsyncs and the checkpoint
        files are written by one background job (:attr:`background`), the checkpoints after the
        fsyncs they count on; the recovery points move when it is done. While a tick's job is still
        running, later ticks leave their flushes and checkpoints for the one after it ends.
        """
        deleted = 0
        due = self.next_retention_check_ms
        if due is not None and now_ms >= due:
            # At a fixed rate from the first check, as Kafka's scheduler runs it.
            interval = self.retention_check_interval_ms
            self.next_retention_check_ms = due + interval * ((now_ms - due) // interval + 1)
            for every_log in self.logs.values():
                deleted += every_log.enforce_retention(now_ms)
        changed = set(self._changed)  # a copy: logs hold this set's add (see _register)
        self._changed.clear()
        while self._roll_queue and self._roll_queue[0][0] <= now_ms:
            _, key = heapq.heappop(self._roll_queue)
            aging = self.logs.get(key)
            if aging is not None and self._roll_due.pop(key, None) is not None:
                aging.maybe_roll(now_ms)
                changed.add(key)
        changed |= self._changed  # what the rolls above changed
        self._changed.clear()
        for key in changed:
            touched = self.logs.get(key)
            if touched is None:
                continue
            deadline = touched.roll_deadline_ms()
            if deadline is not None and self._roll_due.get(key) != deadline:
                self._roll_due[key] = deadline
                heapq.heappush(self._roll_queue, (deadline, key))
            self._unflushed.add(key)
        if self._periodic_io_running:
            self._changed |= changed  # the next tick sees them again
            return deleted
        flushes: list[tuple[TopicPartition, PartitionLog, PendingFlush]] = []
        for key in list(self._unflushed):
            unflushed = self.logs.get(key)
            pending, keep = (None, False) if unflushed is None else self._due_flush(unflushed, now_ms)
            if pending is not None and unflushed is not None:
                flushes.append((key, unflushed, pending))
            if not keep:
                self._unflushed.discard(key)
        changed |= {key for key, _, _ in flushes}
        self._write_in_background(flushes, self._checkpoint_plan(changed, targets={
            key: pending.target for key, _, pending in flushes}))
        return deleted

    def _due_flush(self, partition_log: PartitionLog, now_ms: int) -> tuple[PendingFlush | None, bool]:
        """What to fsync now (rolled segments; everything when flush.ms has passed; what flush.on.ack
        synced, once ``RECOVERY_POINT_LAG_MS`` have passed), and whether the log must be looked at again
        on a later tick (flush.ms or that lag not reached yet)."""
        target = None
        if partition_log.recovery_point < partition_log.active_segment_base_offset:
            target = partition_log.active_segment_base_offset
        keep = False
        flush_ms = partition_log.config.flush_ms
        if flush_ms is not None and partition_log.recovery_point < partition_log.log_end_offset:
            if now_ms - partition_log.last_flush_ms >= flush_ms:
                target = partition_log.log_end_offset
            else:
                keep = True
        # flush.on.ack synced records above the recovery point but not their indexes: fsync those (the
        # .log is synced already) now and then, so a crash revalidates a bounded tail.
        durable = partition_log.durable_offset
        if durable > max(partition_log.recovery_point, target or 0):
            if now_ms - partition_log.last_flush_ms >= RECOVERY_POINT_LAG_MS:
                target = durable
            else:
                keep = True
        return (None if target is None else partition_log.prepare_flush(target)), keep

    def _write_in_background(self, flushes: list[tuple[TopicPartition, PartitionLog, PendingFlush]],
                             plan: list[CheckpointPlan]) -> None:
        """One job: the fsyncs, then the checkpoints that count on them; back on the loop, move the
        recovery points. A failure (a full disk...) is logged, and everything is tried again next tick."""
        if not flushes and not plan:
            return
        pendings = [pending for _, _, pending in flushes]
        files = [(entry.root / name, data) for entry in plan for name, data in entry.files()]

        def work() -> None:
            failure: OSError | None = None
            for pending in pendings:  # each closes its descriptors, whatever happens to the others
                try:
                    pending.run()
                except OSError as exc:
                    failure = failure or exc
            if failure is not None:
                raise failure
            for path, data in files:
                _write_durably(path, data)

        def then(exc: BaseException | None) -> None:
            self._periodic_io_running = False
            if exc is not None:
                log.warning("could not flush or checkpoint the logs (will try again): %s", exc)
                for key, _, _ in flushes:
                    self._unflushed.add(key)
                self._changed.update(key for key, _, _ in flushes)
                self.checkpoints.not_written(entry.root for entry in plan)
                return
            for key, partition_log, pending in flushes:
                if self.logs.get(key) is partition_log:
                    partition_log.complete_flush(pending)
            for entry in plan:
                self.checkpoints.written(entry)

        self._periodic_io_running = True
        self.background.submit(work, then)

    def _flush_now(self, key: TopicPartition) -> None:
        """flush.messages was reached: fsync the whole log off the loop, now."""
        partition_log = self.logs.get(key)
        if partition_log is None or key in self._flush_requested:
            return
        pending = partition_log.prepare_flush()
        if pending is None:
            return
        self._flush_requested.add(key)

        def then(exc: BaseException | None) -> None:
            self._flush_requested.discard(key)
            if exc is not None:
                log.warning("could not flush %s-%d: %s", key[0], key[1], exc)
            elif self.logs.get(key) is partition_log and pending is not None:
                partition_log.complete_flush(pending)

        self.background.submit(pending.run, then)

    def checkpoint(self, *, force: bool = False, changed: set[TopicPartition] | None = None,
                   unless_on_disk: bool = False) -> None:
        """Write each log directory's recovery-point and log-start-offset checkpoints: all of them when
        ``force``d, else those of the directories where a log in ``changed`` (default: any) moved.
        Blocks for the fsyncs (opening, closing, moving a log); the periodic task writes them in the background.
        ``unless_on_disk`` (opening) leaves alone a file that already says what would be written, so an
        empty data directory or a clean restart fsyncs no checkpoint."""
        for entry in self._checkpoint_plan(changed, force=force):
            for name, data in entry.files():
                if not (unless_on_disk and checkpoint_holds(entry.root / name, data)):
                    _write_durably(entry.root / name, data)
            self.checkpoints.written(entry)

    def _checkpoint_plan(self, changed: set[TopicPartition] | None, *, force: bool = False,
                         targets: Mapping[TopicPartition, int] | None = None) -> list[CheckpointPlan]:
        """The checkpoints to write (:meth:`CheckpointBook.plan`)."""
        return self.checkpoints.plan(self.logs, self._dir_of, self.log_dirs, changed, force=force, targets=targets)

    def set_cleaner_offset(self, topic: str, partition: int, offset: int) -> None:
        """Log compaction cleaned the log up to ``offset``: its ``cleaner-offset-checkpoint`` entry
        (written by the next periodic checkpoint)."""
        self.checkpoints.set_cleaner_offset((topic, partition), offset, self._dir_of.get((topic, partition)))

    def close(self, clean: bool = True) -> None:
        """Close every log. ``clean``: flush each (``_flush_for_close``), checkpoint, then write the
        clean-shutdown marker. The flush.on.ack rounds running finish first."""
        self.group_commit.close()
        if clean:
            self._flush_for_close()
        for partition_log in self.logs.values():
            partition_log.close(flush=clean)
        self.checkpoint(force=True)
        if clean:
            for root in self.log_dirs:
                _write_durably(root / CLEAN_SHUTDOWN_FILE, b'{"version":"0","broker_epoch":"-1"}')
        self.logs.clear()
        self._dir_of.clear()


    def _flush_for_close(self) -> None:
        """The fsyncs of a clean close, many at a time (``_flush_many``): each log's files that are not
        durable yet, its final time index entry written first; a log with nothing written since its last
        flush has none."""
        self._flush_many(self.logs.values(), lambda partition_log: partition_log.prepare_close())

    def _flush_many(self, logs: Iterable[PartitionLog],
                    prepare: Callable[[PartitionLog], PendingFlush | None]) -> OSError | None:
        """``prepare`` each log on this thread and run the fsyncs on ``CLOSE_THREADS`` threads, in
        batches of at most ``CLOSE_DESCRIPTORS`` duplicated descriptors (half the open-file budget when
        that is smaller), then ``complete_flush`` each log here. An fsync waits on the disk, not on the
        interpreter, and the file system commits the fsyncs that wait together in one go: one after
        the other, 10,000 written partitions took minutes to close. A log whose fsync failed is left as
        it was (its ``close(flush=True)`` tries again and raises, as a serial close would); the first
        such failure is returned."""
        limit = CLOSE_DESCRIPTORS if self.files.capacity is None else max(
            8, min(CLOSE_DESCRIPTORS, self.files.capacity // 2))
        pool: ThreadPoolExecutor | None = None
        batch: list[tuple[PartitionLog, PendingFlush]] = []
        held = 0
        first_failure: OSError | None = None

        def run_batch() -> None:
            nonlocal pool, first_failure
            if pool is None:
                pool = ThreadPoolExecutor(max_workers=CLOSE_THREADS, thread_name_prefix="kafkalite-fsync")
            failures = list(pool.map(_fsync_failure, [pending for _, pending in batch]))
            for (partition_log, pending), failure in zip(batch, failures, strict=True):
                if failure is None:
                    partition_log.complete_flush(pending)
                else:
                    first_failure = first_failure or failure
            batch.clear()

        try:
            for partition_log in logs:
                pending = prepare(partition_log)
                if pending is None:
                    continue
                if not pending.handles:
                    partition_log.complete_flush(pending)
                    continue
                batch.append((partition_log, pending))
                held += len(pending.handles)
                if held >= limit:
                    run_batch()
                    held = 0
            if batch:
                run_batch()
        finally:
            for _, pending in batch:  # an exception above: release the descriptors taken
                _fsync_failure(pending)
            if pool is not None:
                pool.shutdown(wait=True)
        return first_failure


def _fsync_failure(pending: PendingFlush) -> OSError | None:
    """Run ``pending`` (on a pool thread); the OSError it raised, if any."""
    try:
        pending.run()
    except OSError as exc:
        return exc
    return None


# --------------------------------------------------------------------------------------------------
# Files


def parse_partition_directory(name: str) -> TopicPartition | None:
    """``"my.topic-name-3"`` -> ``("my.topic-name", 3)``; None for anything that is not a partition."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _read_partition_metadata(directory: Path) -> uuid.UUID | None:
    try:
        text = (directory / PARTITION_METADATA).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        if int(fields["version"]) != 0:
            return None
        encoded = fields["topic_id"].strip()
        return uuid.UUID(bytes=base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (KeyError, ValueError):
        return None


def _remove_new_directory(directory: Path) -> None:
    """Remove a partition directory whose creation failed (best effort). A failed segment leaves no
    files, and removing an empty directory needs no descriptor, which may be what ran out."""
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def _write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    # Written atomically but not fsynced: the topic id's durable record is the broker's topics.json
    # (fsynced once per topic change), and two fsyncs per partition made creating a 50-partition
    # internal topic take a third of a second.
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")
    _write_durably(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {encoded}\n".encode("ascii"), sync=False)




def _sync_directory(path: Path) -> None:
    directory_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def _sync_tree(root: Path) -> None:
    """fsync every file under ``root`` and the directory itself (a copied partition)."""
    for path in root.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _sync_directory(root)
