"""The options of the ``kafkalite`` Spark format, parsed once on the driver into frozen values.

Names and meanings are those of Spark's own Kafka connector (``format("kafka")``), so a job moves
between the two by changing the format's name. Spark passes every option as a string, case as typed;
Spark's option map is case-insensitive, and so is the lookup here. Anything malformed raises
:class:`OptionError` naming the option, before a task runs.

``kafka.``-prefixed options go to the bundled client with the prefix removed (``kafka.linger.ms`` ->
``linger.ms``). Keys every client kind knows go to all of them; keys of one kind go to that kind
only; a key that no client of the direction (read or write) knows is refused by name. The options
Spark's connector manages itself are refused here too (``kafka.auto.offset.reset``: use
``startingOffsets``; serializers: columns are bytes or strings; ``kafka.transactional.id``: the sink
derives one per task).

Nothing here imports pyspark or pyarrow: the values are checked in unit tests without Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.client.config import (
    AdminConfig,
    CommonConfig,
    ConfigError,
    ConsumerConfig,
    ProducerConfig,
    config_keys,
    parse_config,
)
from kafkalite.client.metadata import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "StartingPoint",
    "parse_sink_options",
    "parse_source_options",
]

EARLIEST = -2
LATEST = -1

_CLIENT_PREFIX = "kafka."
# Options Spark's connector refuses, because the connector decides them itself.
_MANAGED_BY_THE_SOURCE = {
    "auto.offset.reset": "use startingOffsets (earliest, latest or per-partition JSON)",
    "enable.auto.commit": "offsets live in Spark's checkpoint, not in a consumer group",
    "key.deserializer": "keys are read as bytes (cast them in Spark)",
    "value.deserializer": "values are read as bytes (cast them in Spark)",
    "interceptor.classes": "not supported",
}
_MANAGED_BY_THE_SINK = {
    "key.serializer": "keys are written from a string or binary column",
    "value.serializer": "values are written from a string or binary column",
    "transactional.id": "the sink derives one per task (see transactionalIdPrefix)",
    "enable.idempotence": "the sink writes with transactions, which need idempotence",
    "interceptor.classes": "not supported",
}
_SOURCE_ONLY = ("subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
                "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp")


class OptionError(ValueError):
    """A malformed or unsupported option; the message names it."""


@dataclass(frozen=True, slots=True)
class StartingPoint:
    """Where reading starts (or, for a batch read, ends) in each partition.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``offsets`` maps partitions to an offset, or
    EARLIEST / LATEST) or ``timestamp`` (``timestamp`` for every partition, else ``offsets`` maps
    partitions to timestamps). Partitions a JSON spec leaves out take ``default``.
    """

    kind: str
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None
    default: int = EARLIEST

    def offset_map(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a read (batch or streaming) is to do."""

    consumer_config: tuple[tuple[str, Any], ...]
    admin_config: tuple[tuple[str, Any], ...]
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: StartingPoint = StartingPoint("latest")
    ending: StartingPoint = StartingPoint("latest")
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    read_committed: bool = False
    poll_timeout_ms: int = 120_000

    @property
    def consumer(self) -> dict[str, Any]:
        return dict(self.consumer_config)

    @property
    def admin(self) -> dict[str, Any]:
        return dict(self.admin_config)

    def describe_subscription(self) -> str:
        if self.subscribe:
            return f"subscribe={','.join(self.subscribe)}"
        if self.subscribe_pattern is not None:
            return f"subscribePattern={self.subscribe_pattern}"
        return f"assign={','.join(map(str, self.assign))}"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a write (batch or streaming) is to do."""

    producer_config: tuple[tuple[str, Any], ...]
    admin_config: tuple[tuple[str, Any], ...]
    topic: str | None = None
    transactional_id_prefix: str | None = None

    @property
    def producer(self) -> dict[str, Any]:
        return dict(self.producer_config)

    @property
    def admin(self) -> dict[str, Any]:
        return dict(self.admin_config)


# --- reading the option map ----------------------------------------------------------------------------


class _Options:
    """Spark's options, looked up without regard to case; remembers what was read."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.by_lower = {str(key).lower(): (str(key), value) for key, value in options.items()}

    def get(self, name: str) -> str | None:
        found = self.by_lower.get(name.lower())
        if found is None:
            return None
        value = found[1]
        return None if value is None else str(value)

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def client_options(self) -> dict[str, str]:
        return {key[len(_CLIENT_PREFIX):]: str(value) for key, (_, value) in self.by_lower.items()
                if key.startswith(_CLIENT_PREFIX)}

    def integer(self, name: str, *, minimum: int | None = None) -> int | None:
        text = self.get(name)
        if text is None:
            return None
        try:
            value = int(text.strip())
        except ValueError:
            raise OptionError(f"option {name!r} must be an integer, not {text!r}") from None
        if minimum is not None and value < minimum:
            raise OptionError(f"option {name!r} must be at least {minimum}, not {value}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        text = self.get(name)
        if text is None:
            return default
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise OptionError(f"option {name!r} must be true or false, not {text!r}")


def _client_configs(options: _Options, kind: type[CommonConfig], managed: Mapping[str, str],
                    direction: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``kafka.*`` options as the configs of the client kind ``kind`` and of the admin client."""
    given = options.client_options()
    if not given.get("bootstrap.servers", "").strip():
        raise OptionError("option 'kafka.bootstrap.servers' is required (host:port[,host:port...])")
    known = config_keys(kind)
    admin_known = config_keys(AdminConfig)
    common_known = config_keys(CommonConfig)
    client: dict[str, Any] = {}
    admin: dict[str, Any] = {}
    for key, value in given.items():
        if key in managed:
            raise OptionError(f"option 'kafka.{key}' is not supported: {managed[key]}")
        if key not in known:
            raise OptionError(f"option 'kafka.{key}' is not a config of the bundled {direction} client")
        client[key] = value
        if key in common_known and key in admin_known:
            admin[key] = value
    try:
        parse_config(kind, client)
        parse_config(AdminConfig, admin)
    except ConfigError as exc:
        raise OptionError(f"option 'kafka.{_named_key(str(exc), client)}': {exc}") from None
    return client, admin


def _named_key(message: str, config: Mapping[str, Any]) -> str:
    for key in sorted(config, key=len, reverse=True):
        if repr(key) in message or key in message:
            return key
    return "?"


# --- the source ----------------------------------------------------------------------------------------


def _json(options: _Options, name: str) -> Any:
    text = options.get(name)
    try:
        return json.loads(text or "")
    except ValueError:
        raise OptionError(f"option {name!r} is not valid JSON: {text!r}") from None


def _partition_map(options: _Options, name: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` as partitions to numbers."""
    value = _json(options, name)
    if not isinstance(value, dict) or not value:
        raise OptionError(f"option {name!r} must be a JSON object of topics, like "
                          '{"topicA": {"0": 23, "1": -1}}')
    result: dict[TopicPartition, int] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map partition numbers to numbers")
        for partition, number in partitions.items():
            try:
                index = int(partition)
            except ValueError:
                raise OptionError(f"option {name!r}: {partition!r} of topic {topic!r} is not a partition "
                                  "number") from None
            if isinstance(number, bool) or not isinstance(number, int) or index < 0:
                raise OptionError(f"option {name!r}: {topic}-{partition} must be an integer, not {number!r}")
            result[TopicPartition(topic, index)] = number
    return result


def _offsets_spec(options: _Options, name: str, default: str, *, allowed: tuple[int, ...]) -> StartingPoint:
    text = options.get(name)
    if text is None or not text.strip():
        return StartingPoint(default)
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        if (EARLIEST if lowered == "earliest" else LATEST) not in allowed:
            raise OptionError(f"option {name!r} cannot be {lowered} here")
        return StartingPoint(lowered)
    offsets = _partition_map(options, name)
    for partition, offset in offsets.items():
        if offset < 0 and offset not in allowed:
            raise OptionError(f"option {name!r}: {partition} has offset {offset}; here an offset is >= 0"
                              + "".join(f" or {special}" for special in allowed))
    return StartingPoint("offsets", tuple(sorted(offsets.items(), key=_order)),
                         default=EARLIEST if default == "earliest" else LATEST)


def _order(item: tuple[TopicPartition, int]) -> tuple[str, int]:
    return item[0].topic, item[0].partition


def _timestamp_spec(options: _Options, single: str, by_partition: str) -> StartingPoint | None:
    if options.has(single):
        value = options.integer(single, minimum=0)
        return StartingPoint("timestamp", timestamp=value)
    if options.has(by_partition):
        stamps = _partition_map(options, by_partition)
        for partition, stamp in stamps.items():
            if stamp < 0:
                raise OptionError(f"option {by_partition!r}: {partition} has a negative timestamp {stamp}")
        return StartingPoint("timestamp", tuple(sorted(stamps.items(), key=_order)))
    return None


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """The options of ``spark.read`` / ``spark.readStream`` with format ``kafkalite``."""
    options = _Options(raw)
    chosen = [name for name in ("subscribe", "subscribePattern", "assign") if options.has(name)]
    if len(chosen) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' and 'assign' is needed"
                          + (f" (given: {', '.join(chosen)})" if chosen else ""))
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    if chosen[0] == "subscribe":
        subscribe = tuple(name.strip() for name in (options.get("subscribe") or "").split(",") if name.strip())
        if not subscribe:
            raise OptionError("option 'subscribe' needs a comma-separated list of topics")
    elif chosen[0] == "subscribePattern":
        pattern = options.get("subscribePattern") or ""
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        if not pattern:
            raise OptionError("option 'subscribePattern' is empty")
    else:
        value = _json(options, "assign")
        if not isinstance(value, dict) or not value or not all(
                isinstance(indexes, list) and all(isinstance(index, int) and not isinstance(index, bool) and index >= 0
                                                  for index in indexes) for indexes in value.values()):
            raise OptionError('option \'assign\' must be JSON like {"topicA": [0, 1], "topicB": [2, 4]}')
        assign = tuple(sorted({TopicPartition(topic, index) for topic, indexes in value.items() for index in indexes},
                              key=lambda item: (item.topic, item.partition)))

    starting = _timestamp_spec(options, "startingTimestamp", "startingOffsetsByTimestamp")
    if starting is None:
        starting = _offsets_spec(options, "startingOffsets", "latest" if streaming else "earliest",
                                 allowed=(EARLIEST, LATEST) if streaming else (EARLIEST,))
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if options.has(name):
                raise OptionError(f"option {name!r} is for batch reads only")
        ending = StartingPoint("latest")
    else:
        ending = _timestamp_spec(options, "endingTimestamp", "endingOffsetsByTimestamp") or _offsets_spec(
            options, "endingOffsets", "latest", allowed=(LATEST,))
        for name in ("maxOffsetsPerTrigger",):
            if options.has(name):
                raise OptionError(f"option {name!r} is for streaming reads only")
    strategy = (options.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, not {strategy!r}")
    for name in ("minOffsetsPerTrigger", "maxTriggerDelay"):
        if options.has(name):
            raise OptionError(f"option {name!r} is not supported by the kafkalite format")

    client, admin = _client_configs(options, ConsumerConfig, _MANAGED_BY_THE_SOURCE, "consumer")
    isolation = str(client.get("isolation.level", "read_uncommitted")).strip().lower()
    return SourceOptions(
        consumer_config=tuple(sorted(client.items())), admin_config=tuple(sorted(admin.items())),
        subscribe=subscribe, subscribe_pattern=pattern, assign=assign, starting=starting, ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=options.integer("maxOffsetsPerTrigger", minimum=1),
        min_partitions=options.integer("minPartitions", minimum=1),
        max_records_per_partition=options.integer("maxRecordsPerPartition", minimum=1),
        include_headers=options.boolean("includeHeaders", False),
        fail_on_data_loss=options.boolean("failOnDataLoss", True),
        read_committed=isolation == "read_committed",
        poll_timeout_ms=options.integer("kafkaConsumer.pollTimeoutMs", minimum=1) or 120_000,
    )


# --- the sink ------------------------------------------------------------------------------------------


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """The options of ``df.write`` / ``df.writeStream`` with format ``kafkalite``."""
    options = _Options(raw)
    for name in _SOURCE_ONLY:
        if options.has(name):
            raise OptionError(f"option {name!r} is for reading; a write takes 'topic' (or a topic column)")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    prefix = options.get("transactionalIdPrefix")
    if prefix is not None and not prefix.strip():
        raise OptionError("option 'transactionalIdPrefix' is empty")
    client, admin = _client_configs(options, ProducerConfig, _MANAGED_BY_THE_SINK, "producer")
    return SinkOptions(producer_config=tuple(sorted(client.items())), admin_config=tuple(sorted(admin.items())),
                       topic=topic.strip() if topic else None,
                       transactional_id_prefix=prefix.strip() if prefix else None)
