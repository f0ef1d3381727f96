"""What the group coordinator and both rebalancers share: the settings, the groups by id, the clock,
and the ``__consumer_offsets`` log every change is written to before its answer leaves."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kafkalite.broker.config import config_field
from kafkalite.broker.core.coordinator_log import CoordinatorLog
from kafkalite.broker.core.group.classic_group import ClassicGroup
from kafkalite.broker.core.group.consumer_group import ConsumerGroup
from kafkalite.broker.core.group.offsets import Record
from kafkalite.broker.core.group.records import ConsumerGroupKey, GroupMetadataKey, ShareGroupKey
from kafkalite.broker.core.group.share_group import ShareGroup
from kafkalite.broker.core.group.timers import Timers

__all__ = ["Group", "GroupSettings", "GroupStore", "NEW_MEMBER_JOIN_TIMEOUT_MS"]

log = logging.getLogger("kafkalite.groups")

Group = ClassicGroup | ConsumerGroup | ShareGroup
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's fixed timeout for a new member whose JoinGroup is parked


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The group coordinator's configuration: each field mirrors the broker key it names."""

    min_session_timeout_ms: int = config_field("group.min.session.timeout.ms")
    max_session_timeout_ms: int = config_field("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = config_field("group.initial.rebalance.delay.ms")
    max_group_size: int = config_field("group.max.size")
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offsets_retention_ms: int = config_field("offsets.retention.minutes", scale=60_000)
    retention_check_interval_ms: int = config_field("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = config_field("offset.metadata.max.bytes")
    consumer_session_timeout_ms: int = config_field("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = config_field("group.consumer.heartbeat.interval.ms")
    consumer_max_size: int = config_field("group.consumer.max.size")
    consumer_assignors: tuple[str, ...] = config_field("group.consumer.assignors")
    share_max_size: int = config_field("group.share.max.size")


class GroupStore:
    """Every group by id, and where their changes are written. Touch only from the event loop."""

    def __init__(self, log: CoordinatorLog, settings: GroupSettings, timers: Timers) -> None:
        self.log = log
        self.settings = settings
        self.timers = timers
        self.groups: dict[str, Group] = {}
        self._failing = False  # the last write failed (logged once)

    def now_ms(self) -> int:
        return self.timers.now_ms()

    def write(self, group_id: str, records: Sequence[Record]) -> bool:
        """Append ``records`` to the group's ``__consumer_offsets`` partition (nothing if empty); whether
        they were written. A storage failure (a full disk) is logged once until a write works again:
        the change stays in memory, and is lost if the broker restarts before it is written again.
        An offset commit, which must not be acknowledged unless written, checks the answer."""
        if not records:
            return True
        try:
            self.log.append(self.log.partition_for(group_id), records, self.timers.now_ms())
        except OSError as exc:
            if not self._failing:
                log.warning("cannot write group %s to %s (kept in memory only until writes work again): %s",
                            group_id, self.log.topic_name, exc)
            self._failing = True
            return False
        if self._failing:
            log.info("writes to %s work again", self.log.topic_name)
            self._failing = False
        return True

    def store_classic(self, group: ClassicGroup, with_members: bool) -> None:
        self.write(group.group_id, [(GroupMetadataKey(group.group_id).encode(),
                                     group.to_record(with_members).encode())])

    def store_consumer(self, group: ConsumerGroup) -> None:
        self.write(group.group_id, [(ConsumerGroupKey(group.group_id).encode(), group.encode())])

    def store_share(self, group: ShareGroup) -> None:
        self.write(group.group_id, [(ShareGroupKey(group.group_id).encode(), group.encode())])
