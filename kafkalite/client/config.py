"""Client configuration: Kafka's key names, typed values, one table per client kind.

Each client kind has one frozen dataclass whose fields *are* the table of keys it accepts: the field
``linger_ms`` is the key ``linger.ms``, its default is Kafka's default, and its ``metadata`` holds the
check and a line of documentation. :func:`parse_config` turns what a user passed, a dict with Kafka's
key names and/or keyword arguments with underscores (``{"linger.ms": 5}`` or ``linger_ms=5``), into
that dataclass: values given as strings (as in a properties file) are converted, ``acks="all"``
becomes -1, and an unknown key is a :class:`ConfigError` that names the key.

``CommonConfig`` holds what every client shares (bootstrap, timeouts, reconnect back-off, metadata
age); ``ProducerConfig``, ``ConsumerConfig`` and ``AdminConfig`` add their own keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["AdminConfig", "CommonConfig", "ConfigError", "ConsumerConfig", "ProducerConfig", "parse_config",
           "config_keys"]


class ConfigError(ValueError):
    """A config key that is unknown, or a value of the wrong type or out of range."""


def _key(default: Any, doc: str, check: Callable[[Any], bool] | None = None,
         kind: type | tuple[type, ...] | None = None) -> Any:
    return field(default=default, metadata={"doc": doc, "check": check, "kind": kind})


def _positive(value: int) -> bool:
    return value > 0


def _non_negative(value: int) -> bool:
    return value >= 0


_COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
_PARTITIONERS = ("sticky", "round_robin", "murmur2")


@dataclass(frozen=True, slots=True)
class CommonConfig:
    """Keys every client accepts."""

    bootstrap_servers: str | list[str] = _key(
        "localhost:9092", "host:port pairs (comma-separated string or list) to fetch the first metadata from")
    client_id: str = _key("kafkalite-python", "sent in every request header; shows in broker logs and quotas")
    request_timeout_ms: int = _key(30000, "how long a request may wait for its response", _positive)
    reconnect_backoff_ms: int = _key(50, "first wait before reconnecting to a broker", _non_negative)
    reconnect_backoff_max_ms: int = _key(1000, "cap of the exponential reconnect wait", _non_negative)
    socket_connection_setup_timeout_ms: int = _key(10000, "how long a TCP connect may take", _positive)
    metadata_max_age_ms: int = _key(300000, "refresh metadata at least this often", _positive)
    retry_backoff_ms: int = _key(100, "first wait before retrying a failed request", _non_negative)
    retry_backoff_max_ms: int = _key(1000, "cap of the exponential retry wait", _non_negative)
    connections_max_idle_ms: int = _key(540000, "accepted for compatibility; idle connections are kept")
    security_protocol: str = _key("PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                                  lambda value: value.upper() in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    ssl_truststore_location: str | None = _key(None, "PEM file of the CA certificates brokers are checked against "
                                               "(default: the system's)")
    ssl_truststore_certificates: str | None = _key(None, "the same as PEM text")
    ssl_truststore_type: str = _key("PEM", "PEM only", lambda value: value.upper() == "PEM")
    ssl_keystore_location: str | None = _key(None, "PEM file with the client's key and certificate chain, for "
                                             "brokers with ssl.client.auth")
    ssl_keystore_type: str = _key("PEM", "PEM only", lambda value: value.upper() == "PEM")
    ssl_key_password: str | None = _key(None, "password of the key in ssl.keystore.location")
    ssl_endpoint_identification_algorithm: str | None = _key("https", "https: check the broker's host name; empty: "
                                                             "do not")
    sasl_mechanism: str = _key("PLAIN", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (unsecured tokens); "
                               "Kafka's default GSSAPI is not served")
    sasl_jaas_config: str | None = _key(None, 'the login module line with username="..." password="..."')
    sasl_username: str | None = _key(None, "the SASL user (librdkafka's name; sasl.jaas.config's username)")
    sasl_password: str | None = _key(None, "the SASL password (librdkafka's name)")
    client_dns_lookup: str = _key("use_all_dns_ips", "accepted for compatibility")
    send_buffer_bytes: int = _key(131072, "SO_SNDBUF of broker sockets (-1: the OS default)")
    receive_buffer_bytes: int = _key(65536, "SO_RCVBUF of broker sockets (-1: the OS default)")

    @property
    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        """The bootstrap servers as (host, port) pairs."""
        servers = self.bootstrap_servers
        items = servers.split(",") if isinstance(servers, str) else list(servers)
        addresses = []
        for item in items:
            item = item.strip()
            if not item:
                continue
            if "://" in item:
                item = item.split("://", 1)[1]
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"bootstrap.servers entry {item!r} is not host:port")
            addresses.append((host.strip("[]"), int(port)))
        if not addresses:
            raise ConfigError("bootstrap.servers is empty")
        return addresses


@dataclass(frozen=True, slots=True)
class ProducerConfig(CommonConfig):
    """Keys of the producer (Kafka's names and defaults)."""

    acks: int = _key(-1, "0: no answer, 1: the leader wrote it, -1 or 'all': every in-sync replica has it",
                     lambda value: value in (-1, 0, 1))
    linger_ms: int = _key(5, "wait up to this long for more records before sending a batch", _non_negative)
    batch_size: int = _key(16384, "bytes per partition batch before it is sent", _non_negative)
    buffer_memory: int = _key(33554432, "bytes of records waiting to be sent, all partitions together", _positive)
    max_block_ms: int = _key(60000, "how long send() may wait for buffer space or metadata", _non_negative)
    max_request_size: int = _key(1048576, "largest Produce request (and record) sent", _positive)
    max_in_flight_requests_per_connection: int = _key(5, "Produce requests sent without their answer, per broker",
                                                      lambda value: 1 <= value)
    retries: int = _key(2147483647, "how often a batch is sent again after a retriable error", _non_negative)
    delivery_timeout_ms: int = _key(120000, "upper bound from send() to the delivery report", _positive)
    compression_type: str = _key("none", "none, gzip, snappy, lz4 or zstd", lambda value: value in _COMPRESSION_TYPES)
    compression_gzip_level: int | None = _key(None, "gzip level (1-9); default: the codec's")
    compression_lz4_level: int | None = _key(None, "lz4 level; default: the codec's")
    compression_zstd_level: int | None = _key(None, "zstd level; default: the codec's")
    enable_idempotence: bool = _key(True, "producer id and sequence numbers: no duplicates from retries, order kept")
    transactional_id: str | None = _key(None, "enables transactions; one producer instance per id at a time")
    transaction_timeout_ms: int = _key(60000, "the coordinator aborts a transaction open longer than this", _positive)
    partitioner_class: str | Callable[..., int] = _key(
        "sticky", "keyless records: 'sticky' (KIP-480, default) or 'round_robin'; 'murmur2' hashes keys only; "
        "or a callable(topic, key, partition_count) -> partition")
    partitioner_ignore_keys: bool = _key(False, "spread keyed records like keyless ones")
    key_serializer: Callable[[Any], bytes] | None = _key(None, "callable turning a key into bytes")
    value_serializer: Callable[[Any], bytes] | None = _key(None, "callable turning a value into bytes")
    metadata_max_idle_ms: int = _key(300000, "accepted for compatibility")


_OFFSET_RESETS = ("earliest", "latest", "none")
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_GROUP_PROTOCOLS = ("classic", "consumer")


@dataclass(frozen=True, slots=True)
class ConsumerConfig(CommonConfig):
    """Keys of the consumer (Kafka's names and defaults)."""

    group_id: str | None = _key(None, "the consumer group; needed for subscribe() and commits")
    group_instance_id: str | None = _key(None, "a static member's stable identity (KIP-345): a restart within "
                                               "session.timeout.ms keeps its partitions without a rebalance")
    group_protocol: str = _key("classic", "'classic' (JoinGroup/SyncGroup, client-side assignors) or 'consumer' "
                                          "(KIP-848: ConsumerGroupHeartbeat, server-side assignors)",
                               lambda value: value.lower() in _GROUP_PROTOCOLS)
    group_remote_assignor: str | None = _key(None, "the server-side assignor for group.protocol=consumer "
                                                   "(default: the broker's)")
    session_timeout_ms: int = _key(45000, "the coordinator evicts a member silent this long (classic protocol)",
                                   _positive)
    heartbeat_interval_ms: int = _key(3000, "how often the member heartbeats (classic protocol)", _positive)
    max_poll_interval_ms: int = _key(300000, "the member leaves the group when poll() is not called this long; "
                                             "also the rebalance timeout", _positive)
    partition_assignment_strategy: str | list[Any] = _key(
        "range,cooperative-sticky", "assignors in order of preference: range, roundrobin, sticky, "
        "cooperative-sticky (or the Java class names), or assignor objects")
    enable_auto_commit: bool = _key(True, "commit consumed positions every auto.commit.interval.ms and on close")
    auto_commit_interval_ms: int = _key(5000, "how often positions are committed with enable.auto.commit",
                                        _non_negative)
    auto_offset_reset: str = _key("latest", "where to start without a committed offset, or after "
                                            "OFFSET_OUT_OF_RANGE: earliest, latest or none (raise)",
                                  lambda value: value.lower() in _OFFSET_RESETS)
    fetch_min_bytes: int = _key(1, "the broker waits for this many bytes (up to fetch.max.wait.ms)", _positive)
    fetch_max_bytes: int = _key(52428800, "bytes per Fetch response, all partitions together", _positive)
    fetch_max_wait_ms: int = _key(500, "how long a Fetch waits for fetch.min.bytes", _non_negative)
    max_partition_fetch_bytes: int = _key(1048576, "bytes per partition per Fetch", _positive)
    max_poll_records: int = _key(500, "records one poll() returns at most", _positive)
    isolation_level: str = _key("read_uncommitted", "read_committed: only committed transactional records, "
                                                    "up to the last stable offset",
                                lambda value: value.lower() in _ISOLATION_LEVELS)
    check_crcs: bool = _key(True, "check each batch's CRC before reading its records")
    exclude_internal_topics: bool = _key(True, "a pattern subscription never matches internal topics")
    allow_auto_create_topics: bool = _key(True, "subscribing to a missing topic may create it (when the broker "
                                                "allows auto-creation)")
    client_rack: str = _key("", "this consumer's rack, sent to the group (rack-aware assignors may use it)")
    receive_buffer_bytes: int = _key(-1, "SO_RCVBUF of broker sockets; -1 (the default here): the OS default, "
                                         "which grows as needed, so a Fetch answer arrives while poll() decodes "
                                         "the previous one (the Java client sets 65536)")
    default_api_timeout_ms: int = _key(60000, "how long position(), committed(), offsets_for_times() and the "
                                              "like may block", _positive)
    key_deserializer: Callable[[Any], Any] | None = _key(None, "callable turning key bytes into the record's key")
    value_deserializer: Callable[[Any], Any] | None = _key(None, "callable turning value bytes into the "
                                                                 "record's value")


@dataclass(frozen=True, slots=True)
class AdminConfig(CommonConfig):
    """Keys of the admin client."""

    default_api_timeout_ms: int = _key(60000, "how long an admin call may take, retries included", _positive)
    retries: int = _key(2147483647, "how often a request is sent again after a retriable error", _non_negative)


_C = TypeVar("_C", bound=CommonConfig)
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def config_keys(config_type: type[CommonConfig]) -> dict[str, dataclasses.Field[Any]]:
    """The Kafka key names a config class accepts, with their fields."""
    return {item.name.replace("_", "."): item for item in dataclasses.fields(config_type)}


def _convert(key: str, item: dataclasses.Field[Any], value: Any) -> Any:
    default = item.default
    annotation = str(item.type)
    if key in ("auto.offset.reset", "isolation.level", "group.protocol") and isinstance(value, str):
        value = value.strip().lower()
    if key == "acks" and isinstance(value, str):
        if value.lower() == "all":
            return -1
        value = value.strip()
    if isinstance(default, bool) or annotation.startswith("bool"):
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ConfigError(f"config {key!r} must be true or false, not {value!r}")
        if not isinstance(value, bool):
            raise ConfigError(f"config {key!r} must be a bool, not {type(value).__name__}")
        return value
    if annotation.startswith("int"):
        if value is None and "None" in annotation:
            return None
        if isinstance(value, bool):
            raise ConfigError(f"config {key!r} must be an integer, not a bool")
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise ConfigError(f"config {key!r} must be an integer, not {value!r}") from None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int):
            raise ConfigError(f"config {key!r} must be an integer, not {type(value).__name__}")
        return value
    if annotation.startswith("Callable"):
        if value is not None and not callable(value):
            raise ConfigError(f"config {key!r} must be callable")
        return value
    if annotation.startswith("str | Callable"):
        if callable(value):
            return value
        if not isinstance(value, str):
            raise ConfigError(f"config {key!r} must be a string or a callable")
        return _partitioner_name(key, value)
    if annotation.startswith("str | list"):
        if isinstance(value, (list, tuple)):
            if annotation == "str | list[Any]":  # names or objects (assignors)
                return [entry for entry in value]
            return [str(entry) for entry in value]
    if value is None and "None" in annotation:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"config {key!r} must be a string, not {type(value).__name__}")
    return value


def _partitioner_name(key: str, value: str) -> str:
    short = value.rsplit(".", 1)[-1].lower()
    aliases = {"roundrobinpartitioner": "round_robin", "round_robin": "round_robin", "roundrobin": "round_robin",
               "defaultpartitioner": "sticky", "builtinpartitioner": "sticky", "sticky": "sticky",
               "uniformstickypartitioner": "sticky", "murmur2": "murmur2", "murmur2_random": "sticky",
               "default": "sticky"}
    if short not in aliases:
        raise ConfigError(f"config {key!r}: unknown partitioner {value!r} (one of {', '.join(_PARTITIONERS)})")
    return aliases[short]


def parse_config(config_type: type[_C], config: Mapping[str, Any] | None = None, **keywords: Any) -> _C:
    """Build ``config_type`` from a dict of Kafka keys and/or keyword arguments (``linger_ms=5``).

    Raises :class:`ConfigError` naming the first unknown key or bad value.
    """
    known = config_keys(config_type)
    values: dict[str, Any] = {}
    merged: list[tuple[str, Any]] = [*(config or {}).items(), *keywords.items()]
    for raw_key, value in merged:
        if not isinstance(raw_key, str):
            raise ConfigError(f"config keys are strings, not {raw_key!r}")
        key = raw_key.replace("_", ".")
        item = known.get(key)
        if item is None:
            kind = config_type.__name__.removesuffix("Config").lower() or "client"
            raise ConfigError(f"unknown config key {raw_key!r} for a {kind}")
        converted = _convert(key, item, value)
        check = item.metadata.get("check")
        if check is not None and converted is not None and not callable(converted) and not check(converted):
            raise ConfigError(f"config {key!r} has an invalid value {value!r}: {item.metadata['doc']}")
        values[item.name] = converted
    result = config_type(**values)
    result.bootstrap_addresses  # noqa: B018 - validate early
    return result
