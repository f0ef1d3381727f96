"""The consumer: subscriptions and positions, the fetcher, group membership, assignors.

Modules: ``records`` (``ConsumerRecord``, ``ConsumerRecords``, lazy decoding of fetched batches),
``subscription`` (what is subscribed or assigned, and each partition's position), ``fetch_session``
(KIP-227 sessions), ``fetcher`` (Fetch and ListOffsets), ``assignors`` (the consumer protocol's wire
format, ``range``, ``roundrobin``), ``sticky`` (``sticky``, ``cooperative-sticky``), ``group`` (what
both group protocols share: the coordinator, commits, committed offsets, the rebalance listener),
``classic`` (JoinGroup/SyncGroup/Heartbeat), ``membership`` (KIP-848 ConsumerGroupHeartbeat) and
``consumer`` (the asyncio ``Consumer``).
"""
