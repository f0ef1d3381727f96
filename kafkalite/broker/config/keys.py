"""What one config key is: its type, default, checks, documentation and how it may be updated.

:class:`ConfigKey` is a row of the one table of keys (``table.CONFIG_KEYS``); this module also holds
the enums Kafka numbers on the wire (config types and sources), the exception a bad key or value
raises, the reasons a key can be accepted without effect, and how a listener-prefixed key
(``listener.name.<listener>.<key>``) names its base key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import IntEnum
from typing import Any, Final

from kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigType",
    "listener_base_key",
    "section_table",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigType(IntEnum):
    """Kafka's config types, numbered as in DescribeConfigs v3+ ``config_type``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a value comes from, numbered as in DescribeConfigs v1+ ``config_source``."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1  # Kafka's DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(KafkaError):
    """An unknown key or a bad value; ``error_code`` is what a Kafka response carries (INVALID_CONFIG unless said)."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.INVALID_CONFIG) -> None:
        super().__init__(error_code, message)


_INTEGER_RANGES = {ConfigType.SHORT: 2**15, ConfigType.INT: 2**31, ConfigType.LONG: 2**63}


class ConfigKey:
    """One known key: its type, default (a parsed value; None = no value), checks and documentation.

    Every key lives in one table, ``CONFIG_KEYS``: the properties parser, DescribeConfigs, AlterConfigs,
    the per-topic configs, the group and transaction settings and the generated documentation all read it.

    ``dynamic`` keys may be changed at run time by AlterConfigs on a BROKER resource: for the whole
    cluster (the resource named "") and for this broker, or, when ``per_broker``, for this broker only
    (Kafka's update modes "cluster-wide" and "per-broker"). Topic keys name their broker-level defaults
    in ``synonyms``: ``(broker key, multiplier)`` pairs in precedence order; the first broker key that
    has a value, times its multiplier, is the default. ``inert`` says why a key kafkalite accepts has no
    effect here.

    A key is read-only (``Final``: the type checker refuses an assignment) and compares by identity.
    It is a slotted class with its ``__init__`` written out, not a frozen dataclass: a start makes
    this class and 185 keys before its first answer, and a frozen dataclass compiles four methods to
    make the class and sets each field of each key through ``object.__setattr__``.
    """

    __slots__ = ("name", "type", "default", "doc", "at_least", "at_most", "valid", "ignore_case", "dynamic",
                 "per_broker", "sensitive", "alias_of", "synonyms", "per_topic", "section", "kafka_default", "inert",
                 "shipped")

    name: Final[str]
    type: Final[ConfigType]
    default: Final[Any]
    doc: Final[str]
    at_least: Final[float | None]
    at_most: Final[float | None]
    valid: Final[tuple[str, ...] | None]  # allowed values (for a LIST: allowed items)
    ignore_case: Final[bool]  # ``valid`` compared without case
    dynamic: Final[bool]
    per_broker: Final[bool]  # dynamic for one broker only, not as a cluster-wide default
    sensitive: Final[bool]  # PASSWORD keys always are
    alias_of: Final[str | None]
    synonyms: Final[tuple[tuple[str, int], ...]]
    per_topic: Final[bool]  # a topic config (CreateTopics, AlterConfigs on a topic) rather than a broker key
    section: Final[str]  # its heading in the generated documentation
    kafka_default: Final[str | None]  # Apache Kafka's default, where kafkalite's differs (``doc`` says why)
    inert: Final[str | None]  # accepted for compatibility but without effect here, and why
    shipped: Final[bool]  # set (to its default) in the shipped config/server.properties

    def __init__(self, name: str, type: ConfigType, default: Any, doc: str, at_least: float | None = None,
                 at_most: float | None = None, valid: tuple[str, ...] | None = None, ignore_case: bool = False,
                 dynamic: bool = False, per_broker: bool = False, sensitive: bool = False,
                 alias_of: str | None = None, synonyms: tuple[tuple[str, int], ...] = (), per_topic: bool = False,
                 section: str = "", kafka_default: str | None = None, inert: str | None = None,
                 shipped: bool = False) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.doc = doc
        self.at_least = at_least
        self.at_most = at_most
        self.valid = valid
        self.ignore_case = ignore_case
        self.dynamic = dynamic
        self.per_broker = per_broker
        self.sensitive = sensitive
        self.alias_of = alias_of
        self.synonyms = synonyms
        self.per_topic = per_topic
        self.section = section
        self.kafka_default = kafka_default
        self.inert = inert
        self.shipped = shipped

    def __repr__(self) -> str:
        fields = ", ".join(f"{field}={getattr(self, field)!r}" for field in ConfigKey.__slots__)
        return f"ConfigKey({fields})"

    @property
    def update_mode(self) -> str:
        """Kafka's name for how the key may change: read-only, per-broker or cluster-wide."""
        if not self.dynamic:
            return "read-only"
        return "per-broker" if self.per_broker else "cluster-wide"

    def parse(self, raw: str) -> Any:
        """The typed value of ``raw``; ConfigError names the key when it is not valid."""
        text = raw.strip()
        value: Any
        if self.type is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise self._invalid(raw, "Expected value to be either true or false")
            value = text.lower() == "true"
        elif self.type in _INTEGER_RANGES:
            limit = _INTEGER_RANGES[self.type]
            try:
                value = int(text)
            except ValueError:
                raise self._invalid(raw, f"Not a number of type {self.type.name}") from None
            if not -limit <= value < limit:
                raise self._invalid(raw, f"Not a number of type {self.type.name}")
        elif self.type is ConfigType.DOUBLE:
            try:
                value = float(text)
            except ValueError:
                raise self._invalid(raw, "Not a number of type DOUBLE") from None
        elif self.type is ConfigType.LIST:
            value = [item.strip() for item in text.split(",") if item.strip()]
        else:
            value = text
        self.check(value, raw)
        return value

    def check(self, value: Any, raw: str) -> None:
        if value is None:
            return
        if self.at_least is not None and value < self.at_least:
            raise self._invalid(raw, f"Value must be at least {_number(self.at_least)}")
        if self.at_most is not None and value > self.at_most:
            raise self._invalid(raw, f"Value must be no more than {_number(self.at_most)}")
        if self.valid is not None:
            items = value if isinstance(value, list) else [value]
            allowed = {item.lower() for item in self.valid} if self.ignore_case else set(self.valid)
            if not items or any((item.lower() if self.ignore_case else item) not in allowed for item in items):
                raise self._invalid(raw, f"String must be one of: {', '.join(self.valid)}")

    def format(self, value: Any) -> str | None:
        """The value as Kafka shows it in DescribeConfigs."""
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(value)
        return str(value)

    def _invalid(self, raw: str, reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {raw} for configuration {self.name}: {reason}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def section_table(per_topic: bool, *items: str | ConfigKey) -> tuple[ConfigKey, ...]:
    """Keys in order; a string starts a section (a heading of the generated documentation).
    PASSWORD keys are marked sensitive.

    The keys are the table's own, made for it a line above and seen by nothing else yet, so their
    section fields are filled in place (``object.__setattr__``: they are ``Final`` to everyone else)
    rather than copied, which would cost a whole ``__init__`` per key at every start."""
    section = ""
    keys: list[ConfigKey] = []
    for item in items:
        if isinstance(item, str):
            section = item
            continue
        object.__setattr__(item, "per_topic", per_topic)
        object.__setattr__(item, "section", section)
        if item.type is ConfigType.PASSWORD:
            object.__setattr__(item, "sensitive", True)
        keys.append(item)
    return tuple(keys)


def index_keys(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    """The keys by name; a name defined twice is a mistake in the table."""
    table: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in table:
            raise ValueError(f"config key {key.name} defined twice")
        table[key.name] = key
    return table


# Matched with re.match, which compiles it on the first listener-prefixed key and caches it: a start
# whose keys are all known never compiles it.
LISTENER_PREFIX = r"^listener\.name\.([^.]*)\.(.+)$"


def listener_base_key(name: str) -> tuple[str, str] | None:
    """``listener.name.internal.ssl.keystore.location`` -> ``("internal", "ssl.keystore.location")``;
    None for a key without the listener prefix."""
    if not name.startswith("listener.name."):
        return None
    match = re.match(LISTENER_PREFIX, name)
    return None if match is None else (match.group(1), match.group(2))


# Why a key is accepted (a Kafka server.properties loads unchanged, AlterConfigs takes it) and has
# no effect here: the ``inert`` of the keys in the table.
NO_JITTER = "segments roll at segment.ms exactly, without jitter"
CHECKPOINTS = "the periodic task writes the checkpoints whenever a recovery point or log start offset moved"
NO_PREALLOCATION = "segment files grow as they are written"
CLEANER_IO = "segments are read in blocks of 64 KiB to 8 MiB, as large as their batches need"
NO_DOWNCONVERSION = "Fetch v0-3 are not served, so nothing is ever down-converted"
ONE_REPLICA = "a single node holds the only replica"
LOCAL_COMMIT = "an offset commit is a local append, answered as soon as it is written"
ONE_LOOP = "one event loop serves every connection and runs every task: there is no thread pool to size"
NO_QUORUM = "a single node is its own controller: there is no KRaft quorum or metadata log"
NO_TLS = "TLS is Python's ssl module with PEM key and trust stores, which has no such setting"
NO_SASL = ("SASL is served for PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and unsecured OAUTHBEARER, which need no "
           "such setting")
NO_AUTHORIZER = "no authorizer is loaded: every request is allowed and the ACL APIs answer SECURITY_DISABLED"
NO_DELEGATION_TOKENS = "delegation tokens are not served"
NO_QUOTAS = "requests are never throttled"
NO_POLICIES = "topic and config changes are not checked by policies"
NO_TIERED_STORAGE = "no tiered storage: every segment stays in the local log directory"
NO_METRICS = "no metrics are collected or reported"
NO_TELEMETRY = "clients cannot push telemetry (KIP-714): GetTelemetrySubscriptions and PushTelemetry are not served"
NO_PURGATORY = "waiting requests are futures woken by the event that completes them; nothing needs purging"
NO_CONNECTION_RATE = "new connections are not throttled (max.connections and max.connections.per.ip do apply)"
SOCKET_DEFAULTS = "listening sockets keep the operating system's buffer sizes and kafkalite's backlog"
NO_OUTBOUND = "the broker opens no connections of its own"
STATIC_LISTENERS = "listeners are bound once, at start-up, from the static configuration"
DEFAULT_LEVELS = "a batch recompressed for a topic's compression.type uses the codec's default level"
WHOLE_REPLAY = "internal topics are replayed whole at start-up, not through a buffer of this size"
UNCOMPRESSED_COORDINATOR = "coordinator records are written uncompressed, at once"
BOTH_PROTOCOLS = "both group protocols are served, and only empty groups change protocol"
EVERY_PROTOCOL = "every group protocol is served: classic, consumer (KIP-848) and share (KIP-932)"
WHOLE_STATE = "every change writes a share partition's whole state as one record, so there are no updates between"
FIXED_BOUNDS = ("KIP-848 members get group.consumer.session.timeout.ms and heartbeat.interval.ms; group "
                "configs that would override them are not served")
IN_PROCESS_TXN = "partitions join a transaction in-process, without retries"
