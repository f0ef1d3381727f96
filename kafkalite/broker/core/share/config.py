"""Share-group settings: the broker's (``ShareSettings``) and one group's effective values (``ShareGroupConfig``).

A share group's configs are set with IncrementalAlterConfigs on a GROUP resource (Kafka's group
configs, ``GROUP_KEYS``); a key the group does not set takes the broker key it names. The checks are
Kafka's: each value against its key's type and bounds, the lock duration, session timeout and
heartbeat interval against the broker's ``group.share.min.*``/``max.*`` keys, the delivery count limit
and in-flight limit against the bounds of their broker keys, and a session timeout longer than the
heartbeat interval. ``share.auto.offset.reset`` is ``earliest``, ``latest`` or
``by_duration:<ISO-8601 duration>`` (``PnDTnHnMn.nS``, not negative).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kafkalite.broker.config import BROKER_KEYS, GROUP_KEYS, ConfigError, config_field

__all__ = [
    "AUTO_OFFSET_RESET",
    "ISOLATION_LEVEL",
    "ShareGroupConfig",
    "ShareSettings",
    "check_group_configs",
    "parse_duration_ms",
]

AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
ISOLATION_LEVEL: Final = "share.isolation.level"
_BY_DURATION: Final = "by_duration:"
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The broker keys of share groups: each field mirrors the key it names."""

    session_timeout_ms: int = config_field("group.share.session.timeout.ms")
    min_session_timeout_ms: int = config_field("group.share.min.session.timeout.ms")
    max_session_timeout_ms: int = config_field("group.share.max.session.timeout.ms")
    heartbeat_interval_ms: int = config_field("group.share.heartbeat.interval.ms")
    min_heartbeat_interval_ms: int = config_field("group.share.min.heartbeat.interval.ms")
    max_heartbeat_interval_ms: int = config_field("group.share.max.heartbeat.interval.ms")
    max_groups: int = config_field("group.share.max.groups")
    max_size: int = config_field("group.share.max.size")
    delivery_count_limit: int = config_field("group.share.delivery.count.limit")
    record_lock_duration_ms: int = config_field("group.share.record.lock.duration.ms")
    min_record_lock_duration_ms: int = config_field("group.share.min.record.lock.duration.ms")
    max_record_lock_duration_ms: int = config_field("group.share.max.record.lock.duration.ms")
    partition_max_record_locks: int = config_field("group.share.partition.max.record.locks")
    state_topic_partitions: int = config_field("share.coordinator.state.topic.num.partitions")
    state_topic_segment_bytes: int = config_field("share.coordinator.state.topic.segment.bytes")

    @property
    def max_share_sessions(self) -> int:
        """How many share sessions this broker keeps: Kafka 4.0 sizes its cache the same way."""
        return self.max_groups * self.max_size


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """What one share group uses: its own group configs, else the broker's values."""

    auto_offset_reset: str = "latest"  # "earliest", "latest" or "by_duration:<ISO-8601>"
    read_committed: bool = False
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight_records: int = 200
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000

    @classmethod
    def resolve(cls, settings: ShareSettings, overrides: Mapping[str, str]) -> ShareGroupConfig:
        """The effective values of a group that set ``overrides`` (assumed checked)."""

        def number(key: str, default: int) -> int:
            raw = overrides.get(key)
            return default if raw is None else int(raw.strip())

        return cls(
            auto_offset_reset=overrides.get(AUTO_OFFSET_RESET, "latest").strip(),
            read_committed=overrides.get(ISOLATION_LEVEL, "read_uncommitted").strip() == "read_committed",
            record_lock_duration_ms=number("share.record.lock.duration.ms", settings.record_lock_duration_ms),
            delivery_count_limit=number("share.delivery.count.limit", settings.delivery_count_limit),
            max_in_flight_records=number("share.partition.max.record.locks", settings.partition_max_record_locks),
            session_timeout_ms=number("share.session.timeout.ms", settings.session_timeout_ms),
            heartbeat_interval_ms=number("share.heartbeat.interval.ms", settings.heartbeat_interval_ms),
        )

    def reset_duration_ms(self) -> int | None:
        """The duration of ``by_duration:...``, or None for earliest and latest."""
        if not self.auto_offset_reset.startswith(_BY_DURATION):
            return None
        return parse_duration_ms(self.auto_offset_reset[len(_BY_DURATION):])


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it, in milliseconds (ValueError if malformed)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or (match.group(3) is not None and not any(match.group(i) for i in (4, 5, 6))) or \
            not any(match.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    sign = -1 if match.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = match.group(7) or ""
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if seconds < 0 or (match.group(6) or "").startswith("-"):
        nanos = -nanos
    total_ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + nanos // 1_000_000
    return sign * total_ms


def check_group_configs(settings: ShareSettings, values: Mapping[str, str]) -> None:
    """Kafka's checks of a group's whole set of configs; ConfigError (INVALID_CONFIG) names what is wrong."""
    for name in values:
        if name not in GROUP_KEYS:
            raise ConfigError(f"Unknown group config name: {name}")
    parsed = {name: GROUP_KEYS[name].parse(raw) for name, raw in values.items()}
    reset = parsed.get(AUTO_OFFSET_RESET)
    if reset is not None and reset not in ("earliest", "latest"):
        duration = None
        if reset.startswith(_BY_DURATION):
            try:
                duration = parse_duration_ms(reset[len(_BY_DURATION):])
            except ValueError:
                duration = None
        if duration is None or duration < 0:
            raise ConfigError(f"Invalid value {reset} for configuration {AUTO_OFFSET_RESET}: String must be one of: "
                              "latest, earliest, by_duration:PnDTnHnMn.nS")
    config = ShareGroupConfig.resolve(settings, values)
    _within("share.record.lock.duration.ms", config.record_lock_duration_ms, settings.min_record_lock_duration_ms,
            settings.max_record_lock_duration_ms, "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms")
    _within("share.session.timeout.ms", config.session_timeout_ms, settings.min_session_timeout_ms,
            settings.max_session_timeout_ms, "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms")
    _within("share.heartbeat.interval.ms", config.heartbeat_interval_ms, settings.min_heartbeat_interval_ms,
            settings.max_heartbeat_interval_ms, "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms")
    for name, broker_key, value in (("share.delivery.count.limit", "group.share.delivery.count.limit",
                                     config.delivery_count_limit),
                                    ("share.partition.max.record.locks", "group.share.partition.max.record.locks",
                                     config.max_in_flight_records)):
        bounds = BROKER_KEYS[broker_key]
        low, high = int(bounds.at_least or 0), int(bounds.at_most or 0)
        if not low <= value <= high:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be between {low} and "
                              f"{high}")
    if config.session_timeout_ms <= config.heartbeat_interval_ms:
        raise ConfigError("share.session.timeout.ms must be greater than share.heartbeat.interval.ms")


def _within(name: str, value: int, low: int, high: int, low_key: str, high_key: str) -> None:
    if value < low:
        raise ConfigError(f"{name} must be greater than or equal to {low_key}")
    if value > high:
        raise ConfigError(f"{name} must be less than or equal to {high_key}")
