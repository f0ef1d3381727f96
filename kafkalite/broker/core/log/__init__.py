"""The log room: each partition's append-only log, in Kafka's on-disk layout or in memory.

Modules: ``partition_log`` (``LogConfig``, the ``PartitionLog`` interface, ``SegmentedLog``: the logic
both engines share), ``segment`` (``LogSegment``), ``index`` (the ``.index`` and ``.timeindex`` files),
``disk`` (``DiskLog`` and ``FileSegment``), ``memory`` (``MemoryLog``), ``manager`` (``LogManager``: every
log of the log directories, their checkpoints, periodic work, moves between directories),
``producer_state`` (idempotent and transactional producers per partition), ``txn_index``
(aborted transactions per segment; ``aborted``: the ``AbortedTxn`` class, made on the first abort
written or read) and ``background`` (blocking file work, off the event loop).
Nothing here knows about topics, groups or the network.

Theory of operation
-------------------
**Offsets.** The *log start offset* is the first offset a consumer may fetch (raised by retention and
DeleteRecords); the *log end offset* is the offset the next appended record gets. Offsets are assigned
per batch, never per record: ``append`` writes the log end offset into the batch's first 8 bytes (the
base offset, outside the CRC) and the batch's last offset delta gives the rest. The caller has already
validated the batch (magic 2, CRC, sizes, producer sequence); control and transactional batches are
appended like any other.

**Segments.** The log is a list of segments, each holding a contiguous run of batches from its *base
offset*. Only the last, the *active segment*, is appended to. Before an append the log *rolls* (starts
a new active segment whose base offset is the log end offset) when the batch would push the active
segment past ``segment.bytes``, when ``segment.ms`` has passed between the segment's first batch and
this one (Kafka compares batch timestamps; without timestamps, wall clock since the first append), when
an index is full, or when the batch's offsets would not fit a 4-byte relative offset. ``maybe_roll``
applies the time rule between appends (wall clock since the first append).

**On disk** (:class:`~kafkalite.broker.core.log.disk.DiskLog`): ``<topic>-<partition>/`` holds, per
segment, ``<base offset, 20 digits>.log`` (batches byte for byte), ``.index`` (sparse: last offset of a
batch -> its file position) and ``.timeindex`` (sparse: largest timestamp so far -> offset). A read looks
up the nearest index entry below the wanted offset and walks batch headers forward from there, so it
scans about ``index.interval.bytes`` at most before returning stored bytes untouched.
``memory.MemoryLog`` keeps the same segments as lists of batches.

**Reads** return whole stored batches, starting with the batch that *contains* the wanted offset (it
may begin before it, as in Kafka), while the total stays within ``max_bytes``; with ``min_one_batch``
the first batch comes back whole even if it alone is larger. Batches whose last offset reaches
``upper_bound`` (the high watermark, or the last stable offset) are never returned. A read that asks
for ``file_regions`` gets a run of 64 KiB or more on disk as a ``region.FileRegion`` (a descriptor of
its own, a position, a length) instead of its bytes, for a connection to send with ``os.sendfile``.

**Durability.** Appends land in the page cache. ``flush`` fsyncs every segment holding offsets at or
above the *recovery point*, then moves the recovery point to the log end offset. ``flush.messages`` makes
``append`` ask for a flush after that many records; ``flush.ms`` is applied by the log manager's periodic
task; both default to never, as in Kafka. Fsyncs stay off the event loop: ``flush`` is split into
``prepare_flush`` (loop: choose files, duplicate their descriptors), ``PendingFlush.run`` (elsewhere:
fsync the duplicates) and ``complete_flush`` (loop: move the recovery point); state is only touched on
the loop. A segment hands its file out again to every flush until an fsync of it has *completed*, so a
second acks=all answer never goes out before the bytes it covers are durable. ``background`` is where
the log room sends such work (the server's I/O thread): the periodic fsyncs with the checkpoints that
count on them, flush.messages flushes, producer state snapshots, removing deleted partitions, and the
fsync rounds of ``log.flush.on.ack`` (``group_commit``: answers waiting at the same time share one).
Those rounds sync only what an acknowledged record needs, the ``.log`` files (``records_only``): they
move the log's *durable offset*, not the recovery point, whose promise covers the indexes too.

**Recovery** (on load). Segments wholly below the recovery point, and all segments after a clean
shutdown, are trusted: only a missing or malformed index is rebuilt. After a crash every batch from the
segment containing the recovery point onward is validated (framing, magic 2, CRC-32C, offsets moving
forward), the indexes of the scanned segments are rebuilt, and the log is truncated at the first torn or
corrupt batch; any later segment is deleted.

**Retention** deletes whole segments, oldest first: by ``retention.ms`` (a segment whose largest
timestamp, or last modification when no record in it has a timestamp, is older than now -
retention) and by ``retention.bytes`` (while the log minus that segment is still at least
retention.bytes). If every segment goes, including a non-empty active one, the log rolls first so
an empty active segment remains at the log end offset. The log start offset moves up to the
first remaining segment. ``delete_records_before`` raises the log start offset and drops segments
entirely below it.
"""
