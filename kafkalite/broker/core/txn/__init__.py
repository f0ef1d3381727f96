"""The transaction room: producer ids, transactional ids, and committing or aborting transactions.

Modules: ``coordinator`` (``TransactionCoordinator``, the handlers' one entry point, and its settings),
``state`` (``TransactionMetadata``, the states, legal transitions and log records) and ``producer_ids``
(``ProducerIdAllocator``).

Theory of operation
-------------------
This node coordinates every transactional id. ``TransactionCoordinator`` holds one immutable
:class:`~kafkalite.broker.core.txn.state.TransactionMetadata` per id (states and transitions are described
in ``txn.state``) and is the only entry point for the handlers. Every change is first
written as a key/value record to the ``__transaction_state`` partition of the id
(``abs(hash(id)) % transaction.state.log.num.partitions``, like Kafka), then installed; ``open``
replays the topic (last record per key wins, a tombstone forgets the id).

InitProducerId without a transactional id hands out a fresh producer id (epoch 0) from the
:class:`~kafkalite.broker.core.txn.producer_ids.ProducerIdAllocator`. With one, it checks the timeout against
``transaction.max.timeout.ms`` and bumps the id's epoch, which fences every older producer
instance: their AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn get PRODUCER_FENCED,
their produce requests INVALID_PRODUCER_EPOCH. If a transaction is open, it is first aborted with an
epoch bump and the caller gets CONCURRENT_TRANSACTIONS, so that its retry bumps once more (KIP-360).

Ending a transaction is two steps, as in Kafka. EndTxn moves Ongoing to PrepareCommit or
PrepareAbort and writes it: from then on the outcome is decided and survives a crash. Then the
*markers* are written, scheduled on the event loop (``schedule``): a COMMIT or ABORT control batch
in every partition of the transaction (``Partition.append_marker``, one offset each), and, if the
transaction holds ``__consumer_offsets`` partitions, the group coordinator is told to commit or drop
the offsets TxnOffsetCommit staged. Then CompleteCommit/CompleteAbort is written and the EndTxn is
answered. Unlike Kafka, which answers EndTxn once PrepareCommit is written, the answer waits for
the markers (they are local appends), so a read_committed consumer sees a committed transaction as
soon as its producer does. While the markers are pending, a request touching the transaction gets
CONCURRENT_TRANSACTIONS (clients retry it). A prepared transaction found by ``open`` is completed
the same way. A marker that cannot be written (a storage error) leaves the transaction prepared;
``periodic`` retries it.

Timers (``periodic``, from the broker's timer): every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, Ongoing transactions older than
their timeout are fenced (epoch + 1) and aborted; every
``transaction.remove.expired.transaction.cleanup.interval.ms``, ids idle (Empty or Complete*) for
``transactional.id.expiration.ms`` are forgotten with a tombstone. (Idle producers are forgotten,
and producer state snapshotted at a clean stop, by the cluster, which needs no coordinator for it:
``Cluster`` builds this one only when ``__transaction_state`` exists or a request needs it.)
``clock`` and ``schedule`` are injectable, so tests drive every timeout and every step without
sleeping.

The produce path asks ``verify_partition`` before a transaction's first batch lands in a partition
(KIP-890's verification): only partitions added to the producer's ongoing transaction accept it.
"""
