"""The group room: consumer groups (classic and KIP-848) and their committed offsets.

Modules: ``coordinator`` (``GroupCoordinator``, the handlers' one entry point), ``store`` (what the
coordinator and both rebalancers share: ``GroupSettings``, the groups by id, the clock, the
``__consumer_offsets`` log), ``classic_group`` and ``classic_rebalance`` (the classic protocol's state and
rules), ``consumer_group`` and ``consumer_rebalance`` (KIP-848's), ``assignors`` (server-side assignors),
``offsets`` (committed and transactional offsets), ``records`` (record layouts) and ``timers``.

Theory of operation
-------------------
This node coordinates every group. ``GroupCoordinator`` owns the offset store and, through the
``GroupStore``, the groups by id; the protocol rules live in two rebalancers:

* ``classic_rebalance.ClassicRebalancer`` runs the classic JoinGroup/SyncGroup protocol (states Empty,
  PreparingRebalance, CompletingRebalance, Stable, Dead; see ``classic_group``);
* ``consumer_rebalance.ConsumerRebalancer`` runs KIP-848 ConsumerGroupHeartbeat groups (states Empty,
  Assigning, Reconciling, Stable) with the server-side assignors of ``assignors``.

A group id names one group of one kind. An empty group of one kind is replaced by the other kind
when a member of the other protocol joins (Kafka's offline upgrade/downgrade); a non-empty one
refuses it. Committing offsets to an unknown group with generation -1 creates an Empty "simple"
classic group without a protocol type, as admin tools and manual-assignment consumers need.

Waiting (JoinGroup, SyncGroup) is a future parked on the member; timers are keyed
``Timers.schedule`` calls (``timers``), a real event loop in the broker and a manual clock in
tests. Everything runs on the event loop, so nothing needs a lock.

Durability: every change is written synchronously, as key/value records (``records``), to the
``__consumer_offsets`` partition of the group (``abs(hash(group id)) % offsets.topic.num.partitions``,
like Kafka) before the answer leaves. ``open`` replays the topic: the last record of each key wins, a
tombstone deletes; groups that only have offsets come back as simple groups. ``periodic`` expires
offsets every ``offsets.retention.check.interval.ms``: those of an Empty group ``offsets.retention.minutes``
after it became empty (of a simple group, after their commit), and those of topics a consumer group no
longer subscribes to; a group with no offsets left and no members is deleted.

Transactions (for the transaction coordinator): ``stage_transactional_offsets`` stages TxnOffsetCommit
offsets per producer id, invisible to OffsetFetch (``require_stable`` fetches get
UNSTABLE_OFFSET_COMMIT) until ``complete_transaction(producer_id, commit)`` materializes or drops them.
"""
