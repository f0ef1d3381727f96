"""The share room: what share groups (KIP-932, "queues for Kafka") deliver, record by record.

Modules: ``manager`` (``SharePartitionManager``, the handlers' entry point for ShareFetch,
ShareAcknowledge and the share offsets, and the group coordinator's for membership changes),
``partition`` (``SharePartition``, one share partition's state machine), ``sessions`` (share sessions
and their epochs), ``records`` (the ``__share_group_state`` record layouts) and ``config`` (the broker's
share settings and a group's effective configs). Membership (ShareGroupHeartbeat, the assignor) lives
with the other group kinds in ``kafkalite.broker.core.group`` (``share_group``, ``share_rebalance``).

Theory of operation
-------------------
A *share partition* is one topic partition as one share group consumes it. Several members may
fetch it at once; each record is handed to one member at a time. Its state is a window of in-flight
records starting at the *share-partition start offset* (SPSO): below the SPSO every record is done;
from ``end_offset`` on nothing has been read yet. Each offset in the window is in one state::

        +-----------+  acquired by a fetch (delivery count + 1)   +----------+
        | Available | ------------------------------------------> | Acquired |
        +-----------+ <------------------------------------------ +----------+
              ^          released, or its lock timed out, while        |  |
              |          the delivery count is below the limit         |  | accepted
              |                                                        |  v
              |          rejected, a gap, or released / timed out  +--------------+
              |          at the delivery count limit               | Acknowledged |
              |                         |                          +--------------+
              |                         v                                 |
              |                   +----------+    the SPSO moves past     |
              +-- (never) ------- | Archived | <--------------------------+
                                  +----------+

* Acquiring (ShareFetch). Available records inside the window are taken first (redeliveries), then
  records never read, whole stored batches at a time, up to the request's ``max_records`` (a batch
  may overshoot it unless ShareAcquireMode is record-limit) and while the window holds fewer than
  ``share.partition.max.record.locks`` offsets (the in-flight limit: a record stuck at the SPSO
  stops new acquisitions until it is done). Reads stop at the high watermark, or at the last stable
  offset for ``share.isolation.level=read_committed``; then control batches and the records of
  aborted transactions are archived as they are read, never delivered. Offsets no stored batch
  holds (compacted away) are archived; offsets inside a delivered batch that hold no record are
  acknowledged by the client as gaps. The answer carries the stored batches as they are and the
  acquired ranges with their delivery counts; the client keeps only the acquired records.
* Locks. Everything one fetch acquires in one partition shares a lock that expires after
  ``share.record.lock.duration.ms``: its records still acquired then are released. A member that
  closes its share session (or whose session is evicted, idle), forgets the partition, or is
  fenced by the group coordinator releases its records at once. Released records are archived
  instead once their delivery count reached ``share.delivery.count.limit``.
* Acknowledging (ShareFetch piggyback or ShareAcknowledge): per partition all or nothing; each
  record must be acquired by the acknowledging member (INVALID_RECORD_STATE otherwise). Accept,
  release, reject, gap; renew (v2, IsRenewAck) moves records to a new lock with a fresh deadline.
  After every change the SPSO moves past the acknowledged and archived records at its front.
* Starting. A group's share partition is created when the group coordinator first assigns the
  partition (or a member first fetches it): its SPSO is the log start offset
  (``share.auto.offset.reset=earliest``), the high watermark (``latest``, the default) or the first
  offset at most that old (``by_duration:<ISO-8601>``). AlterShareGroupOffsets sets it; retention and
  DeleteRecords move it forward.
* Long polls. A fetch that acquires nothing waits up to ``max_wait_ms``, woken by appends to its
  partitions and by records of its group becoming available again; ``min_bytes`` counts as one.

Durability: after every change to a share partition except an acquisition, its whole state (SPSO,
state epoch, and the non-trivial runs of the window: acknowledged, archived, and available with a
delivery count) is written to ``__share_group_state`` before the answer leaves. As in Kafka,
acquisitions are not written: an acquired record is written as available with the delivery count
it had before, so after a restart records that were acquired but not acknowledged are delivered
again, and acknowledged ones never are. ``open`` replays the topic (the last record per share
partition wins; a tombstone deletes) and forgets the state of partitions whose topic is gone.

Share sessions (``sessions``) hold which partitions a member fetches and the epoch its next request
must carry; they live in memory, so after a restart clients open new ones. Timers are keyed
``Timers.schedule`` calls on the event loop (a manual clock in tests); nothing needs a lock.
"""
