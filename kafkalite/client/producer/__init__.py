"""The producer, in the rooms a Java client user knows.

``producer.py`` (the public :class:`Producer`: ``send``, ``send_many``, ``flush``, ``close``, the
transaction calls), ``accumulator.py`` (per-partition batches, ``buffer.memory``, record futures),
``partitioner.py`` (murmur2 keys, sticky and round-robin keyless records), ``sender.py`` (the task
that drains batches into Produce requests and retries) and ``transactions.py`` (producer id, epoch,
sequences and the transaction state machine).
"""
