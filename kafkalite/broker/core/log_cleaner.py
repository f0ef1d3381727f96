"""The log cleaner: which compacted partition to clean next, and cleaning it in slices.

Kafka's ``LogCleaner`` and ``LogCleanerManager``, on one event loop. Every ``log.cleaner.backoff.ms``
while idle, the cleaner looks at the partitions of topics whose ``cleanup.policy`` includes
``compact`` (the internal topics are created so) and picks the *filthiest*: the one with the largest
dirty ratio (bytes from the first dirty offset to the first uncleanable offset, over bytes from the
log start offset to the first uncleanable offset) above its ``min.cleanable.dirty.ratio``; a
partition whose oldest dirty record is older than ``max.compaction.lag.ms`` is cleaned whatever its
ratio, and, when none qualifies, one holding tombstones or markers whose delete horizon has passed
(Kafka 3.1+). The first uncleanable offset is the first of: the active segment's base offset, the
last stable offset, and the base offset of the first dirty segment newer than
``min.compaction.lag.ms``. The first dirty offset is kept per partition in
``cleaner-offset-checkpoint`` (``LogManager.set_cleaner_offset``).

The cleaning itself (``kafkalite.broker.core.log.cleaner``) runs in slices: :meth:`LogCleaner.run_slice`
works for at most a few milliseconds and says when it wants to run again, so the broker's timer
interleaves it with requests (a produce or a fetch waits at most one slice). Its fsyncs run on the log
room's background thread. ``log.cleaner.io.max.bytes.per.second`` paces the slices. ``log.cleaner.threads``
of 0 or ``log.cleaner.enable=false`` turn compaction off; more threads than one clean one partition at a
time all the same (one loop). When a cleaning ends, the checkpoint moves to where it stopped, the
aborted transactions it found empty are dropped from the partition's aborted-transaction index, and
one INFO line says what it did.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.broker.config import config_field
from kafkalite.broker.core.log.manager import LogManager
from kafkalite.broker.core.log.partition_log import SegmentedLog
from kafkalite.broker.core.partition import Partition
from kafkalite.broker.core.topics import TopicManager

log = logging.getLogger("kafkalite.log_cleaner")

if TYPE_CHECKING:  # the cleaning itself is imported when a partition is first cleaned
    from kafkalite.broker.core.log.cleaner import Cleaner

__all__ = ["CleanerSettings", "LogCleaner", "Dirtiness"]

SLICE_S = 0.004  # the longest stretch of cleaning between two turns of the event loop
_WAIT_S = 0.005  # how soon to look again while a cleaned group is being fsynced


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The log cleaner's broker keys: each field mirrors the key it names."""

    enable: bool = config_field("log.cleaner.enable")
    threads: int = config_field("log.cleaner.threads")
    backoff_ms: int = config_field("log.cleaner.backoff.ms")
    dedupe_buffer_size: int = config_field("log.cleaner.dedupe.buffer.size")
    io_buffer_load_factor: float = config_field("log.cleaner.io.buffer.load.factor")
    io_max_bytes_per_second: float = config_field("log.cleaner.io.max.bytes.per.second")

    @property
    def active(self) -> bool:
        return self.enable and self.threads > 0

    @property
    def map_capacity(self) -> int:
        """Keys the offset map may hold: the dedupe buffer's share of memory at its load factor."""
        from kafkalite.broker.core.log.cleaner import MAP_ENTRY_BYTES

        return max(1, int(self.dedupe_buffer_size * self.io_buffer_load_factor) // MAP_ENTRY_BYTES)


@dataclass(frozen=True, slots=True)
class Dirtiness:
    """How much of a compacted partition is waiting to be cleaned."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # its oldest dirty record is older than max.compaction.lag.ms

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


class _Running:
    def __init__(self, partition: Partition, cleaner: Cleaner) -> None:
        self.partition = partition
        self.cleaner = cleaner
        self.started = time.monotonic()


class LogCleaner:
    """Compacts the partitions of compacted topics, one at a time, in slices on the event loop."""

    def __init__(self, topics: TopicManager, log_manager: LogManager, settings: CleanerSettings) -> None:
        self.topics = topics
        self.log_manager = log_manager
        self.settings = settings
        self._running: _Running | None = None
        self._next_check_ms = 0
        self._horizons: dict[tuple[str, int], int] = {}  # the earliest delete horizon a cleaning left
        self.cleanings = 0  # finished (for tests and measurements)

    # --- choosing ------------------------------------------------------------------------------

    def dirtiness(self, partition: Partition, now_ms: int) -> Dirtiness | None:
        """How dirty a compacted partition is (None: not compacted, or its log is not cleanable)."""
        partition_log = partition.log
        if not isinstance(partition_log, SegmentedLog) or not partition_log.config.compacts or partition.deleted:
            return None
        config = partition_log.config
        log_start = partition_log.log_start_offset
        active_base = partition_log.active_segment_base_offset
        checkpoint = self.log_manager.cleaner_offsets.get((partition.topic_name, partition.index), log_start)
        first_dirty = checkpoint if log_start <= checkpoint <= active_base else log_start
        first_uncleanable = min(active_base, partition.last_stable_offset)
        dirty_segments = partition_log.segments_between(first_dirty, first_uncleanable)
        if config.min_compaction_lag_ms > 0:
            for segment in dirty_segments:
                if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                    first_uncleanable = min(first_uncleanable, segment.base_offset)
                    break
        if first_dirty >= first_uncleanable:
            return Dirtiness(first_dirty, first_uncleanable, 0, 0, False)
        clean_bytes = sum(segment.size for segment in partition_log.segments_between(log_start, first_dirty)
                          if segment.base_offset < first_dirty)
        dirty = partition_log.segments_between(first_dirty, first_uncleanable)
        dirty_bytes = sum(segment.size for segment in dirty)
        overdue = bool(dirty) and config.max_compaction_lag_ms > 0 and (
            0 <= dirty[0].first_batch_timestamp() < now_ms - config.max_compaction_lag_ms)
        return Dirtiness(first_dirty, first_uncleanable, clean_bytes, dirty_bytes, overdue)

    def _choose(self, now_ms: int) -> tuple[Partition, Dirtiness] | None:
        best: tuple[Partition, Dirtiness] | None = None
        horizon_due: tuple[Partition, Dirtiness] | None = None
        for topic in self.topics:
            if "compact" not in topic.settings.cleanup_policy:
                continue
            for partition in topic.partitions:
                dirtiness = self.dirtiness(partition, now_ms)
                if dirtiness is None:
                    continue
                cleanable = dirtiness.dirty_bytes > 0 and (
                    dirtiness.overdue or dirtiness.ratio > partition.log.config.min_cleanable_dirty_ratio)
                if cleanable and (best is None or (dirtiness.overdue, dirtiness.ratio) > (best[1].overdue,
                                                                                        best[1].ratio)):
                    best = (partition, dirtiness)
                horizon = self._horizons.get((partition.topic_name, partition.index))
                if horizon is not None and horizon <= now_ms and horizon_due is None:
                    horizon_due = (partition, dirtiness)
        return best if best is not None else horizon_due

    # --- running -------------------------------------------------------------------------------

    def run_slice(self, now_ms: int, budget_s: float = SLICE_S) -> float | None:
        """Clean for at most ``budget_s``; the seconds until the next slice is due (0: at once), or
        None while compaction is off."""
        if not self.settings.active:
            self.stop()
            return None
        running = self._running
        if running is None:
            if now_ms < self._next_check_ms:
                return (self._next_check_ms - now_ms) / 1000
            chosen = self._choose(now_ms)
            if chosen is None:
                self._next_check_ms = now_ms + self.settings.backoff_ms
                return self.settings.backoff_ms / 1000
            running = self._running = self._start(*chosen, now_ms)
        partition, cleaner = running.partition, running.cleaner
        if partition.deleted or id(partition.log) != id(cleaner.log):
            cleaner.abandon("the partition was deleted or moved")
        from kafkalite.broker.core.log.cleaner import Step

        step = cleaner.step(time.perf_counter() + budget_s)
        if step is Step.WAITING:
            return _WAIT_S
        if step is Step.MORE:
            return self._pace(running)
        self._finish(running)
        return 0.0

    def _start(self, partition: Partition, dirtiness: Dirtiness, now_ms: int) -> _Running:
        from kafkalite.broker.core.log.cleaner import Cleaner

        partition_log = partition.log
        assert isinstance(partition_log, SegmentedLog)
        producer_state = partition.producer_state
        last_batches = {producer_id: (entry.epoch, entry.last_offset)
                        for producer_id, entry in producer_state.producers.items()}
        cleaner = Cleaner(partition_log, first_dirty_offset=dirtiness.first_dirty_offset,
                          upper_bound=dirtiness.first_uncleanable_offset, now_ms=now_ms,
                          aborted=producer_state.aborted_transactions, last_batches=last_batches,
                          map_capacity=self.settings.map_capacity, background=self.log_manager.background)
        return _Running(partition, cleaner)

    def _pace(self, running: _Running) -> float:
        """The wait that keeps the cleaning's reads under ``log.cleaner.io.max.bytes.per.second``."""
        limit = self.settings.io_max_bytes_per_second
        if limit <= 0 or limit >= 1e300:
            return 0.0
        due = running.cleaner.stats.bytes_read / limit
        return max(0.0, due - (time.monotonic() - running.started))

    def _finish(self, running: _Running) -> None:
        self._running = None
        partition, cleaner = running.partition, running.cleaner
        key = (partition.topic_name, partition.index)
        stats = cleaner.stats
        if cleaner.failure is not None:
            log.warning("%s: cleaning stopped (it will start again): %s", partition, cleaner.failure)
            return
        self.cleanings += 1
        self.log_manager.set_cleaner_offset(partition.topic_name, partition.index, cleaner.end_offset)
        partition.producer_state.aborted.forget(cleaner.forgettable_aborts())
        if cleaner.earliest_horizon is None:
            self._horizons.pop(key, None)
        else:
            self._horizons[key] = cleaner.earliest_horizon
        elapsed = time.perf_counter() - stats.started
        log.info("%s: cleaned up to offset %d in %.2f s: read %d bytes (%d records, %d keys), wrote %d bytes "
                 "(%d records) in %d segment(s)%s", partition, cleaner.end_offset, elapsed, stats.bytes_read,
                 stats.records_read, stats.keys, stats.bytes_written, stats.records_kept, stats.groups,
                 f"; {stats.discarded_groups} group(s) changed meanwhile, left for the next cleaning"
                 if stats.discarded_groups else "")

    def stop(self) -> None:
        """Abandon the cleaning in progress (its cleaned files are removed; nothing else changed)."""
        if self._running is not None:
            self._running.cleaner.abandon("the broker is stopping")
            self._running = None

    def clean_now(self, now_ms: int, timeout_s: float = 60.0) -> int:
        """Run cleanings to the end without yielding (tests and tools without a loop); how many finished."""
        finished = self.cleanings
        self._next_check_ms = 0
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            before = self.cleanings
            self.run_slice(now_ms, budget_s=1.0)
            if self._running is None and self.cleanings == before:
                break  # nothing was started, or what ran gave up
        return self.cleanings - finished
